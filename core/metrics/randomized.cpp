#include "metrics/randomized.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <Eigen/QR>

#include "metrics/random_block.h"
#include "util/rng.h"

namespace attnscope::metrics {

namespace {

using Eigen::MatrixXd;

constexpr double k_total_failure = 1e-10;   // probability that the reported residual bound is wrong
constexpr int k_s1_max_steps = 4;           // subspace-iteration steps for the first s1 estimate (step 1)
constexpr double k_s1_rtol = 1e-3;          // ... stopping when sigma_1 changes by at most this, relatively

// Y <- (I - Q Q^T) Y by classical Gram-Schmidt, `passes` times ("twice is enough").
void project_out(const Eigen::Ref<const MatrixXd>& Q, Eigen::Ref<MatrixXd> Y, int passes = 2)
{
    if (Q.cols() == 0)
        return;
    for (int p = 0; p < passes; ++p) {
        const MatrixXd C = Q.transpose() * Y;
        Y.noalias() -= Q * C;
    }
}

// Y <- the thin Q factor of Y's Householder QR: orthonormal columns whatever Y's rank.
void thin_q(MatrixXd& Y)
{
    const Eigen::HouseholderQR<MatrixXd> qr(Y);
    MatrixXd thin = MatrixXd::Identity(Y.rows(), Y.cols());
    thin.applyOnTheLeft(qr.householderQ());
    Y = std::move(thin);
}

// Orthonormal columns spanning (I - Q Q^T) range(Y) (when Y has full rank there), orthogonal to Q:
// CGS2 against Q, Householder QR, and the same once more on the (now unit) columns. Should rounding leave
// a column essentially inside range(Q) (samples numerically in range(Q)), fresh Gaussian directions take
// the block's place: any orthonormal extension keeps every guarantee.
MatrixXd extend_basis(const Eigen::Ref<const MatrixXd>& Q, MatrixXd Y, SplitMix64& rng)
{
    for (int attempt = 0;; ++attempt) {
        project_out(Q, Y);
        thin_q(Y);
        if (Q.cols() == 0)
            return Y;
        const MatrixXd C = Q.transpose() * Y;
        if (C.norm() <= 0.5 || attempt == 3) {   // sigma_min((I - Q Q^T) Y) >= sqrt(3)/2: well conditioned
            Y.noalias() -= Q * C;
            thin_q(Y);
            return Y;
        }
        Y = gaussian_block(rng, Y.rows(), Y.cols());
    }
}

double max_column_norm(const Eigen::Ref<const MatrixXd>& Z)
{
    double m = 0;
    for (Index j = 0; j < Z.cols(); ++j)
        m = std::max(m, Z.col(j).norm());
    return m;
}

}  // namespace

RandomizedRank randomized_rank(const attention::AttentionOperator& op, double rtol, std::uint64_t seed,
                               Index max_rank, Index block, int power_iterations)
{
    if (!(rtol > 0.0 && rtol < 1.0))
        throw std::invalid_argument("randomized rank: rtol must be in (0, 1) (got " + std::to_string(rtol) + ")");
    if (block < 1)
        throw std::invalid_argument("randomized rank: block must be at least 1 (got " + std::to_string(block) + ")");
    if (max_rank < 0)
        throw std::invalid_argument("randomized rank: max_rank must be >= 0 (got " + std::to_string(max_rank) + ")");
    if (power_iterations < 0)
        throw std::invalid_argument("randomized rank: power_iterations must be >= 0 (got " +
                                    std::to_string(power_iterations) + ")");

    const Index n = op.rows();
    RandomizedRank out;
    if (n == 0) {
        out.converged = true;
        return out;
    }
    max_rank = max_rank == 0 ? std::min<Index>(n, 2048) : std::min(max_rank, n);
    SplitMix64 rng(seed);

    // Step 1: s1 by block subspace iteration; its basis is Q's first block.
    const Index b0 = std::min(block, max_rank);
    MatrixXd Y(n, b0), W(n, b0);
    op.apply(gaussian_block(rng, n, b0), Y);
    out.products += b0;
    MatrixXd V;
    double s1 = 0;
    for (int step = 0; step < k_s1_max_steps; ++step) {
        V = extend_basis(MatrixXd(n, 0), Y, rng);
        op.apply_transpose(V, W);
        out.products += b0;
        const double prev = s1;
        s1 = singular_values(MatrixXd(W)).front();   // sigma_1(V^T A)
        if (s1 == 0.0 || (step > 0 && std::abs(s1 - prev) <= k_s1_rtol * s1) || step + 1 == k_s1_max_steps)
            break;
        op.apply(W, Y);   // A A^T V
        out.products += b0;
    }
    const double tol_test = rtol * s1;   // the stopping threshold; the reported tol can only be larger

    MatrixXd Q(n, std::min<Index>(max_rank, std::max<Index>(4 * b0, 256)));
    Index k = 0;
    auto append = [&](const MatrixXd& cols) {
        if (k + cols.cols() > Q.cols())
            Q.conservativeResize(Eigen::NoChange, std::min<Index>(max_rank, std::max(2 * Q.cols(), k + cols.cols())));
        Q.middleCols(k, cols.cols()) = cols;
        k += cols.cols();
    };
    append(V);

    // Step 2: adaptive range finder. alpha such that T_max alpha^-block = k_total_failure, where T_max bounds
    // the number of tests (one per block added, plus the last).
    const Index t_max = (max_rank - b0 + block - 1) / block + 1;
    const double alpha =
        std::max(1.0 + 1e-12, std::exp((std::log(static_cast<double>(t_max)) - std::log(k_total_failure)) /
                                       static_cast<double>(block)));
    const double factor = alpha * std::sqrt(2.0 / M_PI);
    double E = std::numeric_limits<double>::infinity();
    Index k_test = 0;
    bool deterministic = false;
    Y.resize(n, block);
    for (;;) {
        if (k == n) {   // Q spans R^N: (I - Q Q^T) A = 0
            E = 0.0;
            k_test = n;
            out.converged = true;
            deterministic = true;
            break;
        }
        op.apply(gaussian_block(rng, n, block), Y);
        out.products += block;
        project_out(Q.leftCols(k), Y);
        E = factor * max_column_norm(Y);
        k_test = k;
        ++out.tests;
        out.converged = E <= tol_test;
        const Index m = std::min(block, max_rank - k);
        if (out.converged || m == 0) {
            if (m > 0)
                append(extend_basis(Q.leftCols(k), Y.leftCols(m), rng));
            break;
        }
        MatrixXd Z = Y.leftCols(m);
        for (int p = 0; p < power_iterations; ++p) {
            // One step of subspace iteration on the deflated operator (I - Q Q^T) A: its Gram matrix applied to
            // orth(Z) is (I - Q Q^T) A A^T orth(Z), and the projection comes with extend_basis.
            const MatrixXd Vp = extend_basis(Q.leftCols(k), std::move(Z), rng);
            MatrixXd Wp(n, m);
            op.apply_transpose(Vp, Wp);
            Z.resize(n, m);
            op.apply(Wp, Z);
            out.products += 2 * m;
        }
        append(extend_basis(Q.leftCols(k), std::move(Z), rng));
    }

    // Step 3: singular values of B = Q^T A, as those of A^T Q (N by k). Applied in wide chunks: the softmax
    // operator recomputes its exponentials per call, so one call on 256 columns costs far less than eight on 32.
    out.basis_size = k;
    MatrixXd AtQ(n, k);
    const Index chunk = std::max<Index>(block, 256);
    for (Index c0 = 0; c0 < k; c0 += chunk) {
        const Index c = std::min(chunk, k - c0);
        op.apply_transpose(Q.middleCols(c0, c), AtQ.middleCols(c0, c));
        out.products += c;
    }
    Q = MatrixXd();
    out.singular_values = singular_values(std::move(AtQ));

    // sigma_1(B) >= sigma_1(V^T A) = s1 of step 1 (range(V) is inside range(Q)), so tol = rtol sigma_1(B) >=
    // tol_test: E <= tol_test <= tol keeps every claim, now for the better estimate of sigma_1(A).
    const auto& s = out.singular_values;
    out.s1 = s.empty() ? 0.0 : std::max(s.front(), s1);
    out.tol = rtol * out.s1;
    out.lower = static_cast<Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > out.tol; }));
    out.residual_bound = E;
    out.s1_upper = out.s1 + E;
    out.failure_probability = deterministic ? 0.0 : k_total_failure;
    out.converged = E <= out.tol;   // also when the last test, at max_rank, passes at the final tol
    if (out.converged) {
        const Index weyl = static_cast<Index>(
            std::count_if(s.begin(), s.end(), [&](double v) { return v > out.tol - E; }));
        out.upper = std::min(k_test, weyl);
    } else {
        out.upper = n;
    }
    return out;
}

}  // namespace attnscope::metrics
