#include "analysis/depth_curves.h"

#include <chrono>
#include <limits>
#include <string>

#include "analysis/plan.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "util/error.h"

namespace attnscope::analysis {

namespace {

using depth_curves_json = nlohmann::ordered_json;

double depth_value_or_nan(const depth_curves_json& result, const char* key)
{
    const auto it = result.find(key);
    return it != result.end() && it->is_number() ? it->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// The queries' layout and whether the file holds the layers of a model: an 'l' axis, or per-layer datasets named
// like the queries (at least two, analysis/plan.h layer_tensors). Empty `why` when it does.
struct DepthLayers {
    std::string layout;
    bool l_axis = false;
    std::vector<LayerTensors> per_layer;
    std::string why;
};

DepthLayers depth_layers_of(const TensorSource& src)
{
    const io::TensorRef &q = src.q_ref, &k = src.k_ref;
    if (k.file != q.file)
        throw InputError("depth multiplies the layers of one file: the keys " + k.text + " are not in " + q.file);
    DepthLayers out;
    const auto file = io::open_tensor(q);
    out.layout = io::resolve_layout(file->find(q.name), src.selection, "--q " + q.text);
    out.l_axis = out.layout.find('l') != std::string::npos;
    if (!out.l_axis)
        out.per_layer = layer_tensors(src.q_ref, src.k_ref, std::nullopt);
    if (!out.l_axis && out.per_layer.empty())
        out.why = "depth needs the layers of one model: " + q.file + " holds no per-layer queries and keys (/layers/<i>/q, "
                  "/layers/<i>/k) named like " + q.name + ", and " + q.name + " (layout " + out.layout + ") has no 'l' axis";
    return out;
}

DepthRequest depth_request_from(const ExploreDepthRequest& r, const DepthLayers& layers)
{
    const TensorSource& src = r.base.source;
    DepthRequest req;
    BatchPlan& plan = req.plan;
    plan.files = {src.q_ref.file};
    // Per-layer datasets: named by the lowest layer (every layer named like it is planned), so that the request
    // is the same whichever layer the app shows.
    const io::TensorRef& q = layers.per_layer.empty() ? src.q_ref : layers.per_layer.front().q_ref;
    const io::TensorRef& k = layers.per_layer.empty() ? src.k_ref : layers.per_layer.front().k_ref;
    plan.q_name = q.name;
    plan.k_name = k.name;
    plan.selection = src.selection;
    plan.selection.at.erase('l');
    plan.selection.all.clear();
    plan.layers = AxisChoice::all("layers");
    const bool h_axis = layers.layout.find('h') != std::string::npos;
    req.head_mean = r.head_mean;
    if (r.head_mean) {
        plan.selection.at.erase('h');
        plan.selection.kv_head.reset();   // each head reads its own key/value head
        plan.heads = h_axis ? AxisChoice::all("heads") : AxisChoice::parse("", "heads");
    } else {
        plan.heads = AxisChoice::parse("", "head");   // the selection's head (h, default 0)
    }
    plan.mechanisms = r.base.mechanisms;
    plan.options = r.base.options;
    plan.given = r.given;
    plan.metrics.rank_rtol = r.base.rank_rtol;
    plan.metrics.past_split = r.base.past_split;
    plan.memory_limit = r.base.memory_limit;
    req.alpha = r.alpha;
    return req;
}

}  // namespace

DepthRequest depth_request_for(const ExploreDepthRequest& request)
{
    const DepthLayers layers = depth_layers_of(request.base.source);
    if (!layers.why.empty())
        throw InputError(layers.why);
    return depth_request_from(request, layers);
}

ExploreDepthResult explore_depth(const ExploreDepthRequest& request, const JobContext& ctx)
{
    const auto start = std::chrono::steady_clock::now();
    ExploreDepthResult out;
    out.request = request;
    out.file = request.base.source.q_ref.file;
    ctx.progress(0.0, "planning the layers");
    const DepthLayers layers = depth_layers_of(request.base.source);
    out.head_axis = layers.layout.find('h') != std::string::npos;
    if (!layers.why.empty()) {
        out.unavailable = layers.why;
        return out;
    }
    out.document = depth_document(depth_request_from(request, layers), &ctx);
    const depth_curves_json& in = out.document.at("input");
    out.n = in.at("n").get<Eigen::Index>();
    if (in.at("heads").is_number_integer())
        out.head = in.at("heads").get<Eigen::Index>();
    out.curves.resize(request.base.mechanisms.size());
    for (std::size_t c = 0; c < out.curves.size(); ++c)
        out.curves[c].mechanism = request.base.mechanisms[c];
    for (const depth_curves_json& step : out.document.at("depth")) {
        out.layers.push_back(step.at("layer").get<Eigen::Index>());
        const depth_curves_json& results = step.at("results");
        for (std::size_t c = 0; c < out.curves.size() && c < results.size(); ++c) {
            const depth_curves_json& r = results[c];
            DepthCurve& curve = out.curves[c];
            curve.residual_to_uniform.push_back(depth_value_or_nan(r, "residual_to_uniform"));
            curve.effective_rank.push_back(depth_value_or_nan(r, "effective_rank"));
            curve.rank.push_back(depth_value_or_nan(r, "rank"));
            if (out.heads_averaged == 0 && r.contains("params") && r["params"].contains("heads_averaged"))
                out.heads_averaged = r["params"]["heads_averaged"].get<Eigen::Index>();
            if (r.contains("warnings"))
                for (const depth_curves_json& w : r["warnings"])
                    if (w.is_string())
                        curve.warnings.push_back("depth " + std::to_string(step.at("depth").get<long long>()) + ": " +
                                                 w.get<std::string>());
        }
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}

}  // namespace attnscope::analysis
