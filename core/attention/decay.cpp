#include "attention/decay.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include "attention/blocks.h"
#include "attention/feature_map.h"
#include "kernels/kernels.h"
#include "util/checked.h"

namespace attnscope::attention {

using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

// The shortest text that reads back as x ("1.2", "0.1", "nan").
std::string number(double x)
{
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    return std::string(buf, r.ptr);
}

std::string normalisation_problem(const AttentionOptions& options, const char* family)
{
    if (options.normalize != Normalize::official)
        return {};
    return std::string(family).append(" attention is normalised by rows or not at all; "
                                      "the official normalisation is MHLA's");
}

}  // namespace

// Grid coordinates of every token (docs/maths.md 1.5), per axis. raster: token t sits at unravel(t, grid);
// blocked: block b = t / (N/M) in raster order over the block grid, and raster order inside the block:
// position = unravel(b, block_grid) * step + unravel(t % (N/M), step), step = grid / block_grid.
// Throws std::invalid_argument naming the violated condition.
std::vector<std::vector<Index>> grid_positions(const BlockSpec& spec, Index n)
{
    const auto& g = spec.grid;
    if (g.size() != 2 && g.size() != 3)
        throw std::invalid_argument("grid must have 2 or 3 axes, got " + std::to_string(g.size()));
    Index total = 1;
    for (std::size_t a = 0; a < g.size(); ++a) {
        if (g[a] < 1)
            throw std::invalid_argument("grid axis " + std::to_string(a) + ": size " + std::to_string(g[a]) +
                                        " must be >= 1");
        const auto t = checked_mul(total, g[a]);
        if (!t)
            throw std::invalid_argument("grid " + join_dims(g) + ": the product of the sizes overflows (it must equal N=" +
                                        std::to_string(n) + ")");
        total = *t;
    }
    if (total != n)
        throw std::invalid_argument("grid " + join_dims(g) + " has " + std::to_string(total) + " tokens but N=" +
                                    std::to_string(n));
    const std::size_t nd = g.size();
    std::vector<Index> step = g, outer(nd, 1);   // raster: one block
    if (spec.order == TokenOrder::blocked) {
        const auto& bg = spec.block_grid;
        if (bg.size() != nd)
            throw std::invalid_argument("block-grid has " + std::to_string(bg.size()) + " axes but grid " + join_dims(g) +
                                        " has " + std::to_string(nd) + " (the blocked token order needs both)");
        for (std::size_t a = 0; a < nd; ++a) {
            if (bg[a] < 1 || g[a] % bg[a] != 0)
                throw std::invalid_argument("block-grid axis " + std::to_string(a) + ": " + std::to_string(bg[a]) +
                                            " blocks do not divide the grid's " + std::to_string(g[a]));
            step[a] = g[a] / bg[a];
            outer[a] = bg[a];
        }
    }
    Index per_block = 1;
    for (Index s : step)
        per_block *= s;
    std::vector<std::vector<Index>> pos(nd, std::vector<Index>(static_cast<std::size_t>(n)));
    for (Index t = 0; t < n; ++t) {
        Index b = t / per_block, p = t % per_block;
        for (std::size_t a = nd; a-- > 0;) {
            pos[a][static_cast<std::size_t>(t)] = (b % outer[a]) * step[a] + p % step[a];
            b /= outer[a];
            p /= step[a];
        }
    }
    return pos;
}

namespace {

void check_row_apply_shapes(Index n, const Eigen::Ref<const MatrixXd>& X, const Eigen::Ref<MatrixXd>& Y, const char* what)
{
    if (X.rows() != n || Y.rows() != n || Y.cols() != X.cols())
        throw std::invalid_argument(std::string(what) + ": X is " + std::to_string(X.rows()) + "x" +
                                    std::to_string(X.cols()) + " and Y " + std::to_string(Y.rows()) + "x" +
                                    std::to_string(Y.cols()) + ", expected N=" + std::to_string(n) + " rows each and "
                                    "as many columns");
}

// One pass of the first-order recurrence along the token line (docs/maths.md 1.8), added to Yt (k by N):
//   Yt(:, t) += S_t^T l_t,  S_t = sum over the keys j on one side of t of w(t,j) r_j x_j^T   (r by k),
// where w(t,j) = prod of f over the steps from j to t: forward, j <= t, w = prod_{i=j+1..t} f_i; backward,
// j >= t, w = prod_{i=t+1..j} f_i. `inclusive` puts j = t in S_t (weight 1). Moving one token on multiplies
// S by the factor of that step (<= 1): nothing grows, old terms underflow to 0.
// Lt, Rt: r by N (the feature rows as columns); Xt: k by N.
void line_scan(const MatrixXd& Lt, const MatrixXd& Rt, const VectorXd& f, const MatrixXd& Xt, MatrixXd& Yt,
               bool backward, bool inclusive)
{
    const Index n = Xt.cols();
    MatrixXd S = MatrixXd::Zero(Rt.rows(), Xt.rows());
    for (Index s = 0; s < n; ++s) {
        const Index t = backward ? n - 1 - s : s;
        if (s > 0)
            S *= f(backward ? t + 1 : t);
        if (inclusive)
            S.noalias() += Rt.col(t) * Xt.col(t).transpose();
        Yt.col(t).noalias() += S.transpose() * Lt.col(t);
        if (!inclusive)
            S.noalias() += Rt.col(t) * Xt.col(t).transpose();
    }
}

// V <- W V in place for the symmetric decay W[p,q] = gamma^|p - q| along one axis of a raster grid: V holds
// one column per raster position; the axis has `len` positions `stride` columns apart. Per line, the forward
// sums F_i = V_i + gamma F_{i-1}, then (since gamma (W V)_{i+1} = (sum over q > i) + gamma^2 F_i)
// (W V)_i = (1 - gamma^2) F_i + gamma (W V)_{i+1}: two passes, no buffer, only factors <= 1.
// (Only the first `rows` rows of V are in use.)
void decay_axis(MatrixXd& V, Index rows, Index len, Index stride, double gamma)
{
    const Index n = V.cols();
    const double c = 1.0 - gamma * gamma;
    auto col = [&](Index p) { return V.col(p).head(rows); };
    for (Index base = 0; base < n; base += len * stride)
        for (Index off = 0; off < stride; ++off) {
            const Index p0 = base + off;
            for (Index i = 1; i < len; ++i)
                col(p0 + i * stride) += gamma * col(p0 + (i - 1) * stride);
            for (Index i = len - 1; i-- > 0;)
                col(p0 + i * stride) = c * col(p0 + i * stride) + gamma * col(p0 + (i + 1) * stride);
        }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

double decay_gamma(const AttentionOptions& options)
{
    if (options.decay.gamma)
        return *options.decay.gamma;
    const Index h = std::clamp<Index>(options.query_head, -1000, 2000);   // 2^(-2005) is 0: gamma 1
    return 1.0 - std::ldexp(1.0, static_cast<int>(-5 - h));
}

std::string decay_problem(const AttentionOptions& options, Index n)
{
    const double gamma = decay_gamma(options);
    if (!(gamma > 0.0 && gamma <= 1.0)) {
        std::string s = "the decay gamma must lie in (0, 1], got " + number(gamma);
        if (!options.decay.gamma)
            s.append(" (RetNet's 1 - 2^(-5 - h) for query head h=")
                .append(std::to_string(options.query_head))
                .append(")");
        return s;
    }
    if (std::string s = normalisation_problem(options, "decay"); !s.empty())
        return s;
    if (options.blocks.kind == BlockSpec::Kind::grid) {
        try {
            grid_positions(options.blocks, n);
        } catch (const std::invalid_argument& e) {
            return e.what();
        }
    }
    return {};
}

namespace {

// gates_problem(); with `loaded` false, gates named by a source but not read yet pass (checked when read).
std::string gates_problem_when(const AttentionOptions& options, Index n, bool loaded)
{
    if (!options.causal)
        return "gated attention is causal only (a token's gate decays the keys before it): choose causal attention";
    if (std::string s = normalisation_problem(options, "gated"); !s.empty())
        return s;
    const VectorXd& x = options.gates.values;
    if (x.size() == 0 && !loaded && !options.gates.source.empty())
        return {};
    if (x.size() == 0)
        return "gated attention needs the gates, one value per token (N=" + std::to_string(n) + ")";
    if (x.size() != n)
        return "the gates must hold one value per token: N=" + std::to_string(n) + " tokens, got " +
               std::to_string(x.size()) + " gates";
    for (Index t = 0; t < n; ++t) {
        const double v = x(t);
        if (options.gates.log && !(std::isfinite(v) && v <= 0.0))
            return "the log gates must be finite and <= 0 (gates in (0, 1]): token " + std::to_string(t) +
                   " has ln g = " + number(v);
        if (!options.gates.log && !(v > 0.0 && v <= 1.0))
            return "the gates must lie in (0, 1]: token " + std::to_string(t) + " has g = " + number(v);
    }
    return {};
}

}  // namespace

std::string gates_problem(const AttentionOptions& options, Index n) { return gates_problem_when(options, n, false); }

// ---------------------------------------------------------------------------------------------------

DecayOperator::DecayOperator(Pieces pieces)
    : AttentionOperator(pieces.phi_q.rows()), m_p(std::move(pieces)), m_qt(m_p.phi_q.transpose()),
      m_kt(m_p.phi_k.transpose())
{
    if (!m_p.positions.empty()) {   // raster index of every token: sum_a p_a(t) * (product of the later sizes)
        m_raster.assign(static_cast<std::size_t>(m_n), 0);
        for (std::size_t a = 0; a < m_p.grid.size(); ++a)
            for (Index t = 0; t < m_n; ++t) {
                Index& p = m_raster[static_cast<std::size_t>(t)];
                p = p * m_p.grid[a] + m_p.positions[a][static_cast<std::size_t>(t)];
            }
    }
    if (m_p.mechanism == Mechanism::decay) {   // gamma^d for every distance d (at most N - 1, also on grids)
        m_powers.resize(m_n);
        for (Index d = 0; d < m_n; ++d)
            m_powers(d) = std::pow(m_p.gamma, static_cast<double>(d));
    }
    m_row_scale = VectorXd::Ones(m_n);
    if (!m_p.row_normalised)
        return;
    MatrixXd z(m_n, 1);
    raw_product(MatrixXd::Ones(m_n, 1), z, false);   // z = P 1, by the same recurrences as every product
    for (Index t = 0; t < m_n && !m_unnormalisable_row; ++t)
        if (!(z(t, 0) != 0.0) || !std::isfinite(z(t, 0))) {
            m_unnormalisable_row = t;
            m_unnormalisable_sum = z(t, 0);
        }
    m_row_scale = z.col(0).cwiseInverse();
}

void DecayOperator::raw_product(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y, bool transpose) const
{
    // P^T has the weights transposed and the roles of phi_q, phi_k swapped: its line runs backward
    // when causal; the non-causal decay weights are symmetric.
    const MatrixXd& Lt = transpose ? m_kt : m_qt;
    const MatrixXd& Rt = transpose ? m_qt : m_kt;
    MatrixXd Yt = MatrixXd::Zero(X.cols(), m_n);
    if (m_p.causal) {
        const MatrixXd Xt = X.transpose();
        line_scan(Lt, Rt, m_p.line, Xt, Yt, transpose, true);
    } else if (m_p.positions.empty()) {
        const MatrixXd Xt = X.transpose();
        line_scan(Lt, Rt, m_p.line, Xt, Yt, false, true);
        line_scan(Lt, Rt, m_p.line, Xt, Yt, true, false);
    } else {
        grid_product(Lt, Rt, X, Yt);
    }
    Y = Yt.transpose();
}

void DecayOperator::grid_product(const MatrixXd& Lt, const MatrixXd& Rt, const Eigen::Ref<const MatrixXd>& X,
                                 MatrixXd& Yt) const
{
    // Manhattan decay factors over the axes: W = W_1 kron W_2 (kron W_3) in raster order. Column p of V is
    // vec(r_t x_t^T) for the token t at raster position p; W runs along each axis in turn. V holds r * kc
    // numbers per token: the columns of X go kc at a time, kc chosen to keep V near 8 MiB (at least one,
    // so O(N r) memory).
    const Index r = Rt.rows(), k = X.cols();
    const Index kc = std::clamp<Index>((Index{8} << 20) / (8 * r * m_n), 1, k);
    MatrixXd V(r * kc, m_n);
    for (Index c0 = 0; c0 < k; c0 += kc) {
        const Index w = std::min(kc, k - c0);
        for (Index t = 0; t < m_n; ++t) {
            Eigen::Map<MatrixXd> Vt(V.col(m_raster[static_cast<std::size_t>(t)]).data(), r, w);
            Vt.noalias() = Rt.col(t) * X.block(t, c0, 1, w);
        }
        Index stride = 1;
        for (std::size_t a = m_p.grid.size(); a-- > 0;) {
            decay_axis(V, r * w, m_p.grid[a], stride, m_p.gamma);
            stride *= m_p.grid[a];
        }
        for (Index t = 0; t < m_n; ++t) {
            const Eigen::Map<const MatrixXd> Vt(V.col(m_raster[static_cast<std::size_t>(t)]).data(), r, w);
            Yt.block(c0, t, w, 1).noalias() = Vt.transpose() * Lt.col(t);
        }
    }
}

void DecayOperator::apply(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const
{
    check_row_apply_shapes(m_n, X, Y, "apply");
    raw_product(X, Y, false);
    Y.array().colwise() *= m_row_scale.array();
}

void DecayOperator::apply_transpose(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const
{
    check_row_apply_shapes(m_n, X, Y, "apply_transpose");
    const MatrixXd Xs = m_row_scale.asDiagonal() * X;   // A^T X = P^T (diag(1/z) X)
    raw_product(Xs, Y, true);
}

// w[j] = w(t, j) for every key j (0 where j is not allowed), each weight as docs/maths.md 1.8 writes it.
void DecayOperator::weight_row(Index t, double* w) const
{
    std::fill(w, w + m_n, 0.0);
    if (m_p.mechanism == Mechanism::decay && !m_p.causal) {
        for (Index j = 0; j < m_n; ++j) {
            Index dist = 0;
            if (m_p.positions.empty())
                dist = std::abs(t - j);
            for (const auto& pos : m_p.positions)
                dist += std::abs(pos[static_cast<std::size_t>(t)] - pos[static_cast<std::size_t>(j)]);
            w[j] = m_powers(dist);
        }
        return;
    }
    // Causal: from the diagonal back to the first token; once a weight underflows to 0, so do the earlier ones.
    w[t] = 1.0;
    double acc = 0.0;
    for (Index j = t - 1; j >= 0 && w[j + 1] != 0.0; --j) {
        if (m_p.mechanism == Mechanism::decay) {
            w[j] = m_powers(t - j);
        } else if (m_p.log_line.size() > 0) {
            acc += m_p.log_line(j + 1);
            w[j] = std::exp(acc);
        } else {
            w[j] = w[j + 1] * m_p.line(j + 1);
        }
    }
}

void DecayOperator::dense_rows(Index t0, Index count, Eigen::Ref<MatrixXd> out) const
{
    if (t0 < 0 || count < 0 || t0 + count > m_n || out.rows() != count || out.cols() != m_n)
        throw std::invalid_argument("dense_rows: rows [" + std::to_string(t0) + ", " + std::to_string(t0 + count) +
                                    ") into " + std::to_string(out.rows()) + " x " + std::to_string(out.cols()) +
                                    " for N=" + std::to_string(m_n));
    if (count == 0)
        return;
    kernels::gemm('N', 'T', count, m_n, m_p.phi_q.cols(), 1.0, m_p.phi_q.data() + t0, m_p.phi_q.rows(), m_p.phi_k.data(),
                  m_p.phi_k.rows(), 0.0, out.data(), out.outerStride());
    MatrixXd Wt(m_n, count);   // column i: the weights of row t0 + i
    for (Index i = 0; i < count; ++i)
        weight_row(t0 + i, Wt.col(i).data());
    for (Index j = 0; j < m_n; ++j)
        for (Index i = 0; i < count; ++i) {
            const double w = Wt(j, i);
            out(i, j) = w != 0.0 ? w * out(i, j) : 0.0;   // exactly 0 where no weight (no -0, no inf * 0)
        }
    if (m_p.row_normalised) {   // each row by its own sum, as dense() of the definition
        const VectorXd scale = out.rowwise().sum().cwiseInverse();
        out.array().colwise() *= scale.array();
    }
}

std::optional<DecayOperator::SplitWeights> DecayOperator::split_weights(Index h) const
{
    if (h < 1 || h > m_n - 1)
        throw std::invalid_argument("the past split h=" + std::to_string(h) + " must lie in 1..N-1 (N=" +
                                    std::to_string(m_n) + " tokens)");
    if (!m_p.causal && !m_p.positions.empty())   // non-causal grid decay: the Manhattan distance does not split at h
        return std::nullopt;
    // For t >= h > j the weight splits at h: gamma^(t-j) = gamma^(t-h) gamma^(h-j), and the gate product
    // prod_{i=j+1..t} g_i = (prod_{i=h+1..t} g_i) (prod_{i=j+1..h} g_i) (log gates: sums of logs, exponentiated).
    const Index rows = m_n - h;
    VectorXd after(rows), before(h);   // w(t, h) for t = h.., w(h, j) for j = ..h-1
    if (m_p.mechanism == Mechanism::decay) {
        for (Index i = 0; i < rows; ++i)
            after(i) = m_powers(i);
        for (Index j = 0; j < h; ++j)
            before(j) = m_powers(h - j);
    } else if (m_p.log_line.size() > 0) {
        double acc = 0.0;
        after(0) = 1.0;
        for (Index t = h + 1; t < m_n; ++t) {
            acc += m_p.log_line(t);
            after(t - h) = std::exp(acc);
        }
        acc = 0.0;
        for (Index j = h - 1; j >= 0; --j) {
            acc += m_p.log_line(j + 1);
            before(j) = std::exp(acc);
        }
    } else {
        after(0) = 1.0;
        for (Index t = h + 1; t < m_n; ++t)
            after(t - h) = after(t - h - 1) * m_p.line(t);
        before(h - 1) = m_p.line(h);
        for (Index j = h - 2; j >= 0; --j)
            before(j) = before(j + 1) * m_p.line(j + 1);
    }
    return SplitWeights{std::move(after), std::move(before)};
}

std::vector<Index> DecayOperator::allowed_keys() const
{
    std::vector<Index> n(static_cast<std::size_t>(m_n), m_n);
    if (m_p.causal)
        for (Index t = 0; t < m_n; ++t)
            n[static_cast<std::size_t>(t)] = t + 1;
    return n;
}

// ---------------------------------------------------------------------------------------------------

namespace {

DecayOperator::Pieces feature_pieces(Mechanism mechanism, const Eigen::Ref<const MatrixXd>& Q,
                                     const Eigen::Ref<const MatrixXd>& K, const AttentionOptions& options)
{
    DecayOperator::Pieces p;
    p.mechanism = mechanism;
    p.causal = options.causal;
    p.row_normalised = options.normalize == Normalize::row;
    const FeatureMap phi(options.feature_map, Q.cols());
    p.negative = !phi.non_negative();
    p.phi_q = phi(Q);
    p.phi_k = phi(K);
    return p;
}

}  // namespace

std::unique_ptr<AttentionOperator> make_decay_operator(const Eigen::Ref<const MatrixXd>& Q,
                                                       const Eigen::Ref<const MatrixXd>& K,
                                                       const AttentionOptions& options)
{
    check_queries_and_keys(Q, K);   // attention/operator.h
    const Index n = Q.rows();
    if (const std::string problem = decay_problem(options, n); !problem.empty())
        throw std::invalid_argument(problem);
    DecayOperator::Pieces p = feature_pieces(Mechanism::decay, Q, K, options);
    p.gamma = decay_gamma(options);
    p.line = VectorXd::Constant(n, p.gamma);
    if (!options.causal && options.blocks.kind == BlockSpec::Kind::grid) {
        p.positions = grid_positions(options.blocks, n);
        p.grid = options.blocks.grid;
    }
    return std::make_unique<DecayOperator>(std::move(p));
}

std::unique_ptr<AttentionOperator> make_gated_operator(const Eigen::Ref<const MatrixXd>& Q,
                                                       const Eigen::Ref<const MatrixXd>& K,
                                                       const AttentionOptions& options)
{
    check_queries_and_keys(Q, K);   // attention/operator.h
    const Index n = Q.rows();
    if (const std::string problem = gates_problem_when(options, n, true); !problem.empty())
        throw std::invalid_argument(problem);
    DecayOperator::Pieces p = feature_pieces(Mechanism::gated, Q, K, options);
    if (options.gates.log) {
        p.log_line = options.gates.values;
        p.line = p.log_line.array().exp();   // ln g <= 0: no overflow
    } else {
        p.line = options.gates.values;
    }
    return std::make_unique<DecayOperator>(std::move(p));
}

}  // namespace attnscope::attention
