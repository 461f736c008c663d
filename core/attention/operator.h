#pragma once
// Attention operators shaped like Spectra's matrix operations (rows(), cols(), perform_op()).
//
// Each operator can
//  - materialise its N x N matrix A densely (exactly as docs/maths.md section 1 defines it),
//  - apply A or A^T to a block of vectors without forming N x N (softmax: tile by tile, O(N d) memory, one
//    pass over the scores per block, docs/maths.md section 2.1;
//    linear / MHLA: through the kernel factors, O(N r) per column, causal by prefix sums),
//  - expose its low-rank factors when it has them (non-causal linear and MHLA, section 3).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attention/blocks.h"
#include "attention/options.h"

namespace attnscope::attention {

// A[t,j] = row_scale[t] * mixing(block[t], block[j]) * phi_q.row(t) . phi_k.row(j)   (all j, non-causal)
// which is docs/maths.md 3's  diag(1/z) * blockdiag(Phi_Q) * (Mc kron I_r) * blockdiag(Phi_K)^T.
// Linear attention is the case M = 1, mixing = [[1]].
// The same pieces describe a causal operator (kernel_pieces()) when `causal` is true: then only the keys
// allowed to t enter, A[t,j] = 0 unless block[j] < block[t], or block[j] == block[t] and j <= t.
struct KernelFactors {
    Eigen::VectorXd row_scale;        // N: 1/z_t (row), 1/den(t) (official) or 1 (none)
    Eigen::MatrixXd phi_q;            // N by r
    Eigen::MatrixXd phi_k;            // N by r
    Eigen::MatrixXd mixing;           // M by M
    std::vector<Index> block;         // N block indices
    bool causal = false;              // (kernel_pieces() of a causal operator) the mask above applies
    bool row_normalised = false;      // normalize=row: each row of A is its raw row divided by the row's sum
    // normalize=row with a row whose sum is 0 or not finite (identity features cancelling, a mixing row of
    // zeros, overflow): the first such row and its sum. The matrix is then not defined (row_scale holds
    // inf or NaN there); measurements report the mechanism null with this reason.
    std::optional<Index> unnormalisable_row;
    double unnormalisable_sum = 0;
    // Tokens sorted by (block, token): block b holds order[offsets[b]] .. order[offsets[b+1] - 1]. In these
    // "sorted coordinates" the causal rule is a lower triangle (operator.cpp, SortedKernel).
    std::vector<Index> order;         // N
    std::vector<Index> offsets;       // M + 1
};

// Softmax's pieces: A = rowsoftmax(scale * Q K^T) (causal: keys j <= t), docs/maths.md 1.1.
struct SoftmaxPieces {
    Eigen::MatrixXd q, k;             // N by d
    double scale = 1.0;
    bool causal = false;
};

// The attention matrix A (N x N) of one mechanism, as Spectra models a matrix: rows(), cols(),
// perform_op(), products with blocks of vectors, rows on demand, and the pieces it is made of (so that
// metrics can exploit its structure). It never measures anything itself (core/metrics does).
class AttentionOperator {
public:
    virtual ~AttentionOperator() = default;

    Index rows() const { return m_n; }
    Index cols() const { return m_n; }
    virtual Mechanism mechanism() const = 0;
    virtual bool causal() const = 0;

    // The N x N matrix (dense_rows of every row).
    Eigen::MatrixXd dense() const;
    // Rows [t0, t0 + count) of the N x N matrix into `out` (count by N), equal to dense().middleRows(...):
    // the tile-by-tile path of streaming metrics, O(count N) memory.
    virtual void dense_rows(Index t0, Index count, Eigen::Ref<Eigen::MatrixXd> out) const = 0;
    // Y = A X and Y = A^T X for X  N by k  (Y  N by k, preallocated).
    virtual void apply(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const = 0;
    virtual void apply_transpose(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const = 0;
    // Y = A^T (A X): the product of block Lanczos on A^T A (metrics/topk.h). The default applies A, then
    // A^T; softmax forms each tile of A once for both (kernels::softmax_gram).
    virtual void apply_gram(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const;
    // Spectra's interface: y_out = A x_in.
    void perform_op(const double* x_in, double* y_out) const;

    // Low-rank factors (non-causal linear and MHLA), else nullptr.
    virtual const KernelFactors* factors() const { return nullptr; }
    // The kernel pieces of every linear / MHLA operator, causal or not (`causal` set for the masked ones);
    // nullptr for softmax. For non-causal operators this is the same object as factors().
    virtual const KernelFactors* kernel_pieces() const { return nullptr; }
    // Softmax's queries, keys, scale and mask; nullptr for linear and MHLA.
    virtual const SoftmaxPieces* softmax_pieces() const { return nullptr; }

    // n_t: number of keys allowed to query t (N, or t+1 when causal; MHLA causal per its block rule).
    virtual std::vector<Index> allowed_keys() const = 0;

    // True when entries can be negative (identity feature map); entropy is then not defined.
    virtual bool may_be_negative() const { return false; }

    // normalize=row with a row whose raw sum is 0 or not finite: the first such row and its sum. The matrix is
    // then not defined; measurements report the mechanism null (KernelFactors::unnormalisable_row).
    virtual std::optional<Index> unnormalisable_row() const
    {
        const KernelFactors* f = kernel_pieces();
        return f ? f->unnormalisable_row : std::nullopt;
    }
    virtual double unnormalisable_sum() const
    {
        const KernelFactors* f = kernel_pieces();
        return f ? f->unnormalisable_sum : 0.0;
    }

protected:
    explicit AttentionOperator(Index n) : m_n(n) {}
    Index m_n;
};

// Why MHLA cannot be computed on N tokens with `options` (its blocks, its mixing preset or a loaded mixing
// matrix, its normalisation), in the words make_operator() throws; empty when it can. Needs no data.
std::string mhla_options_problem(const AttentionOptions& options, Index n);

// Why MHLA with `options` on N tokens is linear attention by construction, the same matrix and not a
// measured similarity (docs/maths.md 1.6: uniform mixing, the `causal` preset with row normalisation, one
// block ...), in words for reports; empty when it is not (or the options are impossible).
std::string mhla_same_as_linear(const AttentionOptions& options, Index n);

// The operator of `mechanism` (its factory in attention/mechanisms.h) on Q, K  N by d, one token per row.
// Throws std::invalid_argument for mismatched shapes or impossible options (official normalisation with causal
// or unequal blocks, bad blocks, bad mixing matrix, a causal-only mechanism without the mask ...).
std::unique_ptr<AttentionOperator> make_operator(Mechanism mechanism, const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                                 const Eigen::Ref<const Eigen::MatrixXd>& K,
                                                 const AttentionOptions& options);

// Q and K of one shape, at least one token and one feature, finite; std::invalid_argument naming what is not.
void check_queries_and_keys(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K);

// The two operator kinds the factories of attention/mechanisms.cpp build on.
// Softmax (docs/maths.md 1.1): rowsoftmax(scale Q K^T), tile by tile.
std::unique_ptr<AttentionOperator> make_softmax_operator(const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                                         const Eigen::Ref<const Eigen::MatrixXd>& K, double scale,
                                                         bool causal);
// A kernel operator (KernelFactors above) of feature rows phi_q, phi_k (N by r) on `layout`'s blocks mixed by
// `mixing` (M x M), normalised as options.normalize says, causal as options.causal says; `may_be_negative`:
// its entries can be negative (feature maps that are not positive).
std::unique_ptr<AttentionOperator> make_kernel_operator(Mechanism mechanism, Eigen::MatrixXd phi_q, Eigen::MatrixXd phi_k,
                                                        const BlockLayout& layout, Eigen::MatrixXd mixing,
                                                        const AttentionOptions& options, bool may_be_negative);

// A formed N x N matrix as an operator (a product of layers' attention matrices, analysis/depth.h): rows, products
// and the allowed keys it is given; no pieces, so every measure takes it as it is.
class MatrixOperator final : public AttentionOperator {
public:
    MatrixOperator(Eigen::MatrixXd A, Mechanism mechanism, bool causal, std::vector<Index> allowed, bool may_be_negative)
        : AttentionOperator(A.rows()), m_a(std::move(A)), m_mechanism(mechanism), m_causal(causal),
          m_allowed(std::move(allowed)), m_negative(may_be_negative)
    {
    }
    Mechanism mechanism() const override { return m_mechanism; }
    bool causal() const override { return m_causal; }
    void dense_rows(Index t0, Index count, Eigen::Ref<Eigen::MatrixXd> out) const override { out = m_a.middleRows(t0, count); }
    void apply(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override { Y.noalias() = m_a * X; }
    void apply_transpose(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override
    {
        Y.noalias() = m_a.transpose() * X;
    }
    std::vector<Index> allowed_keys() const override { return m_allowed; }
    bool may_be_negative() const override { return m_negative; }
    const Eigen::MatrixXd& matrix() const { return m_a; }

private:
    Eigen::MatrixXd m_a;
    Mechanism m_mechanism;
    bool m_causal;
    std::vector<Index> m_allowed;
    bool m_negative;
};

}  // namespace attnscope::attention
