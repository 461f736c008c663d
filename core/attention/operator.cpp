#include "attention/operator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "attention/mixing.h"
#include "kernels/kernels.h"

namespace attnscope::attention {

using Eigen::MatrixXd;
using Eigen::VectorXd;

void AttentionOperator::perform_op(const double* x_in, double* y_out) const
{
    const Eigen::Map<const MatrixXd> x(x_in, m_n, 1);
    Eigen::Map<MatrixXd> y(y_out, m_n, 1);
    apply(x, y);
}

void AttentionOperator::apply_gram(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const
{
    MatrixXd tmp(m_n, X.cols());
    apply(X, tmp);
    apply_transpose(tmp, Y);
}

Eigen::MatrixXd AttentionOperator::dense() const
{
    MatrixXd A(m_n, m_n);
    dense_rows(0, m_n, A);
    return A;
}

namespace {

// The MHLA authors' eps in the official denominator (docs/maths.md 1.4).
constexpr double k_official_eps = 1e-6;

// normalize=official needs non-causal attention and blocks of equal size (docs/maths.md 1.4).
void check_normalization(const AttentionOptions& options, const BlockLayout& layout)
{
    if (options.normalize != Normalize::official)
        return;
    if (options.causal)
        throw std::invalid_argument("normalize=official is defined for non-causal attention only");
    if (!layout.equal_sizes())
        throw std::invalid_argument("normalize=official needs blocks of equal size (block 0 has " +
                                    std::to_string(layout.tokens.front().size()) + " tokens, block " +
                                    std::to_string(layout.num_blocks - 1) + " has " +
                                    std::to_string(layout.tokens.back().size()) + ")");
}

void check_rows(Index n, Index t0, Index count, const Eigen::Ref<MatrixXd>& out)
{
    if (t0 < 0 || count < 0 || t0 + count > n || out.rows() != count || out.cols() != n)
        throw std::invalid_argument("dense_rows: rows [" + std::to_string(t0) + ", " + std::to_string(t0 + count) +
                                    ") into " + std::to_string(out.rows()) + " x " + std::to_string(out.cols()) +
                                    " for N=" + std::to_string(n));
}

void check_apply_shapes(Index n, const Eigen::Ref<const MatrixXd>& X, const Eigen::Ref<MatrixXd>& Y, const char* what)
{
    if (X.rows() != n)
        throw std::invalid_argument(std::string(what) + ": X has " + std::to_string(X.rows()) + " rows, expected N=" +
                                    std::to_string(n));
    if (Y.rows() != n || Y.cols() != X.cols())
        throw std::invalid_argument(std::string(what) + ": Y is " + std::to_string(Y.rows()) + "x" +
                                    std::to_string(Y.cols()) + ", expected " + std::to_string(n) + "x" +
                                    std::to_string(X.cols()));
}

// ---------------------------------------------------------------------------------------------------
// Softmax (docs/maths.md 1.1), tile by tile: a tile of T queries needs the T x N scores only.
class SoftmaxOperator final : public AttentionOperator {
public:
    SoftmaxOperator(const Eigen::Ref<const MatrixXd>& Q, const Eigen::Ref<const MatrixXd>& K, double scale, bool causal)
        : AttentionOperator(Q.rows()), m_p{Q, K, scale, causal}
    {
    }

    Mechanism mechanism() const override { return Mechanism::softmax; }
    bool causal() const override { return m_p.causal; }
    const SoftmaxPieces* softmax_pieces() const override { return &m_p; }

    void dense_rows(Index t0, Index count, Eigen::Ref<MatrixXd> out) const override
    {
        check_rows(m_n, t0, count, out);
        out.setZero();
        MatrixXd Et;
        for (Index r0 = t0; r0 < t0 + count; r0 += k_tile) {
            const Index T = std::min(k_tile, t0 + count - r0);
            tile(r0, T, Et);
            out.block(r0 - t0, 0, T, Et.rows()) = Et.transpose();
        }
    }

    // Products through the log normalisers (kernels::softmax_apply): every tile of A stands on its own, so
    // output rows are shared out to the threads and one pass serves a whole block of vectors.
    void apply(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        check_apply_shapes(m_n, X, Y, "softmax apply");
        product(X, Y, false);
    }

    void apply_transpose(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        check_apply_shapes(m_n, X, Y, "softmax apply_transpose");
        product(X, Y, true);
    }

    void apply_gram(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        check_apply_shapes(m_n, X, Y, "softmax apply_gram");
        ensure_lse();
        kernels::softmax_gram(m_p.q.data(), m_p.q.rows(), m_p.k.data(), m_p.k.rows(), m_n, m_p.q.cols(), m_p.scale,
                              m_p.causal, m_lse.data(), X.data(), X.outerStride(), X.cols(), Y.data(), Y.outerStride());
    }

    std::vector<Index> allowed_keys() const override
    {
        std::vector<Index> n(static_cast<std::size_t>(m_n));
        for (Index t = 0; t < m_n; ++t)
            n[static_cast<std::size_t>(t)] = m_p.causal ? t + 1 : m_n;
        return n;
    }

private:
    static constexpr Index k_tile = 256;

    // Et (nk x T): column i is row r0+i of A restricted to its first nk keys (nk = N, or r0+T when causal;
    // later keys are masked anyway). S = scale * Q K^T, minus each row's max, exp, divided by the row sum.
    void tile(Index r0, Index T, MatrixXd& Et) const
    {
        const Index nk = m_p.causal ? r0 + T : m_n;
        Et.resize(nk, T);
        // Scores K Q_tile^T, then per column (query): scale, subtract the max, exp, normalise (core/kernels).
        kernels::gemm('N', 'T', nk, T, m_p.k.cols(), 1.0, m_p.k.data(), m_p.k.rows(), m_p.q.data() + r0, m_p.q.rows(), 0.0,
                      Et.data(), nk);
        std::vector<Index> allowed(static_cast<std::size_t>(T));
        for (Index i = 0; i < T; ++i)
            allowed[static_cast<std::size_t>(i)] = m_p.causal ? r0 + i + 1 : nk;
        kernels::softmax_columns(Et.data(), nk, T, nk, m_p.scale, allowed.data());
    }

    void ensure_lse() const
    {
        std::call_once(m_lse_once, [&] {
            m_lse.resize(m_n);
            if (m_n > 0 && kernels::softmax_log_normalisers(m_p.q.data(), m_p.q.rows(), m_p.k.data(), m_p.k.rows(), m_n,
                                                            m_p.q.cols(), m_p.scale, m_p.causal, m_lse.data()) != 0)
                m_lse.setConstant(std::numeric_limits<double>::quiet_NaN());   // not finite: so is every product
        });
    }

    void product(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y, bool transpose) const
    {
        ensure_lse();
        kernels::softmax_apply(m_p.q.data(), m_p.q.rows(), m_p.k.data(), m_p.k.rows(), m_n, m_p.q.cols(), m_p.scale,
                               m_p.causal, m_lse.data(), transpose, X.data(), X.outerStride(), X.cols(), Y.data(),
                               Y.outerStride());
    }

    SoftmaxPieces m_p;
    mutable std::once_flag m_lse_once;   // the log normalisers, computed by the first product
    mutable VectorXd m_lse;
};

// ---------------------------------------------------------------------------------------------------
// Kernel attention (linear, MHLA), docs/maths.md 1.3-1.4 and 3.
//
// Work happens in "sorted" coordinates: tokens ordered by (block, token). There the causal rule
// (blk(j) < blk(t), or same block and j <= t) is exactly pos(j) <= pos(t), a lower triangle, and a
// block's tokens are contiguous. With a_u, b_v the (sorted) feature rows and C the mixing matrix,
//   P[u,v] = C[blk(u), blk(v)] a_u . b_v           (v <= u when causal).
// P^T has the same shape after reversing all positions: rows b, columns a, and mixing
// C'[x,y] = C[M-1-y, M-1-x] on the reversed block numbering.
struct SortedKernel {
    MatrixXd a;                   // N by r, rows of the left factor
    MatrixXd b;                   // N by r, rows of the right factor
    MatrixXd c;                   // M by M
    std::vector<Index> offsets;   // M+1: block i is positions offsets[i] .. offsets[i+1]-1

    Index blocks() const { return c.rows(); }
    Index begin(Index i) const { return offsets[static_cast<std::size_t>(i)]; }
    Index size(Index i) const { return offsets[static_cast<std::size_t>(i) + 1] - offsets[static_cast<std::size_t>(i)]; }

    // Columns of Ut (r*k by M): vec(B_i^T X_i) per block.
    MatrixXd block_moments(const MatrixXd& X) const
    {
        const Index r = b.cols(), k = X.cols(), m = blocks();
        MatrixXd Ut(r * k, m);
        for (Index i = 0; i < m; ++i) {
            Eigen::Map<MatrixXd> U(Ut.col(i).data(), r, k);
            U.noalias() = b.middleRows(begin(i), size(i)).transpose() * X.middleRows(begin(i), size(i));
        }
        return Ut;
    }

    // Y = P X, every key allowed: Y_i = A_i * sum_j C[i,j] (B_j^T X_j).
    MatrixXd apply_full(const MatrixXd& X) const
    {
        const Index r = b.cols(), k = X.cols(), m = blocks();
        const MatrixXd Ut = block_moments(X);
        MatrixXd Wt(r * k, m);
        Wt.noalias() = Ut * c.transpose();
        MatrixXd Y(X.rows(), k);
        for (Index i = 0; i < m; ++i) {
            const Eigen::Map<const MatrixXd> W(Wt.col(i).data(), r, k);
            Y.middleRows(begin(i), size(i)).noalias() = a.middleRows(begin(i), size(i)) * W;
        }
        return Y;
    }

    // Y = P X with the lower-triangle mask: earlier blocks through their mixed moments, the own block by
    // prefix sums over chunks of tokens (a chunk's own lower triangle done densely).
    MatrixXd apply_causal(const MatrixXd& X) const
    {
        constexpr Index chunk = 64;
        const Index r = b.cols(), k = X.cols(), m = blocks();
        const MatrixXd Ut = block_moments(X);
        const MatrixXd lower = c.triangularView<Eigen::StrictlyLower>();
        MatrixXd Wt(r * k, m);
        Wt.noalias() = Ut * lower.transpose();   // column i: sum_{j<i} C[i,j] vec(U_j)
        MatrixXd Y(X.rows(), k);
        MatrixXd S(r, k), G, H(r, k);
        for (Index i = 0; i < m; ++i) {
            const double cii = c(i, i);
            const Eigen::Map<const MatrixXd> W(Wt.col(i).data(), r, k);
            S.setZero();
            for (Index p0 = 0; p0 < size(i); p0 += chunk) {
                const Index u0 = begin(i) + p0;
                const Index T = std::min(chunk, size(i) - p0);
                const Eigen::Ref<const MatrixXd> Ac = a.middleRows(u0, T);
                const Eigen::Ref<const MatrixXd> Bc = b.middleRows(u0, T);
                const Eigen::Ref<const MatrixXd> Xc = X.middleRows(u0, T);
                H = W + cii * S;
                G.noalias() = Ac * Bc.transpose();
                G.triangularView<Eigen::StrictlyUpper>().setZero();
                Eigen::Ref<MatrixXd> Yc = Y.middleRows(u0, T);
                Yc.noalias() = Ac * H;
                Yc.noalias() += cii * (G * Xc);
                S.noalias() += Bc.transpose() * Xc;
            }
        }
        return Y;
    }

    MatrixXd apply(const MatrixXd& X, bool causal) const { return causal ? apply_causal(X) : apply_full(X); }
};

class KernelOperator final : public AttentionOperator {
public:
    // phi_q, phi_k: N by r feature rows; `layout` and `mixing` (M x M) the blocks (linear attention: one block,
    // [[1]]); `negative`: entries may be negative (entropy undefined).
    KernelOperator(Mechanism mechanism, MatrixXd phi_q, MatrixXd phi_k, const BlockLayout& layout, MatrixXd mixing,
                   const AttentionOptions& options, bool negative)
        : AttentionOperator(phi_q.rows()), m_mechanism(mechanism), m_causal(options.causal), m_negative(negative)
    {
        m_f.mixing = std::move(mixing);
        check_normalization(options, layout);

        m_f.phi_q = std::move(phi_q);
        m_f.phi_k = std::move(phi_k);
        m_f.block = layout.block_of_token;
        m_f.causal = options.causal;

        // Sorted coordinates (see SortedKernel).
        const Index m = layout.num_blocks;
        m_perm.reserve(static_cast<std::size_t>(m_n));
        m_pos.resize(static_cast<std::size_t>(m_n));
        std::vector<Index> offsets{0};
        for (const auto& toks : layout.tokens) {
            for (Index t : toks) {
                m_pos[static_cast<std::size_t>(t)] = static_cast<Index>(m_perm.size());
                m_perm.push_back(t);
            }
            offsets.push_back(static_cast<Index>(m_perm.size()));
        }
        m_f.order = m_perm;
        m_f.offsets = offsets;
        m_fwd.a = gather(m_f.phi_q);
        m_fwd.b = gather(m_f.phi_k);
        m_fwd.c = m_f.mixing;
        m_fwd.offsets = offsets;
        if (m_causal) {
            // The reversed problem that gives P^T (see SortedKernel).
            m_rev.a = m_fwd.b.colwise().reverse();
            m_rev.b = m_fwd.a.colwise().reverse();
            m_rev.c = m_f.mixing.transpose().reverse();
            m_rev.offsets.assign(offsets.size(), 0);
            for (std::size_t i = 0; i < offsets.size(); ++i)
                m_rev.offsets[i] = m_n - offsets[offsets.size() - 1 - i];
        } else {
            m_rev.a = m_fwd.b;
            m_rev.b = m_fwd.a;
            m_rev.c = m_f.mixing.transpose();
            m_rev.offsets = offsets;
        }

        m_f.row_scale = VectorXd::Ones(m_n);
        m_f.row_normalised = options.normalize == Normalize::row;
        // A signed Mc (docs/maths.md 1.4) can make a normaliser negative: such a row is not defined either.
        const bool signed_mc = signed_mixing(m_f.mixing);
        if (m_f.row_normalised) {
            const VectorXd z = scatter(m_fwd.apply(MatrixXd::Ones(m_n, 1), m_causal)).col(0);
            m_f.row_scale = z.cwiseInverse();
            mark_unnormalisable(z, signed_mc);
        } else if (options.normalize == Normalize::official) {
            // den(t) = 1e-6 + sum_b Mc[i,b] phi(q_{b,p}) . z_b for t at position p of block i;
            // G(b,p) = phi(q_{b,p}) . z_b, so den = 1e-6 + (Mc G)(i,p).
            const Index L = static_cast<Index>(layout.tokens.front().size());
            MatrixXd G(m, L);
            for (Index bk = 0; bk < m; ++bk) {
                const auto& toks = layout.tokens[static_cast<std::size_t>(bk)];
                VectorXd zb = VectorXd::Zero(m_f.phi_k.cols());
                for (Index j : toks)
                    zb += m_f.phi_k.row(j).transpose();
                for (Index p = 0; p < L; ++p)
                    G(bk, p) = m_f.phi_q.row(toks[static_cast<std::size_t>(p)]).dot(zb);
            }
            MatrixXd den(m, L);
            den.noalias() = m_f.mixing * G;
            VectorXd den_t(m_n);
            for (Index i = 0; i < m; ++i)
                for (Index p = 0; p < L; ++p)
                    den_t(layout.tokens[static_cast<std::size_t>(i)][static_cast<std::size_t>(p)]) = k_official_eps + den(i, p);
            m_f.row_scale = den_t.cwiseInverse();
            if (signed_mc)   // non-negative Mc: den >= 1e-6
                mark_unnormalisable(den_t, true);
        }
    }

    // Records the first row whose normaliser z(t) is 0 or not finite, or with a signed Mc <= 0 (the
    // degenerate-normaliser rule, docs/maths.md 4); with a signed Mc every such row's scale becomes NaN, so the
    // matrix is not finite wherever it is not defined (1/z alone would be finite for z < 0).
    void mark_unnormalisable(const VectorXd& z, bool signed_mc)
    {
        for (Index t = 0; t < m_n; ++t) {
            if (z(t) != 0.0 && std::isfinite(z(t)) && (!signed_mc || z(t) > 0.0))
                continue;
            if (!m_f.unnormalisable_row) {
                m_f.unnormalisable_row = t;
                m_f.unnormalisable_sum = z(t);
            }
            if (signed_mc)
                m_f.row_scale(t) = std::numeric_limits<double>::quiet_NaN();
        }
    }

    Mechanism mechanism() const override { return m_mechanism; }
    bool causal() const override { return m_causal; }

    void dense_rows(Index t0, Index count, Eigen::Ref<MatrixXd> out) const override
    {
        check_rows(m_n, t0, count, out);
        kernels::gemm('N', 'T', count, m_n, m_f.phi_q.cols(), 1.0, m_f.phi_q.data() + t0, m_f.phi_q.rows(), m_f.phi_k.data(),
                      m_f.phi_k.rows(), 0.0, out.data(), out.outerStride());
        const bool plain = !m_causal && m_f.mixing.size() == 1 && m_f.mixing(0, 0) == 1.0;   // linear, non-causal
        if (!plain) {
            // Column j of the tile scales by mixing(block[t], block[j]): G(i, b) = mixing(block[t0 + i], b).
            MatrixXd G(count, m_f.mixing.cols());
            for (Index i = 0; i < count; ++i)
                G.row(i) = m_f.mixing.row(m_f.block[static_cast<std::size_t>(t0 + i)]);
            for (Index j = 0; j < m_n; ++j) {
                out.col(j).array() *= G.col(m_f.block[static_cast<std::size_t>(j)]).array();
                if (m_causal) {
                    const Index pj = m_pos[static_cast<std::size_t>(j)];
                    for (Index i = 0; i < count; ++i)
                        if (pj > m_pos[static_cast<std::size_t>(t0 + i)])
                            out(i, j) = 0.0;
                }
            }
        }
        // Whole rows: row normalisation uses each row's own sum, exactly as dense() does.
        // (Column by column: rows of a column-major tile are strided.)
        VectorXd scale = m_f.row_normalised ? VectorXd(out.rowwise().sum().cwiseInverse())
                                          : VectorXd(m_f.row_scale.segment(t0, count));
        if (m_f.unnormalisable_row)   // rows mark_unnormalisable left undefined stay so
            for (Index i = 0; i < count; ++i)
                if (std::isnan(m_f.row_scale(t0 + i)))
                    scale(i) = m_f.row_scale(t0 + i);
        out.array().colwise() *= scale.array();
    }

    void apply(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        check_apply_shapes(m_n, X, Y, "apply");
        const MatrixXd Ys = m_fwd.apply(gather(X), m_causal);
        for (Index u = 0; u < m_n; ++u) {
            const Index t = m_perm[static_cast<std::size_t>(u)];
            Y.row(t) = m_f.row_scale(t) * Ys.row(u);
        }
    }

    void apply_transpose(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        check_apply_shapes(m_n, X, Y, "apply_transpose");
        // A^T X = P^T (diag(s) X).
        MatrixXd Xs(m_n, X.cols());
        for (Index u = 0; u < m_n; ++u) {
            const Index t = m_perm[static_cast<std::size_t>(m_causal ? m_n - 1 - u : u)];
            Xs.row(u) = m_f.row_scale(t) * X.row(t);
        }
        const MatrixXd Ys = m_rev.apply(Xs, m_causal);
        for (Index u = 0; u < m_n; ++u)
            Y.row(m_perm[static_cast<std::size_t>(m_causal ? m_n - 1 - u : u)]) = Ys.row(u);
    }

    const KernelFactors* factors() const override { return m_causal ? nullptr : &m_f; }
    const KernelFactors* kernel_pieces() const override { return &m_f; }

    std::vector<Index> allowed_keys() const override
    {
        std::vector<Index> n(static_cast<std::size_t>(m_n), m_n);
        if (m_causal)
            for (Index t = 0; t < m_n; ++t)
                n[static_cast<std::size_t>(t)] = m_pos[static_cast<std::size_t>(t)] + 1;
        return n;
    }

    bool may_be_negative() const override { return m_negative; }

private:
    MatrixXd gather(const Eigen::Ref<const MatrixXd>& X) const
    {
        MatrixXd out(X.rows(), X.cols());
        for (Index u = 0; u < X.rows(); ++u)
            out.row(u) = X.row(m_perm[static_cast<std::size_t>(u)]);
        return out;
    }
    MatrixXd scatter(const MatrixXd& Xs) const
    {
        MatrixXd out(Xs.rows(), Xs.cols());
        for (Index u = 0; u < Xs.rows(); ++u)
            out.row(m_perm[static_cast<std::size_t>(u)]) = Xs.row(u);
        return out;
    }

    Mechanism m_mechanism;
    bool m_causal;
    bool m_negative = false;
    KernelFactors m_f;
    std::vector<Index> m_perm;   // sorted position -> token
    std::vector<Index> m_pos;    // token -> sorted position
    SortedKernel m_fwd;          // P
    SortedKernel m_rev;          // P^T (positions reversed when causal)
};

}  // namespace

void check_queries_and_keys(const Eigen::Ref<const MatrixXd>& Q, const Eigen::Ref<const MatrixXd>& K)
{
    if (Q.rows() != K.rows() || Q.cols() != K.cols())
        throw std::invalid_argument("Q is " + std::to_string(Q.rows()) + "x" + std::to_string(Q.cols()) + " but K is " +
                                    std::to_string(K.rows()) + "x" + std::to_string(K.cols()) +
                                    " (they must have the same shape)");
    if (Q.rows() == 0)
        throw std::invalid_argument("no tokens (N=0)");
    if (Q.cols() == 0)
        throw std::invalid_argument("no features (d=0)");
    for (const auto* M : {&Q, &K})
        if (!M->allFinite())
            throw std::invalid_argument(std::string(M == &Q ? "Q" : "K") + " has non-finite entries");
}


std::string mhla_options_problem(const AttentionOptions& options, Index n)
{
    try {
        const BlockLayout layout = make_blocks(options.blocks, n);
        if (!options.mixing.matrix && !options.mixing.preset.empty() && !is_mixing_preset(options.mixing.preset))
            return {};   // a matrix from a file, not loaded yet: checked when it is
        make_mixing(options.mixing, layout, options.causal);
        check_normalization(options, layout);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return {};
}

std::string mhla_same_as_linear(const AttentionOptions& options, Index n)
{
    if (options.normalize != Normalize::row)
        return {};
    BlockLayout layout;
    Eigen::MatrixXd mc;
    try {
        layout = make_blocks(options.blocks, n);
        if (!options.mixing.matrix && !options.mixing.preset.empty() && !is_mixing_preset(options.mixing.preset))
            return {};   // a matrix from a file that is not loaded yet
        mc = make_mixing(options.mixing, layout, options.causal);
    } catch (const std::invalid_argument&) {
        return {};
    }
    const Index m = layout.num_blocks;
    // Row normalisation cancels a factor that is constant over the keys a query sees. Causally those are
    // the earlier blocks and the own block up to t, which is "every key j <= t" only when blocks are
    // contiguous in token order.
    if (options.causal && !std::is_sorted(layout.block_of_token.begin(), layout.block_of_token.end()))
        return {};
    for (Index i = 0; i < m; ++i) {
        const Index seen = options.causal ? i + 1 : m;
        if (!(mc(i, 0) > 0.0))
            return {};
        for (Index b = 1; b < seen; ++b)
            if (mc(i, b) != mc(i, 0))
                return {};
    }
    const std::string what = "MHLA is linear attention by construction here (the same matrix, not a measured similarity): ";
    if (m == 1)
        return what + "one block (M = 1)";
    const std::string name = resolved_mixing_name(options.mixing, options.causal, options.blocks.kind == BlockSpec::Kind::grid);
    if (name == "uniform")
        return what + "uniform mixing with row normalisation";
    if (name == "causal")
        return what + "the causal preset's rows are constant over the blocks a query sees, and row normalisation cancels them";
    return what + "every row of the mixing matrix is constant over the blocks a query sees, and row normalisation cancels it";
}

std::unique_ptr<AttentionOperator> make_softmax_operator(const Eigen::Ref<const MatrixXd>& Q,
                                                         const Eigen::Ref<const MatrixXd>& K, double scale, bool causal)
{
    return std::make_unique<SoftmaxOperator>(Q, K, scale, causal);
}

std::unique_ptr<AttentionOperator> make_kernel_operator(Mechanism mechanism, Eigen::MatrixXd phi_q, Eigen::MatrixXd phi_k,
                                                        const BlockLayout& layout, Eigen::MatrixXd mixing,
                                                        const AttentionOptions& options, bool may_be_negative)
{
    return std::make_unique<KernelOperator>(mechanism, std::move(phi_q), std::move(phi_k), layout, std::move(mixing), options,
                                            may_be_negative);
}

}  // namespace attnscope::attention
