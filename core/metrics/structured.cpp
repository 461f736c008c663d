#include "metrics/structured.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include <Eigen/QR>
#include <lapacke.h>

#include "metrics/metrics.h"

namespace attnscope::metrics {

using Eigen::Index;
using Eigen::MatrixXd;

namespace {

// Tokens of each block, in ascending token order.
std::vector<std::vector<Index>> tokens_per_block(const attention::KernelFactors& f)
{
    const Index m = f.mixing.rows();
    std::vector<std::vector<Index>> tokens(static_cast<std::size_t>(m));
    for (std::size_t t = 0; t < f.block.size(); ++t) {
        const Index b = f.block[t];
        if (b < 0 || b >= m)
            throw std::invalid_argument("structured spectrum: token " + std::to_string(t) + " in block " +
                                        std::to_string(b) + " of " + std::to_string(m));
        tokens[static_cast<std::size_t>(b)].push_back(static_cast<Index>(t));
    }
    return tokens;
}

// R factor (min(rows, cols) by cols, upper trapezoidal) of the thin QR of X.
MatrixXd r_factor(const MatrixXd& X)
{
    const Index k = std::min(X.rows(), X.cols());
    if (k == 0)
        return MatrixXd(0, X.cols());
    Eigen::HouseholderQR<MatrixXd> qr(X);
    return qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
}

}  // namespace

Index structured_core_size(const attention::KernelFactors& f)
{
    Index size = 0;
    for (const auto& tokens : tokens_per_block(f))
        size += std::min(static_cast<Index>(tokens.size()), f.phi_q.cols());
    return size;
}

std::vector<double> structured_singular_values(const attention::KernelFactors& f)
{
    if (f.causal)
        throw std::invalid_argument("structured spectrum: causal attention has no low-rank factorisation");
    const Index n = f.phi_q.rows(), r = f.phi_q.cols();
    if (f.phi_k.rows() != n || f.phi_k.cols() != r || f.row_scale.size() != n ||
        static_cast<Index>(f.block.size()) != n || f.mixing.rows() != f.mixing.cols())
        throw std::invalid_argument("structured spectrum: inconsistent factor shapes");

    const auto tokens = tokens_per_block(f);
    const Index m = f.mixing.rows();
    std::vector<MatrixXd> rq(static_cast<std::size_t>(m)), rk(static_cast<std::size_t>(m));
    std::vector<Index> offset(static_cast<std::size_t>(m) + 1, 0);
    for (Index b = 0; b < m; ++b) {
        const auto& tb = tokens[static_cast<std::size_t>(b)];
        const Index nb = static_cast<Index>(tb.size());
        MatrixXd xq(nb, r), xk(nb, r);
        for (Index i = 0; i < nb; ++i) {
            const Index t = tb[static_cast<std::size_t>(i)];
            xq.row(i) = f.row_scale(t) * f.phi_q.row(t);
            xk.row(i) = f.phi_k.row(t);
        }
        rq[static_cast<std::size_t>(b)] = r_factor(xq);
        rk[static_cast<std::size_t>(b)] = r_factor(xk);
        offset[static_cast<std::size_t>(b) + 1] = offset[static_cast<std::size_t>(b)] + rq[static_cast<std::size_t>(b)].rows();
    }

    const Index size = offset.back();
    MatrixXd core = MatrixXd::Zero(size, size);
    for (Index i = 0; i < m; ++i) {
        const MatrixXd& ri = rq[static_cast<std::size_t>(i)];
        if (ri.rows() == 0)
            continue;
        for (Index j = 0; j < m; ++j) {
            const double w = f.mixing(i, j);
            const MatrixXd& sj = rk[static_cast<std::size_t>(j)];
            if (w == 0.0 || sj.rows() == 0)
                continue;
            core.block(offset[static_cast<std::size_t>(i)], offset[static_cast<std::size_t>(j)], ri.rows(), sj.rows())
                .noalias() = w * (ri * sj.transpose());
        }
    }
    std::vector<double> s = singular_values(std::move(core));
    s.resize(static_cast<std::size_t>(n), 0.0);   // the structural zeros
    std::sort(s.begin(), s.end(), std::greater<>());
    return s;
}

namespace {

// Row indices of x (or y) per block, ascending; `side` names the side in messages.
std::vector<std::vector<Index>> rows_per_block(const std::vector<Index>& block, Index m, const char* side)
{
    std::vector<std::vector<Index>> rows(static_cast<std::size_t>(m));
    for (std::size_t i = 0; i < block.size(); ++i) {
        const Index b = block[i];
        if (b < 0 || b >= m)
            throw std::invalid_argument(std::string("block factors: ") + side + " " + std::to_string(i) + " in block " +
                                        std::to_string(b) + " of " + std::to_string(m));
        rows[static_cast<std::size_t>(b)].push_back(static_cast<Index>(i));
    }
    return rows;
}

// The R factor of each block's rows of x (min(rows in block, r) by r), and their offsets in the core.
std::vector<MatrixXd> block_r_factors(const MatrixXd& x, const std::vector<std::vector<Index>>& rows,
                                      std::vector<Index>& offset)
{
    std::vector<MatrixXd> out(rows.size());
    offset.assign(rows.size() + 1, 0);
    for (std::size_t b = 0; b < rows.size(); ++b) {
        MatrixXd xb(static_cast<Index>(rows[b].size()), x.cols());
        for (std::size_t i = 0; i < rows[b].size(); ++i)
            xb.row(static_cast<Index>(i)) = x.row(rows[b][i]);
        out[b] = r_factor(xb);
        offset[b + 1] = offset[b] + out[b].rows();
    }
    return out;
}

}  // namespace

std::vector<double> block_factor_singular_values(const BlockFactorization& f)
{
    const Index rows = f.x.rows(), cols = f.y.rows(), m = f.mixing.rows();
    if (f.y.cols() != f.x.cols() || static_cast<Index>(f.row_block.size()) != rows ||
        static_cast<Index>(f.col_block.size()) != cols || f.mixing.cols() != m)
        throw std::invalid_argument("block factors: inconsistent shapes");
    std::vector<Index> row_offset, col_offset;
    const std::vector<MatrixXd> rx = block_r_factors(f.x, rows_per_block(f.row_block, m, "row"), row_offset);
    const std::vector<MatrixXd> ry = block_r_factors(f.y, rows_per_block(f.col_block, m, "column"), col_offset);
    // B = blockdiag(U) * C * blockdiag(V)^T with orthonormal U, V: C[a,b] = Mc[a,b] R_a S_b^T.
    MatrixXd core = MatrixXd::Zero(row_offset.back(), col_offset.back());
    for (Index a = 0; a < m; ++a) {
        const MatrixXd& ra = rx[static_cast<std::size_t>(a)];
        for (Index b = 0; b < m; ++b) {
            const MatrixXd& sb = ry[static_cast<std::size_t>(b)];
            const double w = f.mixing(a, b);
            if (w == 0.0 || ra.rows() == 0 || sb.rows() == 0)
                continue;
            core.block(row_offset[static_cast<std::size_t>(a)], col_offset[static_cast<std::size_t>(b)], ra.rows(), sb.rows())
                .noalias() = w * (ra * sb.transpose());
        }
    }
    std::vector<double> s = core.size() > 0 ? singular_values(std::move(core)) : std::vector<double>{};
    s.resize(static_cast<std::size_t>(std::min(rows, cols)), 0.0);   // the structural zeros
    std::sort(s.begin(), s.end(), std::greater<>());
    return s;
}

std::vector<double> inverse_bidiagonal_singular_values(const Eigen::VectorXd& diagonal, const Eigen::VectorXd& subdiagonal)
{
    const Index n = diagonal.size();
    if (n == 0)
        return {};
    if (subdiagonal.size() != n - 1)
        throw std::invalid_argument("inverse bidiagonal: " + std::to_string(n) + " diagonal entries need " +
                                    std::to_string(n - 1) + " subdiagonal ones, not " + std::to_string(subdiagonal.size()));
    for (Index t = 0; t < n; ++t)
        if (!(diagonal(t) != 0.0) || !std::isfinite(diagonal(t)))
            throw std::invalid_argument("inverse bidiagonal: diagonal entry " + std::to_string(t) + " is zero or not finite");
    if (!subdiagonal.allFinite())
        throw std::invalid_argument("inverse bidiagonal: a subdiagonal entry is not finite");
    const auto count = static_cast<std::size_t>(n);
    std::vector<double> d(count), e(std::max<std::size_t>(count - 1, 1), 0.0), work(4 * count + 4);
    for (std::size_t t = 0; t < count; ++t)
        d[t] = diagonal(static_cast<Index>(t));
    for (std::size_t t = 0; t + 1 < count; ++t)
        e[t] = subdiagonal(static_cast<Index>(t));
    double dummy = 0.0;
    // Values only (ncvt = nru = ncc = 0): dbdsqr runs dqds, which is accurate to high relative accuracy.
    const lapack_int info = LAPACKE_dbdsqr_work(LAPACK_COL_MAJOR, 'L', static_cast<lapack_int>(n), 0, 0, 0, d.data(),
                                                e.data(), &dummy, 1, &dummy, 1, &dummy, 1, work.data());
    if (info < 0)
        throw std::runtime_error("LAPACKE_dbdsqr: illegal argument " + std::to_string(-info));
    if (info > 0)
        throw std::runtime_error("LAPACKE_dbdsqr: dqds did not converge (info=" + std::to_string(info) + ")");
    for (double& v : d)
        v = 1.0 / std::abs(v);
    std::sort(d.begin(), d.end(), std::greater<>());
    return d;
}

std::vector<double> causal_averaging_singular_values(Index n)
{
    if (n <= 0)
        return {};
    Eigen::VectorXd diagonal(n), subdiagonal(n - 1);
    for (Index t = 0; t < n; ++t)
        diagonal(t) = static_cast<double>(t + 1);
    for (Index t = 1; t < n; ++t)
        subdiagonal(t - 1) = -static_cast<double>(t);
    return inverse_bidiagonal_singular_values(diagonal, subdiagonal);
}

Index mixing_rank(const Eigen::MatrixXd& mixing)
{
    const Index m = mixing.rows();
    return spectrum_metrics(singular_values(Eigen::MatrixXd(mixing)), m, m, std::nullopt).rank;
}

std::optional<MixingRankCap> mixing_rank_cap(const attention::KernelFactors& pieces)
{
    if (pieces.causal)
        return std::nullopt;
    MixingRankCap cap;
    cap.features = pieces.phi_q.cols();
    cap.mixing_rank = mixing_rank(pieces.mixing);
    cap.bound = cap.mixing_rank * cap.features;
    cap.allowed = std::min(pieces.phi_q.rows(), pieces.mixing.rows() * cap.features);
    if (cap.bound >= cap.allowed)
        return std::nullopt;
    return cap;
}

namespace {
constexpr std::string_view k_rank_cap_opening = "the mixing matrix has rank ";
}

std::string rank_cap_sentence(const MixingRankCap& cap, std::string_view label)
{
    std::string s(k_rank_cap_opening);
    s.append(std::to_string(cap.mixing_rank))
        .append(": ")
        .append(label)
        .append(" rank <= ")
        .append(std::to_string(cap.bound))
        .append(" whatever the data (rank(Mc) x r = ")
        .append(std::to_string(cap.mixing_rank))
        .append(" x ")
        .append(std::to_string(cap.features))
        .append(" features; N and M x r allow ")
        .append(std::to_string(cap.allowed))
        .append(")");
    return s;
}

bool is_rank_cap_sentence(std::string_view warning)
{
    return warning.substr(0, k_rank_cap_opening.size()) == k_rank_cap_opening;
}

}  // namespace attnscope::metrics
