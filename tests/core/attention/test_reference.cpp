// Every case of make_cases.py: the operator's dense matrix, apply / apply_transpose, allowed keys and
// metrics against the independent NumPy reference (tests/reference/attnref.py).
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attention/operator.h"
#include "case_options.h"
#include "metrics/metrics.h"
#include "support/test_support.h"

namespace {

using namespace attnscope;
using attention::Index;
using Eigen::MatrixXd;

struct Case {
    std::string name;
    attention::Mechanism mechanism;
    attention::AttentionOptions options;
    std::optional<double> rank_rtol;
    MatrixXd Q, K, A;
    std::vector<Index> allowed;
    nlohmann::json metrics;
};

std::vector<Case> load_cases(const std::string& tag)
{
    const std::string dir = test::fresh_work_dir("attention_reference_" + tag);
    test::run_python("core/attention/make_cases.py", {dir});
    std::ifstream in(dir + "/cases.json");
    const nlohmann::json all = nlohmann::json::parse(in);
    std::vector<Case> cases;
    for (const auto& c : all) {
        Case k;
        k.name = c.at("name").get<std::string>();
        k.mechanism = attention::parse_mechanism(c.at("mechanism").get<std::string>());
        k.options = test::options_from_json(c.at("options"), dir);
        if (!c.at("rank_rtol").is_null())
            k.rank_rtol = c.at("rank_rtol").get<double>();
        k.Q = test::read_npy_simple(dir + "/" + c.at("q").get<std::string>());
        k.K = test::read_npy_simple(dir + "/" + c.at("k").get<std::string>());
        k.A = test::read_npy_simple(dir + "/" + c.at("a").get<std::string>());
        k.allowed = c.at("allowed").get<std::vector<Index>>();
        k.metrics = c.at("metrics");
        cases.push_back(std::move(k));
    }
    return cases;
}

double rel(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

TEST(AttentionReference, DenseMatchesNumPy)
{
    const auto cases = load_cases("dense");
    ASSERT_GE(cases.size(), 60u);
    double worst = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const auto op = attention::make_operator(c.mechanism, c.Q, c.K, c.options);
        ASSERT_EQ(op->rows(), c.A.rows());
        const MatrixXd A = op->dense();
        const double d = test::max_rel_diff(A, c.A);
        worst = std::max(worst, d);
        EXPECT_LE(d, 1e-10);
        EXPECT_EQ(op->allowed_keys(), c.allowed);
        EXPECT_EQ(op->mechanism(), c.mechanism);
    }
    std::printf("max relative difference of dense() vs NumPy over %zu cases: %.3g\n", cases.size(), worst);
}

TEST(AttentionReference, ApplyMatchesNumPy)
{
    const auto cases = load_cases("apply");
    double worst = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const auto op = attention::make_operator(c.mechanism, c.Q, c.K, c.options);
        const Index n = c.A.rows();
        const MatrixXd X = MatrixXd::Random(n, 3);
        MatrixXd Y(n, 3), Yt(n, 3);
        op->apply(X, Y);
        op->apply_transpose(X, Yt);
        const MatrixXd Yref = c.A * X, Ytref = c.A.transpose() * X;
        const double d = std::max(test::max_rel_diff(Y, Yref), test::max_rel_diff(Yt, Ytref));
        worst = std::max(worst, d);
        EXPECT_LE(d, 1e-10);
    }
    std::printf("max relative difference of apply / apply_transpose vs NumPy: %.3g\n", worst);
}

TEST(AttentionReference, MetricsMatchNumPy)
{
    const auto cases = load_cases("metrics");
    double worst_sv = 0, worst_scalar = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const auto op = attention::make_operator(c.mechanism, c.Q, c.K, c.options);
        MatrixXd A = op->dense();
        const Index n = A.rows();
        const auto& m = c.metrics;

        const auto sm = metrics::spectrum_metrics(metrics::singular_values(MatrixXd(A)), n, n, c.rank_rtol);
        const auto sref = m.at("singular_values").get<std::vector<double>>();
        ASSERT_EQ(sm.singular_values.size(), sref.size());
        for (std::size_t i = 0; i < sref.size(); ++i) {
            const double d = std::abs(sm.singular_values[i] - sref[i]) / sref[0];
            worst_sv = std::max(worst_sv, d);
            EXPECT_LE(d, 1e-10) << "singular value " << i;
        }
        EXPECT_EQ(sm.rank, m.at("rank").get<Index>());
        EXPECT_DOUBLE_EQ(sm.relative_rank, m.at("relative_rank").get<double>());
        for (const auto& [mine, key] : {std::pair{sm.tol, "rank_tol"}, std::pair{sm.effective_rank, "effective_rank"},
                                        std::pair{sm.stable_rank, "stable_rank"}}) {
            const double r = std::abs(mine - m.at(key).get<double>()) / std::max(std::abs(m.at(key).get<double>()), 1e-300);
            worst_scalar = std::max(worst_scalar, r);
            EXPECT_LE(r, 1e-10) << key;
        }

        if (m.at("entropy").is_null()) {
            EXPECT_TRUE(op->may_be_negative());
            EXPECT_THROW(metrics::row_entropy(A, op->allowed_keys()), std::invalid_argument);
            continue;
        }
        const auto e = metrics::row_entropy(A, op->allowed_keys());
        const auto& er = m.at("entropy");
        for (const auto& [mine, key] : {std::pair{e.mean, "mean"}, std::pair{e.std, "std"}, std::pair{e.min, "min"},
                                        std::pair{e.max, "max"}, std::pair{e.normalized_mean, "normalized_mean"}}) {
            const double r = rel(mine, er.at(key).get<double>());
            worst_scalar = std::max(worst_scalar, r);
            EXPECT_LE(r, 1e-10) << "entropy " << key;
        }
        const auto rows = m.at("row_entropy").get<std::vector<double>>();
        ASSERT_EQ(e.rows.size(), rows.size());
        for (std::size_t t = 0; t < rows.size(); ++t)
            EXPECT_LE(rel(e.rows[t], rows[t]), 1e-10) << "row " << t;
    }
    std::printf("max singular value difference / s1: %.3g; max relative difference of tol, ranks, entropies: %.3g\n",
                worst_sv, worst_scalar);
}

}  // namespace
