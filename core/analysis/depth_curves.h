#pragma once
// Collapse with depth for one explore request (the app's Depth view, `attnscope figure --view depth`): the layers
// of the file whose queries the request reads, multiplied as `attnscope depth` multiplies them (analysis/depth.h,
// docs/maths.md 2.2), and per mechanism the curves residual_to_uniform, effective rank and numerical rank against
// depth, read from depth_document()'s JSON (which the result keeps whole).
//
// The request's queries name the layers: FILE:/layers/<i>/q (any layer of the file's per-layer datasets: every
// layer named like it is taken, planned as `attnscope depth` plans them) or one tensor with an 'l' axis (every
// index of it). The selection's other choices stay (layout, prefix tokens, other index axes); its head is used
// only when one head is asked for (head_mean false; no head axis: the one head there is). Options the user did
// not choose (`given`) come from each layer's own attributes, as for `attnscope depth`.
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/depth.h"
#include "analysis/explore.h"
#include "analysis/file_defaults.h"

namespace attnscope::analysis {

struct ExploreDepthRequest {
    ExploreRequest base;      // queries, keys, selection, mechanisms, options, rank tolerance, memory
    ExplicitChoices given;    // what the user chose; the rest follows each layer's attributes
    bool head_mean = true;    // A_l = the mean over the layer's heads; false: the selection's head (h, default 0)
    double alpha = 0.5;       // in [0, 1]
};

// One mechanism's curves, one value per depth 1..L (NaN where the document has none: a broken chain, no spectrum).
struct DepthCurve {
    attention::Mechanism mechanism{};
    std::vector<double> residual_to_uniform, effective_rank, rank;
    std::vector<std::string> warnings;   // "depth 2: ..." as the document gives them
};

struct ExploreDepthResult {
    ExploreDepthRequest request;       // what was asked (the provenance the view states)
    // Non-empty: the request's file has no layers to multiply (the view says this instead of a plot).
    std::string unavailable;
    std::string file;                  // the file whose layers were multiplied
    Eigen::Index n = 0;
    std::vector<Eigen::Index> layers;  // the layer of each depth 1..L
    std::optional<Eigen::Index> head;  // the one head multiplied; absent: the mean over `heads_averaged` heads
    Eigen::Index heads_averaged = 0;   // heads in each layer's mean (1 without a head axis)
    bool head_axis = false;            // the queries have a head axis
    std::vector<DepthCurve> curves;    // in the request's mechanism order
    nlohmann::ordered_json document;   // depth_document()'s JSON
    double seconds = 0;
};

// The depth request of `request`: every layer of its queries' file, its heads (the mean, or the selection's head),
// mechanisms, options (`given` as explicit), selection and rank tolerance. Reads headers only. Throws InputError
// when the queries have no layers ("depth needs the layers of one model: ...") or keys of another file.
DepthRequest depth_request_for(const ExploreDepthRequest& request);

// depth_document() of depth_request_for(request) as curves. A file without layers is not an error: `unavailable`
// says why. Progress over the layers' heads and the products; cancellation between them. Throws as
// depth_document() does otherwise (layers of different N, the memory limit).
ExploreDepthResult explore_depth(const ExploreDepthRequest& request, const JobContext& ctx);

}  // namespace attnscope::analysis
