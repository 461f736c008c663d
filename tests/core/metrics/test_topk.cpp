// Matrix-free top-k singular values (block Lanczos on A^T A, applied tile by tile, metrics/topk.h) equal the largest
// dense singular values, for operators without factors (softmax, causal kernels) and with them.
#include <gtest/gtest.h>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "metrics/topk.h"
#include "support/test_support.h"

using namespace attnscope;
using attention::Mechanism;
using test::splitmix_rowwise;

TEST(TopK, MatchesDenseLargestValues)
{
    const Eigen::Index n = 600;
    const Eigen::MatrixXd q = splitmix_rowwise(n, 16, 1), k = splitmix_rowwise(n, 16, 2);
    for (const auto& [m, causal, op] : test::operator_cases(q, k, 6)) {
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
    const Eigen::MatrixXd q = splitmix_rowwise(40, 4, 3), k = splitmix_rowwise(40, 4, 4);
    const auto op = attention::make_operator(Mechanism::softmax, q, k, {});
    const auto top = metrics::top_singular_values(*op, 100);
    EXPECT_EQ(top.values.size(), 40u);
    EXPECT_EQ(top.products, 0);
    EXPECT_THROW(metrics::top_singular_values(*op, 0), std::invalid_argument);
}
