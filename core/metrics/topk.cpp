#include "metrics/topk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include <Eigen/QR>
#include <Eigen/SVD>

#include <lapacke.h>

#include "kernels/kernels.h"
#include "metrics/metrics.h"
#include "metrics/random_block.h"
#include "util/rng.h"

namespace attnscope::metrics {

namespace {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

constexpr Index k_dense_below = 256;    // min(rows, cols) up to which the dense SVD is cheaper
constexpr Index k_default_passes = 400;
constexpr double k_floor_eps = 64.0;    // the rounding floor of a residual, in units of eps * theta_1

// C = alpha op(A) B + beta C on the kernels' threads (kernels::gemm): the tall products of the basis, which
// Eigen would hand to OpenBLAS, serial inside SerialBlas.
void product(bool transpose_a, const Eigen::Ref<const MatrixXd>& A, const Eigen::Ref<const MatrixXd>& B, Eigen::Ref<MatrixXd> C,
             double alpha = 1.0, double beta = 0.0)
{
    const Index m = transpose_a ? A.cols() : A.rows(), inner = transpose_a ? A.rows() : A.cols();
    if (C.rows() != m || C.cols() != B.cols() || B.rows() != inner)
        throw std::logic_error("top-k: product shapes disagree");
    if (inner == 0) {
        if (beta == 0.0)
            C.setZero();
        else
            C *= beta;
        return;
    }
    kernels::gemm(transpose_a ? 'T' : 'N', 'N', m, C.cols(), inner, alpha, A.data(), A.outerStride(), B.data(),
                  B.outerStride(), beta, C.data(), C.outerStride());
}

// Householder QR of W (n by b): W = Q R, Q with orthonormal columns, R upper triangular.
void householder(MatrixXd& W, MatrixXd& R)
{
    const Eigen::HouseholderQR<MatrixXd> qr(W);
    const Index b = W.cols();
    R = qr.matrixQR().topRows(b).triangularView<Eigen::Upper>();
    MatrixXd thin = MatrixXd::Identity(W.rows(), b);
    thin.applyOnTheLeft(qr.householderQ());
    W = std::move(thin);
}

// W (n by b) on entry; on return W has orthonormal columns orthogonal to those of Q (n by m) and
// W_in = Q C + W R (C  m by b, R  b by b): block classical Gram-Schmidt, twice, then Householder QR, repeated
// while the new columns are not orthogonal to Q (when W_in is rank deficient, Householder fills the missing
// directions with vectors unrelated to Q, whose rows of R are ~0; composing keeps W_in = Q C + W R).
// Should that not settle, fresh Gaussian directions take the block's place with R = 0: W_in lay in range(Q)
// to rounding, and any orthonormal extension keeps every relation the solver relies on.
void orthonormalise(const Eigen::Ref<const MatrixXd>& Q, MatrixXd& W, MatrixXd& C, MatrixXd& R, SplitMix64& rng)
{
    const Index m = Q.cols(), b = W.cols();
    C.setZero(m, b);
    R.setIdentity(b, b);
    MatrixXd Ci, Ri;
    for (int attempt = 0; attempt < 4; ++attempt) {
        // W_cur = W_in-part: invariant W_in = Q C + W R.
        for (int pass = 0; pass < 2 && m > 0; ++pass) {
            Ci.resize(m, b);
            product(true, Q, W, Ci);
            product(false, Q, Ci, W, -1.0, 1.0);
            C.noalias() += Ci * R;
        }
        householder(W, Ri);
        R = (Ri * R).eval();
        if (m == 0)
            return;
        product(true, Q, W, Ci);
        if (Ci.norm() <= 1e-10)   // orthogonal to Q to rounding: done (the last projection is folded in below)
        {
            product(false, Q, Ci, W, -1.0, 1.0);
            C.noalias() += Ci * R;
            return;
        }
    }
    W = gaussian_block(rng, W.rows(), b);
    for (int pass = 0; pass < 2; ++pass) {
        Ci.resize(m, b);
        product(true, Q, W, Ci);
        product(false, Q, Ci, W, -1.0, 1.0);
    }
    householder(W, Ri);
    R.setZero(b, b);
}

TopSingularValues dense_values(const BlockOperator& op, Index k)
{
    TopSingularValues out;
    std::vector<double> s = singular_values(op.dense());
    s.resize(static_cast<std::size_t>(std::min<Index>(k, static_cast<Index>(s.size()))));
    out.values = std::move(s);
    // LAPACK's error bound for computed singular values (Users' Guide, "Error Bounds for the Singular Value
    // Decomposition"): eps * s_1.
    const double bound = std::numeric_limits<double>::epsilon() * (out.values.empty() ? 0.0 : out.values.front());
    out.residuals.assign(out.values.size(), bound);
    out.dense = true;
    return out;
}

void check_options(Index k, const TopKOptions& o)
{
    if (k < 1)
        throw std::invalid_argument("top-k singular values: k must be at least 1 (got " + std::to_string(k) + ")");
    if (!(o.tol > 0.0 && o.tol < 1.0))
        throw std::invalid_argument("top-k singular values: tol must be in (0, 1) (got " + std::to_string(o.tol) + ")");
    if (o.block < 0 || o.max_basis < 0 || o.max_passes < 0)
        throw std::invalid_argument("top-k singular values: block, max_basis and max_passes must be >= 0");
}

struct BasisSizes {
    Index block = 0;        // b: vectors per block
    Index cap = 0;          // the most basis vectors held
    Index keep = 0;         // Ritz vectors kept at a restart
    Index max_passes = 0;   // operator applications before giving up
};

// The options' sizes, defaulted and clamped for k values of an operator with min(rows, cols) = r.
BasisSizes basis_sizes(Index k, Index r, const TopKOptions& o)
{
    BasisSizes z;
    Index b = o.block > 0 ? o.block : top_k_default_block(k);
    Index cap = o.max_basis > 0 ? o.max_basis : k + 12 * b;
    cap = std::min(cap, r);
    b = std::max<Index>(1, std::min(b, (cap - k) / 2));   // room for k kept vectors and two blocks
    if (cap < k + 2 * b)
        throw std::invalid_argument("top-k singular values: max_basis " + std::to_string(cap) + " leaves no room for k=" +
                                    std::to_string(k) + " and two blocks");
    z.block = b;
    z.cap = cap;
    z.keep = std::min(k + b, cap - b);
    z.max_passes = o.max_passes > 0 ? o.max_passes : k_default_passes;
    return z;
}

struct RitzPairs {
    VectorXd lambda;   // Ritz values of A^T A, descending
    MatrixXd S;        // their vectors in the basis, column i for lambda(i)
};

// Ritz pairs of T (m by m): LAPACK's divide and conquer, dsyevd (~10x Eigen's QR iteration at m = 832),
// returns them ascending, so they are reversed. Nothing when they are not finite (nor were the products).
std::optional<RitzPairs> ritz_pairs(const MatrixXd& T, Index m)
{
    MatrixXd Tm = (T.topLeftCorner(m, m) + T.topLeftCorner(m, m).transpose()) / 2.0;
    VectorXd ascending(m);
    const bool finite = Tm.allFinite();
    if (!finite || LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', static_cast<lapack_int>(m), Tm.data(),
                                  static_cast<lapack_int>(m), ascending.data()) != 0 ||
        !ascending.allFinite())
        return std::nullopt;
    return RitzPairs{ascending.reverse(), Tm.rowwise().reverse()};
}

// Rayleigh-Ritz on A from the basis V's first m columns and the leading k Ritz vectors S:
// A V_k = P diag(sigma) Z^T, u = P, v = V_k Z; then A^T u for the residuals.
void rayleigh_ritz_on_a(const BlockOperator& op, const MatrixXd& V, Index m, const MatrixXd& S, Index k,
                        TopSingularValues& out)
{
    const Index rows = op.rows(), cols = op.cols();
    MatrixXd Vk(cols, k);
    product(false, V.leftCols(m), S.leftCols(k), Vk);
    MatrixXd AV(rows, k);
    op.apply(Vk, AV);
    ++out.passes;
    out.products += k;
    const Eigen::JacobiSVD<MatrixXd> small(AV, Eigen::ComputeThinU | Eigen::ComputeThinV);
    const MatrixXd Uk = small.matrixU();
    const MatrixXd Vr = Vk * small.matrixV();
    const VectorXd sigma = small.singularValues();
    MatrixXd AtU(cols, k);
    op.apply_transpose(Uk, AtU);
    ++out.passes;
    out.products += k;
    const MatrixXd AVr = AV * small.matrixV();
    for (Index i = 0; i < k; ++i) {
        const double left = (AVr.col(i) - sigma(i) * Uk.col(i)).squaredNorm();
        const double right = (AtU.col(i) - sigma(i) * Vr.col(i)).squaredNorm();
        out.values.push_back(sigma(i));
        out.residuals.push_back(std::sqrt((left + right) / 2.0));
    }
}

}  // namespace

bool top_k_uses_dense(Index rows, Index cols, Index k)
{
    const Index r = std::min(rows, cols);
    return r <= k_dense_below || 2 * k + 1 > r;
}

Index top_k_default_block(Index k) { return std::min<Index>(std::max<Index>(k, 16), 64); }

void BlockOperator::apply_gram(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const
{
    MatrixXd AX(rows(), X.cols());
    apply(X, AX);
    apply_transpose(AX, Y);
}

TopSingularValues top_singular_values(const BlockOperator& op, Index k, const TopKOptions& o)
{
    const kernels::SerialBlas serial;   // the block products bring their own threads (kernels.h)
    check_options(k, o);
    const Index rows = op.rows(), cols = op.cols();
    if (top_k_uses_dense(rows, cols, k))
        return dense_values(op, k);

    TopSingularValues out;
    out.tol = o.tol;
    const BasisSizes z = basis_sizes(k, std::min(rows, cols), o);
    const Index b = z.block, cap = z.cap;
    out.block = b;

    SplitMix64 rng(o.seed);
    MatrixXd V(cols, cap), T = MatrixXd::Zero(cap, cap);
    MatrixXd Vnext = gaussian_block(rng, cols, b), W(cols, b), C, R;
    orthonormalise(V.leftCols(0), Vnext, C, R, rng);
    Index m = 0, steps = 0;

    for (;;) {
        // One block step: A^T A Vnext = V C + Vnew R (C's last block is the diagonal block of T).
        V.middleCols(m, b) = Vnext;
        op.apply_gram(Vnext, W);
        ++out.passes;
        out.products += b;
        orthonormalise(V.leftCols(m + b), W, C, R, rng);
        T.block(0, m, m + b, b) = C;
        T.block(m, 0, b, m + b) = C.transpose();
        m += b;
        Vnext = W;
        out.basis = std::max(out.basis, m);
        // The Ritz step costs O(m^3) (~0.1 s at m = 832): taken every other step, and always before a restart,
        // which needs the vectors anyway. At most one step more than checking every time.
        ++steps;
        if (steps % 2 != 0 && m + b <= cap && out.passes + 4 <= z.max_passes)
            continue;

        // Ritz pairs of T (the wanted ones are the leading) and their residuals.
        const std::optional<RitzPairs> ritz = ritz_pairs(T, m);
        if (!ritz) {
            out.converged = false;
            out.values.assign(static_cast<std::size_t>(k), std::numeric_limits<double>::quiet_NaN());
            out.residuals = out.values;
            return out;
        }
        const VectorXd& lambda = ritz->lambda;
        const MatrixXd& S = ritz->S;
        const double floor = k_floor_eps * std::numeric_limits<double>::epsilon() * std::abs(lambda(0));
        bool done = true;
        for (Index i = 0; i < k && done; ++i)
            done = (R * S.block(m - b, i, b, 1)).norm() <= std::max(o.tol * lambda(i), floor);
        if (done || out.passes + 3 > z.max_passes) {
            out.converged = done;
            rayleigh_ritz_on_a(op, V, m, S, k, out);
            return out;
        }
        if (m + b > cap) {   // thick restart: keep the leading Ritz vectors; A^T A V' = V' diag(lambda) + Vnext (...)
            MatrixXd kept(cols, z.keep);
            product(false, V.leftCols(m), S.leftCols(z.keep), kept);
            V.leftCols(z.keep) = kept;
            T.setZero();
            T.topLeftCorner(z.keep, z.keep) = lambda.head(z.keep).asDiagonal();
            m = z.keep;
            ++out.restarts;
        }
    }
}

TopSingularValues top_singular_values(const attention::AttentionOperator& op, Index k, const TopKOptions& options)
{
    return top_singular_values(AttentionBlockOperator(op), k, options);
}

}  // namespace attnscope::metrics
