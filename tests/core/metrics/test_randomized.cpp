// Numerical rank by the adaptive randomized range finder: the bracket lower <= #{sigma_i(A) > tol} <= upper
// against dense singular values (LAPACK) and numpy.linalg.matrix_rank (make_randomized_cases.py), sharp
// brackets for a low-rank-plus-noise matrix, Ritz values below the true ones, determinism, the max_rank
// cutoff and argument checks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include <Eigen/QR>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "metrics/randomized.h"
#include "support/test_support.h"

namespace {

using namespace attnscope;
using attention::Mechanism;
using Eigen::MatrixXd;
using metrics::Index;
using test::splitmix_rowwise;

// A given dense matrix behind the operator interface; counts the columns it is applied to and the
// narrowest block it was given.
class MatrixOperator final : public attention::AttentionOperator {
public:
    explicit MatrixOperator(MatrixXd A) : AttentionOperator(A.rows()), m_a(std::move(A)) {}
    Mechanism mechanism() const override { return Mechanism::linear; }
    bool causal() const override { return false; }
    void dense_rows(Index t0, Index count, Eigen::Ref<MatrixXd> out) const override
    {
        out = m_a.middleRows(t0, count);
    }
    void apply(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        count(X.cols());
        Y.noalias() = m_a * X;
    }
    void apply_transpose(const Eigen::Ref<const MatrixXd>& X, Eigen::Ref<MatrixXd> Y) const override
    {
        count(X.cols());
        Y.noalias() = m_a.transpose() * X;
    }
    std::vector<Index> allowed_keys() const override { return std::vector<Index>(static_cast<std::size_t>(m_n), m_n); }
    bool may_be_negative() const override { return true; }

    mutable Index columns = 0;
    mutable Index narrowest = std::numeric_limits<Index>::max();

private:
    void count(Index c) const
    {
        columns += c;
        narrowest = std::min(narrowest, c);
    }
    MatrixXd m_a;
};

Index rank_above(const std::vector<double>& s, double tol)
{
    return static_cast<Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > tol; }));
}

// The properties every run must have, given A's dense singular values.
void check_bracket(const metrics::RandomizedRank& r, const std::vector<double>& s, double rtol, Index n)
{
    const double s1 = s.front();
    EXPECT_LE(r.s1, s1 * (1 + 1e-12));
    EXPECT_GE(r.s1, s1 * 0.99);   // a few subspace-iteration steps on a separated sigma_1
    EXPECT_DOUBLE_EQ(r.tol, rtol * r.s1);
    const Index truth = rank_above(s, r.tol);
    EXPECT_LE(r.lower, truth);
    EXPECT_GE(r.upper, truth);
    EXPECT_LE(r.upper, n);
    EXPECT_GE(r.s1_upper, s1 * (1 - 1e-12));
    ASSERT_EQ(static_cast<Index>(r.singular_values.size()), r.basis_size);
    EXPECT_TRUE(std::is_sorted(r.singular_values.rbegin(), r.singular_values.rend()));
    for (std::size_t i = 0; i < r.singular_values.size(); ++i)
        EXPECT_LE(r.singular_values[i], s[i] + 1e-12 * s1) << "Ritz value " << i;
    if (r.converged) {
        EXPECT_LE(r.residual_bound, r.tol);
        EXPECT_LE(r.upper, r.basis_size);
        EXPECT_GE(r.residual_bound, s.size() > static_cast<std::size_t>(r.basis_size)
                                        ? s[static_cast<std::size_t>(r.basis_size)] * (1 - 1e-9)
                                        : 0.0);   // ||(I - QQ^T)A|| >= sigma_{k+1}(A)
    } else {
        EXPECT_EQ(r.upper, n);
        EXPECT_GT(r.residual_bound, r.tol);
    }
}

TEST(RandomizedRank, BracketsDenseRankOfAttentionOperators)
{
    const Index n = 300;
    const MatrixXd q = splitmix_rowwise(n, 16, 11), k = splitmix_rowwise(n, 16, 12);
    for (const auto& [m, causal, op] : test::operator_cases(q, k, 6)) {
        const std::vector<double> s = metrics::singular_values(op->dense());
        for (double rtol : {1e-1, 1e-3, 1e-6, 1e-10})
            for (int power : {0, 1}) {
                SCOPED_TRACE(std::string(attention::to_string(m)) + (causal ? " causal" : "") +
                             " rtol=" + std::to_string(rtol) + " power=" + std::to_string(power));
                const auto r = metrics::randomized_rank(*op, rtol, 7, 0, 16, power);
                check_bracket(r, s, rtol, n);
                EXPECT_TRUE(r.converged);   // max_rank = N: converges at the latest with a full basis
                EXPECT_GT(r.products, 0);
            }
    }
}

TEST(RandomizedRank, LowRankPlusNoiseIsExact)
{
    // A = U diag(s) V^T, rank 20, s from 1 down to 1e-3, plus noise of norm about 1e-10: at rtol 1e-6 the
    // numerical rank is 20 and the bracket closes on it, well before a full basis.
    const Index n = 400, rank = 20;
    const Eigen::HouseholderQR<MatrixXd> qu(splitmix_rowwise(n, rank, 21)), qv(splitmix_rowwise(n, rank, 22));
    const MatrixXd U = qu.householderQ() * MatrixXd::Identity(n, rank);
    const MatrixXd V = qv.householderQ() * MatrixXd::Identity(n, rank);
    Eigen::VectorXd sv(rank);
    for (Index i = 0; i < rank; ++i)
        sv(i) = std::pow(10.0, -3.0 * static_cast<double>(i) / static_cast<double>(rank - 1));
    const MatrixXd A = U * sv.asDiagonal() * V.transpose() + 1e-10 / (2 * std::sqrt(double(n))) * splitmix_rowwise(n, n, 23);
    const MatrixOperator op(A);
    const std::vector<double> s = metrics::singular_values(MatrixXd(A));
    ASSERT_EQ(rank_above(s, 1e-6 * s.front()), rank);
    for (Index block : {4, 8, 32}) {
        SCOPED_TRACE("block " + std::to_string(block));
        op.columns = 0;
        op.narrowest = std::numeric_limits<Index>::max();
        const auto r = metrics::randomized_rank(op, 1e-6, 3, 0, block);
        check_bracket(r, s, 1e-6, n);
        EXPECT_TRUE(r.converged);
        EXPECT_EQ(r.lower, rank);
        EXPECT_EQ(r.upper, rank);
        EXPECT_LT(r.basis_size, n / 2);
        EXPECT_EQ(r.failure_probability, 1e-10);
        EXPECT_EQ(r.products, op.columns);   // every application counted
        EXPECT_EQ(op.narrowest, block);      // never one vector at a time
        for (Index i = 0; i < rank; ++i)     // captured range: Ritz values are accurate
            EXPECT_NEAR(r.singular_values[static_cast<std::size_t>(i)], s[static_cast<std::size_t>(i)], 1e-9);
    }
}

TEST(RandomizedRank, FullBasisIsDeterministicProof)
{
    // Well conditioned: no block passes the test until Q spans R^N, then E = 0 without probability.
    const Index n = 64;
    const MatrixXd A = MatrixXd::Identity(n, n) * 4.0 + splitmix_rowwise(n, n, 31) / std::sqrt(double(n));
    const MatrixOperator op(A);
    const std::vector<double> s = metrics::singular_values(MatrixXd(A));
    const auto r = metrics::randomized_rank(op, 1e-3, 1, 0, 8);
    check_bracket(r, s, 1e-3, n);
    EXPECT_TRUE(r.converged);
    EXPECT_EQ(r.basis_size, n);
    EXPECT_EQ(r.lower, n);
    EXPECT_EQ(r.upper, n);
    EXPECT_EQ(r.residual_bound, 0.0);
    EXPECT_EQ(r.failure_probability, 0.0);
}

TEST(RandomizedRank, DeterministicForSeed)
{
    const MatrixXd q = splitmix_rowwise(260, 8, 41), k = splitmix_rowwise(260, 8, 42);
    const auto op = attention::make_operator(Mechanism::softmax, q, k, {});
    const auto a = metrics::randomized_rank(*op, 1e-4, 99, 0, 16);
    const auto b = metrics::randomized_rank(*op, 1e-4, 99, 0, 16);
    EXPECT_EQ(a.lower, b.lower);
    EXPECT_EQ(a.upper, b.upper);
    EXPECT_EQ(a.basis_size, b.basis_size);
    EXPECT_EQ(a.products, b.products);
    EXPECT_EQ(a.tests, b.tests);
    EXPECT_EQ(a.s1, b.s1);
    EXPECT_EQ(a.residual_bound, b.residual_bound);
    EXPECT_EQ(a.singular_values, b.singular_values);
    // Another seed: other draws, same guarantees.
    const auto c = metrics::randomized_rank(*op, 1e-4, 100, 0, 16);
    EXPECT_NE(c.singular_values, a.singular_values);
    check_bracket(c, metrics::singular_values(op->dense()), 1e-4, 260);
}

TEST(RandomizedRank, MaxRankCutoffProvesNothingAbove)
{
    const Index n = 300;
    const MatrixXd q = splitmix_rowwise(n, 64, 51), k = splitmix_rowwise(n, 64, 52);
    const auto op = attention::make_operator(Mechanism::softmax, q, k, {});
    const std::vector<double> s = metrics::singular_values(op->dense());
    ASSERT_GT(rank_above(s, 1e-8 * s.front()), 40);
    for (Index max_rank : {40, 45}) {   // a multiple of the block and not
        const auto r = metrics::randomized_rank(*op, 1e-8, 5, max_rank, 10);
        check_bracket(r, s, 1e-8, n);
        EXPECT_FALSE(r.converged);
        EXPECT_EQ(r.upper, n);
        EXPECT_EQ(r.basis_size, max_rank);
        EXPECT_EQ(r.lower, max_rank);   // all Ritz values are far above 1e-8 s1
    }
}

TEST(RandomizedRank, RejectsBadArguments)
{
    const MatrixXd q = splitmix_rowwise(40, 4, 61), k = splitmix_rowwise(40, 4, 62);
    const auto op = attention::make_operator(Mechanism::softmax, q, k, {});
    for (double rtol : {0.0, -1e-3, 1.0, 2.0, std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity()})
        EXPECT_THROW(metrics::randomized_rank(*op, rtol), std::invalid_argument) << rtol;
    EXPECT_THROW(metrics::randomized_rank(*op, 1e-3, 0, 0, 0), std::invalid_argument);
    EXPECT_THROW(metrics::randomized_rank(*op, 1e-3, 0, -1), std::invalid_argument);
    EXPECT_THROW(metrics::randomized_rank(*op, 1e-3, 0, 0, 8, -1), std::invalid_argument);
    EXPECT_NO_THROW(metrics::randomized_rank(*op, 1e-3, 0, 1000, 100));   // both clamped to N
}

TEST(RandomizedRank, BracketsNumPyMatrixRank)
{
    const std::string dir = test::fresh_work_dir("randomized_rank");
    test::run_python("core/metrics/make_randomized_cases.py", {"make", dir});
    const MatrixXd q = test::read_npy_simple(dir + "/q.npy"), k = test::read_npy_simple(dir + "/k.npy");
    const auto softmax = attention::make_operator(Mechanism::softmax, q, k, {});
    const MatrixOperator lowrank(test::read_npy_simple(dir + "/lowrank.npy"));
    struct Case {
        std::string name;
        const attention::AttentionOperator* op;
        double rtol;
        bool exact;   // a clear gap at the tolerance: the bracket must close
    };
    for (const Case& c : {Case{"softmax", softmax.get(), 1e-2, false}, Case{"softmax", softmax.get(), 1e-4, false},
                          Case{"lowrank", &lowrank, 1e-6, true}, Case{"lowrank", &lowrank, 1e-2, false}}) {
        SCOPED_TRACE(c.name + " rtol=" + std::to_string(c.rtol));
        const auto r = metrics::randomized_rank(*c.op, c.rtol, 2, 0, 16);
        char tol[64];
        std::snprintf(tol, sizeof tol, "%.17g", r.tol);
        const std::string json = dir + "/" + c.name + "_rank.json";
        test::run_python("core/metrics/make_randomized_cases.py", {"rank", dir + "/" + c.name + ".npy", tol, json});
        std::ifstream in(json);
        const auto ref = nlohmann::json::parse(in);
        const Index np_rank = ref.at("rank").get<Index>();
        EXPECT_LE(r.lower, np_rank);
        EXPECT_GE(r.upper, np_rank);
        const auto s = ref.at("s").get<std::vector<double>>();
        check_bracket(r, s, c.rtol, c.op->rows());
        if (c.exact) {
            EXPECT_TRUE(r.converged);
            EXPECT_EQ(r.lower, np_rank);
            EXPECT_EQ(r.upper, np_rank);
        }
    }
}

}  // namespace
