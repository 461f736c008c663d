// core/kernels: every instruction-set build of the products and reductions against plain loops.
#include <cmath>
#include <limits>

#include <Eigen/Core>
#include <gtest/gtest.h>

#include "isa_fixture.h"
#include "kernels/kernels.h"
#include "support/test_support.h"

using namespace attnscope;
using Eigen::MatrixXd;

namespace {

using test::uniform_matrix;

class Kernels : public test::IsaTest {};

TEST_P(Kernels, GemmMatchesLoopsForEveryTransposeAndStride)
{
    unsigned seed = 1;
    for (const char ta : {'N', 'T'})
        for (const char tb : {'N', 'T'})
            for (const auto& [m, n, k] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {5, 3, 7}, {64, 300, 33}, {257, 129, 64}, {1100, 40, 70}}) {
                // Stored with padding (leading dimension larger than the rows).
                const MatrixXd A = uniform_matrix(ta == 'N' ? m + 3 : k + 3, ta == 'N' ? k : m, seed++);
                const MatrixXd B = uniform_matrix(tb == 'N' ? k + 2 : n + 2, tb == 'N' ? n : k, seed++);
                MatrixXd C = uniform_matrix(m + 1, n, seed++);
                const MatrixXd C0 = C;
                const double alpha = -0.75, beta = 0.5;
                kernels::gemm(ta, tb, m, n, k, alpha, A.data(), A.rows(), B.data(), B.rows(), beta, C.data(), C.rows());
                for (int j = 0; j < n; ++j)
                    for (int i = 0; i < m + 1; ++i) {
                        double want = C0(i, j);
                        if (i < m) {
                            double dot = 0.0;
                            for (int l = 0; l < k; ++l)
                                dot += (ta == 'N' ? A(i, l) : A(l, i)) * (tb == 'N' ? B(l, j) : B(j, l));
                            want = alpha * dot + beta * C0(i, j);
                        }
                        ASSERT_NEAR(C(i, j), want, 1e-13 * (1 + std::abs(want))) << ta << tb << " " << m << "x" << n << "x" << k;
                    }
                // beta = 0 ignores C's old contents, NaN included.
                C.setConstant(std::numeric_limits<double>::quiet_NaN());
                kernels::gemm(ta, tb, m, n, k, 1.0, A.data(), A.rows(), B.data(), B.rows(), 0.0, C.data(), C.rows());
                EXPECT_TRUE(C.topRows(m).allFinite());
            }
}

TEST_P(Kernels, EntropyAccumulationMatchesLoops)
{
    MatrixXd T = uniform_matrix(70, 90, 5, 0.0, 1.0);
    T(3, 4) = 0.0;   // 0 ln 0 = 0
    T(69, 89) = 1e-300;
    std::vector<double> acc(70, 0.25), want(70, 0.25);
    ASSERT_EQ(kernels::accumulate_entropy(T.data(), 66, 90, T.rows(), acc.data()), 0);
    for (int i = 0; i < 66; ++i) {
        for (int j = 0; j < 90; ++j)
            if (T(i, j) > 0)
                want[static_cast<std::size_t>(i)] -= T(i, j) * std::log(T(i, j));
        EXPECT_NEAR(acc[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)], 1e-13 * 90);
    }
    MatrixXd neg = T;
    neg(10, 20) = -1e-18;
    EXPECT_EQ(kernels::accumulate_entropy(neg.data(), 70, 90, 70, acc.data()), 1);
    neg(10, 20) = std::numeric_limits<double>::infinity();
    EXPECT_EQ(kernels::accumulate_entropy(neg.data(), 70, 90, 70, acc.data()), 2);
    neg(10, 20) = std::numeric_limits<double>::quiet_NaN();
    EXPECT_EQ(kernels::accumulate_entropy(neg.data(), 70, 90, 70, acc.data()), 2);
}

TEST_P(Kernels, SoftmaxColumnsMatchLoops)
{
    MatrixXd X = uniform_matrix(50, 6, 9, -20.0, 20.0);
    const MatrixXd X0 = X;
    const std::vector<kernels::Index> allowed = {50, 1, 25, 49, 50, 2};
    kernels::softmax_columns(X.data(), 50, 6, 50, 0.3, allowed.data());
    for (int c = 0; c < 6; ++c) {
        const auto n = allowed[static_cast<std::size_t>(c)];
        double mx = -1e300, sum = 0.0;
        for (int i = 0; i < n; ++i)
            mx = std::max(mx, 0.3 * X0(i, c));
        for (int i = 0; i < n; ++i)
            sum += std::exp(0.3 * X0(i, c) - mx);
        for (int i = 0; i < 50; ++i)
            EXPECT_NEAR(X(i, c), i < n ? std::exp(0.3 * X0(i, c) - mx) / sum : 0.0, 1e-15);
    }
}

INSTANTIATE_TEST_SUITE_P(Isa, Kernels, test::every_isa(), test::isa_name);

TEST(KernelsDispatch, NeverAboveTheCpu)
{
    const kernels::Isa before = kernels::active_isa();
    EXPECT_EQ(kernels::set_isa(kernels::Isa::generic), kernels::Isa::generic);
    kernels::set_isa(before);
    EXPECT_EQ(kernels::active_isa(), before);
}

}  // namespace
