// singular_values_with_progress(): the interruptible dgesdd. Square and moderately tall matrices give
// dgesdd's values (the same LAPACK/BLAS calls: bit for bit when the allocator aligns the workspace alike,
// which the test does not rely on); other shapes agree to rounding. Progress rises to 1; an exception
// thrown by the callback stops the computation.
#include <iostream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "metrics/bidiag_svd.h"
#include "support/test_support.h"

using namespace attnscope;
using Eigen::MatrixXd;
// The reference is LAPACK's dgesdd itself (metrics::singular_values switches to the two-stage SVD for
// large matrices).
using test::dgesdd_values;
using test::gaussian_matrix;

namespace {

// Row-stochastic softmax of local 1-D scores: a decaying spectrum like real attention.
MatrixXd attention_like(Eigen::Index n, unsigned seed)
{
    const MatrixXd Q = gaussian_matrix(n, 16, seed), K = gaussian_matrix(n, 16, seed + 1);
    MatrixXd S = Q * K.transpose() / 4.0;
    for (Eigen::Index t = 0; t < n; ++t)
        for (Eigen::Index j = 0; j < n; ++j)
            S(t, j) -= 0.05 * static_cast<double>((t - j) * (t - j));
    for (Eigen::Index t = 0; t < n; ++t) {
        const double m = S.row(t).maxCoeff();
        S.row(t) = (S.row(t).array() - m).exp();
        S.row(t) /= S.row(t).sum();
    }
    return S;
}

std::vector<double> ours(const MatrixXd& A, std::vector<double>* fractions = nullptr)
{
    return metrics::singular_values_with_progress(MatrixXd(A), [fractions](double f) {
        if (fractions)
            fractions->push_back(f);
    });
}

}  // namespace

TEST(BidiagSvd, SquareMatricesGiveDgesddValues)
{
    std::size_t equal = 0, total = 0;
    // Sizes below, at and above the blocked crossover (nb = 32, nx = 128) and not multiples of nb.
    for (Eigen::Index n : {1, 2, 7, 33, 129, 161, 300, 517}) {
        for (const MatrixXd& A : {gaussian_matrix(n, n, 10 + static_cast<unsigned>(n)), attention_like(n, 3)}) {
            const auto s = ours(A), r = dgesdd_values(A);
            ASSERT_EQ(s.size(), r.size());
            for (std::size_t i = 0; i < s.size(); ++i) {
                ASSERT_NEAR(s[i], r[i], 1e-14 * r[0]) << "n=" << n << " i=" << i;
                equal += s[i] == r[i];
                ++total;
            }
        }
    }
    std::cout << equal << " of " << total << " values bit-identical to dgesdd's\n";
}

TEST(BidiagSvd, OtherShapesAgreeToRounding)
{
    // Tall past dgesdd's QR threshold (M >= 11 N / 6), wide (transposed), moderately tall (bit-identical path).
    for (auto [rows, cols] : {std::pair<Eigen::Index, Eigen::Index>{400, 150}, {150, 400}, {260, 200}, {1, 50}, {50, 1}}) {
        const MatrixXd A = gaussian_matrix(rows, cols, 5);
        const auto s = ours(A), r = dgesdd_values(A);
        ASSERT_EQ(s.size(), r.size());
        for (std::size_t i = 0; i < s.size(); ++i)
            EXPECT_NEAR(s[i], r[i], 1e-12 * r[0]) << rows << "x" << cols << " i=" << i;
    }
}

TEST(BidiagSvd, ScaledAndDegenerateMatrices)
{
    const MatrixXd A = gaussian_matrix(140, 140, 9);
    for (double scale : {1e-160, 1e160}) {   // dgesdd's scaling branches
        const auto s = ours(A * scale), r = dgesdd_values(A * scale);
        for (std::size_t i = 0; i < s.size(); ++i)
            EXPECT_NEAR(s[i], r[i], 1e-14 * r[0]) << "scale " << scale;
    }
    for (double v : ours(MatrixXd::Zero(150, 150)))
        EXPECT_EQ(v, 0.0);
    MatrixXd rank2 = gaussian_matrix(200, 2, 1) * gaussian_matrix(2, 200, 2);
    const auto s = ours(rank2);
    EXPECT_GT(s[1], 1.0);
    EXPECT_LT(s[2], 1e-12 * s[0]);
    EXPECT_TRUE(ours(MatrixXd(0, 5)).empty());
    MatrixXd bad = MatrixXd::Ones(4, 4);
    bad(1, 2) = std::nan("");
    EXPECT_THROW(ours(bad), std::invalid_argument);
}

TEST(BidiagSvd, ProgressRisesToOne)
{
    std::vector<double> f;
    ours(attention_like(300, 4), &f);
    ASSERT_GT(f.size(), 100u);   // at least once per column of the blocked part
    EXPECT_EQ(f.front(), 0.0);
    EXPECT_EQ(f.back(), 1.0);
    for (std::size_t i = 1; i < f.size(); ++i)
        EXPECT_GE(f[i], f[i - 1]);
}

TEST(BidiagSvd, CallbackExceptionStops)
{
    struct Stop {};
    int calls = 0;
    double last = 0;
    EXPECT_THROW(metrics::singular_values_with_progress(gaussian_matrix(400, 400, 2),
                                                        [&](double f) {
                                                            last = f;
                                                            if (++calls == 50)
                                                                throw Stop{};
                                                        }),
                 Stop);
    EXPECT_EQ(calls, 50);
    EXPECT_LT(last, 0.5);
}
