// Matrix-free top-k singular values (Spectra Lanczos on A^T A, applied tile by tile) equal the largest
// dense singular values, for operators without factors (softmax, causal kernels) and with them.
#include <gtest/gtest.h>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "metrics/topk.h"
#include "util/rng.h"

using namespace attnscope;
using attention::Mechanism;

namespace {

Eigen::MatrixXd random(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed)
{
    SplitMix64 rng(seed);
    Eigen::MatrixXd m(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
        for (Eigen::Index j = 0; j < cols; ++j)
            m(i, j) = rng.normal();
    return m;
}

}  // namespace

TEST(TopK, MatchesDenseLargestValues)
{
    const Eigen::Index n = 600;
    const Eigen::MatrixXd q = random(n, 16, 1), k = random(n, 16, 2);
    for (bool causal : {false, true})
        for (Mechanism m : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla}) {
            attention::AttentionOptions o;
            o.causal = causal;
            o.blocks.blocks = 6;
            const auto op = attention::make_operator(m, q, k, o);
            const std::vector<double> dense = metrics::singular_values(op->dense());
            const auto top = metrics::top_singular_values(*op, 8);
            EXPECT_TRUE(top.converged);
            ASSERT_EQ(top.values.size(), 8u);
            EXPECT_GT(top.products, 0);
            for (std::size_t i = 0; i < 8; ++i)
                EXPECT_NEAR(top.values[i], dense[i], 1e-10 * dense[0])
                    << attention::to_string(m) << (causal ? " causal" : "") << " value " << i;
        }
}

TEST(TopK, SmallProblemsFallBackToDense)
{
    const Eigen::MatrixXd q = random(40, 4, 3), k = random(40, 4, 4);
    const auto op = attention::make_operator(Mechanism::softmax, q, k, {});
    const auto top = metrics::top_singular_values(*op, 100);
    EXPECT_EQ(top.values.size(), 40u);
    EXPECT_EQ(top.products, 0);
    EXPECT_THROW(metrics::top_singular_values(*op, 0), std::invalid_argument);
}
