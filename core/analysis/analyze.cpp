#include "analysis/analyze.h"

#include <cmath>
#include <fstream>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "attention/blocks.h"
#include "attention/mixing.h"
#include "attention/operator.h"
#include "metrics/streaming.h"
#include "metrics/structured.h"
#include "metrics/topk.h"
#include "util/error.h"

namespace attnscope::analysis {

using attention::Mechanism;
using json = nlohmann::ordered_json;

namespace {

std::string human_bytes(std::uint64_t b)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

}  // namespace

std::uint64_t dense_memory_bytes(Index n)
{
    // The matrix, the copy dgesdd destroys, and dgesdd's O(N^2) workspace (jobz='N': ~ N^2 / 2 doubles
    // plus O(N)). Entropy reads the matrix in place.
    const long double nn = static_cast<long double>(n) * static_cast<long double>(n) * 8.0L;
    const long double total = nn * 2.5L + 64.0L * 1024 * 1024;
    if (total > 1.8e19L)
        return UINT64_MAX;
    return static_cast<std::uint64_t>(total);
}

std::uint64_t default_memory_limit()
{
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0)
        return 4ULL << 30;
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size) / 2;
}

json mechanism_params(Mechanism mechanism, const attention::AttentionOptions& options, Index n, Index d)
{
    json p = json::object();
    if (mechanism == Mechanism::softmax) {
        const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(d));
        p["scale"] = scale;
        p["causal"] = options.causal;
        return p;
    }
    p["feature_map"] = std::string(attention::to_string(options.feature_map.kind));
    if (options.feature_map.kind == attention::FeatureMapKind::favor) {
        p["favor_features"] = options.feature_map.favor_features;
        p["seed"] = options.feature_map.seed;
    }
    p["causal"] = options.causal;
    if (mechanism == Mechanism::linear)
        return p;

    const attention::BlockLayout layout = attention::make_blocks(options.blocks, n);
    p["blocks"] = layout.num_blocks;
    using Kind = attention::BlockSpec::Kind;
    if (options.blocks.kind == Kind::chunk) {
        p["chunk"] = options.blocks.chunk;
    } else if (options.blocks.kind == Kind::grid) {
        p["grid"] = options.blocks.grid;
        p["block_grid"] = options.blocks.block_grid;
        p["token_order"] = std::string(attention::to_string(options.blocks.order));
    }
    const std::string mixing = options.mixing.matrix ? options.mixing.preset
                                                     : attention::resolved_mixing_name(options.mixing, options.causal);
    p["mixing"] = mixing;
    if (!options.mixing.matrix && mixing == "exp")
        p["mixing_sigma"] = options.mixing.sigma;
    if (!options.mixing.matrix && mixing == "local")
        p["mixing_threshold"] = options.mixing.threshold;
    p["normalize"] = std::string(attention::to_string(options.normalize));
    return p;
}

std::vector<MechanismResult> analyze(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K,
                                     const std::vector<Mechanism>& mechanisms, const attention::AttentionOptions& options,
                                     const MetricOptions& metric_options, std::uint64_t memory_limit)
{
    const Index n = Q.rows();
    const Index d = Q.cols();
    if (K.rows() != n || K.cols() != d)
        throw std::invalid_argument("keys are " + std::to_string(K.rows()) + " x " + std::to_string(K.cols()) +
                                    " but queries are " + std::to_string(n) + " x " + std::to_string(d));
    if (metric_options.top_k && *metric_options.top_k < 1)
        throw std::invalid_argument("--top-k must be at least 1");
    if (metric_options.rank_rtol && !(*metric_options.rank_rtol > 0.0 && *metric_options.rank_rtol < 1.0))
        throw std::invalid_argument("--rank-rtol must lie in (0, 1)");

    // Tiles of streaming entropy and the factors: a few times N x (d + 4096) doubles at most.
    const long double light = static_cast<long double>(n) * (static_cast<long double>(d) * 8.0L + 4096.0L) * 8.0L;
    if (light > static_cast<long double>(memory_limit))
        throw InputError("N=" + std::to_string(n) + " tokens: even the streaming analysis needs about " +
                         human_bytes(static_cast<std::uint64_t>(light)) + ", over the memory limit of " +
                         human_bytes(memory_limit) + " (--max-memory)");

    // Resolve every mechanism's parameters first, so that an impossible option fails before any work.
    std::vector<MechanismResult> results;
    for (const Mechanism m : mechanisms) {
        MechanismResult r;
        r.mechanism = m;
        r.params = mechanism_params(m, options, n, d);
        results.push_back(std::move(r));
    }

    std::vector<std::unique_ptr<attention::AttentionOperator>> ops;
    std::vector<SpectrumPath> paths;
    for (const MechanismResult& r : results) {
        ops.push_back(attention::make_operator(r.mechanism, Q, K, options_for(r.mechanism, options)));
        paths.push_back(choose_spectrum_path(*ops.back(), metric_options, memory_limit));
    }

    // Linear and MHLA attention share their raw scores phi(q) . phi(k): when both stream their entropy
    // (non-causal), one pass over the N^2 scores gives both (AttentionOperator::kernel_block_sums).
    std::vector<std::optional<PrecomputedEntropy>> shared(results.size());
    if (metric_options.entropy && !options.causal) {
        std::optional<std::size_t> lin, mhla;
        for (std::size_t i = 0; i < results.size(); ++i) {
            if (paths[i] == SpectrumPath::dense)
                continue;
            if (results[i].mechanism == Mechanism::linear)
                lin = i;
            else if (results[i].mechanism == Mechanism::mhla)
                mhla = i;
        }
        if (lin && mhla) {
            Eigen::MatrixXd P, R;
            const int status = ops[*mhla]->kernel_block_sums(P, R);
            for (const std::size_t i : {*lin, *mhla}) {
                PrecomputedEntropy pre;
                pre.status = status != 0 ? status : ops[i]->row_entropies_from_block_sums(P, R, pre.rows);
                shared[i] = std::move(pre);
            }
        }
    }

    for (std::size_t i = 0; i < results.size(); ++i) {
        MechanismResult& r = results[i];
        const attention::AttentionOptions mechanism_options = options_for(r.mechanism, options);
        const attention::AttentionOperator& op = *ops[i];
        const PrecomputedEntropy* pre = shared[i] ? &*shared[i] : nullptr;
        if (paths[i] == SpectrumPath::dense) {
            Eigen::MatrixXd A = op.dense();
            measure(r, op, &A, true, paths[i], mechanism_options, metric_options);
        } else {   // everything else streams: no N x N matrix is ever formed
            measure(r, op, nullptr, false, paths[i], mechanism_options, metric_options, pre);
        }
        ops[i].reset();
    }
    return results;
}

attention::AttentionOptions options_for(Mechanism mechanism, const attention::AttentionOptions& options)
{
    attention::AttentionOptions o = options;
    if (mechanism == Mechanism::linear)
        o.normalize = attention::Normalize::row;
    return o;
}

std::string_view to_string(SpectrumMethod m)
{
    switch (m) {
    case SpectrumMethod::automatic: return "auto";
    case SpectrumMethod::dense: return "dense";
    case SpectrumMethod::structured: return "structured";
    case SpectrumMethod::streaming: return "streaming";
    }
    return "auto";
}

SpectrumMethod parse_spectrum_method(std::string_view s)
{
    if (s == "auto")
        return SpectrumMethod::automatic;
    if (s == "dense")
        return SpectrumMethod::dense;
    if (s == "structured")
        return SpectrumMethod::structured;
    if (s == "streaming")
        return SpectrumMethod::streaming;
    throw std::invalid_argument("--method " + std::string(s) + " is not one of auto, dense, structured, streaming");
}

SpectrumPath choose_spectrum_path(const attention::AttentionOperator& op, const MetricOptions& mo, std::uint64_t memory_limit)
{
    if (!mo.spectrum)
        return SpectrumPath::none;
    const attention::KernelFactors* factors = op.factors();
    const Index n = op.rows();
    const std::string name = std::string(attention::to_string(op.mechanism())) +
                             (op.kernel_pieces() && op.kernel_pieces()->causal ? " (causal)" : "");
    switch (mo.method) {
    case SpectrumMethod::dense:
        break;
    case SpectrumMethod::structured:
        if (!factors)
            throw std::invalid_argument(name + " attention has no low-rank factors: --method structured applies to "
                                               "non-causal linear and MHLA only (use --method auto)");
        return SpectrumPath::structured;
    case SpectrumMethod::streaming:
        if (factors)
            return SpectrumPath::structured;
        if (mo.rank_rtol)
            return SpectrumPath::randomized;
        if (!mo.top_k)   // nothing about the spectrum is computable without N x N: null, and measure() says why
            return SpectrumPath::none;
        return SpectrumPath::top_k;
    case SpectrumMethod::automatic:
        // Structured is exact; it is taken when its core is smaller than N (an O((M r)^3) SVD instead of O(N^3)).
        if (factors && metrics::structured_core_size(*factors) < n)
            return SpectrumPath::structured;
        if (dense_memory_bytes(n) > memory_limit) {
            if (factors)
                return SpectrumPath::structured;
            if (mo.rank_rtol)
                return SpectrumPath::randomized;
            if (mo.top_k)
                return SpectrumPath::top_k;
        }
        break;
    }
    const std::uint64_t need = dense_memory_bytes(n);
    if (need > memory_limit)
        throw InputError(name + ", N=" + std::to_string(n) + ": all singular values need the dense " + std::to_string(n) +
                         " x " + std::to_string(n) + " matrix, about " + human_bytes(need) + ", over the memory limit of " +
                         human_bytes(memory_limit) + " (--max-memory). What fits: --metrics entropy (streamed), --top-k K "
                         "(matrix-free largest singular values), and --method structured for non-causal linear and MHLA");
    return SpectrumPath::dense;
}

void measure(MechanismResult& r, const attention::AttentionOperator& op, Eigen::MatrixXd* A, bool consume,
             SpectrumPath path, const attention::AttentionOptions& options, const MetricOptions& metric_options,
             const PrecomputedEntropy* pre)
{
    if (path == SpectrumPath::dense && !A)
        throw std::logic_error("measure: a dense spectrum needs the dense matrix");
    const std::vector<Index> allowed = op.allowed_keys();
    const std::string non_finite = "the attention matrix has non-finite entries (a row normaliser is zero); "
                                   "no metric is reported";
    if (A && !A->allFinite()) {
        r.warnings.push_back(non_finite);
        return;
    }
    if (metric_options.entropy) {
        bool negative = false;
        if (A) {
            negative = (A->array() < 0.0).any();
            if (!negative) {
                r.entropy = metrics::row_entropy(*A, allowed);
                r.entropy_method = "dense";
            }
        } else {
            metrics::StreamedEntropy streamed;
            if (pre) {
                streamed.non_finite = pre->status == 2;
                streamed.negative = pre->status == 1;
                if (pre->status == 0) {
                    std::vector<double> h = pre->rows;
                    for (double& v : h)
                        if (v == 0.0)
                            v = 0.0;   // no -0
                    streamed.stats = metrics::entropy_stats(std::move(h), op.allowed_keys());
                }
            } else {
                streamed = metrics::streaming_row_entropy(op);
            }
            if (streamed.non_finite) {
                r.warnings.push_back(non_finite);
                return;
            }
            negative = streamed.negative;
            if (streamed.stats) {
                r.entropy = std::move(streamed.stats);
                r.entropy_method = "streaming";
            }
        }
        if (negative)
            r.warnings.push_back("entropy is undefined: the matrix has negative entries (feature map " +
                                 std::string(attention::to_string(options.feature_map.kind)) +
                                 "), so its rows are not distributions");
        else if (r.mechanism == Mechanism::mhla && options.normalize != attention::Normalize::row)
            r.warnings.push_back("rows are not normalised to sum 1 (normalize=" +
                                 std::string(attention::to_string(options.normalize)) +
                                 "); entropy is computed from the entries as they are");
    }
    if (path == SpectrumPath::none) {
        if (metric_options.spectrum)   // --method streaming on an operator without factors
            r.warnings.push_back("no spectrum: all singular values of " + std::string(attention::to_string(r.mechanism)) +
                                 " attention need the dense N x N matrix, which --method streaming never forms; give "
                                 "--top-k K for the K largest (matrix-free), --rank-rtol R for the rank at a relative "
                                 "tolerance (randomized range finder), or use --method auto");
        return;
    }
    const Index n = op.rows();
    std::vector<double> s;
    if (path == SpectrumPath::top_k) {
        metrics::TopSingularValues top = metrics::top_singular_values(op, *metric_options.top_k);
        if (!top.converged)
            r.warnings.push_back("the matrix-free top-k solver did not converge; the values are its best estimates");
        r.warnings.push_back("only the " + std::to_string(top.values.size()) +
                             " largest singular values are known (matrix-free): rank, effective and stable rank need "
                             "all of them (--method dense)");
        metrics::SpectrumMetrics partial;
        partial.singular_values = std::move(top.values);
        r.spectrum = std::move(partial);
        r.partial_spectrum = true;
        r.spectrum_method = "top-k";
        return;
    }
    if (path == SpectrumPath::randomized) {
        metrics::RandomizedRank rr = metrics::randomized_rank(op, *metric_options.rank_rtol, /*seed=*/0);
        if (!rr.converged)
            r.warnings.push_back("the randomized range finder reached its basis limit of " + std::to_string(rr.basis_size) +
                                 " before its residual bound fell below the tolerance: only the lower bound " +
                                 std::to_string(rr.lower) + " on the rank is proven");
        metrics::SpectrumMetrics partial;
        partial.tol = rr.tol;
        partial.rank = rr.lower;
        if (metric_options.top_k) {
            metrics::TopSingularValues top = metrics::top_singular_values(op, *metric_options.top_k);
            if (!top.converged)
                r.warnings.push_back("the matrix-free top-k solver did not converge; the values are its best estimates");
            partial.singular_values = std::move(top.values);
        }
        r.spectrum = std::move(partial);
        r.rank_bracket = std::move(rr);
        r.partial_spectrum = true;
        r.spectrum_method = "randomized";
        return;
    }
    if (path == SpectrumPath::structured)
        s = metrics::structured_singular_values(*op.factors());
    else
        s = consume ? metrics::singular_values(std::move(*A)) : metrics::singular_values(Eigen::MatrixXd(*A));
    r.spectrum = metrics::spectrum_metrics(std::move(s), n, n, metric_options.rank_rtol);
    r.spectrum_method = path == SpectrumPath::structured ? "structured" : "dense";
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
    j["method"] = std::move(method);
    if (mo.spectrum) {
        if (r.spectrum && r.rank_bracket) {
            // The rank bracketed (metrics/randomized.h): exact when the bounds meet.
            const metrics::RandomizedRank& b = *r.rank_bracket;
            if (b.lower == b.upper) {
                j["rank"] = b.lower;
            } else {
                j["rank"] = nullptr;
            }
            j["rank_tol"] = b.tol;
            j["rank_bounds"] = json{{"lower", b.lower},
                                    {"upper", b.upper},
                                    {"lower_proof", "deterministic: singular values of Q^T A interlace those of A"},
                                    {"upper_failure_probability", b.failure_probability},
                                    {"residual_bound", b.residual_bound},
                                    {"s1", b.s1},
                                    {"s1_upper", b.s1_upper},
                                    {"basis_size", b.basis_size},
                                    {"products", b.products},
                                    {"converged", b.converged}};
            for (const char* key : {"relative_rank", "effective_rank", "stable_rank"})
                j[key] = nullptr;
            if (r.spectrum->singular_values.empty())
                j["singular_values"] = nullptr;
            else
                j["singular_values"] = r.spectrum->singular_values;
        } else if (r.spectrum && r.partial_spectrum) {
            for (const char* key : {"rank", "rank_tol", "relative_rank", "effective_rank", "stable_rank"})
                j[key] = nullptr;
            j["singular_values"] = r.spectrum->singular_values;
        } else if (r.spectrum) {
            const auto& s = *r.spectrum;
            j["rank"] = s.rank;
            j["rank_tol"] = s.tol;
            j["relative_rank"] = s.relative_rank;
            j["effective_rank"] = s.effective_rank;
            j["stable_rank"] = s.stable_rank;
            std::vector<double> values = s.singular_values;
            if (mo.top_k && static_cast<std::size_t>(*mo.top_k) < values.size())
                values.resize(static_cast<std::size_t>(*mo.top_k));
            j["singular_values"] = values;
        } else {
            for (const char* key : {"rank", "rank_tol", "relative_rank", "effective_rank", "stable_rank", "singular_values"})
                j[key] = nullptr;
        }
    }
    if (mo.entropy) {
        if (r.entropy) {
            const auto& e = *r.entropy;
            j["entropy"] = json{{"mean", e.mean}, {"std", e.std}, {"min", e.min}, {"max", e.max},
                                {"normalized_mean", e.normalized_mean}};
            if (mo.row_entropy)
                j["row_entropy"] = e.rows;
        } else {
            j["entropy"] = nullptr;
            if (mo.row_entropy)
                j["row_entropy"] = nullptr;
        }
    }
    j["warnings"] = r.warnings;
    return j;
}

}  // namespace attnscope::analysis
