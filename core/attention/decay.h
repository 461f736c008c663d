#pragma once
// The decay and gated linear-attention families of docs/maths.md 1.8, as attention operators:
//   P[t,j] = w(t,j) phi(q_t) . phi(k_j),   A = diag(1/z) P (normalize row, z = P 1) or A = P (none),
// with a content-free weight w:
//   decay  w = gamma^dist(t,j): causal dist = t - j (j <= t, also on grids); non-causal |t - j| in 1-D, the
//          Manhattan distance of the grid positions with a grid (BlockSpec::Kind::grid, token order raster or
//          blocked as docs/maths.md 1.5 lays tokens out);
//   gated  w = prod_{i=j+1..t} g_i for j <= t (causal only), one gate g_i in (0, 1] per token.
// Products never form N x N: w factors along the token line (and along each grid axis), so A X and A^T X
// are first-order recurrences S_t = w_t S_{t-1} + phi(k_t) x_t^T, O(N r k) time and O(N (r + k)) memory
// (docs/maths.md 1.8). The recurrences only ever multiply by weights <= 1: nothing overflows, and weights
// far in the past underflow to 0 as they should.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attention/operator.h"
#include "attention/options.h"

namespace attnscope::attention {

// Grid coordinates of every token (docs/maths.md 1.5), per axis, for spec.grid (raster or blocked token order).
// Throws std::invalid_argument naming the violated condition (axes, sizes, N).
std::vector<std::vector<Index>> grid_positions(const BlockSpec& spec, Index n);

// The gamma decay uses: options.decay.gamma, or RetNet's schedule 1 - 2^(-5 - h) for h = options.query_head.
// Not checked (decay_problem() says whether it lies in (0, 1]).
double decay_gamma(const AttentionOptions& options);

// Why decay cannot be computed on N tokens with `options` (its gamma, its normalisation, its grid), in the
// words make_decay_operator() throws; empty when it can. Needs no data.
std::string decay_problem(const AttentionOptions& options, Index n);

// Why gated cannot be computed on N tokens with `options` (not causal, its normalisation, the gates: their
// number and the first token whose gate lies outside (0, 1]); empty when it can. Needs no data: gates that
// name a source but are not read yet (empty values) are checked by make_gated_operator() when they are.
std::string gates_problem(const AttentionOptions& options, Index n);

// The operator of both families. Built by the factories below; the class is public for its accessors.
class DecayOperator final : public AttentionOperator {
public:
    // What the factories resolve from the options (build operators through them: they check the pieces).
    // `line` holds the weight of one step along the token line, w(t, t-1): the gates, or gamma N times.
    struct Pieces {
        Mechanism mechanism = Mechanism::decay;
        bool causal = false;
        bool row_normalised = true;
        bool negative = false;                 // the feature map can give negative entries
        double gamma = 1.0;                    // decay only
        Eigen::MatrixXd phi_q, phi_k;          // N by r feature rows
        Eigen::VectorXd line;                  // N: g_t (gated) or gamma (decay)
        Eigen::VectorXd log_line;              // N: ln g_t when the gates were given as logs, else empty
        std::vector<std::vector<Index>> positions;   // per axis, N grid coordinates (non-causal grid decay)
        std::vector<Index> grid;               // grid sizes per axis (non-causal grid decay)
    };
    explicit DecayOperator(Pieces pieces);

    Mechanism mechanism() const override { return m_p.mechanism; }
    bool causal() const override { return m_p.causal; }
    // Exact rows: each weight as docs/maths.md 1.8 writes it (gamma^dist by std::pow; gate products
    // multiplied, or log gates summed, from t back to j), times the kernel scores; row-normalised by the
    // row's own sum. O(count N r).
    void dense_rows(Index t0, Index count, Eigen::Ref<Eigen::MatrixXd> out) const override;
    void apply(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override;
    void apply_transpose(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override;
    std::vector<Index> allowed_keys() const override;
    bool may_be_negative() const override { return m_p.negative; }

    // normalize=row with a row whose sum z_t = (P 1)_t is 0 or not finite (identity features cancelling,
    // scores that overflow): the first such row and its sum, as KernelFactors::unnormalisable_row. The
    // matrix is then not defined (dense rows and products hold inf or NaN); report the mechanism null.
    std::optional<Index> unnormalisable_row() const override { return m_unnormalisable_row; }
    double unnormalisable_sum() const override { return m_unnormalisable_sum; }
    // For t >= h > j along the line (causal, or non-causal decay in 1-D) the weight splits at h:
    // w(t, j) = after(t - h) * before(j), with after(i) = w(h + i, h) (gamma^i, or the gates h+1..h+i) and
    // before(j) = w(h, j) (gamma^(h-j), or the gates j+1..h). Nothing for non-causal decay on a grid (the
    // Manhattan distance does not split). With pieces() and row_scale(): the past block's factors
    // (analysis/mask_measures.h). Throws std::invalid_argument for h outside 1..N-1.
    struct SplitWeights {
        Eigen::VectorXd after, before;   // N - h and h values
    };
    std::optional<SplitWeights> split_weights(Index h) const;
    const Pieces& pieces() const { return m_p; }
    // 1/z_t (row) or 1 (none).
    const Eigen::VectorXd& row_scale() const { return m_row_scale; }
    // decay's resolved gamma (1 for gated).
    double gamma() const { return m_p.gamma; }

private:
    // Y = P X (transpose false) or P^T X (true), P unnormalised.
    void raw_product(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y, bool transpose) const;
    // Yt (k by N) = (P X)^T for the non-causal grid decay (or P^T X: Lt, Rt exchanged).
    void grid_product(const Eigen::MatrixXd& Lt, const Eigen::MatrixXd& Rt, const Eigen::Ref<const Eigen::MatrixXd>& X,
                      Eigen::MatrixXd& Yt) const;
    void weight_row(Index t, double* w) const;

    Pieces m_p;
    Eigen::MatrixXd m_qt, m_kt;    // phi_q^T, phi_k^T (r by N): one token per column for the recurrences
    Eigen::VectorXd m_powers;      // decay: gamma^d, d = 0 .. N-1 (std::pow, as the definition reads)
    std::vector<Index> m_raster;   // non-causal grid decay: the raster index of each token's grid position
    Eigen::VectorXd m_row_scale;   // 1/z_t (row) or 1 (none)
    std::optional<Index> m_unnormalisable_row;
    double m_unnormalisable_sum = 0.0;
};

// Q, K  N by d, one token per row. Throws std::invalid_argument for mismatched shapes, non-finite inputs or
// what decay_problem() / gates_problem() name.
std::unique_ptr<AttentionOperator> make_decay_operator(const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                                       const Eigen::Ref<const Eigen::MatrixXd>& K,
                                                       const AttentionOptions& options);
std::unique_ptr<AttentionOperator> make_gated_operator(const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                                       const Eigen::Ref<const Eigen::MatrixXd>& K,
                                                       const AttentionOptions& options);

}  // namespace attnscope::attention
