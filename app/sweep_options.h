#pragma once
// The options of `attnscope sweep` (docs/cli.md), registered on `sweep` and on `figure` (whose explore
// views use the inputs, selection and mechanism options too): the core's sweep request (analysis/sweep_request.h)
// with its flags generated from the descriptors; and a sweep run that shows its progress on a terminal.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "analysis/sweep.h"
#include "analysis/sweep_request.h"
#include "cli_options.h"

namespace attnscope::app {

// The options of `attnscope sweep`, registered on `sweep` and on `figure`, resolved into the core's SweepSpec.
struct SweepOptions : analysis::SweepRequest {
    std::vector<io::TensorRef> q, k;   // parsed as the command line is read (add_tensor_option)
    std::string mechanisms = attention::default_mechanism_text();
    SelectionArgs selection;
    MechanismArgs mechanism;
    MetricArgs metrics;
    MemoryArgs memory;

    void add_to(CLI::App& cmd, bool vary_required);
    // The spec of `attnscope sweep` (validates every option; plan_sweep validates the points); applies the thread
    // count asked for.
    analysis::SweepSpec resolve() const;
};

// Plans and runs `spec`, with a progress line on stderr when it is a terminal.
std::vector<analysis::SweepRecord> run_sweep_with_progress(const analysis::SweepPlan& plan);

}  // namespace attnscope::app
