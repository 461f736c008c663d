#pragma once
// The options of `attnscope sweep` (docs/cli.md), registered on `sweep` and on `figure` (whose explore
// views use the inputs, selection and mechanism options too) and mapped onto the core's SweepSpec; and a
// sweep run that shows its progress on a terminal.
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analysis/sweep.h"
#include "cli_options.h"

namespace attnscope::app {

// The options of `attnscope sweep`, registered on `sweep` and on `figure` (whose explore views use the
// inputs, selection and mechanism options too), and resolved into the core's SweepSpec.
struct SweepOptions {
    std::vector<std::string> q, k;
    std::string synth_kind;
    std::int64_t d = 64, seeds = 1, n = 0;
    std::string vary;
    std::string subsample = "first";
    std::int64_t draws = 1;
    std::int64_t subsample_seed = 0;
    std::string heads, layers;
    std::string mechanisms = attention::default_mechanism_text();
    SelectionArgs selection;
    MechanismArgs mechanism;
    MetricArgs metrics;
    MemoryArgs memory;

    void add_to(CLI::App& cmd, bool vary_required);
    // The spec of `attnscope sweep` (validates every option; plan_sweep validates the points).
    analysis::SweepSpec resolve() const;
};

// Plans and runs `spec`, with a progress line on stderr when it is a terminal.
std::vector<analysis::SweepRecord> run_sweep_with_progress(const analysis::SweepPlan& plan);

}  // namespace attnscope::app
