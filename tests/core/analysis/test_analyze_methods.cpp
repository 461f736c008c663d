// analyze()'s spectrum paths beyond dense and structured: the randomized rank bracket (softmax and causal
// operators without factors, --rank-rtol) against the dense rank, its JSON, and the method choice.
#include <random>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "attention/operator.h"
#include "metrics/metrics.h"

using namespace attnscope;
using Eigen::MatrixXd;

namespace {

MatrixXd gaussian(Eigen::Index rows, Eigen::Index cols, unsigned seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    MatrixXd A(rows, cols);
    for (Eigen::Index i = 0; i < A.size(); ++i)
        A.data()[i] = g(rng);
    return A;
}

TEST(AnalyzeMethods, StreamingRankRtolBracketsTheDenseRank)
{
    const Eigen::Index n = 300;
    const MatrixXd Q = gaussian(n, 16, 1), K = gaussian(n, 16, 2);
    for (const bool causal : {false, true}) {
        attention::AttentionOptions o;
        o.causal = causal;
        analysis::MetricOptions mo;
        mo.method = analysis::SpectrumMethod::streaming;
        mo.rank_rtol = 1e-3;
        const auto results = analysis::analyze(Q, K, {attention::Mechanism::softmax}, o, mo, 1ULL << 34);
        ASSERT_EQ(results.size(), 1u);
        const analysis::MechanismResult& r = results[0];
        EXPECT_EQ(r.spectrum_method, "randomized");
        ASSERT_TRUE(r.rank_bracket.has_value());
        const auto op = attention::make_operator(attention::Mechanism::softmax, Q, K, o);
        const metrics::SpectrumMetrics dense = metrics::spectrum_metrics(metrics::singular_values(op->dense()), n, n, 1e-3);
        // The bracket is about tol = rtol * s1 with s1 <= sigma_1(A): count the dense values above that tol.
        const double tol = r.rank_bracket->tol;
        const auto s = metrics::singular_values(op->dense());
        const auto truth = static_cast<Eigen::Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > tol; }));
        EXPECT_LE(r.rank_bracket->lower, truth) << "causal " << causal;
        EXPECT_GE(r.rank_bracket->upper, truth) << "causal " << causal;
        EXPECT_NEAR(r.rank_bracket->s1, dense.singular_values[0], 1e-8 * dense.singular_values[0]);

        const auto j = analysis::result_json(r, mo);
        ASSERT_TRUE(j.contains("rank_bounds"));
        EXPECT_EQ(j["rank_bounds"]["lower"].get<Eigen::Index>(), r.rank_bracket->lower);
        EXPECT_EQ(j["rank_bounds"]["upper"].get<Eigen::Index>(), r.rank_bracket->upper);
        EXPECT_EQ(j["method"]["spectrum"], "randomized");
        if (r.rank_bracket->lower == r.rank_bracket->upper)
            EXPECT_EQ(j["rank"].get<Eigen::Index>(), truth);
        else
            EXPECT_TRUE(j["rank"].is_null());
        EXPECT_TRUE(j["effective_rank"].is_null());
    }
}

TEST(AnalyzeMethods, AutoTakesTheRandomizedPathOnlyWhenDenseDoesNotFit)
{
    const MatrixXd Q = gaussian(200, 8, 3), K = gaussian(200, 8, 4);
    attention::AttentionOptions o;
    analysis::MetricOptions mo;
    mo.rank_rtol = 1e-2;
    const auto op = attention::make_operator(attention::Mechanism::softmax, Q, K, o);
    EXPECT_EQ(analysis::choose_spectrum_path(*op, mo, 1ULL << 34), analysis::SpectrumPath::dense);
    EXPECT_EQ(analysis::choose_spectrum_path(*op, mo, 1000), analysis::SpectrumPath::randomized);
    mo.rank_rtol.reset();
    EXPECT_THROW(analysis::choose_spectrum_path(*op, mo, 1000), std::exception);   // names what fits
    mo.method = analysis::SpectrumMethod::streaming;
    try {
        analysis::choose_spectrum_path(*op, mo, 1ULL << 34);
        FAIL() << "streaming all singular values of softmax must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("--rank-rtol"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("--top-k"), std::string::npos) << e.what();
    }
}

}  // namespace
