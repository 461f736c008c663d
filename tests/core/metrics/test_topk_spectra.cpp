// A second opinion on the block Lanczos top-k (metrics/topk.h) from code that is not ours: Spectra's
// SymEigsSolver (implicitly restarted single-vector Lanczos, its own random start) on A^T A, applied
// matrix-free as A^T (A x) through the operator's apply and apply_transpose (never apply_gram, the fused
// product our solver uses). Each of our values must lie within what the two residual bounds allow of
// Spectra's value of the same index:
//  - ours: a singular value lies within rho_i of sigma_i (topk.h);
//  - Spectra's: with r_i = ||A^T A x_i - lambda_i x_i|| (x_i a unit Ritz vector, recomputed here), an
//    eigenvalue mu of A^T A has |mu - lambda_i| <= r_i, so a singular value lies within
//    r_i / sqrt(lambda_i) of sqrt(lambda_i) (|s - t| = |s^2 - t^2| / (s + t)).
// At a small N the dense LAPACK SVD (dgesdd) is a third opinion held to the same bounds.
// Spectra is instantiated in this translation unit only (its solver templates are slow to compile).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <Spectra/SymEigsSolver.h>

#include "attention/operator.h"
#include "metrics/topk.h"
#include "support/random_matrix.h"
#include "support/test_support.h"

using namespace attnscope;
using Eigen::Index;
using Eigen::MatrixXd;

namespace {

// A^T A of an attention operator in Spectra's operator concept: y = A^T (A x), one vector at a time.
class GramOp {
public:
    using Scalar = double;
    explicit GramOp(const attention::AttentionOperator& op) : m_op(op), m_ax(op.rows(), 1) {}
    Index rows() const { return m_op.cols(); }
    Index cols() const { return m_op.cols(); }
    void perform_op(const double* x_in, double* y_out) const
    {
        const Eigen::Map<const MatrixXd> x(x_in, m_op.cols(), 1);
        Eigen::Map<MatrixXd> y(y_out, m_op.cols(), 1);
        m_op.apply(x, m_ax);
        m_op.apply_transpose(m_ax, y);
    }

private:
    const attention::AttentionOperator& m_op;
    mutable MatrixXd m_ax;
};

struct SecondOpinion {
    std::vector<double> values;   // sqrt(lambda_i), descending
    std::vector<double> bounds;   // r_i / sqrt(lambda_i): a singular value lies within it (header)
    bool converged = false;
};

SecondOpinion spectra_top_k(const attention::AttentionOperator& op, Index k)
{
    GramOp gram(op);
    const Index ncv = std::min<Index>(std::max<Index>(4 * k, 40), op.cols());
    Spectra::SymEigsSolver<GramOp> eigs(gram, k, ncv);
    eigs.init();
    eigs.compute(Spectra::SortRule::LargestAlge, 2000, 1e-13);
    SecondOpinion out;
    out.converged = eigs.info() == Spectra::CompInfo::Successful;
    if (!out.converged)
        return out;
    const Eigen::VectorXd lambda = eigs.eigenvalues();
    const MatrixXd x = eigs.eigenvectors();
    MatrixXd ax(op.rows(), k), gx(op.cols(), k);
    op.apply(x, ax);
    op.apply_transpose(ax, gx);
    for (Index i = 0; i < k; ++i) {
        const double s = std::sqrt(std::max(lambda(i), 0.0));
        const double r = (gx.col(i) - lambda(i) * x.col(i)).norm() / x.col(i).norm();
        out.values.push_back(s);
        out.bounds.push_back(s > 0 ? r / s : std::sqrt(r));
    }
    return out;
}

// Rounding in forming sigma_i from products with A: a few ulps of s_1 per inner product of length N.
double rounding(double s1, Index n)
{
    return 64 * std::numeric_limits<double>::epsilon() * std::sqrt(static_cast<double>(n)) * s1;
}

struct Case {
    Index n, d, k;
    std::uint64_t seed;
};

// Largest |ours_i - theirs_i| / ours_1 over all operators and sizes, for the report at the end.
double g_max_rel = 0;

void check_case(const Case& c, bool with_dense)
{
    const MatrixXd q = test::splitmix_rowwise(c.n, c.d, c.seed), kk = test::splitmix_rowwise(c.n, c.d, c.seed + 1);
    ASSERT_FALSE(metrics::top_k_uses_dense(c.n, c.n, c.k));
    for (const auto& [m, causal, op] : test::operator_cases(q, kk, 6)) {
        const std::string what = std::string(attention::to_string(m)) + (causal ? " causal" : "") + " N=" + std::to_string(c.n) +
                                 " d=" + std::to_string(c.d);
        const auto ours = metrics::top_singular_values(*op, c.k);
        ASSERT_TRUE(ours.converged) << what;
        ASSERT_EQ(ours.values.size(), static_cast<std::size_t>(c.k)) << what;
        const SecondOpinion theirs = spectra_top_k(*op, c.k);
        ASSERT_TRUE(theirs.converged) << what << ": Spectra did not converge";
        const double s1 = ours.values[0], slack = rounding(s1, c.n);
        std::vector<double> dense;
        if (with_dense)
            dense = test::dgesdd_values(op->dense());
        for (Index i = 0; i < c.k; ++i) {
            const std::size_t j = static_cast<std::size_t>(i);
            const double diff = std::abs(ours.values[j] - theirs.values[j]);
            g_max_rel = std::max(g_max_rel, diff / s1);
            EXPECT_LE(diff, ours.residuals[j] + theirs.bounds[j] + slack)
                << what << " value " << i << ": ours " << ours.values[j] << " (rho " << ours.residuals[j]
                << "), Spectra " << theirs.values[j] << " (bound " << theirs.bounds[j] << ")";
            if (with_dense) {
                EXPECT_LE(std::abs(ours.values[j] - dense[j]), ours.residuals[j] + slack)
                    << what << " value " << i << ": ours " << ours.values[j] << ", dgesdd " << dense[j];
                EXPECT_LE(std::abs(theirs.values[j] - dense[j]), theirs.bounds[j] + slack)
                    << what << " value " << i << ": Spectra " << theirs.values[j] << ", dgesdd " << dense[j];
            }
        }
    }
    std::printf("N=%ld d=%ld k=%ld: max |ours - Spectra| / s_1 so far %.3g\n", static_cast<long>(c.n),
                static_cast<long>(c.d), static_cast<long>(c.k), g_max_rel);
}

}  // namespace

// N = 300: above the dense fallback (top_k_uses_dense), small enough for dgesdd as the third opinion.
TEST(TopKSpectra, AgreesWithSpectraAndLapackAtSmallN)
{
    check_case({300, 16, 8, 11}, true);
}

TEST(TopKSpectra, AgreesWithSpectraAtLargerN)
{
    check_case({700, 32, 6, 21}, false);
    check_case({1200, 64, 5, 31}, false);
}
