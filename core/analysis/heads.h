#pragma once
// Every query head of one selection side by side (the app's Heads view, `attnscope figure --view heads`).
// explore_heads() runs explore() once per head of a page with the selection's head axis set to that head,
// everything else as requested, so each head's rank and entropy are exactly the numbers the Metrics view
// and `analyze` give for it (docs/maths.md 1.7 for the key/value head a grouped query head reads). Of each
// matrix only a small image is kept (reduce_region, the largest entry of each cell), with its causal
// mask, and each mechanism's colour range is shared by the page's heads (colour_range over their maps, as
// the Maps view takes one range for its panels).
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/explore.h"
#include "analysis/map_scale.h"

namespace attnscope::analysis {

struct HeadsRequest {
    ExploreRequest base;           // the selection's own head ('h' of base.source.selection.at) is replaced
    Eigen::Index first = 0;        // the page: heads first .. first + count - 1 (clipped to the heads there are)
    Eigen::Index count = 8;
    Eigen::Index cells = 128;      // cells per axis of each kept image (at most N)
    double clip_percentile = 99;   // the top of each mechanism's range (map_scale.h's colour_range)
};

// One mechanism of one head: its measured result (row entropies dropped), the reduced image, the cells a
// causal query may not see, or why it could not be computed.
struct HeadPanel {
    attention::Mechanism mechanism{};
    MechanismResult result;
    ReducedImage image;
    std::vector<char> masked;   // per cell of `image` (empty: no causal mask)
    std::string error;          // non-empty: no image
};

struct HeadMaps {
    std::optional<Eigen::Index> head, kv_head;   // absent without a head axis
    std::vector<HeadPanel> panels;               // in request order of the mechanisms
};

struct HeadsResult {
    HeadsRequest request;                      // what was asked (the provenance a view states)
    Eigen::Index heads = 0, kv_heads = 0;      // H and Hk of the queries and keys (0 without a head axis)
    Eigen::Index first = 0;                    // the page's first head
    std::optional<Eigen::Index> layer;         // the layer shown: the selection's 'l', or of per-layer datasets
    Eigen::Index n = 0, d = 0;
    nlohmann::ordered_json input;              // the first head's "input" object (analyze JSON)
    std::vector<attention::Mechanism> mechanisms;
    std::vector<HeadMaps> maps;                // one per head of the page, in head order
    std::vector<ColourRange> ranges;           // per mechanism, shared by the page's heads
    double seconds = 0;
};

// The page of heads `request` asks for. Progress runs over the page (one stage per head); cancellation is
// checked inside each head's explore. Throws like explore(), and std::invalid_argument when `first` lies
// outside the heads (an empty page).
HeadsResult explore_heads(const HeadsRequest& request, const JobContext& ctx);

}  // namespace attnscope::analysis
