#pragma once
// The typed request of `attnscope depth` (docs/cli.md) beside the analysis requests: which layers, the heads'
// mean and the residual weight alpha, one descriptor per option (analysis/requests.h); shared by the command line
// (app/cmd_depth.cpp) and attnscope.depth (python/).
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/depth.h"
#include "analysis/requests.h"

namespace attnscope::analysis {

struct DepthSettings {
    std::string q, k;              // dataset names in the file; empty: q/k, else the first per-layer /layers/<i>/q, k
    std::string layers = "all";
    std::string heads;             // "mean" (the default when no head is selected)
    double alpha = 0.5;
};

const std::vector<OptionDescriptor<DepthSettings>>& depth_options();

// Every option of one depth run.
struct DepthRequests {
    std::string file;
    std::string mechanisms;        // comma list (empty: the default list)
    DepthSettings depth;
    AnalysisRequests analysis;
};

// The request of depth_document, every option validated and named in `spelling`; sets the read limit. Checks
// the memory request but does not apply its thread count (the front end's: apply_threads).
DepthRequest resolve_depth(const DepthRequests& r, Spelling spelling);

}  // namespace attnscope::analysis
