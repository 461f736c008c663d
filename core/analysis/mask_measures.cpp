#include "analysis/mask_measures.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "attention/mechanisms.h"
#include "metrics/metrics.h"
#include "util/error.h"

namespace attnscope::analysis {

std::vector<Index> support_sizes(const attention::AttentionOperator& op)
{
    const attention::KernelFactors* f = op.kernel_pieces();
    if (!f)   // no blocks and no mixing: nothing but the causal rule is zero by construction (docs/maths.md 2.2)
        return op.allowed_keys();
    const Index n = op.rows();
    const Index m = f->mixing.rows();
    std::vector<Index> size(static_cast<std::size_t>(m), 0);
    for (const Index b : f->block)
        ++size[static_cast<std::size_t>(b)];
    // Non-causal: every block b with Mc[blk(t), b] != 0. Causal (the rule of attention/operator.h): the whole
    // of every earlier block, and of t's own block the tokens up to t, seen in token order.
    std::vector<Index> seen(static_cast<std::size_t>(m), 0);
    std::vector<Index> out(static_cast<std::size_t>(n), 0);
    for (Index t = 0; t < n; ++t) {
        const Index bt = f->block[static_cast<std::size_t>(t)];
        ++seen[static_cast<std::size_t>(bt)];
        Index s = 0;
        for (Index b = 0; b < m; ++b) {
            if (f->mixing(bt, b) == 0.0 || (f->causal && b > bt))
                continue;
            s += f->causal && b == bt ? seen[static_cast<std::size_t>(b)] : size[static_cast<std::size_t>(b)];
        }
        out[static_cast<std::size_t>(t)] = s;
    }
    return out;
}

std::unique_ptr<attention::AttentionOperator> make_baseline_operator(const attention::AttentionOperator& op,
                                                                     const attention::AttentionOptions& options)
{
    // phi(q) . phi(k) = 1 for every pair: ones under the identity map (relu would add its epsilon). What
    // multiplies the kernel (mixing, decay, gates, cosformer's cos/sin reweighting) and the normalisation
    // (official's den(t) = 1e-6 + sum_b Mc[i, b] |b|) come out as for A.
    const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(op.rows(), 1);
    attention::AttentionOptions o = options;
    o.feature_map.kind = attention::FeatureMapKind::identity;
    if (attention::mechanism_info(op.mechanism()).structure == attention::Structure::scores) {
        // rowsoftmax of a constant score on the causal rule is 1 / n_t on the allowed keys: linear attention on
        // these ones, row-normalised. Built so, it has factors (rank 1 when non-causal: the structured spectrum,
        // where the dense SVD of the constant matrix is needlessly slow).
        o = attention::effective_options(attention::Mechanism::linear, o);
        o.feature_map.kind = attention::FeatureMapKind::identity;
        return attention::make_operator(attention::Mechanism::linear, ones, ones, o);
    }
    return attention::make_operator(op.mechanism(), ones, ones, o);
}

std::optional<Index> past_split_of(bool causal, std::optional<Index> given, Index n)
{
    if (given) {
        if (*given < 1 || *given > n - 1)
            throw std::invalid_argument("the past split h=" + std::to_string(*given) + " must lie in 1..N-1 (N=" +
                                        std::to_string(n) + " tokens)");
        return given;
    }
    if (!causal)
        return std::nullopt;
    return n / 2;
}

double past_block_weight(Index n) { return std::max(0.1, static_cast<double>(n) / 320.0); }

void measure_past_block(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                        const MeasureRequest& request, StageProgress* progress)
{
    const Index n = op.rows();
    if (!request.metrics.spectrum || request.is_baseline)
        return;
    const std::optional<Index> split = past_split_of(op.causal(), request.metrics.past_split, n);
    if (!split)
        return;
    r.past_block_asked = true;
    const Index h = *split;
    if (h < 1) {   // the default split of one token
        r.warnings.push_back("no past block: it needs a split h in 1..N-1, and N=" + std::to_string(n));
        return;
    }
    if (progress)
        progress->begin(std::string(attention::to_string(r.mechanism)) + ": past block", past_block_weight(n));
    Eigen::MatrixXd B;
    if (A) {
        B = A->bottomLeftCorner(n - h, h);
    } else {
        // The rows h.. of A, then the block of them: (N - h) N doubles, and the block's copy for the SVD.
        const double bytes = 8.0 * static_cast<double>(n - h) * static_cast<double>(n + h);
        if (bytes > static_cast<double>(request.memory_limit)) {
            r.warnings.push_back("no past block: forming its rows A[" + std::to_string(h) + ":N, :] needs about " +
                                 human_bytes(static_cast<std::uint64_t>(bytes)) + ", over the memory limit of " +
                                 human_bytes(request.memory_limit));
            return;
        }
        Eigen::MatrixXd rows(n - h, n);
        op.dense_rows(h, n - h, rows);
        B = rows.leftCols(h);
    }
    if (progress)
        progress->at(0.5);
    PastBlockResult out;
    out.split = h;
    out.rows = n - h;
    out.cols = h;
    out.spectrum = metrics::spectrum_metrics(metrics::singular_values(std::move(B)), n - h, h, request.metrics.rank_rtol);
    r.past_block = std::move(out);
}

void measure_baseline(MechanismResult& r, const attention::AttentionOperator& op,
                      const attention::AttentionOptions& options, const MeasureRequest& request,
                      StageProgress* progress)
{
    if (!request.metrics.baseline || request.is_baseline || !(request.metrics.spectrum || request.metrics.entropy))
        return;
    MeasureRequest base;
    base.metrics = request.metrics;
    base.metrics.row_entropy = false;
    base.metrics.baseline = false;
    base.metrics.past_split.reset();
    base.memory_limit = request.memory_limit;
    base.is_baseline = true;
    std::unique_ptr<attention::AttentionOperator> op0;
    try {
        op0 = make_baseline_operator(op, options);
        base.path = choose_spectrum(*op0, base.metrics, request.memory_limit).path;
    } catch (const std::invalid_argument& e) {
        r.warnings.push_back(std::string("no content-free baseline: ") + e.what());
        return;
    } catch (const InputError& e) {
        r.warnings.push_back(std::string("no content-free baseline: ") + e.what());
        return;
    }
    Measurement m = measure(*op0, options, base, progress);
    if (!m.finite) {
        r.warnings.push_back("no content-free baseline: with every kernel score replaced by 1 a row normaliser is <= 0 "
                             "(a signed mixing matrix), so the baseline matrix is not defined");
        return;
    }
    BaselineResult b;
    if (m.result.spectrum && !m.result.partial_spectrum)
        b.spectrum = std::move(m.result.spectrum);
    else if (request.metrics.spectrum)
        r.warnings.push_back("the content-free baseline's ranks need every singular value of its matrix, which its "
                             "spectrum path does not give here");
    b.entropy = std::move(m.result.entropy);
    if (b.entropy)
        b.entropy->rows.clear();
    else if (request.metrics.entropy)
        r.warnings.push_back("the content-free baseline has negative entries (a signed mixing matrix): its entropy is "
                             "not defined");
    r.baseline = std::move(b);
}

}  // namespace attnscope::analysis
