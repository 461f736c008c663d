// The two-stage values-only SVD (metrics/svd_two_stage.h) against LAPACK's dgesdd, called directly
// (test::dgesdd_values), on every instruction-set build of the products (core/kernels): random,
// attention-like, rank-deficient, graded, tall and wide matrices, several band widths; progress and
// cancellation.
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>

#include "isa_fixture.h"
#include "kernels/kernels.h"
#include "metrics/metrics.h"
#include "metrics/svd_two_stage.h"
#include "support/test_support.h"

using namespace attnscope;
using Eigen::MatrixXd;

namespace {

MatrixXd gaussian(Eigen::Index rows, Eigen::Index cols, unsigned seed) { return test::gaussian_matrix(rows, cols, seed); }

MatrixXd softmax_like(Eigen::Index n, unsigned seed)
{
    MatrixXd S = gaussian(n, 32, seed) * gaussian(n, 32, seed + 7).transpose() / std::sqrt(32.0);
    for (Eigen::Index t = 0; t < n; ++t) {
        S.row(t).array() -= S.row(t).maxCoeff();
        S.row(t) = S.row(t).array().exp().matrix();
        S.row(t) /= S.row(t).sum();
    }
    return S;
}

void expect_agree(const MatrixXd& A, Eigen::Index band, const char* what)
{
    const std::vector<double> ref = test::dgesdd_values(A);
    const std::vector<double> got = metrics::singular_values_two_stage(MatrixXd(A), band);
    ASSERT_EQ(got.size(), ref.size()) << what;
    const double s1 = ref.empty() ? 0.0 : ref[0];
    for (std::size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 64 * 0x1.0p-52 * s1 * std::sqrt(static_cast<double>(A.cols())) + 1e-300)
            << what << " " << A.rows() << "x" << A.cols() << " band " << band << " i=" << i;
    for (std::size_t i = 1; i < got.size(); ++i)
        ASSERT_GE(got[i - 1], got[i]);
}

class TwoStage : public test::IsaTest {};

TEST_P(TwoStage, AgreesWithDgesddOnManyShapes)
{
    unsigned seed = 1;
    for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}, {7, 7}, {64, 64}, {65, 65},
                                                                     {200, 130}, {130, 200}, {300, 300}, {513, 513}})
        for (const Eigen::Index band : {1, 3, 16, 64, 200})
            expect_agree(gaussian(rows, cols, seed++), band, "gaussian");
    expect_agree(softmax_like(700, 3), 64, "softmax-like");
    expect_agree(softmax_like(257, 4), 32, "softmax-like");
}

TEST_P(TwoStage, RankDeficientAndGradedMatrices)
{
    // Rank 5 in 400 x 400: 395 values at rounding level, as dgesdd finds them.
    const MatrixXd low = gaussian(400, 5, 11) * gaussian(5, 400, 12);
    expect_agree(low, 64, "rank 5");
    const std::vector<double> s = metrics::singular_values_two_stage(MatrixXd(low));
    EXPECT_GT(s[4], 1.0);
    EXPECT_LT(s[5], 1e-12 * s[0]);
    // Columns scaled over 12 orders of magnitude.
    MatrixXd graded = gaussian(300, 300, 13);
    for (Eigen::Index j = 0; j < 300; ++j)
        graded.col(j) *= std::pow(10.0, -12.0 * static_cast<double>(j) / 299.0);
    expect_agree(graded, 48, "graded");
    expect_agree(MatrixXd::Zero(100, 100), 16, "zero");
    expect_agree(MatrixXd::Identity(150, 150) * 3.0, 16, "identity");
}

INSTANTIATE_TEST_SUITE_P(Isa, TwoStage, test::every_isa(), test::isa_name);

TEST(TwoStageSvd, ProgressRisesAndCancelStops)
{
    std::vector<double> f;
    metrics::singular_values_two_stage(gaussian(600, 600, 21), 32, [&](double x) {
        f.push_back(x);
        return true;
    });
    ASSERT_GE(f.size(), 600u / 32);
    EXPECT_EQ(f.front(), 0.0);
    for (std::size_t i = 1; i < f.size(); ++i)
        EXPECT_GE(f[i], f[i - 1]);
    EXPECT_LE(f.back(), 1.0);

    int calls = 0;
    EXPECT_THROW(metrics::singular_values_two_stage(gaussian(600, 600, 22), 32, [&](double) { return ++calls < 5; }),
                 metrics::Cancelled);
    EXPECT_EQ(calls, 5);
}

TEST(TwoStageSvd, RefusesBadInput)
{
    MatrixXd bad = gaussian(10, 10, 5);
    bad(3, 4) = std::numeric_limits<double>::quiet_NaN();
    EXPECT_THROW(metrics::singular_values_two_stage(std::move(bad)), std::invalid_argument);
    EXPECT_THROW(metrics::singular_values_two_stage(gaussian(10, 10, 6), 0), std::invalid_argument);
    EXPECT_TRUE(metrics::singular_values_two_stage(MatrixXd(0, 4)).empty());
}

TEST(TwoStageSvd, SingularValuesUsesItForLargeMatrices)
{
    // singular_values() switches to the two-stage path at k_two_stage_min_size: same numbers either way.
    const MatrixXd A = softmax_like(metrics::k_two_stage_min_size + 3, 31);
    const std::vector<double> ref = test::dgesdd_values(A), got = metrics::singular_values(MatrixXd(A));
    ASSERT_EQ(got.size(), ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-13 * ref[0]);
}

// A constant matrix (softmax of q = 0) is rank 1: its reduction decays into subnormal numbers, which the
// SVDs flush to zero while they run (util/flush_subnormals.h; 5.9 s -> 0.16 s of CPU at N = 1024). The
// values stay right, and the caller's floating-point mode is restored, after a normal return and after a
// cancellation.
bool subnormals_survive()
{
    volatile double tiny = 1e-310;   // subnormal: flushed to zero under FTZ/DAZ
    volatile double one = 1.0;
    return tiny * one != 0.0;
}

TEST(TwoStageSvd, ConstantMatrixIsRankOneAndTheModeIsRestored)
{
    ASSERT_TRUE(subnormals_survive());
    const Eigen::Index n = metrics::k_two_stage_min_size + 88;
    const MatrixXd A = MatrixXd::Constant(n, n, 1.0 / static_cast<double>(n));
    for (const std::vector<double>& s : {metrics::singular_values(MatrixXd(A)), metrics::singular_values_two_stage(MatrixXd(A))}) {
        ASSERT_EQ(s.size(), static_cast<std::size_t>(n));
        EXPECT_NEAR(s[0], 1.0, 1e-13);
        EXPECT_LE(s[1], 1e-13);
        EXPECT_EQ(metrics::spectrum_metrics(s, n, n, std::nullopt).rank, 1);
    }
    EXPECT_TRUE(subnormals_survive());
    const metrics::TwoStageProgress stop = [](double) { return false; };
    EXPECT_THROW(metrics::singular_values_two_stage(MatrixXd(A), metrics::two_stage_default_band, stop), metrics::Cancelled);
    EXPECT_TRUE(subnormals_survive());
}

}  // namespace
