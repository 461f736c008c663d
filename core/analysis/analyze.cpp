#include "analysis/analyze.h"

#include <optional>
#include <stdexcept>
#include <string>

#include "analysis/mask_measures.h"
#include "analysis/metric_table.h"
#include "attention/mechanisms.h"
#include "kernels/kernels.h"
#include "metrics/streaming.h"
#include "util/error.h"

namespace attnscope::analysis {

using attention::Mechanism;
using json = nlohmann::ordered_json;

namespace {

// Linear and MHLA attention share their raw scores phi(q) . phi(k) (attention::MechanismInfo::
// plain_kernel_scores): when two such mechanisms stream their entropy (non-causal), one pass over the N^2 scores
// gives both (metrics::kernel_block_sums, taken over the blocked one's blocks).
std::vector<std::optional<metrics::RowEntropies>> shared_kernel_entropy(const std::vector<PreparedMechanism>& prepared,
                                                                        const attention::AttentionOptions& options,
                                                                        const MetricOptions& mo)
{
    std::vector<std::optional<metrics::RowEntropies>> shared(prepared.size());
    if (!mo.entropy || options.causal)
        return shared;
    std::optional<std::size_t> lin, mhla;   // the one without blocks, the one with
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        const attention::MechanismInfo& info = attention::mechanism_info(prepared[i].result.mechanism);
        if (prepared[i].path == SpectrumPath::dense || !info.plain_kernel_scores)
            continue;
        (info.has_blocks() ? mhla : lin) = i;
    }
    if (!lin || !mhla)
        return shared;
    const metrics::KernelBlockSums sums = metrics::kernel_block_sums(*prepared[*mhla].op->kernel_pieces());
    for (const std::size_t i : {*lin, *mhla})
        shared[i] = metrics::row_entropies_from_block_sums(*prepared[i].op->kernel_pieces(), sums);
    return shared;
}

}  // namespace

std::vector<MechanismResult> analyze(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K,
                                     const std::vector<Mechanism>& mechanisms, const attention::AttentionOptions& options,
                                     const MetricOptions& metric_options, std::uint64_t memory_limit, const JobContext* ctx,
                                     const Eigen::MatrixXd* values, const RetrievalTargets* targets)
{
    const Index n = Q.rows();
    const Index d = Q.cols();
    if (K.rows() != n || K.cols() != d)
        throw std::invalid_argument("keys are " + std::to_string(K.rows()) + " x " + std::to_string(K.cols()) +
                                    " but queries are " + std::to_string(n) + " x " + std::to_string(d));
    if (metric_options.top_k && *metric_options.top_k < 1)
        throw std::invalid_argument("top-k must be at least 1");
    if (metric_options.rank_rtol && !(*metric_options.rank_rtol > 0.0 && *metric_options.rank_rtol < 1.0))
        throw std::invalid_argument("the rank tolerance must lie in (0, 1)");
    (void)past_split_of(options.causal, metric_options.past_split, n);   // a given split outside 1..N-1 fails here

    // Q, K, the factors and the streamed entropy's working space (measure.h); dense work is checked per
    // mechanism when its path is chosen.
    const std::uint64_t light = streaming_memory_bytes(n, d, mechanisms, options, metric_options);
    if (light > memory_limit)
        throw MemoryLimitError("N=" + std::to_string(n) + " tokens: even the streaming analysis needs about " +
                               human_bytes(light) + ", over the memory limit of " + human_bytes(memory_limit));

    // Every mechanism's parameters first, so that an impossible option fails before any work.
    for (const Mechanism m : mechanisms)
        (void)mechanism_params(m, options_for(m, options), n, d);
    std::vector<PreparedMechanism> prepared;
    for (const Mechanism m : mechanisms)
        prepared.push_back(prepare_mechanism(m, Q, K, options, metric_options, memory_limit));
    if (ctx)
        ctx->check();
    const auto shared = shared_kernel_entropy(prepared, options, metric_options);

    // The token distances of locality: the grid the options name holds for every mechanism (softmax's own options
    // drop it).
    const TokenDistance distance(options, n);
    std::vector<MeasureRequest> requests(prepared.size());
    double total = 0;
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        requests[i].path = prepared[i].path;
        requests[i].metrics = metric_options;
        requests[i].shared_entropy = shared[i] ? &*shared[i] : nullptr;
        requests[i].memory_limit = memory_limit;
        requests[i].distance = &distance;
        total += measure_weight(requests[i], n);
    }
    std::optional<StageProgress> progress;
    if (ctx)
        progress.emplace(*ctx, total);

    std::vector<MechanismResult> results;
    for (std::size_t i = 0; i < prepared.size(); ++i) {
        PreparedMechanism& p = prepared[i];
        if (ctx)
            ctx->check();
        Measurement m = measure(*p.op, p.options, requests[i], progress ? &*progress : nullptr);
        m.result.params = std::move(p.result.params);
        m.result.warnings.insert(m.result.warnings.begin(), p.result.warnings.begin(), p.result.warnings.end());
        m.result.same_as_linear = p.result.same_as_linear;
        m.result.rank_cap = p.result.rank_cap;
        m.result.spectrum_why = std::move(p.result.spectrum_why);
        // docs/maths.md 2.2: a causal result (or one with a split) has its past block, null when not measured.
        m.result.past_block_asked = m.result.past_block_asked || past_measures_asked(options.causal, metric_options);
        if (values && m.finite)
            measure_output(m.result, *p.op, *values, metric_options.rank_rtol);
        if (targets) {
            m.result.retrieval_asked = true;
            if (m.finite && !targets->pairs.empty()) {
                const Retrieval rt = measure_retrieval(*p.op, *targets);
                m.result.retrieval_mass = rt.mass;
                m.result.retrieval_rank = rt.rank;
            } else if (targets->pairs.empty()) {
                m.result.warnings.push_back("no retrieval measures: none of " + targets->source +
                                            "'s pairs lies in the analysed tokens");
            }
        }
        results.push_back(std::move(m.result));
        p.op.reset();
    }
    return results;
}

void measure_output(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd& values,
                    std::optional<double> rank_rtol)
{
    r.output_asked = true;
    if (values.rows() != op.rows())
        throw std::invalid_argument("values have " + std::to_string(values.rows()) + " tokens but the attention matrix " +
                                    std::to_string(op.rows()));
    Eigen::MatrixXd Y(op.rows(), values.cols());
    op.apply(values, Y);
    if (!Y.allFinite()) {
        r.warnings.push_back("no output measures: A V has entries that are not finite");
        return;
    }
    r.output = metrics::spectrum_metrics(metrics::singular_values(std::move(Y)), op.rows(), values.cols(), rank_rtol);
}

nlohmann::ordered_json distance_json(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K,
                                     const std::vector<Mechanism>& mechanisms, const attention::AttentionOptions& options,
                                     const MetricOptions& metric_options, std::uint64_t memory_limit, const JobContext* ctx)
{
    json out = json::object();
    if (mechanisms.size() < 2 || !metric_options.entropy)
        return out;
    MetricOptions nothing;
    nothing.spectrum = nothing.entropy = nothing.baseline = false;
    std::vector<PreparedMechanism> ops;
    for (const Mechanism m : mechanisms)
        ops.push_back(prepare_mechanism(m, Q, K, options, nothing, memory_limit));
    auto keep_going = [&] { return !(ctx && ctx->token.cancelled()); };
    auto fields = [](std::optional<double> tv, std::optional<double> js, std::optional<double> rel, const std::string& why) {
        json j{{"tv", tv ? json(*tv) : json(nullptr)}, {"js", js ? json(*js) : json(nullptr)},
               {"rel_frobenius", rel ? json(*rel) : json(nullptr)}};
        if (!why.empty())
            j["why"] = why;
        return j;
    };
    for (std::size_t a = 0; a < ops.size(); ++a)
        out[std::string(attention::to_string(mechanisms[a]))] = json::object();
    for (std::size_t a = 0; a < ops.size(); ++a)
        for (std::size_t b = a + 1; b < ops.size(); ++b) {
            const std::string na(attention::to_string(mechanisms[a])), nb(attention::to_string(mechanisms[b]));
            if (ctx)
                ctx->check();
            MechanismDistance d;
            if (ops[a].op->unnormalisable_row() || ops[b].op->unnormalisable_row())
                d.why = "a matrix is not defined (a row normaliser is zero or not finite)";
            else
                d = mechanism_distance(*ops[a].op, *ops[b].op, keep_going);
            if (ctx)
                ctx->check();
            out[na][nb] = fields(d.tv, d.js, d.rel_frobenius, d.why);
            out[nb][na] = fields(d.tv, d.js, d.rel_frobenius_reverse, d.why);
        }
    return out;
}

nlohmann::ordered_json kernels_json()
{
    nlohmann::ordered_json k;
    k["simd"] = std::string(kernels::to_string(kernels::active_isa()));
    k["threads"] = kernels::threads();
    k["openblas_core"] = kernels::openblas_core();
    if (const auto choice = kernels::gemm_choice_made()) {
        const auto path = [&](int cls) { return choice->own[static_cast<std::size_t>(cls)] ? "own" : "openblas"; };
        k["gemm"] = nlohmann::ordered_json{{"general", path(kernels::gemm_general)},
                                           {"rank_k", path(kernels::gemm_rank_k)},
                                           {"thin", path(kernels::gemm_thin)},
                                           {"source", choice->source}};
    }
    for (const auto& [operation, path] : kernels::measured_paths_made())
        k["operations"][operation] = path == kernels::GemmPath::own ? "own" : "openblas";
    return k;
}

// docs/maths.md 2.2: {h, rows, cols, rank, energy_rank_99} for each split of H, ascending; null when not computed.
nlohmann::ordered_json past_profile_json(const MechanismResult& r)
{
    if (!r.past_profile)
        return nullptr;
    json splits = json::array();
    for (const metrics::SplitRank& s : r.past_profile->splits)
        splits.push_back(json{{"h", s.h}, {"rows", s.rows}, {"cols", s.cols}, {"rank", s.rank},
                              {"energy_rank_99", s.energy_rank_99}});
    return splits;
}

json result_json(const MechanismResult& r, const MetricOptions& mo)
{
    json j = json::object();
    j["mechanism"] = std::string(attention::to_string(r.mechanism));
    j["params"] = r.params;
    nlohmann::ordered_json method = nlohmann::ordered_json::object();
    if (!r.spectrum_method.empty())
        method["spectrum"] = r.spectrum_method;
    if (!r.entropy_method.empty())
        method["entropy"] = r.entropy_method;
    if (!r.spectrum_why.empty() && !r.spectrum_method.empty())
        method["why"] = r.spectrum_why;
    if (r.past_profile)   // "factors" (exact, never the blocks) or "matrix" (the SVD of each block)
        method["past_profile"] = r.past_profile->method;
    if (r.top_k && !r.top_k->dense)   // the block solver's report (docs/cli.md, "AttnScope's additions")
        method["top_k"] = json{{"solver", "block-lanczos"},
                               {"block", r.top_k->block},
                               {"passes", r.top_k->passes},
                               {"restarts", r.top_k->restarts},
                               {"tol", r.top_k->tol},
                               {"converged", r.top_k->converged}};
    j["method"] = std::move(method);
    if (mo.spectrum) {
        // The scalar metrics (analysis/metric_table.h), then the singular values: all of them (cut to --top-k),
        // the top-k alone, or what the randomized range finder found.
        write_metric_fields(r, MetricGroup::spectrum, j);
        if (!r.spectrum || (r.rank_bracket && r.spectrum->singular_values.empty())) {
            j["singular_values"] = nullptr;
        } else if (r.rank_bracket || r.partial_spectrum) {
            j["singular_values"] = r.spectrum->singular_values;
            if (r.top_k)
                j["singular_value_residuals"] = r.top_k->residuals;
        } else {
            std::vector<double> values = r.spectrum->singular_values;
            if (mo.top_k && static_cast<std::size_t>(*mo.top_k) < values.size())
                values.resize(static_cast<std::size_t>(*mo.top_k));
            j["singular_values"] = values;
        }
    }
    if (mo.spectrum)
        write_metric_object(r, MetricGroup::rank_at_rtol, j, r.spectrum && !r.partial_spectrum);
    if (mo.entropy) {
        if (r.entropy) {
            json e = json::object();
            write_metric_fields(r, MetricGroup::entropy, e);
            j[std::string(json_object_of(MetricGroup::entropy))] = std::move(e);
            if (mo.row_entropy)
                j["row_entropy"] = r.entropy->rows;
        } else {
            j["entropy"] = nullptr;
            if (mo.row_entropy)
                j["row_entropy"] = nullptr;
        }
    }
    // docs/maths.md 2.2: the content-free baseline and A against it, the past block.
    if (mo.baseline && (mo.spectrum || mo.entropy)) {
        write_metric_object(r, MetricGroup::baseline, j, r.baseline.has_value());
        if (r.baseline && !r.baseline->entropy)
            j["baseline"]["entropy"] = nullptr;
        write_metric_fields(r, MetricGroup::versus_baseline, j);
    }
    // docs/maths.md 2.2: the logit norm (with the spectrum), locality (with the entropy).
    if (mo.spectrum || mo.entropy)
        write_metric_fields(r, MetricGroup::rows, j);
    if (mo.entropy) {
        if (r.locality) {
            json m = json::object();
            for (const auto& [radius, mass] : r.locality->mass_within)
                m[std::to_string(radius)] = mass;
            j["mass_within"] = std::move(m);
        } else {
            j["mass_within"] = nullptr;
        }
    }
    if (r.retrieval_asked)   // the inputs' retrieval targets (analysis/retrieval.h)
        write_metric_fields(r, MetricGroup::retrieval, j);
    if (r.output_asked)   // --v: rank, effective rank, energy rank 99% of A V
        write_metric_object(r, MetricGroup::output, j, r.output.has_value());
    if (r.past_block_asked) {
        write_metric_object(r, MetricGroup::past_block, j, r.past_block.has_value());
        write_metric_fields(r, MetricGroup::past_profile, j);
        j["past_profile"] = past_profile_json(r);
    }
    j["warnings"] = r.warnings;
    return j;
}

}  // namespace attnscope::analysis
