#include "analysis/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "analysis/mask_measures.h"
#include "attention/mechanisms.h"
#include "attention/mixing.h"
#include "metrics/bidiag_svd.h"
#include "metrics/structured.h"
#include "metrics/svd_two_stage.h"
#include "metrics/topk.h"
#include "util/error.h"
#include "util/names.h"

namespace attnscope::analysis {

using attention::Mechanism;
using json = nlohmann::ordered_json;

json mechanism_params(Mechanism mechanism, const attention::AttentionOptions& options, Index n, Index d)
{
    json p = json::object();
    attention::mechanism_info(mechanism).params(p, options, n, d);
    return p;
}

attention::AttentionOptions options_for(Mechanism mechanism, const attention::AttentionOptions& options)
{
    return attention::effective_options(mechanism, options);
}

namespace {

constexpr NameTable<SpectrumMethod, 4> k_methods{{{SpectrumMethod::automatic, "auto"},
                                                  {SpectrumMethod::dense, "dense"},
                                                  {SpectrumMethod::structured, "structured"},
                                                  {SpectrumMethod::streaming, "streaming"}}};

}  // namespace

std::string_view to_string(SpectrumMethod m) { return name_of(k_methods, m); }
SpectrumMethod parse_spectrum_method(std::string_view s) { return value_named(k_methods, s, "--method"); }

SpectrumCostEstimate spectrum_cost_estimate(Index n, Index d, Index k)
{
    const double nn = static_cast<double>(n);
    const double b = static_cast<double>(metrics::top_k_default_block(k));
    SpectrumCostEstimate c;
    c.dense_flops = 8.0 / 3.0 * nn * nn * nn;
    c.top_k_flops = k_auto_top_k_passes * 2.0 * nn * nn * (static_cast<double>(d) + 2.0 * b);
    return c;
}

bool auto_prefers_top_k(Index n, Index d, Index k)
{
    if (metrics::top_k_uses_dense(n, n, k))
        return false;
    const SpectrumCostEstimate c = spectrum_cost_estimate(n, d, k);
    return c.top_k_flops < c.dense_flops;
}

Index score_width(const attention::AttentionOperator& op)
{
    if (const attention::SoftmaxPieces* p = op.softmax_pieces())
        return p->q.cols();
    if (const attention::KernelFactors* f = op.kernel_pieces())
        return f->phi_q.cols();
    return op.cols();   // unknown structure: charged as if the scores were N wide
}

PreparedMechanism prepare_mechanism(Mechanism mechanism, const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                    const Eigen::Ref<const Eigen::MatrixXd>& K, const attention::AttentionOptions& options,
                                    const MetricOptions& metric_options, std::uint64_t memory_limit)
{
    PreparedMechanism p;
    p.result.mechanism = mechanism;
    p.options = options_for(mechanism, options);
    p.result.params = mechanism_params(mechanism, p.options, Q.rows(), Q.cols());
    if (std::string same = attention::mechanism_info(mechanism).same_as(p.options, Q.rows()); !same.empty()) {
        p.result.warnings.push_back(std::move(same));
        p.result.same_as_linear = true;
    }
    p.op = attention::make_operator(mechanism, Q, K, p.options);
    if (const attention::KernelFactors* f = p.op->kernel_pieces())
        if (const std::optional<metrics::MixingRankCap> cap = metrics::mixing_rank_cap(*f)) {
            p.result.warnings.push_back(metrics::rank_cap_sentence(*cap, attention::mechanism_info(mechanism).label));
            p.result.rank_cap = cap->bound;
        }
    SpectrumChoice choice = choose_spectrum(*p.op, metric_options, memory_limit);
    p.path = choice.path;
    p.result.spectrum_why = std::move(choice.why);
    return p;
}

double spectrum_weight(SpectrumPath path, Index n)
{
    if (path == SpectrumPath::dense)
        return std::max(1.0, static_cast<double>(n) / 40.0);
    return path == SpectrumPath::none ? 0.0 : 0.2;
}

double measure_weight(const MeasureRequest& request, Index n)
{
    const bool dense = request.keep_matrix || request.path == SpectrumPath::dense;
    const double one = (dense ? 2.0 : 1.0) + spectrum_weight(request.path, n);
    // The baseline A0 takes about the path A takes (docs/performance.md); the past block a quarter-size SVD (a
    // causal default split is not known here: its stage then ends the job's bar a little early, never late).
    const double baseline = request.metrics.baseline && !request.is_baseline ? 1.0 + spectrum_weight(request.path, n) : 0.0;
    const double locality = request.metrics.entropy && !request.is_baseline ? 1.0 : 0.0;
    return one + baseline + locality + (request.metrics.past_split ? past_block_weight(n) : 0.0);
}

namespace {

// Rows per tile when the matrix is checked and measured in pieces (a multiple of the softmax operator's own
// tile, so that its tiles are dense()'s).
constexpr Index k_rows_per_tile = 256;
// From this N on a kept matrix is formed tile by tile with cancellation between tiles (dense() of a kernel
// operator is one GEMM: ~1 s at N = 8192).
constexpr Index k_tiled_build_from = 2048;

// Runs body(t0, count) over row tiles until it returns false.
template <class Body>
void for_each_tile(Index n, Body&& body)
{
    for (Index t0 = 0; t0 < n; t0 += k_rows_per_tile)
        if (!body(t0, std::min(k_rows_per_tile, n - t0)))
            return;
}

double done_fraction(Index t0, Index count, Index n) { return static_cast<double>(t0 + count) / static_cast<double>(n); }

void begin(StageProgress* progress, Mechanism m, const MeasureRequest& request, const char* stage, double weight)
{
    if (progress)
        progress->begin(
            std::string(request.is_baseline ? "content-free baseline" : attention::to_string(m)) + ": " + stage, weight);
}

void at(StageProgress* progress, double fraction)
{
    if (progress)
        progress->at(fraction);
}

std::shared_ptr<Eigen::MatrixXd> form_matrix(const attention::AttentionOperator& op, bool tiled, StageProgress* progress)
{
    const Index n = op.rows();
    auto A = std::make_shared<Eigen::MatrixXd>();
    if (!tiled || n < k_tiled_build_from) {
        *A = op.dense();
        return A;
    }
    A->resize(n, n);
    for_each_tile(n, [&](Index t0, Index count) {
        op.dense_rows(t0, count, A->middleRows(t0, count));
        at(progress, done_fraction(t0, count, n));
        return true;
    });
    return A;
}

// Why entries may be negative: the feature map, or a learned mixing matrix with negative entries (docs/maths.md 1.4).
std::string negative_cause(Mechanism m, const attention::AttentionOptions& options)
{
    std::string why = "feature map ";
    why.append(attention::to_string(options.feature_map.kind));
    if (attention::mechanism_info(m).has_mixing() && options.mixing.matrix && attention::signed_mixing(*options.mixing.matrix))
        why = options.feature_map.kind == attention::FeatureMapKind::identity ? why + " and a signed mixing matrix"
                                                                             : std::string("a signed mixing matrix");
    return why;
}

// The warnings that go with entropy (or its absence), the same on every path.
void entropy_warnings(MechanismResult& r, bool negative, const attention::AttentionOptions& options)
{
    if (negative) {
        std::string w = "entropy is undefined: the matrix has negative entries (";
        r.warnings.push_back(w.append(negative_cause(r.mechanism, options)).append("), so its rows are not distributions"));
    } else if (attention::mechanism_info(r.mechanism).takes(attention::opt_normalize) &&
             options.normalize != attention::Normalize::row)
        r.warnings.push_back("rows are not normalised to sum 1 (normalize=" +
                             std::string(attention::to_string(options.normalize)) +
                             "); entropy is computed from the entries as they are");
}

// Checks the matrix in row tiles (finite, non-negative) and takes every row's entropy from them; `tile(t0,
// count)` gives rows [t0, t0 + count) (of the formed matrix, or formed from the operator). Returns false when
// an entry is not finite (then nothing is measured).
template <class Tile>
bool measure_tiled_entropy(MechanismResult& r, const attention::AttentionOperator& op, Tile&& tile,
                           const std::vector<Index>& allowed, const attention::AttentionOptions& options,
                           const MetricOptions& mo, StageProgress* progress)
{
    const Index n = op.rows();
    bool finite = true, negative = false;
    std::vector<double> h(static_cast<std::size_t>(n), 0.0);
    for_each_tile(n, [&](Index t0, Index count) {
        const Eigen::Ref<const Eigen::MatrixXd> rows = tile(t0, count);
        if (!rows.allFinite()) {
            finite = false;
            return false;
        }
        negative = negative || (rows.array() < 0.0).any();
        if (!negative && mo.entropy) {
            const std::vector<Index> allowed_rows(allowed.begin() + t0, allowed.begin() + t0 + count);
            const metrics::EntropyStats part = metrics::row_entropy(rows, allowed_rows);
            std::copy(part.rows.begin(), part.rows.end(), h.begin() + t0);
        }
        at(progress, done_fraction(t0, count, n));
        return true;
    });
    if (!finite) {
        r.warnings.push_back(non_finite_reason(op));
        return false;
    }
    if (mo.entropy) {
        if (!negative) {
            r.entropy = metrics::entropy_stats(std::move(h), allowed);
            r.entropy_method = "dense";
        }
        entropy_warnings(r, negative, options);
    }
    return true;
}

bool measure_formed_entropy(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd& A,
                            const std::vector<Index>& allowed, const attention::AttentionOptions& options,
                            const MetricOptions& mo, StageProgress* progress)
{
    return measure_tiled_entropy(
        r, op, [&](Index t0, Index count) { return A.middleRows(t0, count); }, allowed, options, mo, progress);
}

// Entropy without the matrix (shared pass or streamed). Returns false when an entry is not finite.
bool measure_streamed_entropy(MechanismResult& r, const attention::AttentionOperator& op,
                              const attention::AttentionOptions& options, const MeasureRequest& request)
{
    if (!request.metrics.entropy)
        return true;
    metrics::RowEntropies h = request.shared_entropy ? *request.shared_entropy : metrics::streamed_row_entropies(op);
    metrics::StreamedEntropy streamed = metrics::entropy_statistics(std::move(h), op.allowed_keys());
    if (streamed.status == metrics::EntropyStatus::non_finite) {
        r.warnings.push_back(non_finite_reason(op));
        return false;
    }
    if (streamed.stats) {
        r.entropy = std::move(streamed.stats);
        r.entropy_method = "streaming";
    }
    entropy_warnings(r, streamed.status == metrics::EntropyStatus::negative, options);
    return true;
}

metrics::SpectrumMetrics top_k_values(MechanismResult& r, const attention::AttentionOperator& op, Index k)
{
    metrics::TopSingularValues top = metrics::top_singular_values(op, k);
    if (!top.converged)
        r.warnings.push_back("the matrix-free top-k solver stopped at its limit of " + std::to_string(top.passes) +
                             " passes before every residual fell below " + std::to_string(top.tol) +
                             " times its value; the values are its best estimates, each within its "
                             "singular_value_residuals entry of a singular value");
    metrics::SpectrumMetrics partial;
    partial.singular_values = top.values;
    r.top_k = std::move(top);
    return partial;
}

void measure_randomized(MechanismResult& r, const attention::AttentionOperator& op, const MetricOptions& mo)
{
    metrics::RandomizedRank rr = metrics::randomized_rank(op, *mo.rank_rtol, /*seed=*/0);
    if (!rr.converged)
        r.warnings.push_back("the randomized range finder reached its basis limit of " + std::to_string(rr.basis_size) +
                             " before its residual bound fell below the tolerance: only the lower bound " +
                             std::to_string(rr.lower) + " on the rank is proven");
    metrics::SpectrumMetrics partial = mo.top_k ? top_k_values(r, op, *mo.top_k) : metrics::SpectrumMetrics{};
    partial.tol = rr.tol;
    partial.rank = rr.lower;
    r.spectrum = std::move(partial);
    r.rank_bracket = std::move(rr);
    r.partial_spectrum = true;
    r.spectrum_method = "randomized";
}

// The spectrum by its path. `A`: the formed matrix (dense path), consumed when `consume`.
void measure_spectrum(MechanismResult& r, const attention::AttentionOperator& op, const MeasureRequest& request,
                      Eigen::MatrixXd* A, bool consume, StageProgress* progress)
{
    const MetricOptions& mo = request.metrics;
    const Index n = op.rows();
    switch (request.path) {
    case SpectrumPath::none:
        if (mo.spectrum)   // --method streaming on an operator without factors
            r.warnings.push_back("no spectrum: all singular values of " + std::string(attention::to_string(r.mechanism)) +
                                 " attention need the dense N x N matrix, which --method streaming never forms; give "
                                 "--top-k K for the K largest (matrix-free), --rank-rtol R for the rank at a relative "
                                 "tolerance (randomized range finder), or use --method auto");
        return;
    case SpectrumPath::top_k: {
        r.spectrum = top_k_values(r, op, *mo.top_k);
        r.warnings.push_back("only the " + std::to_string(r.spectrum->singular_values.size()) +
                             " largest singular values are known (matrix-free): rank, effective and stable rank need "
                             "all of them (--method dense)");
        r.partial_spectrum = true;
        r.spectrum_method = "top-k";
        return;
    }
    case SpectrumPath::randomized:
        measure_randomized(r, op, mo);
        return;
    case SpectrumPath::structured:
    case SpectrumPath::dense:
        break;
    }
    begin(progress, r.mechanism, request, "singular values", spectrum_weight(request.path, n));
    std::vector<double> s;
    if (request.path == SpectrumPath::structured) {
        s = metrics::structured_singular_values(*op.factors());
    } else if (!A) {
        throw std::logic_error("measure: a dense spectrum needs the dense matrix");
    } else if (request.keep_matrix && n < k_kept_two_stage_min_size) {
        s = metrics::singular_values_with_progress(Eigen::MatrixXd(*A), [&](double f) { at(progress, f); });
    } else if (progress && n >= metrics::k_two_stage_min_size) {
        // What singular_values() computes at this size (the two-stage reduction, default band), observed
        // between its panels so that a job stops promptly; the values are the same.
        const metrics::TwoStageProgress observe = [&](double f) {
            if (progress->cancelled())
                return false;
            at(progress, f);
            return true;
        };
        try {
            s = metrics::singular_values_two_stage(consume && !request.keep_matrix ? std::move(*A) : Eigen::MatrixXd(*A),
                                                   metrics::two_stage_default_band,
                                                   observe);
        } catch (const metrics::Cancelled&) {
            progress->check();
            throw;
        }
    } else {
        s = consume ? metrics::singular_values(std::move(*A)) : metrics::singular_values(Eigen::MatrixXd(*A));
    }
    r.spectrum = metrics::spectrum_metrics(std::move(s), n, n, mo.rank_rtol);
    r.spectrum_method = request.path == SpectrumPath::structured ? "structured" : "dense";
}

// The measures of docs/maths.md 2.2 that need the spectrum and entropy of A: the entropy against the support,
// and the content-free baseline; and the warning for tolerance-free ranks that a partial spectrum leaves open.
// docs/maths.md 2.2's logit norm (with the spectrum) and locality (with the entropy: both read rows), from the
// formed matrix `A` when there is one; a warning says what could not be computed.
void measure_scores_and_rows(MechanismResult& r, const attention::AttentionOperator& op,
                             const attention::AttentionOptions& options, const MeasureRequest& request,
                             const Eigen::MatrixXd* A, StageProgress* progress)
{
    if (request.is_baseline)
        return;
    const std::string name(attention::to_string(r.mechanism));
    if (request.metrics.spectrum) {
        try {
            r.logit_norm = logit_norm(op);
        } catch (const std::exception& e) {
            r.warnings.push_back("no logit norm for " + name + ": " + e.what());
        }
    }
    if (!request.metrics.entropy)
        return;
    r.locality_asked = true;
    begin(progress, r.mechanism, request, "locality", 1.0);
    std::optional<TokenDistance> own;
    const TokenDistance* distance = request.distance;
    if (!distance) {
        own.emplace(options, op.rows());
        distance = &*own;
    }
    std::string why;
    r.locality = locality(op, *distance, why, A, [&] { return !(progress && progress->cancelled()); });
    if (progress)
        progress->check();
    if (!r.locality && !why.empty())
        r.warnings.push_back("no mean attention distance for " + name + ": " + why);
}

void measure_beyond_mask(MechanismResult& r, const attention::AttentionOperator& op,
                         const attention::AttentionOptions& options, const MeasureRequest& request,
                         StageProgress* progress)
{
    if (r.entropy)
        r.support_normalized_mean = metrics::support_normalized_mean(r.entropy->rows, support_sizes(op));
    if (r.spectrum && r.partial_spectrum && !request.is_baseline)
        r.warnings.push_back("energy ranks and ranks at fixed relative tolerances need every singular value, and only "
                             "the largest are known here");
    measure_baseline(r, op, options, request, progress);
}

}  // namespace

std::string non_finite_reason(const attention::AttentionOperator& op)
{
    const std::string name(attention::mechanism_info(op.mechanism()).label);
    std::string why;
    if (const std::optional<Index> row = op.unnormalisable_row()) {
        char sum[64];
        std::snprintf(sum, sizeof sum, "%g", op.unnormalisable_sum());
        why = "the kernel scores phi(q) . phi(k) of query t=" + std::to_string(*row) +
              " over the keys it sees sum to " + sum + ", so its row cannot be normalised (features that cancel, "
              "such as identity on signed data, a mixing row of zeros, a signed mixing matrix that makes the sum <= 0, "
              "or scores that overflow)";
    } else if (op.softmax_pieces()) {
        why = "its scaled scores scale * q . k are not finite (they overflow double precision: rescale the inputs "
              "or give a smaller --scale)";
    } else {
        why = "its kernel scores phi(q) . phi(k) overflow double precision";
    }
    return name + " attention is not defined here: " + why + "; no metric is reported for it";
}

Measurement measure(const attention::AttentionOperator& op, const attention::AttentionOptions& options,
                    const MeasureRequest& request, StageProgress* progress)
{
    Measurement out;
    MechanismResult& r = out.result;
    r.mechanism = op.mechanism();
    if (op.unnormalisable_row()) {
        r.warnings.push_back(non_finite_reason(op));   // nothing is defined to measure
        out.finite = false;
        return out;
    }
    if (!(request.keep_matrix || request.path == SpectrumPath::dense)) {   // nothing N x N is ever formed
        begin(progress, r.mechanism, request, "entropy", 1.0);
        out.finite = measure_streamed_entropy(r, op, options, request);
        if (out.finite) {
            measure_scores_and_rows(r, op, options, request, nullptr, progress);
            measure_past_block(r, op, nullptr, request, progress);
            measure_spectrum(r, op, request, nullptr, false, progress);
        }
    } else {
        const std::vector<Index> allowed = op.allowed_keys();
        begin(progress, r.mechanism, request, "attention matrix", 1.0);
        std::shared_ptr<Eigen::MatrixXd> A = form_matrix(op, request.keep_matrix, progress);
        begin(progress, r.mechanism, request, "entropy", 1.0);
        out.finite = measure_formed_entropy(r, op, *A, allowed, options, request.metrics, progress);
        if (request.keep_matrix)
            out.matrix = A;
        if (out.finite) {
            measure_scores_and_rows(r, op, options, request, A.get(), progress);
            measure_past_block(r, op, A.get(), request, progress);   // before the spectrum, which may consume A
            measure_spectrum(r, op, request, A.get(), !request.keep_matrix, progress);
        }
    }
    if (out.finite)
        measure_beyond_mask(r, op, options, request, progress);
    return out;
}

Measurement measure_with_known_values(const attention::AttentionOperator& op, const attention::AttentionOptions& options,
                                      const MeasureRequest& request, const std::vector<double>& values,
                                      StageProgress* progress)
{
    Measurement out;
    MechanismResult& r = out.result;
    r.mechanism = op.mechanism();
    if (op.unnormalisable_row()) {
        r.warnings.push_back(non_finite_reason(op));
        out.finite = false;
        return out;
    }
    // The dense path's entropy from the same row tiles, each formed from the operator into one buffer.
    const std::vector<Index> allowed = op.allowed_keys();
    begin(progress, r.mechanism, request, "entropy", 1.0);
    Eigen::MatrixXd buffer(std::min(k_rows_per_tile, op.rows()), op.cols());
    out.finite = measure_tiled_entropy(
        r, op,
        [&](Index t0, Index count) {
            auto rows = buffer.topRows(count);
            op.dense_rows(t0, count, rows);
            return rows;
        },
        allowed, options, request.metrics, progress);
    if (out.finite)
        measure_scores_and_rows(r, op, options, request, nullptr, progress);
    if (out.finite && request.metrics.spectrum) {
        begin(progress, r.mechanism, request, "singular values", spectrum_weight(SpectrumPath::structured, op.rows()));
        r.spectrum = metrics::spectrum_metrics(values, op.rows(), op.cols(), request.metrics.rank_rtol);
        r.spectrum_method = "structured";
    }
    if (out.finite)
        measure_beyond_mask(r, op, options, request, progress);
    return out;
}

}  // namespace attnscope::analysis
