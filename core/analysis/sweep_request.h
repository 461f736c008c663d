#pragma once
// The typed request of a sweep (issue 33; docs/cli.md "sweep"): what varies and over which units, the synthetic
// data when no inputs are given, with one descriptor per option (analysis/requests.h). The command line's
// `sweep` and `figure` flags (app/sweep_options.cpp) and the Python keywords of attnscope.sweep (python/) are
// generated from the descriptors; resolve_sweep validates a whole sweep and names options as the caller spells them.
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/requests.h"
#include "analysis/sweep.h"

namespace attnscope::analysis {

struct SweepRequest {
    std::string synth;                 // synthetic data instead of inputs: a kind of analysis/synth.h
    std::int64_t d = 64;               // synthetic features per head
    std::int64_t seeds = 1;            // synthetic draws
    std::int64_t n = 0;                // synthetic tokens for vary m
    std::string vary;                  // n=LIST or m=LIST
    std::string subsample = "first";
    std::int64_t draws = 1;
    std::int64_t subsample_seed = 0;
    std::string heads, layers;         // "all", a comma list, or "" (the selection's)
};

// The descriptors, in the order the command line's help lists them (after --q and --k).
const std::vector<OptionDescriptor<SweepRequest>>& sweep_options();

// Every option of one sweep, as a front end holds them.
struct SweepRequests {
    std::vector<io::TensorRef> q, k;   // in pairs (files' tensors or arrays); or none with `sweep.synth`
    std::string mechanisms;            // comma list of mechanisms (empty: the default list)
    SweepRequest sweep;
    AnalysisRequests analysis;
};

// The spec of one sweep: validates every option (plan_sweep validates the points), naming options in `spelling`.
// Checks the memory request but does not apply its thread count (the front end's: apply_threads).
SweepSpec resolve_sweep(const SweepRequests& r, Spelling spelling);

}  // namespace attnscope::analysis
