#pragma once
// An aggregate (analysis/aggregate.h) against the NumPy reference's rows (tests/reference/attnref.py,
// aggregate()): every field of every row, numbers to 1e-12 relative, nulls where the reference has None.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"

namespace attnscope::test {

inline double rel_diff(double a, double b) { return std::abs(a - b) / std::max({std::abs(b), 1e-300}); }

// got against want: want null means got is NaN (not defined); otherwise within 1e-12 relative.
inline void expect_close_or_null(double got, const nlohmann::ordered_json& want, const std::string& what)
{
    if (want.is_null()) {
        EXPECT_TRUE(std::isnan(got)) << what << ": " << got << ", the reference has none";
        return;
    }
    ASSERT_TRUE(want.is_number()) << what << ": reference gave " << want.dump();
    EXPECT_LE(rel_diff(got, want.get<double>()), 1e-12) << what << ": " << got << " vs " << want.get<double>();
}

inline void expect_aggregate_matches(const analysis::Aggregate& got, const nlohmann::ordered_json& want)
{
    ASSERT_EQ(got.mechanisms.size(), want["mechanisms"].size());
    for (std::size_t i = 0; i < got.mechanisms.size(); ++i) {
        const auto& g = got.mechanisms[i];
        const auto& w = want["mechanisms"][i];
        const std::string what = g.mechanism + " " + g.metric;
        EXPECT_EQ(g.mechanism, w["mechanism"].get<std::string>()) << i;
        ASSERT_EQ(g.metric, w["metric"].get<std::string>()) << i;
        EXPECT_EQ(g.n, w["n"].get<std::size_t>()) << what;
        expect_close_or_null(g.mean, w["mean"], what + " mean");
        if (w["std"].is_null())
            EXPECT_FALSE(g.std) << what;
        else if (g.std)
            expect_close_or_null(*g.std, w["std"], what + " std");
        else
            ADD_FAILURE() << what << ": no std";
        expect_close_or_null(g.ci_low, w["ci_low"], what + " ci_low");
        expect_close_or_null(g.ci_high, w["ci_high"], what + " ci_high");
        EXPECT_EQ(g.clusters, w["clusters"].get<std::size_t>()) << what;
        EXPECT_EQ(analysis::to_string(g.ci_method), w["ci_method"].get<std::string>()) << what;
        EXPECT_EQ(g.agree, w["agree"].get<std::size_t>()) << what;
    }
    ASSERT_EQ(got.pairs.size(), want["pairs"].size());
    for (std::size_t i = 0; i < got.pairs.size(); ++i) {
        const auto& g = got.pairs[i];
        const auto& w = want["pairs"][i];
        const std::string what = g.mechanism_a + "-" + g.mechanism_b + " " + g.metric;
        EXPECT_EQ(g.mechanism_a, w["mechanism_a"].get<std::string>()) << i;
        EXPECT_EQ(g.mechanism_b, w["mechanism_b"].get<std::string>()) << i;
        ASSERT_EQ(g.metric, w["metric"].get<std::string>()) << i;
        EXPECT_EQ(g.n, w["n"].get<std::size_t>()) << what;
        expect_close_or_null(g.mean_diff, w["mean_diff"], what + " mean_diff");
        expect_close_or_null(g.ci_low, w["ci_low"], what + " ci_low");
        expect_close_or_null(g.ci_high, w["ci_high"], what + " ci_high");
        expect_close_or_null(g.p_sign, w["p_sign"], what + " p_sign");
        EXPECT_EQ(g.clusters, w["clusters"].get<std::size_t>()) << what;
        EXPECT_EQ(analysis::to_string(g.ci_method), w["ci_method"].get<std::string>()) << what;
        EXPECT_EQ(g.agree, w["agree"].get<std::size_t>()) << what;
        expect_close_or_null(g.p_t, w["p_t"], what + " p_t");
        expect_close_or_null(g.p_holm, w["p_holm"], what + " p_holm");
    }
}

}  // namespace attnscope::test
