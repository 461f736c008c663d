// Singular values (LAPACK dgesdd), ranks and row entropies (docs/maths.md 2) against NumPy
// (make_metric_cases.py), plus the edge cases the definitions fix.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "metrics/bidiag_svd.h"
#include "metrics/metrics.h"
#include "metrics/svd_two_stage.h"
#include "support/test_support.h"

namespace {

using namespace attnscope;
using metrics::Index;
using Eigen::MatrixXd;

double rel(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

TEST(Metrics, MatchNumPy)
{
    const std::string dir = test::fresh_work_dir("metrics_cases");
    test::run_python("core/metrics/make_metric_cases.py", {dir});
    std::ifstream in(dir + "/metrics.json");
    const nlohmann::json cases = nlohmann::json::parse(in);
    ASSERT_GE(cases.size(), 10u);
    double worst_sv = 0, worst = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.at("name").get<std::string>());
        const MatrixXd A = test::read_npy_simple(dir + "/" + c.at("file").get<std::string>());
        const Index rows = c.at("rows").get<Index>(), cols = c.at("cols").get<Index>();
        ASSERT_EQ(A.rows(), rows);
        std::optional<double> rtol;
        if (!c.at("rank_rtol").is_null())
            rtol = c.at("rank_rtol").get<double>();
        const auto s = metrics::singular_values(MatrixXd(A));
        const auto& sp = c.at("spectrum");
        const auto sref = sp.at("singular_values").get<std::vector<double>>();
        ASSERT_EQ(s.size(), sref.size());
        const double s1 = std::max(sref[0], 1e-300);
        for (std::size_t i = 0; i < s.size(); ++i) {
            worst_sv = std::max(worst_sv, std::abs(s[i] - sref[i]) / s1);
            EXPECT_LE(std::abs(s[i] - sref[i]), 1e-12 * s1) << "s_" << i + 1;
        }
        const auto m = metrics::spectrum_metrics(s, rows, cols, rtol);
        EXPECT_EQ(m.singular_values, s);
        EXPECT_EQ(m.rank, sp.at("rank").get<Index>());
        EXPECT_DOUBLE_EQ(m.relative_rank, sp.at("relative_rank").get<double>());
        for (const auto& [mine, key] : {std::pair{m.tol, "rank_tol"}, std::pair{m.effective_rank, "effective_rank"},
                                        std::pair{m.stable_rank, "stable_rank"}}) {
            const double ref = sp.at(key).get<double>();
            const double d = std::abs(mine - ref) / std::max(std::abs(ref), 1e-300);
            worst = std::max(worst, ref == 0 ? std::abs(mine) : d);
            if (ref == 0)
                EXPECT_EQ(mine, 0.0) << key;
            else
                EXPECT_LE(d, 1e-12) << key;
        }
        if (!c.contains("entropy"))
            continue;
        const auto e = metrics::row_entropy(A, c.at("allowed").get<std::vector<Index>>());
        const auto& er = c.at("entropy");
        for (const auto& [mine, key] : {std::pair{e.mean, "mean"}, std::pair{e.std, "std"}, std::pair{e.min, "min"},
                                        std::pair{e.max, "max"}, std::pair{e.normalized_mean, "normalized_mean"}}) {
            worst = std::max(worst, rel(mine, er.at(key).get<double>()));
            EXPECT_LE(rel(mine, er.at(key).get<double>()), 1e-12) << key;
        }
        const auto rows_ref = c.at("row_entropy").get<std::vector<double>>();
        ASSERT_EQ(e.rows.size(), rows_ref.size());
        for (std::size_t t = 0; t < rows_ref.size(); ++t)
            EXPECT_LE(rel(e.rows[t], rows_ref[t]), 1e-12) << "row " << t;
    }
    std::printf("max |s - s_numpy| / s1: %.3g; max relative difference of tol, ranks, entropies: %.3g\n", worst_sv,
                worst);
}

// Issue 30: one-hot rows with subnormal entries beside the ones (softmax of logits ~1e9) made dgesdd, under the
// SVDs' flush-to-zero mode, return NaN; and entries near 2^+-1000 overflow the two-stage reduction. Every dense
// entry point gives the exact answer: a 0/1 matrix with one 1 per row has singular values sqrt(column counts).
TEST(Metrics, OneHotRowsWithSubnormalsAndExtremeScales)
{
    for (const Index n : {Index{64}, Index{600}}) {
        MatrixXd A = MatrixXd::Zero(n, n);
        std::vector<double> counts(static_cast<std::size_t>(n), 0.0);
        for (Index t = 0; t < n; ++t) {
            const Index c = (t * 7 + t / 3) % (n / 4);   // a quarter of the columns, unevenly
            A(t, c) = 1.0;
            counts[static_cast<std::size_t>(c)] += 1.0;
            A(t, (c + 1 + t % 5) % n) = 5.55e-309;        // subnormal
            A(t, (c + 9) % n) = 1e-310;
        }
        std::vector<double> expect;
        for (double k : counts)
            expect.push_back(std::sqrt(k));
        std::sort(expect.begin(), expect.end(), std::greater<>());
        for (const double scale : {1.0, std::ldexp(1.0, 700), std::ldexp(1.0, -700)}) {
            SCOPED_TRACE("n = " + std::to_string(n) + ", scale 2^" + std::to_string(std::ilogb(scale)));
            const MatrixXd As = A * scale;   // the subnormals vanish or grow with it; the expectation is unchanged
            const std::vector<std::vector<double>> got = {
                metrics::singular_values(MatrixXd(As)),
                metrics::singular_values_two_stage(MatrixXd(As)),
                metrics::singular_values_with_progress(MatrixXd(As), {}),
            };
            for (const auto& s : got) {
                ASSERT_EQ(s.size(), expect.size());
                for (std::size_t i = 0; i < s.size(); ++i)
                    ASSERT_NEAR(s[i] / scale, expect[i], 1e-12 * expect[0]) << "value " << i;
                EXPECT_NO_THROW(metrics::spectrum_metrics(s, n, n, std::nullopt));
            }
        }
    }
}

TEST(Metrics, KnownSmallAnswers)
{
    // diag(3, 2, 0): rank 2, stable rank (9 + 4) / 9, effective rank exp(H(3/5, 2/5)).
    MatrixXd A = MatrixXd::Zero(3, 3);
    A(0, 0) = 3;
    A(1, 1) = 2;
    const auto s = metrics::singular_values(MatrixXd(A));
    ASSERT_EQ(s.size(), 3u);
    EXPECT_DOUBLE_EQ(s[0], 3.0);
    EXPECT_DOUBLE_EQ(s[1], 2.0);
    EXPECT_EQ(s[2], 0.0);
    const auto m = metrics::spectrum_metrics(s, 3, 3, std::nullopt);
    EXPECT_EQ(m.rank, 2);
    EXPECT_DOUBLE_EQ(m.tol, 3.0 * 3.0 * std::ldexp(1.0, -52));
    EXPECT_DOUBLE_EQ(m.relative_rank, 2.0 / 3.0);
    EXPECT_DOUBLE_EQ(m.stable_rank, 13.0 / 9.0);
    EXPECT_NEAR(m.effective_rank, std::exp(-(0.6 * std::log(0.6) + 0.4 * std::log(0.4))), 1e-15);
    const auto r = metrics::spectrum_metrics(s, 3, 3, 0.7);   // tol = 2.1 > s_2
    EXPECT_DOUBLE_EQ(r.tol, 2.1);
    EXPECT_EQ(r.rank, 1);

    // Unsorted input is sorted; relative rank divides by rows.
    const auto u = metrics::spectrum_metrics({1.0, 4.0, 2.0}, 6, 3, std::nullopt);
    EXPECT_EQ(u.singular_values, (std::vector<double>{4.0, 2.0, 1.0}));
    EXPECT_DOUBLE_EQ(u.tol, 4.0 * 6.0 * std::ldexp(1.0, -52));
    EXPECT_DOUBLE_EQ(u.relative_rank, 0.5);
}

TEST(Metrics, ZeroAndEmptySpectra)
{
    const auto z = metrics::spectrum_metrics(metrics::singular_values(MatrixXd::Zero(5, 5)), 5, 5, std::nullopt);
    EXPECT_EQ(z.rank, 0);
    EXPECT_EQ(z.tol, 0.0);
    EXPECT_EQ(z.effective_rank, 0.0);
    EXPECT_EQ(z.stable_rank, 0.0);
    EXPECT_EQ(z.relative_rank, 0.0);
    EXPECT_TRUE(metrics::singular_values(MatrixXd(0, 0)).empty());
    const auto e = metrics::spectrum_metrics({}, 0, 0, std::nullopt);
    EXPECT_EQ(e.rank, 0);
}

TEST(Metrics, EntropyEdgeCases)
{
    // One-hot rows have entropy 0 (0 ln 0 = 0); uniform rows ln(n); rows with n_t = 1 count 0 in the
    // normalised mean.
    MatrixXd A = MatrixXd::Zero(3, 4);
    A(0, 2) = 1.0;
    A.row(1).setConstant(0.25);
    A(2, 0) = 0.5;
    A(2, 1) = 0.5;
    const auto e = metrics::row_entropy(A, {1, 4, 2});
    EXPECT_EQ(e.rows[0], 0.0);
    EXPECT_NEAR(e.rows[1], std::log(4.0), 1e-15);
    EXPECT_NEAR(e.rows[2], std::log(2.0), 1e-15);
    EXPECT_NEAR(e.normalized_mean, 2.0 / 3.0, 1e-15);
    EXPECT_EQ(e.min, 0.0);
    EXPECT_NEAR(e.max, std::log(4.0), 1e-15);
    const double mean = (std::log(4.0) + std::log(2.0)) / 3.0;
    EXPECT_NEAR(e.mean, mean, 1e-15);
    const double var = (mean * mean + std::pow(std::log(4.0) - mean, 2) + std::pow(std::log(2.0) - mean, 2)) / 3.0;
    EXPECT_NEAR(e.std, std::sqrt(var), 1e-15);
}

TEST(Metrics, BadArguments)
{
    MatrixXd A = MatrixXd::Constant(3, 3, 1.0 / 3);
    EXPECT_THROW(metrics::row_entropy(A, {3, 3}), std::invalid_argument);
    A(1, 2) = -0.1;
    try {
        metrics::row_entropy(A, {3, 3, 3});
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("(1, 2)"), std::string::npos) << e.what();
    }
    EXPECT_THROW(metrics::spectrum_metrics({1.0}, 1, 1, -0.5), std::invalid_argument);
    EXPECT_THROW(metrics::spectrum_metrics({1.0}, 1, 1, std::numeric_limits<double>::quiet_NaN()),
                 std::invalid_argument);
    MatrixXd B = MatrixXd::Ones(2, 2);
    B(0, 0) = std::numeric_limits<double>::infinity();
    EXPECT_THROW(metrics::singular_values(std::move(B)), std::invalid_argument);
}

}  // namespace
