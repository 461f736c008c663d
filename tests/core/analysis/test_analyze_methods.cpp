// analyze()'s spectrum paths beyond dense and structured: the randomized rank bracket (softmax and causal
// operators without factors, --rank-rtol) against the dense rank, its JSON, and the method choice.

#include <gtest/gtest.h>

#include "support/test_support.h"

#include "analysis/analyze.h"
#include "attention/operator.h"
#include "metrics/metrics.h"

using namespace attnscope;
using Eigen::MatrixXd;

namespace {

MatrixXd gaussian(Eigen::Index rows, Eigen::Index cols, unsigned seed) { return test::gaussian_matrix(rows, cols, seed); }

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
    EXPECT_EQ(analysis::choose_spectrum(*op, mo, 1ULL << 34).path, analysis::SpectrumPath::dense);
    EXPECT_EQ(analysis::choose_spectrum(*op, mo, 1000).path, analysis::SpectrumPath::randomized);
    mo.rank_rtol.reset();
    EXPECT_THROW(analysis::choose_spectrum(*op, mo, 1000), std::exception);   // names what fits
    mo.method = analysis::SpectrumMethod::streaming;
    EXPECT_EQ(analysis::choose_spectrum(*op, mo, 1ULL << 34).path, analysis::SpectrumPath::none);
    // One streaming run over all three: softmax's spectrum is null with a warning naming what would work,
    // linear / MHLA are structured, every entropy is streamed.
    const auto results = analysis::analyze(Q, K, {attention::Mechanism::softmax, attention::Mechanism::linear,
                                                  attention::Mechanism::mhla}, o, mo, 1ULL << 34);
    ASSERT_EQ(results.size(), 3u);
    EXPECT_FALSE(results[0].spectrum.has_value());
    ASSERT_EQ(results[0].warnings.size(), 1u);
    EXPECT_NE(results[0].warnings[0].find("--top-k"), std::string::npos);
    EXPECT_NE(results[0].warnings[0].find("--rank-rtol"), std::string::npos);
    const auto j = analysis::result_json(results[0], mo);
    EXPECT_TRUE(j["rank"].is_null());
    EXPECT_TRUE(j["singular_values"].is_null());
    EXPECT_EQ(results[0].entropy_method, "streaming");
    for (std::size_t i = 1; i < 3; ++i) {
        EXPECT_EQ(results[i].spectrum_method, "structured");
        EXPECT_EQ(results[i].entropy_method, "streaming");
        EXPECT_TRUE(results[i].warnings.empty());
    }
}

// auto with --top-k: the estimate of docs/cli.md, (8/3) N^3 for the dense SVD against 50 passes of
// 2 N^2 (d + 2b) for block Lanczos, breaks even at N = 50 * 2 * (d + 2b) * 3/8 = 37.5 (d + 2b).
TEST(AnalyzeMethods, AutoTakesTopKWhenTheEstimateSaysItIsCheaper)
{
    // d = 64, k = 64 (b = 64): even at N = 7200.
    const auto c = analysis::spectrum_cost_estimate(7200, 64, 64);
    EXPECT_NEAR(c.top_k_flops / c.dense_flops, 1.0, 1e-12);
    EXPECT_FALSE(analysis::auto_prefers_top_k(4096, 64, 64));
    EXPECT_FALSE(analysis::auto_prefers_top_k(7100, 64, 64));
    EXPECT_TRUE(analysis::auto_prefers_top_k(7300, 64, 64));
    EXPECT_TRUE(analysis::auto_prefers_top_k(16384, 64, 64));
    // k = 8 (b = 16): even at N = 37.5 * 96 = 3600.
    EXPECT_FALSE(analysis::auto_prefers_top_k(3500, 64, 8));
    EXPECT_TRUE(analysis::auto_prefers_top_k(3700, 64, 8));
    // Where the top-k solver itself would take the dense SVD (2k + 1 > N), never.
    EXPECT_FALSE(analysis::auto_prefers_top_k(100000, 64, 50000));

    // Through choose_spectrum on softmax operators (nothing is computed): d = 2, k = 1 (b = 16)
    // breaks even at N = 37.5 * 34 = 1275.
    attention::AttentionOptions o;
    const auto big = attention::make_operator(attention::Mechanism::softmax, gaussian(1400, 2, 5), gaussian(1400, 2, 6), o);
    const auto small = attention::make_operator(attention::Mechanism::softmax, gaussian(1200, 2, 5), gaussian(1200, 2, 6), o);
    analysis::MetricOptions mo;
    const std::uint64_t fits = 1ULL << 34;
    EXPECT_EQ(analysis::choose_spectrum(*big, mo, fits).path, analysis::SpectrumPath::dense);   // no --top-k: every value
    mo.top_k = 1;
    EXPECT_EQ(analysis::choose_spectrum(*big, mo, fits).path, analysis::SpectrumPath::top_k);
    EXPECT_EQ(analysis::choose_spectrum(*small, mo, fits).path, analysis::SpectrumPath::dense);
    const std::string why_top_k = analysis::choose_spectrum(*big, mo, fits).why;
    EXPECT_NE(why_top_k.find("estimated cheaper"), std::string::npos) << why_top_k;
    EXPECT_NE(why_top_k.find("leave out --top-k"), std::string::npos) << why_top_k;
    const std::string why_dense = analysis::choose_spectrum(*small, mo, fits).why;
    EXPECT_NE(why_dense.find("estimated cheaper than the 1 largest"), std::string::npos) << why_dense;
    o.causal = true;
    const auto causal = attention::make_operator(attention::Mechanism::softmax, gaussian(1400, 2, 5), gaussian(1400, 2, 6), o);
    EXPECT_EQ(analysis::choose_spectrum(*causal, mo, fits).path, analysis::SpectrumPath::top_k);
    // --rank-rtol asks for the exact rank: dense while it fits.
    mo.rank_rtol = 1e-3;
    EXPECT_EQ(analysis::choose_spectrum(*big, mo, fits).path, analysis::SpectrumPath::dense);
    EXPECT_NE(analysis::choose_spectrum(*big, mo, fits).why.find("--rank-rtol"),
              std::string::npos);
    // --method dense is obeyed.
    mo.rank_rtol.reset();
    mo.method = analysis::SpectrumMethod::dense;
    EXPECT_EQ(analysis::choose_spectrum(*big, mo, fits).path, analysis::SpectrumPath::dense);
}

}  // namespace

namespace {

TEST(AnalyzeMethods, LinearAndMhlaShareOneEntropyPass)
{
    // Together (one pass over the scores, kernel_block_sums) and one by one give the same row entropies,
    // equal to the dense matrices' own.
    const Eigen::Index n = 257;
    const MatrixXd Q = gaussian(n, 12, 7), K = gaussian(n, 12, 8);
    for (const auto fm : {attention::FeatureMapKind::relu, attention::FeatureMapKind::elu1, attention::FeatureMapKind::favor}) {
        for (const auto norm : {attention::Normalize::row, attention::Normalize::none}) {
            attention::AttentionOptions o;
            o.feature_map.kind = fm;
            o.blocks.blocks = 5;
            o.mixing.preset = "cos";
            o.normalize = norm;
            analysis::MetricOptions mo;
            mo.spectrum = false;
            mo.row_entropy = true;
            const auto both = analysis::analyze(Q, K, {attention::Mechanism::linear, attention::Mechanism::mhla}, o, mo, 1ULL << 34);
            for (std::size_t i = 0; i < both.size(); ++i) {
                const auto alone = analysis::analyze(Q, K, {both[i].mechanism}, o, mo, 1ULL << 34);
                ASSERT_TRUE(both[i].entropy && alone[0].entropy);
                const auto op = attention::make_operator(both[i].mechanism, Q, K, analysis::options_for(both[i].mechanism, o));
                const auto dense = metrics::row_entropy(op->dense(), op->allowed_keys());
                for (Eigen::Index t = 0; t < n; ++t) {
                    const auto u = static_cast<std::size_t>(t);
                    EXPECT_NEAR(both[i].entropy->rows[u], alone[0].entropy->rows[u], 1e-12 * (1 + std::abs(dense.rows[u])));
                    EXPECT_NEAR(both[i].entropy->rows[u], dense.rows[u], 1e-11 * (1 + std::abs(dense.rows[u])))
                        << attention::to_string(both[i].mechanism) << " t=" << t;
                }
            }
        }
    }
}

}  // namespace
