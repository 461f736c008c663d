#include "metrics/streaming.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/kernels.h"

namespace attnscope::metrics {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

EntropyStatus status_of(int kernel_status)
{
    return kernel_status == 0 ? EntropyStatus::ok : kernel_status == 1 ? EntropyStatus::negative : EntropyStatus::non_finite;
}

// Rows through dense_rows(), `tile_rows` at a time (0: tiles of about 8 MiB).
RowEntropies by_rows(const attention::AttentionOperator& op, Index tile_rows)
{
    const Index n = op.rows();
    RowEntropies out;
    out.rows.assign(static_cast<std::size_t>(n), 0.0);
    if (tile_rows <= 0)
        tile_rows = std::clamp<Index>((8LL << 20) / (8 * std::max<Index>(n, 1)), 1, 256);
    MatrixXd tile;
    VectorXd acc;
    for (Index t0 = 0; t0 < n; t0 += tile_rows) {
        const Index count = std::min(tile_rows, n - t0);
        tile.resize(count, n);
        op.dense_rows(t0, count, tile);
        acc.setZero(count);
        if (const int status = kernels::accumulate_entropy(tile.data(), count, n, tile.outerStride(), acc.data())) {
            out.status = status_of(status);
            return out;
        }
        for (Index i = 0; i < count; ++i)
            out.rows[static_cast<std::size_t>(t0 + i)] = acc(i);
    }
    return out;
}

RowEntropies softmax_rows(const attention::SoftmaxPieces& p, Index n)
{
    RowEntropies out;
    out.rows.assign(static_cast<std::size_t>(n), 0.0);
    if (n == 0)
        return out;
    out.status = status_of(kernels::softmax_row_entropies(p.q.data(), p.q.rows(), p.k.data(), p.k.rows(), n, p.q.cols(),
                                                          p.scale, p.causal, out.rows.data()));
    return out;
}

MatrixXd gather_rows(const MatrixXd& X, const std::vector<Index>& order)
{
    MatrixXd out(X.rows(), X.cols());
    for (Index u = 0; u < X.rows(); ++u)
        out.row(u) = X.row(order[static_cast<std::size_t>(u)]);
    return out;
}

}  // namespace

KernelBlockSums kernel_block_sums(const attention::KernelFactors& f)
{
    const Index n = f.phi_q.rows(), m = f.mixing.rows();
    KernelBlockSums out;
    out.P.resize(n, m);
    out.R.resize(n, m);
    if (n == 0)
        return out;
    // In sorted coordinates (blocks contiguous, the causal mask a lower triangle), then back to tokens.
    const MatrixXd a = gather_rows(f.phi_q, f.order), b = gather_rows(f.phi_k, f.order);
    MatrixXd Ps(n, m), Rs(n, m);
    const int status = kernels::kernel_block_sums(a.data(), a.rows(), b.data(), b.rows(), n, a.cols(), m, f.offsets.data(),
                                                  f.causal, Ps.data(), Rs.data(), Ps.rows());
    for (Index u = 0; u < n; ++u) {
        const Index t = f.order[static_cast<std::size_t>(u)];
        out.P.row(t) = Ps.row(u);
        out.R.row(t) = Rs.row(u);
    }
    out.status = status_of(status);
    if (out.status == EntropyStatus::ok && !(out.P.allFinite() && out.R.allFinite()))
        out.status = EntropyStatus::non_finite;
    return out;
}

RowEntropies row_entropies_from_block_sums(const attention::KernelFactors& f, const KernelBlockSums& sums)
{
    const Index n = f.phi_q.rows();
    RowEntropies out;
    out.rows.assign(static_cast<std::size_t>(n), 0.0);
    if (sums.status != EntropyStatus::ok) {
        out.status = sums.status;
        return out;
    }
    const MatrixXd& P_in = sums.P;
    const MatrixXd& R_in = sums.R;
    const bool collapse = f.mixing.rows() == 1 && P_in.cols() > 1;   // linear from finer block sums
    if (P_in.rows() != n || R_in.rows() != n || R_in.cols() != P_in.cols() ||
        (!collapse && P_in.cols() != f.mixing.rows()) || (collapse && f.causal))
        throw std::invalid_argument("row_entropies_from_block_sums: sums of shape " + std::to_string(P_in.rows()) + "x" +
                                    std::to_string(P_in.cols()) + " do not fit this operator");
    const MatrixXd P = collapse ? MatrixXd(P_in.rowwise().sum()) : P_in;
    const MatrixXd R = collapse ? MatrixXd(R_in.rowwise().sum()) : R_in;
    // A[t,j] = w_t c(bt, bj) g_tj: with s = c g, sum_j s = sum_b c P(t,b) and
    // sum_j s ln s = sum_b c (P(t,b) ln c + R(t,b)) (blocks with c = 0 contribute nothing).
    const Index m = f.mixing.rows();
    for (Index t = 0; t < n; ++t) {
        const Index bt = f.block[static_cast<std::size_t>(t)];
        double z = 0.0, s2 = 0.0;
        for (Index b = 0; b < m; ++b) {
            const double c = f.mixing(bt, b), p = P(t, b);
            if (c == 0.0 || p == 0.0)
                continue;
            if (c < 0.0) {
                out.status = EntropyStatus::negative;
                return out;
            }
            z += c * p;
            s2 += c * (p * std::log(c) + R(t, b));
        }
        double H = 0.0;
        if (f.row_normalised) {   // H = ln z - (1/z) sum s ln s
            if (!(z > 0.0)) {
                out.status = EntropyStatus::non_finite;
                return out;
            }
            H = std::log(z) - s2 / z;
        } else {   // A = w s as it stands: H = -sum w s (ln w + ln s)
            const double w = f.row_scale(t);
            if (w < 0.0 && z > 0.0) {
                out.status = EntropyStatus::negative;
                return out;
            }
            H = w > 0.0 ? -(w * s2 + w * std::log(w) * z) : 0.0;
        }
        if (!std::isfinite(H)) {
            out.status = EntropyStatus::non_finite;
            return out;
        }
        out.rows[static_cast<std::size_t>(t)] = H;
    }
    return out;
}

RowEntropies streamed_row_entropies(const attention::AttentionOperator& op, Index tile_rows)
{
    if (tile_rows > 0)   // explicit tiles: the generic dense_rows path (tests compare both)
        return by_rows(op, tile_rows);
    if (const attention::SoftmaxPieces* p = op.softmax_pieces())
        return softmax_rows(*p, op.rows());
    if (const attention::KernelFactors* f = op.kernel_pieces())
        return row_entropies_from_block_sums(*f, kernel_block_sums(*f));
    return by_rows(op, 0);
}

StreamedEntropy entropy_statistics(RowEntropies h, const std::vector<Index>& allowed)
{
    StreamedEntropy out;
    out.status = h.status;
    if (h.status != EntropyStatus::ok)
        return out;
    for (double& v : h.rows)
        if (v == 0.0)
            v = 0.0;   // no -0
    out.stats = entropy_stats(std::move(h.rows), allowed);
    return out;
}

StreamedEntropy streaming_row_entropy(const attention::AttentionOperator& op, Index tile_rows)
{
    return entropy_statistics(streamed_row_entropies(op, tile_rows), op.allowed_keys());
}

}  // namespace attnscope::metrics
