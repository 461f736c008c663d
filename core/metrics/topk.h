#pragma once
// The k largest singular values of a matrix that is only available through products with blocks of
// vectors (an attention operator applied tile by tile), by block Golub-Kahan-Lanczos bidiagonalisation
// with full reorthogonalisation and thick restarts (the block form of Baglama & Reichel's augmented
// restarted Lanczos bidiagonalisation; docs/maths.md section 2.1 states the method, its stopping rule and
// what the residuals prove). One step applies A to a block of b vectors and A^T to the next: two passes
// over the tiles, each costing about the same for 1 vector or 64 (the scores and exponentials dominate).
//
// With U, V the orthonormal bases built so far (U  rows by m, V  cols by m), B = U^T A V (m by m) is known
// without extra products, A V = U B exactly, and A^T U = V B^T + V' R E^T, V' the next block. For the SVD
// B = Y diag(theta) X^T the Ritz triples (theta_i, U y_i, V x_i) then have the residual ||R y_i(last b)||
// at no cost: the stopping rule is that residual <= tol * theta_i for each of the k (or <= 64 eps theta_1,
// the rounding floor). The reported residual of each value is recomputed from two explicit products at
// the end, rho_i = sqrt((||A v_i - theta_i u_i||^2 + ||A^T u_i - theta_i v_i||^2) / 2), and proves:
//  - theta_i <= sigma_i(A) (Cauchy interlacing: theta are the singular values of U^T A V);
//  - some singular value of A lies in [theta_i - rho_i, theta_i + rho_i] (the vector (u_i, v_i)/sqrt 2 is
//    an approximate eigenvector of [0 A; A^T 0], whose eigenvalues are +-sigma_j);
//  - when no other singular value lies within delta_i of theta_i, the error is <= rho_i^2 / delta_i.
// A block of b >= the multiplicity of a repeated singular value finds all its copies (a random start has a
// component along each of them); single-vector Lanczos finds one.
// Memory: 2 (rows + cols) by max_basis doubles, O(N (k + 4 b)).
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
    virtual Eigen::MatrixXd dense() const = 0;
};

// An attention operator as a BlockOperator (softmax: kernels::softmax_apply, one pass over the scores per
// block).
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
    Eigen::MatrixXd dense() const override { return m_op.dense(); }

private:
    const attention::AttentionOperator& m_op;
};

struct TopKOptions {
    double tol = 1e-12;                // stopping rule: residual_i <= tol * value_i for each of the k
    Eigen::Index block = 0;            // vectors per block; 0: min(max(k, 16), 64)
    Eigen::Index max_basis = 0;        // columns of U and V; 0: k + 4 block (clamped to min(rows, cols))
    Eigen::Index max_passes = 0;       // products of A or A^T with a block before giving up; 0: 600
    std::uint64_t seed = 0;            // the random start block (util/rng.h)
};

struct TopSingularValues {
    std::vector<double> values;      // descending, k of them (all of them when k >= min(rows, cols): dense)
    std::vector<double> residuals;   // rho_i per value (header): a singular value lies within rho_i of it
    bool converged = true;           // the stopping rule held for all k (else: the pass limit came first)
    bool dense = false;              // small problem: values of the dense SVD, residuals eps * s_1 (LAPACK's bound)
    Eigen::Index products = 0;       // columns A or A^T was applied to, in total
    Eigen::Index passes = 0;         // block products (each one pass over A's tiles)
    Eigen::Index block = 0;          // vectors per block
    Eigen::Index basis = 0;          // largest basis size used (columns of U and of V)
    Eigen::Index restarts = 0;       // thick restarts
    double tol = 0;                  // the stopping tolerance used
};

// Throws std::invalid_argument for k < 1, tol not in (0, 1), block < 0, max_basis < 0 or max_passes < 0.
TopSingularValues top_singular_values(const BlockOperator& op, Eigen::Index k, const TopKOptions& options = {});
TopSingularValues top_singular_values(const attention::AttentionOperator& op, Eigen::Index k,
                                      const TopKOptions& options = {});

}  // namespace attnscope::metrics
