#include "analysis/depth.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analysis/analyze.h"
#include "analysis/inputs.h"
#include "analysis/measure.h"
#include "analysis/plan.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "attention/mechanisms.h"
#include "util/error.h"

namespace attnscope::analysis {

using Eigen::MatrixXd;
using depth_json = nlohmann::ordered_json;

double residual_to_uniform(const Eigen::Ref<const MatrixXd>& P)
{
    const double norm = P.norm();
    if (!(norm > 0.0))
        return 0.0;
    const Eigen::RowVectorXd pi = P.colwise().mean();
    return (P.rowwise() - pi).norm() / norm;
}

namespace {

// One mechanism's running product and what is known of it.
struct Chain {
    attention::Mechanism mechanism{};
    MatrixXd P;                          // empty until the first layer
    bool causal = false;
    bool negative = false;               // some layer can have negative entries
    std::string broken;                  // why the chain stopped (a layer's matrix was not defined)
    nlohmann::ordered_json params;       // the first layer's first head's resolved parameters
};

}  // namespace

depth_json depth_document(const DepthRequest& request, const JobContext* ctx)
{
    if (!(request.alpha >= 0.0 && request.alpha <= 1.0))
        throw std::invalid_argument("--alpha " + std::to_string(request.alpha) + " must lie in [0, 1]");
    if (request.plan.files.size() != 1)
        throw std::invalid_argument("depth takes one file");
    {
        // A file without layers: say so (the planner would only say that the layout has no 'l' axis).
        const std::string& file = request.plan.files.front();
        const io::TensorRef q = io::tensor_in(file, request.plan.q_name), k = io::tensor_in(file, request.plan.k_name);
        const auto tf = io::open_tensor(q);
        const std::string layout = io::resolve_layout(tf->find(q.name), request.plan.selection, "--q " + q.text);
        if (layout.find('l') == std::string::npos && layer_tensors(q, k, std::nullopt).empty())
            throw InputError("depth needs the layers of one model: " + file + " holds no per-layer queries and keys "
                             "(/layers/<i>/q, /layers/<i>/k, at least two) named like " + request.plan.q_name +
                             ", and " + request.plan.q_name + " (layout " + layout + ") has no 'l' axis");
    }
    const std::vector<BatchUnit> units = plan_batch_units(request.plan);
    // The units by layer, in layer order (the plan's order: layers, then heads).
    std::vector<Index> layers;
    std::map<Index, std::vector<const BatchUnit*>> by_layer;
    for (const BatchUnit& u : units) {
        if (!u.layer)
            throw InputError(request.plan.files.front() +
                             ": its queries have no layers (neither /layers/<i>/q datasets nor an 'l' axis); depth "
                             "needs the layers of one model");
        if (!by_layer.count(*u.layer))
            layers.push_back(*u.layer);
        by_layer[*u.layer].push_back(&u);
    }
    if (layers.empty())
        throw InputError(request.plan.files.front() + ": no layer to multiply");
    if (!request.head_mean)
        for (const Index l : layers)
            if (by_layer[l].size() != 1)
                throw std::invalid_argument("--head: layer " + std::to_string(l) + " has " +
                                            std::to_string(by_layer[l].size()) + " heads planned; give one head");

    std::vector<Chain> chains;
    for (const attention::Mechanism m : request.plan.mechanisms)
        chains.push_back(Chain{m, {}, false, false, {}, {}});
    MetricOptions metrics = request.plan.metrics;
    metrics.baseline = false;   // a product of layers has no content-free counterpart of its own
    const std::uint64_t limit = request.plan.memory_limit ? request.plan.memory_limit : default_memory_limit();

    depth_json steps = depth_json::array();
    std::size_t steps_done = 0;   // for the progress
    Index n = -1;
    depth_json input_of_first;
    for (std::size_t li = 0; li < layers.size(); ++li) {
        const Index layer = layers[li];
        std::vector<MatrixXd> sums(chains.size());
        std::vector<std::size_t> heads_seen(chains.size(), 0);
        for (const BatchUnit* u : by_layer[layer]) {
            if (ctx)   // each layer's heads, then its products' measures: one step each
                ctx->progress(static_cast<double>(steps_done++) / static_cast<double>(units.size() + layers.size()),
                              "layer " + std::to_string(layer) + (u->head ? ", head " + std::to_string(*u->head) : std::string()));
            const LoadedInputs in = load_inputs(u->source.q_ref, u->source.k_ref, std::nullopt, u->source.selection);
            const Index un = in.q.values.rows();
            if (n < 0) {
                n = un;
                input_of_first = in.input_json;
                // The products, each layer's sum, one matrix being formed and measure()'s SVD copy and work.
                const long double need = static_cast<long double>(chains.size() * 2 + 4) * un * un * 8.0L;
                if (need > static_cast<long double>(limit))
                    throw MemoryLimitError("N=" + std::to_string(un) + " tokens: the products of " +
                                           std::to_string(chains.size()) + " mechanisms need about " +
                                           human_bytes(static_cast<std::uint64_t>(need)) + ", over the memory limit of " +
                                           human_bytes(limit));
            } else if (un != n) {
                throw InputError("layer " + std::to_string(layer) + " has N=" + std::to_string(un) + " tokens but layer " +
                                 std::to_string(layers.front()) + " has " + std::to_string(n) +
                                 ": a product of layers needs one N");
            }
            const attention::AttentionOptions options = options_for_inputs(u->options, in);
            MetricOptions nothing;
            nothing.spectrum = nothing.entropy = nothing.baseline = false;
            for (std::size_t c = 0; c < chains.size(); ++c) {
                Chain& ch = chains[c];
                if (!ch.broken.empty())
                    continue;
                PreparedMechanism p = prepare_mechanism(ch.mechanism, in.q.values, in.k.values, options, nothing, limit);
                if (p.op->unnormalisable_row()) {
                    ch.broken = "layer " + std::to_string(layer) + ": " + non_finite_reason(*p.op);
                    continue;
                }
                MatrixXd A = p.op->dense();
                if (!A.allFinite()) {
                    ch.broken = "layer " + std::to_string(layer) + ": " + non_finite_reason(*p.op);
                    continue;
                }
                // The product is lower triangular only when every layer's matrix is.
                ch.causal = ch.params.is_null() ? p.op->causal() : ch.causal && p.op->causal();
                if (ch.params.is_null())
                    ch.params = p.result.params;
                ch.negative = ch.negative || p.op->may_be_negative();
                if (sums[c].size() == 0)
                    sums[c] = std::move(A);
                else
                    sums[c] += A;
                ++heads_seen[c];
            }
        }
        if (ctx)
            ctx->progress(static_cast<double>(steps_done++) / static_cast<double>(units.size() + layers.size()),
                          "depth " + std::to_string(li + 1) + ": measuring the products");
        depth_json results = depth_json::array();
        for (std::size_t c = 0; c < chains.size(); ++c) {
            Chain& ch = chains[c];
            MechanismResult r;
            r.mechanism = ch.mechanism;
            depth_json j;
            if (ch.broken.empty()) {
                MatrixXd A = std::move(sums[c]);
                A /= static_cast<double>(heads_seen[c]);
                MatrixXd step = request.alpha * A;
                step.diagonal().array() += 1.0 - request.alpha;
                ch.P = ch.P.size() == 0 ? std::move(step) : MatrixXd(step * ch.P);
                // The product's allowed keys: causal layers keep P lower triangular (keys j <= t).
                std::vector<Index> allowed(static_cast<std::size_t>(n), n);
                if (ch.causal)
                    for (Index t = 0; t < n; ++t)
                        allowed[static_cast<std::size_t>(t)] = t + 1;
                const attention::MatrixOperator op(ch.P, ch.mechanism, ch.causal, allowed, ch.negative);
                MeasureRequest req;
                req.path = metrics.spectrum ? SpectrumPath::dense : SpectrumPath::none;
                req.metrics = metrics;
                req.memory_limit = limit;
                Measurement m = measure(op, attention::AttentionOptions{}, req);
                r = std::move(m.result);
                r.past_block_asked = past_measures_asked(ch.causal, metrics);
                j = result_json(r, metrics);
                j["params"] = ch.params;   // the first layer's (per-layer mixing matrices differ by layer and head)
                j["params"]["alpha"] = request.alpha;
                j["params"]["heads_averaged"] = heads_seen[c];
                j["residual_to_uniform"] = residual_to_uniform(ch.P);
            } else {
                j = result_json(r, metrics);
                j["residual_to_uniform"] = nullptr;
                j["warnings"].push_back("no product from here on: " + ch.broken);
            }
            results.push_back(std::move(j));
        }
        steps.push_back({{"depth", static_cast<Index>(li) + 1}, {"layer", layer}, {"results", std::move(results)}});
    }
    depth_json doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    depth_json input = input_of_first;
    input["file"] = request.plan.files.front();
    input["layers"] = layers;
    input["heads"] = request.head_mean ? depth_json("mean") : depth_json(by_layer[layers.front()].front()->head.value_or(0));
    input["alpha"] = request.alpha;
    doc["input"] = std::move(input);
    doc["depth"] = std::move(steps);
    doc["kernels"] = kernels_json();
    return doc;
}

}  // namespace attnscope::analysis
