#pragma once
// The k largest singular values of a matrix that is only available through products with blocks of
// vectors (an attention operator applied tile by tile), by block Lanczos on A^T A with full
// reorthogonalisation and thick restarts, and a final Rayleigh-Ritz step on A itself (docs/maths.md
// section 2.1 states the method, its stopping rule and what the residuals prove). One step applies
// A^T A to a block of b vectors: for softmax one pass over the tiles (each tile formed once for A and A^T),
// costing about the same for 1 vector or 64 (the scores and exponentials dominate).
//
// With V (cols by m) the orthonormal basis so far, A^T A V = V T + V' R E^T (V' the next block), so the
// Ritz pairs (lambda_i, V s_i) of T = V^T A^T A V have residuals ||R s_i(last b)|| at no cost: the stopping
// rule is that residual <= tol * lambda_i for each of the k (with u = A v / ||A v||, sigma = sqrt(lambda):
// ||A^T u - sigma v|| = residual / sigma <= tol sigma), or <= 64 eps lambda_1 (rounding). At the stop, A V_k (V_k the k leading Ritz
// vectors) has the SVD P diag(sigma) Z^T; the values reported are these sigma_i, with u_i = P e_i,
// v_i = V_k Z e_i, and their residual bound comes from one more product with A^T,
// rho_i = sqrt((||A v_i - sigma_i u_i||^2 + ||A^T u_i - sigma_i v_i||^2) / 2). It proves:
//  - sigma_i <= s_i(A) (Cauchy interlacing: sigma are the singular values of A V_k);
//  - some singular value of A lies in [sigma_i - rho_i, sigma_i + rho_i] (the vector (u_i, v_i)/sqrt 2 is
//    an approximate eigenvector of [0 A; A^T 0], whose eigenvalues are +-s_j);
//  - when no other singular value lies within delta_i of sigma_i, the error is <= rho_i^2 / delta_i.
// A block of b >= the multiplicity of a repeated singular value finds all its copies (a random start has a
// component along each of them); single-vector Lanczos finds one.
// Memory: (cols by max_basis) + a few (rows or cols) by (block or k) doubles, O(N (k + 12 b)).
#include <cstdint>
#include <vector>

#include <Eigen/Core>

#include "attention/operator.h"

namespace attnscope::metrics {

// What the block method needs of a matrix (rows by cols): products with blocks of vectors, and the dense
// matrix for small problems.
class BlockOperator {
public:
    virtual ~BlockOperator() = default;
    virtual Eigen::Index rows() const = 0;
    virtual Eigen::Index cols() const = 0;
    // Y = A X (X  cols by b, Y  rows by b) and Y = A^T X (X  rows by b, Y  cols by b), Y preallocated.
    virtual void apply(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const = 0;
    virtual void apply_transpose(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const = 0;
    // Y = A^T (A X) (X, Y  cols by b). The default applies A, then A^T.
    virtual void apply_gram(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const;
    virtual Eigen::MatrixXd dense() const = 0;
};

// An attention operator as a BlockOperator (softmax: kernels::softmax_apply and softmax_gram, one pass over
// the scores per block).
class AttentionBlockOperator final : public BlockOperator {
public:
    explicit AttentionBlockOperator(const attention::AttentionOperator& op) : m_op(op) {}
    Eigen::Index rows() const override { return m_op.rows(); }
    Eigen::Index cols() const override { return m_op.cols(); }
    void apply(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override { m_op.apply(X, Y); }
    void apply_transpose(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override
    {
        m_op.apply_transpose(X, Y);
    }
    void apply_gram(const Eigen::Ref<const Eigen::MatrixXd>& X, Eigen::Ref<Eigen::MatrixXd> Y) const override
    {
        m_op.apply_gram(X, Y);
    }
    Eigen::MatrixXd dense() const override { return m_op.dense(); }

private:
    const attention::AttentionOperator& m_op;
};

struct TopKOptions {
    double tol = 1e-10;                // stopping rule: ||A^T u_i - s_i v_i|| <= tol * s_i for each of the k
    Eigen::Index block = 0;            // vectors per block; 0: min(max(k, 16), 64)
    Eigen::Index max_basis = 0;        // columns of V; 0: k + 12 block (clamped to cols)
    Eigen::Index max_passes = 0;       // block products before giving up; 0: 400
    std::uint64_t seed = 0;            // the random start block (util/rng.h)
};

struct TopSingularValues {
    std::vector<double> values;      // descending, k of them (all of them when k >= min(rows, cols): dense)
    std::vector<double> residuals;   // rho_i per value (header): a singular value lies within rho_i of it
    bool converged = true;           // the stopping rule held for all k (else: the pass limit came first)
    bool dense = false;              // small problem: values of the dense SVD, residuals eps * s_1 (LAPACK's bound)
    Eigen::Index products = 0;       // columns A or A^T was applied to, in total
    Eigen::Index passes = 0;         // block products with A^T A, A or A^T (each one pass over A's tiles)
    Eigen::Index block = 0;          // vectors per block
    Eigen::Index basis = 0;          // largest basis size used (columns of V)
    Eigen::Index restarts = 0;       // thick restarts
    double tol = 0;                  // the stopping tolerance used
};

// True when top_singular_values takes the dense SVD instead (min(rows, cols) <= 256, or 2k + 1 > it).
bool top_k_uses_dense(Eigen::Index rows, Eigen::Index cols, Eigen::Index k);

// Vectors per block when TopKOptions::block is 0: min(max(k, 16), 64).
Eigen::Index top_k_default_block(Eigen::Index k);

// Throws std::invalid_argument for k < 1, tol not in (0, 1), block < 0, max_basis < 0 or max_passes < 0.
TopSingularValues top_singular_values(const BlockOperator& op, Eigen::Index k, const TopKOptions& options = {});
TopSingularValues top_singular_values(const attention::AttentionOperator& op, Eigen::Index k,
                                      const TopKOptions& options = {});

}  // namespace attnscope::metrics
