#pragma once
// Attention operators shaped like Spectra's matrix operations (rows(), cols(), perform_op()).
//
// Each operator can
//  - materialise its N x N matrix A densely (exactly as attention.md section 1 defines it),
//  - apply A or A^T to a block of vectors without forming N x N (softmax: tile by tile, O(N d) memory;
//    linear / MHLA: through the kernel factors, O(N r) per column, causal by prefix sums),
//  - expose its low-rank factors when it has them (non-causal linear and MHLA, section 3).
#include <memory>
#include <vector>

#include <Eigen/Core>

#include "attention/blocks.h"
#include "attention/options.h"

namespace attnscope::attention {

// A[t,j] = row_scale[t] * mixing(block[t], block[j]) * phi_q.row(t) . phi_k.row(j)   (all j, non-causal)
// which is attention.md 3's  diag(1/z) * blockdiag(Phi_Q) * (Mc kron I_r) * blockdiag(Phi_K)^T.
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
};

class AttentionOperator {
public:
    virtual ~AttentionOperator() = default;

    Index rows() const { return m_n; }
    Index cols() const { return m_n; }
    virtual Mechanism mechanism() const = 0;

    // The N x N matrix.
    virtual Eigen::MatrixXd dense() const = 0;
    // Rows [t0, t0 + count) of the N x N matrix into `out` (count by N), equal to dense().middleRows(...):
    // the tile-by-tile path of streaming metrics, O(count N) memory.
    virtual void dense_rows(Index t0, Index count, Eigen::Ref<Eigen::MatrixXd> out) const = 0;
    // Y = A X and Y = A^T X for X  N by k  (Y  N by k, preallocated).
    virtual void apply(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const = 0;
    virtual void apply_transpose(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const = 0;
    // Y = A^T (A X): the product of matrix-free solvers on A^T A. The default applies A, then A^T; softmax
    // computes each tile of A once for both.
    virtual void apply_gram(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const;
    // Spectra's interface: y_out = A x_in.
    void perform_op(const double* x_in, double* y_out) const;

    // Low-rank factors (non-causal linear and MHLA), else nullptr.
    virtual const KernelFactors* factors() const { return nullptr; }
    // The kernel pieces of every linear / MHLA operator, causal or not (`causal` set for the masked ones);
    // nullptr for softmax. For non-causal operators this is the same object as factors().
    virtual const KernelFactors* kernel_pieces() const { return nullptr; }

    // n_t: number of keys allowed to query t (N, or t+1 when causal; MHLA causal per its block rule).
    virtual std::vector<Index> allowed_keys() const = 0;

    // Row entropies H_t = -sum_j A[t,j] ln A[t,j] (0 ln 0 = 0) of every row into h (resized to N), streamed
    // in tiles without forming N x N: O(N d) memory. Returns 0, or 1 when an entry is negative (entropy
    // undefined), 2 when one is not finite (h is then unspecified). The default goes through dense_rows();
    // softmax and kernel operators compute it from their factors (core/kernels).
    virtual int row_entropies(std::vector<double>& h) const { return row_entropies_by_rows(h, 0); }
    // Kernel operators (linear, MHLA): for token t and key block b of this operator, P(t, b) = sum_j g_tj and
    // R(t, b) = sum_j g_tj ln g_tj over the keys j of block b allowed to t, with g_tj = phi_q(t) . phi_k(j) the
    // raw scores (no mixing, no normalisation): N x M each. Every row entropy of linear and MHLA attention
    // with these feature maps follows from them (a non-causal linear row: ln z - (1/z) sum_b R with
    // z = sum_b P). Returns 0, 1 when a score is negative, 2 when one is not finite; -1 for softmax.
    virtual int kernel_block_sums(Eigen::MatrixXd& P, Eigen::MatrixXd& R) const
    {
        (void)P;
        (void)R;
        return -1;
    }
    // Row entropies (as row_entropies()) from kernel_block_sums() P, R over this operator's blocks; an
    // operator with one block (linear) also takes the row sums of another operator's sums over the same
    // tokens and feature map (non-causal). Returns -1 for softmax.
    virtual int row_entropies_from_block_sums(const Eigen::MatrixXd& P, const Eigen::MatrixXd& R, std::vector<double>& h) const
    {
        (void)P;
        (void)R;
        (void)h;
        return -1;
    }
    // The same through dense_rows(), `tile_rows` rows at a time (0: tiles of about 8 MiB).
    int row_entropies_by_rows(std::vector<double>& h, Index tile_rows) const;

    // True when entries can be negative (identity feature map); entropy is then not defined.
    virtual bool may_be_negative() const { return false; }

protected:
    explicit AttentionOperator(Index n) : m_n(n) {}
    Index m_n;
};

// Q, K  N by d, one token per row. Throws std::invalid_argument for mismatched shapes or impossible
// options (official normalisation with causal or unequal blocks, bad blocks, bad mixing matrix).
std::unique_ptr<AttentionOperator> make_operator(Mechanism mechanism, const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                                 const Eigen::Ref<const Eigen::MatrixXd>& K,
                                                 const AttentionOptions& options);

}  // namespace attnscope::attention
