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

void check_arguments(double rtol, Index max_rank, Index block, int power_iterations)
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
}

// Q's columns, grown block by block up to max_rank (capacity doubles, so appends stay cheap).
class GrowingBasis {
public:
    GrowingBasis(Index n, Index capacity, Index max_rank) : m_q(n, capacity), m_max_rank(max_rank) {}

    void append(const MatrixXd& cols)
    {
        if (m_k + cols.cols() > m_q.cols())
            m_q.conservativeResize(Eigen::NoChange,
                                   std::min<Index>(m_max_rank, std::max(2 * m_q.cols(), m_k + cols.cols())));
        m_q.middleCols(m_k, cols.cols()) = cols;
        m_k += cols.cols();
    }
    Index size() const { return m_k; }
    auto columns() const { return m_q.leftCols(m_k); }
    void release() { m_q = MatrixXd(); }

private:
    MatrixXd m_q;
    Index m_k = 0;
    Index m_max_rank;
};

struct FirstBlock {
    MatrixXd V;      // N by b0 orthonormal: the first block of Q
    double s1 = 0;   // sigma_1(V^T A)
};

// Step 1: s1 by block subspace iteration; its basis is Q's first block.
FirstBlock first_block(const attention::AttentionOperator& op, Index b0, SplitMix64& rng, RandomizedRank& out)
{
    const Index n = op.rows();
    MatrixXd Y(n, b0), W(n, b0);
    op.apply(gaussian_block(rng, n, b0), Y);
    out.products += b0;
    FirstBlock f;
    for (int step = 0; step < k_s1_max_steps; ++step) {
        f.V = extend_basis(MatrixXd(n, 0), Y, rng);
        op.apply_transpose(f.V, W);
        out.products += b0;
        const double prev = f.s1;
        f.s1 = singular_values(MatrixXd(W)).front();   // sigma_1(V^T A)
        if (f.s1 == 0.0 || (step > 0 && std::abs(f.s1 - prev) <= k_s1_rtol * f.s1) || step + 1 == k_s1_max_steps)
            break;
        op.apply(W, Y);   // A A^T V
        out.products += b0;
    }
    return f;
}

struct RangeStop {
    double E = std::numeric_limits<double>::infinity();   // the residual bound at the last test
    Index k_test = 0;                                      // columns of Q at that test
    bool deterministic = false;                            // Q spans R^N
};

// Step 2: adaptive range finder. alpha such that T_max alpha^-block = k_total_failure, where T_max bounds
// the number of tests (one per block added, plus the last).
RangeStop find_range(const attention::AttentionOperator& op, GrowingBasis& basis, double tol_test, Index b0,
                     Index block, Index max_rank, int power_iterations, SplitMix64& rng, RandomizedRank& out)
{
    const Index n = op.rows();
    const Index t_max = (max_rank - b0 + block - 1) / block + 1;
    const double alpha =
        std::max(1.0 + 1e-12, std::exp((std::log(static_cast<double>(t_max)) - std::log(k_total_failure)) /
                                       static_cast<double>(block)));
    const double factor = alpha * std::sqrt(2.0 / M_PI);
    RangeStop stop;
    MatrixXd Y(n, block);
    for (;;) {
        const Index k = basis.size();
        if (k == n) {   // Q spans R^N: (I - Q Q^T) A = 0
            stop.E = 0.0;
            stop.k_test = n;
            out.converged = true;
            stop.deterministic = true;
            return stop;
        }
        op.apply(gaussian_block(rng, n, block), Y);
        out.products += block;
        project_out(basis.columns(), Y);
        stop.E = factor * max_column_norm(Y);
        stop.k_test = k;
        ++out.tests;
        out.converged = stop.E <= tol_test;
        const Index m = std::min(block, max_rank - k);
        if (out.converged || m == 0) {
            if (m > 0)
                basis.append(extend_basis(basis.columns(), Y.leftCols(m), rng));
            return stop;
        }
        MatrixXd Z = Y.leftCols(m);
        for (int p = 0; p < power_iterations; ++p) {
            // One step of subspace iteration on the deflated operator (I - Q Q^T) A: its Gram matrix applied to
            // orth(Z) is (I - Q Q^T) A A^T orth(Z), and the projection comes with extend_basis.
            const MatrixXd Vp = extend_basis(basis.columns(), std::move(Z), rng);
            MatrixXd Wp(n, m);
            op.apply_transpose(Vp, Wp);
            Z.resize(n, m);
            op.apply(Wp, Z);
            out.products += 2 * m;
        }
        basis.append(extend_basis(basis.columns(), std::move(Z), rng));
    }
}

// Step 3: singular values of B = Q^T A, as those of A^T Q (N by k). Applied in wide chunks: the softmax
// operator recomputes its exponentials per call, so one call on 256 columns costs far less than eight on 32.
std::vector<double> projected_singular_values(const attention::AttentionOperator& op, GrowingBasis& basis,
                                              Index block, RandomizedRank& out)
{
    const Index k = basis.size();
    MatrixXd AtQ(op.rows(), k);
    const Index chunk = std::max<Index>(block, 256);
    for (Index c0 = 0; c0 < k; c0 += chunk) {
        const Index c = std::min(chunk, k - c0);
        op.apply_transpose(basis.columns().middleCols(c0, c), AtQ.middleCols(c0, c));
        out.products += c;
    }
    basis.release();
    return singular_values(std::move(AtQ));
}

// sigma_1(B) >= sigma_1(V^T A) = s1 of step 1 (range(V) is inside range(Q)), so tol = rtol sigma_1(B) >=
// tol_test: E <= tol_test <= tol keeps every claim, now for the better estimate of sigma_1(A).
void bracket_rank(RandomizedRank& out, double rtol, double s1, const RangeStop& stop, Index n)
{
    const auto& s = out.singular_values;
    const double E = stop.E;
    out.s1 = s.empty() ? 0.0 : std::max(s.front(), s1);
    out.tol = rtol * out.s1;
    out.lower = static_cast<Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > out.tol; }));
    out.residual_bound = E;
    out.s1_upper = out.s1 + E;
    out.failure_probability = stop.deterministic ? 0.0 : k_total_failure;
    out.converged = E <= out.tol;   // also when the last test, at max_rank, passes at the final tol
    if (out.converged) {
        const Index weyl = static_cast<Index>(
            std::count_if(s.begin(), s.end(), [&](double v) { return v > out.tol - E; }));
        out.upper = std::min(stop.k_test, weyl);
    } else {
        out.upper = n;
    }
}

}  // namespace

RandomizedRank randomized_rank(const attention::AttentionOperator& op, double rtol, std::uint64_t seed,
                               Index max_rank, Index block, int power_iterations)
{
    check_arguments(rtol, max_rank, block, power_iterations);
    const Index n = op.rows();
    RandomizedRank out;
    if (n == 0) {
        out.converged = true;
        return out;
    }
    max_rank = max_rank == 0 ? std::min<Index>(n, 2048) : std::min(max_rank, n);
    SplitMix64 rng(seed);

    const Index b0 = std::min(block, max_rank);
    FirstBlock first = first_block(op, b0, rng, out);
    const double tol_test = rtol * first.s1;   // the stopping threshold; the reported tol can only be larger

    GrowingBasis basis(n, std::min<Index>(max_rank, std::max<Index>(4 * b0, 256)), max_rank);
    basis.append(first.V);
    const RangeStop stop = find_range(op, basis, tol_test, b0, block, max_rank, power_iterations, rng, out);

    out.basis_size = basis.size();
    out.singular_values = projected_singular_values(op, basis, block, out);
    bracket_rank(out, rtol, first.s1, stop, n);
    return out;
}

}  // namespace attnscope::metrics
