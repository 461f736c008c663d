// The block Lanczos top-k solver (metrics/topk.h) against singular values known independently: LAPACK's
// dgesdd on the formed matrix, or matrices built with a chosen spectrum (repeated values, rank deficiency).
// Checks what the header promises: values to 1e-10 relative, each value a lower bound of its singular value,
// a singular value within each reported residual, multiplicities found with a block at least as wide.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/QR>

#include "attention/operator.h"
#include "metrics/topk.h"
#include "support/random_matrix.h"
#include "support/test_support.h"

using namespace attnscope;
using attention::Mechanism;
using Eigen::Index;
using Eigen::MatrixXd;

namespace {

// A dense matrix as a BlockOperator, counting its products.
class DenseOp final : public metrics::BlockOperator {
public:
    explicit DenseOp(MatrixXd A) : m_a(std::move(A)) {}
    Index rows() const override { return m_a.rows(); }
    Index cols() const override { return m_a.cols(); }
    void apply(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        Y.noalias() = m_a * X;
        columns += X.cols();
    }
    void apply_transpose(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        Y.noalias() = m_a.transpose() * X;
        columns += X.cols();
    }
    void apply_gram(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        Y.noalias() = m_a.transpose() * (m_a * X);
        columns += X.cols();
    }
    MatrixXd dense() const override { return m_a; }
    mutable Index columns = 0;   // columns of all blocks A, A^T or A^T A was applied to

private:
    MatrixXd m_a;
};

MatrixXd orthonormal(Index rows, Index cols, std::uint64_t seed)
{
    const Eigen::HouseholderQR<MatrixXd> qr(test::splitmix_colwise(rows, cols, seed));
    MatrixXd q = MatrixXd::Identity(rows, cols);
    q.applyOnTheLeft(qr.householderQ());
    return q;
}

// rows x cols with singular values `s` (descending, at most min(rows, cols)), random singular vectors.
MatrixXd with_spectrum(Index rows, Index cols, const std::vector<double>& s, std::uint64_t seed)
{
    const Index r = static_cast<Index>(s.size());
    const Eigen::VectorXd sv = Eigen::Map<const Eigen::VectorXd>(s.data(), r);
    return orthonormal(rows, r, seed) * sv.asDiagonal() * orthonormal(cols, r, seed + 1).transpose();
}

// Every promise of the header for values `top` of a matrix with singular values `exact` (descending).
void expect_promises(const metrics::TopSingularValues& top, const std::vector<double>& exact, Index k, double rel,
                     const std::string& what)
{
    ASSERT_EQ(top.values.size(), static_cast<std::size_t>(k)) << what;
    ASSERT_EQ(top.residuals.size(), static_cast<std::size_t>(k)) << what;
    const double s1 = exact.front();
    for (Index i = 0; i < k; ++i) {
        const auto u = static_cast<std::size_t>(i);
        const double v = top.values[u], e = exact[u];
        EXPECT_LE(std::abs(v - e), rel * e + 1e-14 * s1) << what << " value " << i << ": " << v << " vs " << e;
        EXPECT_LE(v, e + 1e-13 * s1) << what << " value " << i << " is not a lower bound";
        // Some exact singular value within the residual (plus rounding in the check itself).
        double nearest = std::numeric_limits<double>::infinity();
        for (double x : exact)
            nearest = std::min(nearest, std::abs(x - v));
        EXPECT_LE(nearest, top.residuals[u] + 1e-14 * s1) << what << " value " << i;
        EXPECT_GE(top.residuals[u], 0.0);
    }
}

}  // namespace

TEST(BlockKrylov, AttentionOperatorsMatchDgesdd)
{
    const Index n = 700;   // not a multiple of the 128-row tiles
    const MatrixXd q = test::splitmix_rowwise(n, 16, 11), k = test::splitmix_rowwise(n, 16, 12);
    for (const auto& [m, causal, op] : test::operator_cases(q, k, 5)) {
        const std::string what = std::string(attention::to_string(m)) + (causal ? " causal" : "");
        const std::vector<double> exact = test::dgesdd_values(op->dense());
        const Index kk = m == Mechanism::softmax ? 24 : 8;   // kernel operators have rank ~ the feature dimension
        const auto top = metrics::top_singular_values(*op, kk);
        EXPECT_TRUE(top.converged) << what;
        EXPECT_FALSE(top.dense) << what;
        EXPECT_GT(top.passes, 0) << what;
        expect_promises(top, exact, kk, 1e-10, what);
    }
}

TEST(BlockKrylov, RepeatedSingularValuesAreAllFound)
{
    // A triple value and a double one inside the top 8, rectangular.
    std::vector<double> s = {10.0, 6.0, 6.0, 6.0, 4.0, 3.0, 3.0, 2.5};
    for (int i = 0; s.size() < 400; ++i)
        s.push_back(2.0 * std::pow(0.97, i));
    const DenseOp op(with_spectrum(520, 450, s, 7));
    for (const Index block : {Index{4}, Index{8}, Index{16}}) {
        metrics::TopKOptions o;
        o.block = block;
        const auto top = metrics::top_singular_values(op, 8, o);
        EXPECT_TRUE(top.converged) << "block " << block;
        expect_promises(top, s, 8, 1e-10, "block " + std::to_string(block));
    }
}

TEST(BlockKrylov, RestartsKeepAccuracy)
{
    std::vector<double> s;
    for (int i = 0; i < 500; ++i)
        s.push_back(1.0 / (1.0 + 0.05 * i));   // slow decay: many steps, so several restarts
    const DenseOp op(with_spectrum(500, 500, s, 21));
    metrics::TopKOptions o;
    o.block = 4;
    o.max_basis = 10 + 2 * 4;
    o.max_passes = 5000;
    const auto top = metrics::top_singular_values(op, 10, o);
    EXPECT_TRUE(top.converged);
    EXPECT_GT(top.restarts, 0);
    EXPECT_LE(top.basis, o.max_basis);
    expect_promises(top, s, 10, 1e-10, "restarted");
    // Every product was counted, the two final ones included.
    EXPECT_EQ(top.products, op.columns);
}

TEST(BlockKrylov, RankDeficientMatrix)
{
    const std::vector<double> s = {5.0, 4.0, 3.0, 2.0, 1.0};
    const DenseOp op(with_spectrum(400, 400, s, 31));
    const auto top = metrics::top_singular_values(op, 8);
    EXPECT_TRUE(top.converged);
    std::vector<double> exact = s;
    exact.resize(8, 0.0);
    expect_promises(top, exact, 8, 1e-10, "rank 5");
}

TEST(BlockKrylov, PassLimitIsReportedAndValuesStayLowerBounds)
{
    std::vector<double> s;
    for (int i = 0; i < 400; ++i)
        s.push_back(1.0 / (1.0 + 0.01 * i));
    const DenseOp op(with_spectrum(400, 400, s, 41));
    metrics::TopKOptions o;
    o.block = 2;
    o.max_passes = 6;
    const auto top = metrics::top_singular_values(op, 5, o);
    EXPECT_FALSE(top.converged);
    ASSERT_EQ(top.values.size(), 5u);
    for (std::size_t i = 0; i < 5; ++i) {
        EXPECT_LE(top.values[i], s[i] + 1e-13);
        double nearest = 1e300;
        for (double x : s)
            nearest = std::min(nearest, std::abs(x - top.values[i]));
        EXPECT_LE(nearest, top.residuals[i] + 1e-14);   // the residual bound holds unconverged too
    }
}

TEST(BlockKrylov, SoftmaxProductsMatchTheFormedMatrix)   // A X, A^T X, A^T A X: kernels::softmax_apply, softmax_gram
{
    const Index n = 333;
    const MatrixXd q = test::splitmix_rowwise(n, 8, 51), k = test::splitmix_rowwise(n, 8, 52);
    const MatrixXd X = test::splitmix_colwise(n, 3, 53);
    for (const bool causal : {false, true}) {
        attention::AttentionOptions o;
        o.causal = causal;
        const auto op = attention::make_operator(Mechanism::softmax, q, k, o);
        const MatrixXd A = op->dense();
        MatrixXd Y(n, 3), Yt(n, 3), G(n, 3);
        op->apply(X, Y);
        op->apply_transpose(X, Yt);
        op->apply_gram(X, G);
        const MatrixXd AtAX = A.transpose() * (A * X);
        EXPECT_LE((G - AtAX).cwiseAbs().maxCoeff(), 1e-13 * (A.transpose().cwiseAbs() * (A.cwiseAbs() * X.cwiseAbs())).maxCoeff())
            << causal;
        // Entries exp(s - lse) instead of exp(s - max) / sum: equal to a few eps relative to |A| |X|.
        const double scale = (A.cwiseAbs() * X.cwiseAbs()).maxCoeff(), scale_t = (A.transpose().cwiseAbs() * X.cwiseAbs()).maxCoeff();
        EXPECT_LE((Y - A * X).cwiseAbs().maxCoeff(), 1e-13 * scale) << causal;
        EXPECT_LE((Yt - A.transpose() * X).cwiseAbs().maxCoeff(), 1e-13 * scale_t) << causal;
    }
}

TEST(BlockKrylov, BadArguments)
{
    const DenseOp op(MatrixXd::Identity(300, 300));
    EXPECT_THROW(metrics::top_singular_values(op, 0), std::invalid_argument);
    metrics::TopKOptions o;
    o.tol = 0.0;
    EXPECT_THROW(metrics::top_singular_values(op, 3, o), std::invalid_argument);
    o = {};
    o.block = -1;
    EXPECT_THROW(metrics::top_singular_values(op, 3, o), std::invalid_argument);
}
