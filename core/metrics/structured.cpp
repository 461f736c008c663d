#include "metrics/structured.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include <Eigen/QR>

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
