// The measures of docs/maths.md 2.2 in the core (analysis/mask_measures.h): the support sizes against the
// N x N support counted entry by entry, the baseline operator against its closed forms, the tolerance-free
// ranks' edge cases, the past block taken from the matrix and formed from the operator (and null over the
// memory limit), and the baseline on the structured path equal to the dense one. The NumPy reference checks
// the numbers end to end (tests/app/check_measures.py).
#include <gtest/gtest.h>

#include "support/test_support.h"

#include "analysis/analyze.h"
#include "analysis/mask_measures.h"
#include "analysis/metric_table.h"
#include "attention/operator.h"
#include "metrics/metrics.h"

using namespace attnscope;
using attention::Mechanism;
using Eigen::Index;
using Eigen::MatrixXd;

namespace {

MatrixXd gaussian(Index rows, Index cols, unsigned seed) { return test::gaussian_matrix(rows, cols, seed); }

// MHLA on 4 blocks of a 1-D sequence with a mixing matrix that has zeros.
attention::AttentionOptions mhla_with_zeros(bool causal)
{
    attention::AttentionOptions o;
    o.causal = causal;
    o.blocks.blocks = 4;
    MatrixXd mc(4, 4);
    mc << 1.0, 0.5, 0.0, 0.25, 0.0, 1.0, 0.5, 0.0, 0.25, 0.0, 1.0, 0.5, 0.0, 0.0, 0.5, 1.0;
    o.mixing.preset = "learned";
    o.mixing.matrix = mc;
    return o;
}

TEST(MaskMeasures, SupportSizesCountTheStructuralNonZeros)
{
    const Index n = 22;   // unequal blocks (6, 6, 5, 5)
    const MatrixXd Q = gaussian(n, 3, 1), K = gaussian(n, 3, 2);
    for (const bool causal : {false, true}) {
        const auto op = attention::make_operator(Mechanism::mhla, Q, K, mhla_with_zeros(causal));
        const attention::KernelFactors& f = *op->kernel_pieces();
        const std::vector<Index> sizes = analysis::support_sizes(*op);
        ASSERT_EQ(static_cast<Index>(sizes.size()), n);
        for (Index t = 0; t < n; ++t) {
            Index count = 0;
            for (Index j = 0; j < n; ++j) {
                const Index bt = f.block[static_cast<std::size_t>(t)], bj = f.block[static_cast<std::size_t>(j)];
                const bool allowed = !causal || bj < bt || (bj == bt && j <= t);
                count += allowed && f.mixing(bt, bj) != 0.0;
            }
            EXPECT_EQ(sizes[static_cast<std::size_t>(t)], count) << "t=" << t << " causal " << causal;
        }
    }
    // Without blocks the support is what the causal rule allows.
    attention::AttentionOptions o;
    o.causal = true;
    const auto softmax = attention::make_operator(Mechanism::softmax, Q, K, o);
    EXPECT_EQ(analysis::support_sizes(*softmax), softmax->allowed_keys());
}

TEST(MaskMeasures, BaselineOperatorsHaveTheirClosedForms)
{
    const Index n = 12;
    const MatrixXd Q = gaussian(n, 4, 3), K = gaussian(n, 4, 4);
    attention::AttentionOptions causal;
    causal.causal = true;
    causal.scale = 7.0;   // plays no part: every score is 0
    const auto softmax = attention::make_operator(Mechanism::softmax, Q, K, causal);
    const MatrixXd a0 = analysis::make_baseline_operator(*softmax, causal)->dense();
    for (Index t = 0; t < n; ++t)
        for (Index j = 0; j < n; ++j)
            EXPECT_NEAR(a0(t, j), j <= t ? 1.0 / static_cast<double>(t + 1) : 0.0, 1e-15);

    // MHLA: A0[t,j] = Mc[bt,bj] / sum_b Mc[bt,b] |b| (three blocks of 4, non-causal, row-normalised).
    attention::AttentionOptions o = mhla_with_zeros(false);
    o.blocks.blocks = 3;
    MatrixXd mc(3, 3);
    mc << 1.0, 0.5, 0.0, 0.25, 1.0, 0.5, 0.0, 2.0, 1.0;
    o.mixing.matrix = mc;
    const auto mhla = attention::make_operator(Mechanism::mhla, Q, K, o);
    const MatrixXd b0 = analysis::make_baseline_operator(*mhla, o)->dense();
    for (Index t = 0; t < n; ++t)
        for (Index j = 0; j < n; ++j) {
            const Index bt = t / 4, bj = j / 4;
            EXPECT_NEAR(b0(t, j), mc(bt, bj) / (4.0 * mc.row(bt).sum()), 1e-15) << t << "," << j;
        }
}

TEST(MaskMeasures, EnergyRanksAndRanksAtTolerances)
{
    EXPECT_EQ(metrics::energy_rank({}, 0.9), 0);
    EXPECT_EQ(metrics::energy_rank({0.0, 0.0}, 0.9), 0);
    EXPECT_EQ(metrics::energy_rank({2.0}, 0.99), 1);
    EXPECT_EQ(metrics::energy_rank({3.0, 1.0}, 0.90), 1);   // 9 >= 0.9 * 10
    EXPECT_EQ(metrics::energy_rank({3.0, 1.0}, 0.99), 2);
    const auto m = metrics::spectrum_metrics({1.0, 0.05, 5e-4, 5e-7, 0.0}, 5, 5, std::nullopt);
    EXPECT_EQ(m.rank_at_rtol, (std::array<Index, 7>{2, 2, 3, 3, 4, 4, 4}));   // 5e-4 < 1e-3, 5e-7 < 1e-6
}

TEST(MaskMeasures, PastBlockFromTheMatrixAndFromTheOperator)
{
    const Index n = 300;
    const MatrixXd Q = gaussian(n, 6, 5), K = gaussian(n, 6, 6);
    attention::AttentionOptions o;
    o.causal = true;
    analysis::MetricOptions dense;
    dense.method = analysis::SpectrumMethod::dense;
    analysis::MetricOptions streamed;
    streamed.method = analysis::SpectrumMethod::streaming;
    streamed.top_k = 4;
    const auto a = analysis::analyze(Q, K, {Mechanism::linear}, o, dense, 1ULL << 34);
    const auto b = analysis::analyze(Q, K, {Mechanism::linear}, o, streamed, 1ULL << 34);
    ASSERT_TRUE(a[0].past_block && a[0].past_block->spectrum);
    ASSERT_TRUE(b[0].past_block && b[0].past_block->spectrum);
    EXPECT_EQ(a[0].past_block->split, n / 2);
    EXPECT_EQ(a[0].past_block->spectrum->rank, 6);   // <= d: phi(q_t) . phi(k_j) / z_t on every entry
    EXPECT_EQ(b[0].past_block->spectrum->singular_values, a[0].past_block->spectrum->singular_values);
    EXPECT_FALSE(analysis::find_metric("energy_rank_90")->read(b[0]));   // only the top 4 values are known

    // Over the memory limit without the matrix: null, and a warning says why.
    const auto op = attention::make_operator(Mechanism::linear, Q, K, o);
    analysis::MechanismResult r;
    analysis::MeasureRequest small;
    small.memory_limit = 1000;
    analysis::measure_past_block(r, *op, nullptr, small, nullptr);
    EXPECT_TRUE(r.past_block_asked);
    EXPECT_FALSE(r.past_block);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_NE(r.warnings[0].find("memory limit"), std::string::npos);

    // A split outside 1..N-1 is refused before any work.
    analysis::MetricOptions bad = dense;
    bad.past_split = n;
    EXPECT_THROW(analysis::analyze(Q, K, {Mechanism::linear}, o, bad, 1ULL << 34), std::invalid_argument);
}

TEST(MaskMeasures, StructuredBaselineEqualsTheDenseOne)
{
    const Index n = 40;
    const MatrixXd Q = gaussian(n, 3, 7), K = gaussian(n, 3, 8);
    const attention::AttentionOptions o = mhla_with_zeros(false);
    analysis::MetricOptions structured, dense;
    structured.method = analysis::SpectrumMethod::structured;
    dense.method = analysis::SpectrumMethod::dense;
    const auto s = analysis::analyze(Q, K, {Mechanism::linear, Mechanism::mhla}, o, structured, 1ULL << 34);
    const auto d = analysis::analyze(Q, K, {Mechanism::linear, Mechanism::mhla}, o, dense, 1ULL << 34);
    for (std::size_t i = 0; i < 2; ++i) {
        ASSERT_TRUE(s[i].baseline && s[i].baseline->spectrum && d[i].baseline && d[i].baseline->spectrum);
        const metrics::SpectrumMetrics& bs = *s[i].baseline->spectrum;
        const metrics::SpectrumMetrics& bd = *d[i].baseline->spectrum;
        EXPECT_EQ(bs.rank, bd.rank);
        EXPECT_LE(bs.rank, i == 0 ? 1 : 4);   // rank(A0) <= rank(Mc) (linear: one block)
        EXPECT_NEAR(bs.effective_rank, bd.effective_rank, 1e-10 * bd.effective_rank);
        EXPECT_EQ(bs.energy_rank_99, bd.energy_rank_99);
        EXPECT_NEAR(s[i].baseline->entropy->mean, d[i].baseline->entropy->mean, 1e-12);
        EXPECT_NEAR(*s[i].support_normalized_mean, *d[i].support_normalized_mean, 1e-12);
        EXPECT_FALSE(s[i].past_block_asked);   // non-causal, no split asked for
    }
}

}  // namespace
