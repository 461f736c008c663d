// explore_heads: one explore() per head of a page, kept as small images (heads.h).
#include "analysis/heads.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "analysis/inputs.h"
#include "analysis/plan.h"

namespace attnscope::analysis {

namespace {

using Eigen::Index;

// A context for the i-th of `count` heads: the job's cancel token, its progress mapped into the head's
// share of the page and the stage prefixed with the head.
JobContext head_context(const JobContext& ctx, Index i, Index count, const std::string& what)
{
    JobContext sub;
    sub.token = ctx.token;
    if (ctx.on_progress)
        sub.on_progress = [&ctx, i, count, what](double fraction, const std::string& stage) {
            ctx.on_progress((static_cast<double>(i) + fraction) / static_cast<double>(count), what + ": " + stage);
        };
    return sub;
}

// One mechanism of one head as the page keeps it: the image (max of each cell, peaks stay visible), its mask
// and the values its colour range is taken from (while the matrix is still there).
HeadPanel keep_panel(const ExploreResult& r, const MechanismOutcome& o, Index cells, std::vector<MapValues>& values)
{
    HeadPanel p;
    p.mechanism = o.result.mechanism;
    p.result = o.result;
    if (p.result.entropy)
        p.result.entropy->rows.clear();   // the titles read the statistics, not the N row entropies
    p.error = o.error;
    if (!o.matrix || !o.error.empty()) {
        values.emplace_back();
        return p;
    }
    const Index side = std::min(cells, r.n);
    p.image = reduce_region(*o.matrix, 0, r.n, 0, r.n, side, side, Reduce::max, o.pyramid.get());
    const CausalMask mask = CausalMask::of(r, o);
    p.masked = mask.masked_cells(p.image, r.n);
    values.push_back(map_values(o, mask, nullptr, nullptr, r.n, Reduce::max));
    return p;
}

// The layer the queries are: the selection's 'l' index, or the layer of per-layer datasets (headers only).
std::optional<Index> layer_of(const TensorSource& src)
{
    if (const auto it = src.selection.at.find('l'); it != src.selection.at.end())
        return it->second;
    try {
        for (const LayerTensors& l : layer_tensors(src.q_ref, src.k_ref, std::nullopt))
            if (l.q_ref.text == src.q_ref.text)
                return l.layer;
    } catch (const std::exception&) {
        // Not a file of per-layer datasets the listing understands: no layer to name.
    }
    return std::nullopt;
}

}  // namespace

HeadsResult explore_heads(const HeadsRequest& request, const JobContext& ctx)
{
    const auto start = std::chrono::steady_clock::now();
    if (request.count < 1 || request.cells < 1)
        throw std::invalid_argument("a page of heads needs count >= 1 and cells >= 1");
    const TensorSource& src = request.base.source;
    ctx.progress(0.0, "reading the heads");
    const HeadPairing pairing = pair_heads(src.q_ref, src.k_ref, src.selection);
    HeadsResult out;
    out.request = request;
    out.heads = pairing.heads;
    out.kv_heads = pairing.kv_heads;
    out.mechanisms = request.base.mechanisms;
    out.layer = layer_of(src);
    // Without a head axis the page is the selection itself, shown as one head.
    const Index total = std::max<Index>(1, pairing.heads);
    if (request.first < 0 || request.first >= total)
        throw std::invalid_argument("first head " + std::to_string(request.first) + " is outside 0.." + std::to_string(total - 1));
    out.first = request.first;
    const Index count = std::min(request.count, total - request.first);

    // values[mechanism][head]: what each mechanism's shared range is taken from.
    std::vector<std::vector<MapValues>> values(out.mechanisms.size());
    for (Index i = 0; i < count; ++i) {
        ExploreRequest one = request.base;
        const Index head = request.first + i;
        if (pairing.heads > 0)
            one.source.selection.at['h'] = head;
        const std::string what = pairing.heads > 0 ? "head " + std::to_string(head) : "the selection";
        const ExploreResult r = explore(one, head_context(ctx, i, count, what));
        if (i == 0) {
            out.n = r.n;
            out.d = r.d;
            out.input = r.input;
        }
        HeadMaps maps;
        if (pairing.heads > 0) {
            maps.head = head;
            maps.kv_head = pair_heads(src.q_ref, src.k_ref, one.source.selection).kv_head;
        }
        for (std::size_t m = 0; m < r.outcomes.size() && m < values.size(); ++m)
            maps.panels.push_back(keep_panel(r, r.outcomes[m], request.cells, values[m]));
        out.maps.push_back(std::move(maps));
        ctx.check();
    }
    for (const std::vector<MapValues>& v : values) {
        std::vector<const MapValues*> shown;
        for (const MapValues& mv : v)
            if (!mv.values.empty())
                shown.push_back(&mv);
        out.ranges.push_back(colour_range(shown, request.clip_percentile, false));
    }
    ctx.progress(1.0, "done");
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

}  // namespace attnscope::analysis
