#include "analysis/row_measures.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include <Eigen/QR>

#include "attention/decay.h"
#include "metrics/metrics.h"

namespace attnscope::analysis {

using Eigen::MatrixXd;

namespace {

// The R factor of a thin QR of X (min(rows, cols) by cols).
MatrixXd thin_r(const MatrixXd& X)
{
    Eigen::HouseholderQR<MatrixXd> qr(X);
    const Index k = std::min(X.rows(), X.cols());
    return qr.matrixQR().topRows(k).triangularView<Eigen::Upper>();
}

// s_1 of X Y^T (both N by w) from R_X R_Y^T.
double largest_product_value(const MatrixXd& X, const MatrixXd& Y)
{
    if (X.size() == 0 || Y.size() == 0)
        return 0.0;
    MatrixXd core = thin_r(X) * thin_r(Y).transpose();
    const std::vector<double> s = metrics::singular_values(std::move(core));
    return s.empty() ? 0.0 : s.front();
}

// The smallest k with squared <= 4^k (the radius 2^k holds the distance sqrt(squared)).
int radius_index(Index squared)
{
    if (squared <= 1)
        return 0;
    return (static_cast<int>(std::bit_width(static_cast<std::uint64_t>(squared - 1))) + 1) / 2;
}

// Rows [t0, t0 + count) of `op` into `rows` (count by N).
void form_rows(const attention::AttentionOperator& op, Index t0, Index count, MatrixXd& rows)
{
    rows.resize(count, op.cols());
    op.dense_rows(t0, count, rows);
}

}  // namespace

Index row_tile(Index n) { return std::max<Index>(1, std::min<Index>(256, (Index{1} << 22) / std::max<Index>(n, 1))); }

std::optional<double> logit_norm(const attention::AttentionOperator& op)
{
    if (const attention::SoftmaxPieces* s = op.softmax_pieces())
        return s->scale * largest_product_value(s->q, s->k);
    if (const attention::KernelFactors* k = op.kernel_pieces())
        return largest_product_value(k->phi_q, k->phi_k);
    if (const auto* d = dynamic_cast<const attention::DecayOperator*>(&op))
        return largest_product_value(d->pieces().phi_q, d->pieces().phi_k);
    return std::nullopt;
}

TokenDistance::TokenDistance(const attention::AttentionOptions& options, Index n)
{
    if (options.blocks.kind == attention::BlockSpec::Kind::grid && !options.blocks.grid.empty())
        m_positions = attention::grid_positions(options.blocks, n);
}

Index TokenDistance::squared(Index t, Index j) const
{
    if (m_positions.empty())
        return (t - j) * (t - j);
    Index s = 0;
    for (const std::vector<Index>& axis : m_positions) {
        const Index d = axis[static_cast<std::size_t>(t)] - axis[static_cast<std::size_t>(j)];
        s += d * d;
    }
    return s;
}

std::optional<Locality> locality(const attention::AttentionOperator& op, const TokenDistance& distance, std::string& why,
                                 const Eigen::MatrixXd* formed, const std::function<bool()>& keep_going)
{
    const Index n = op.rows();
    why.clear();
    std::vector<Index> radii;
    for (Index r = 1; r < n; r *= 2)
        radii.push_back(r);
    const Index tile = row_tile(n);
    MatrixXd rows;
    std::vector<long double> mass(radii.size() + 1, 0.0L);   // per radius index: the mass first reached there
    long double mean = 0.0L;
    std::vector<double> row_mass(radii.size() + 1);
    for (Index t0 = 0; t0 < n; t0 += tile) {
        if (keep_going && !keep_going())
            return std::nullopt;
        const Index count = std::min(tile, n - t0);
        if (formed)
            rows = formed->middleRows(t0, count);
        else
            form_rows(op, t0, count, rows);
        for (Index i = 0; i < count; ++i) {
            const Index t = t0 + i;
            double row_mean = 0.0;
            std::fill(row_mass.begin(), row_mass.end(), 0.0);
            for (Index j = 0; j < n; ++j) {
                const double a = rows(i, j);
                if (a == 0.0)
                    continue;
                if (a < 0.0 || !std::isfinite(a)) {
                    why = a < 0.0 ? "row " + std::to_string(t) + " has a negative entry, so it is no distribution over distances"
                                  : "row " + std::to_string(t) + " has an entry that is not finite";
                    return std::nullopt;
                }
                const Index s = distance.squared(t, j);
                row_mean += a * std::sqrt(static_cast<double>(s));
                row_mass[static_cast<std::size_t>(std::min<int>(radius_index(s), static_cast<int>(radii.size())))] += a;
            }
            mean += row_mean;
            for (std::size_t k = 0; k < row_mass.size(); ++k)
                mass[k] += row_mass[k];
        }
    }
    Locality out;
    out.mean_distance = static_cast<double>(mean / static_cast<long double>(n));
    long double within = 0.0L;
    for (std::size_t k = 0; k < radii.size(); ++k) {
        within += mass[k];
        out.mass_within.emplace_back(radii[k], static_cast<double>(within / static_cast<long double>(n)));
    }
    return out;
}

MechanismDistance mechanism_distance(const attention::AttentionOperator& a, const attention::AttentionOperator& b,
                                     const std::function<bool()>& keep_going)
{
    const Index n = a.rows();
    if (b.rows() != n)
        throw std::invalid_argument("mechanism distance: " + std::to_string(n) + " and " + std::to_string(b.rows()) +
                                    " tokens");
    const Index tile = row_tile(n);
    MatrixXd ra, rb;
    long double tv = 0.0L, js = 0.0L, diff2 = 0.0L, norm2 = 0.0L, norm_a2 = 0.0L;
    bool distributions = true;
    MechanismDistance out;
    for (Index t0 = 0; t0 < n; t0 += tile) {
        if (keep_going && !keep_going())
            return {};
        const Index count = std::min(tile, n - t0);
        form_rows(a, t0, count, ra);
        form_rows(b, t0, count, rb);
        if (!ra.allFinite() || !rb.allFinite()) {
            out.why = "a row is not finite";
            return out;
        }
        for (Index i = 0; i < count; ++i) {
            double row_tv = 0.0, row_js = 0.0, sum_a = 0.0, sum_b = 0.0, row_d2 = 0.0, row_n2 = 0.0, row_a2 = 0.0;
            bool negative = false;
            for (Index j = 0; j < n; ++j) {
                const double p = ra(i, j), q = rb(i, j);
                const double d = p - q;
                row_d2 += d * d;
                row_n2 += q * q;
                row_a2 += p * p;
                if (!distributions)
                    continue;
                if (p < 0.0 || q < 0.0) {
                    negative = true;
                    continue;
                }
                sum_a += p;
                sum_b += q;
                row_tv += std::abs(d);
                const double m = 0.5 * (p + q);
                if (p > 0.0)
                    row_js += 0.5 * p * std::log(p / m);
                if (q > 0.0)
                    row_js += 0.5 * q * std::log(q / m);
            }
            diff2 += row_d2;
            norm2 += row_n2;
            norm_a2 += row_a2;
            if (!distributions)
                continue;
            const Index t = t0 + i;
            if (negative) {
                distributions = false;
                out.why = "row " + std::to_string(t) + " has a negative entry, so the rows are not distributions";
            } else if (std::abs(sum_a - 1.0) > 1e-9 || std::abs(sum_b - 1.0) > 1e-9) {
                distributions = false;
                out.why = "row " + std::to_string(t) + " does not sum to 1 (" + std::to_string(sum_a) + " and " +
                          std::to_string(sum_b) + "), so the rows are not distributions";
            } else {
                tv += 0.5 * row_tv;
                js += row_js;
            }
        }
    }
    if (distributions) {
        out.tv = static_cast<double>(tv / static_cast<long double>(n));
        out.js = static_cast<double>(js / static_cast<long double>(n));
    }
    if (norm2 > 0.0L)
        out.rel_frobenius = static_cast<double>(std::sqrt(diff2) / std::sqrt(norm2));
    if (norm_a2 > 0.0L)
        out.rel_frobenius_reverse = static_cast<double>(std::sqrt(diff2) / std::sqrt(norm_a2));
    return out;
}

}  // namespace attnscope::analysis
