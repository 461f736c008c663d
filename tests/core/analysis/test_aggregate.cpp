// Statistics over units (analysis/aggregate.h) against the NumPy reference (tests/reference/attnref.py,
// aggregate() and sign_test_p(), run by aggregate_reference.py) to 1e-12, on fixed batch-like records with
// nested metrics, nulls, ties, a unit one mechanism lacks and a metric one mechanism lacks; the sign test at
// n = 1, 2, 1000 and beyond the exact range; and the errors.
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "io/selection.h"
#include "support/test_support.h"
#include "util/rng.h"

namespace attnscope {
namespace {

using json = nlohmann::ordered_json;
using analysis::Aggregate;

// Seven units x three mechanisms, shaped like results.jsonl records (provenance fields, lists, strings,
// booleans, nested objects), the values drawn from a fixed generator.
std::vector<json> fixed_records()
{
    SplitMix64 rng(42);
    std::vector<json> out;
    const std::vector<std::string> mechanisms = {"softmax", "linear", "mhla"};
    for (int unit = 0; unit < 7; ++unit)
        for (std::size_t mi = 0; mi < mechanisms.size(); ++mi) {
            const std::string& m = mechanisms[mi];
            if (m == "mhla" && unit == 5)
                continue;   // not measured on this unit: pairs with mhla have n = 6
            json r;
            r["key"] = "f.h5|l=-|h=" + std::to_string(unit) + "|" + m;
            r["unit"] = unit;
            r["mechanism_index"] = mi;
            r["settings"] = "abcd";
            r["input"] = {{"file", "f.h5"}, {"n", 64}, {"d", 8}};
            r["layer"] = nullptr;
            r["head"] = unit;
            r["mechanism"] = m;
            r["params"] = {{"blocks", 4}};
            r["rank"] = 8 + static_cast<int>(rng.uniform() * 3);   // small integers: ties between mechanisms
            r["effective_rank"] = 5.0 + 10.0 * rng.uniform() * static_cast<double>(mi + 1);
            r["singular_values"] = {3.0, 2.0, 1.0};
            r["exact"] = true;
            r["entropy"] = {{"mean", 1.0 + rng.uniform()}, {"std", unit == 3 ? json() : json(rng.uniform())}};
            r["rank_at_rtol"] = {{"1e-2", 3 + unit % 2}, {"1e-3", 5}};
            if (m == "mhla")
                r["mixing_rank"] = 2 + unit % 3;   // only MHLA has it: no pair row
            r["warnings"] = json::array({"a warning"});
            r["seconds"] = 0.1 * unit;
            out.push_back(std::move(r));
        }
    return out;
}

double rel(double a, double b) { return std::abs(a - b) / std::max({std::abs(b), 1e-300}); }

void expect_close(double got, const json& want, const std::string& what)
{
    ASSERT_TRUE(want.is_number()) << what << ": reference gave " << want.dump();
    EXPECT_LE(rel(got, want.get<double>()), 1e-12) << what << ": " << got << " vs " << want.get<double>();
}

TEST(Aggregate, MatchesTheNumPyReference)
{
    const std::vector<json> records = fixed_records();
    const std::vector<std::pair<int, int>> counts = {{0, 0},  {1, 0},     {1, 1},     {0, 2},     {2, 0},    {3, 7},
                                                     {31, 31}, {0, 62},   {10, 53},   {0, 63},    {20, 60},  {400, 600},
                                                     {500, 500}, {0, 1000}, {1, 999}, {480, 520}, {2000, 2600}};
    const std::string dir = test::fresh_work_dir("aggregate_reference");
    {
        std::ofstream(dir + "/records.json") << json(records).dump();
        json c = json::array();
        for (const auto& [p, n] : counts)
            c.push_back({p, n});
        std::ofstream(dir + "/counts.json") << c.dump();
    }
    test::run_python("core/analysis/aggregate_reference.py", {dir + "/records.json", dir + "/counts.json", dir + "/out.json"});
    const json want = json::parse(test::read_text(dir + "/out.json"));

    const Aggregate got = analysis::aggregate(analysis::batch_unit_metrics(records));
    EXPECT_EQ(got.units, 7u);
    ASSERT_EQ(got.mechanisms.size(), want["mechanisms"].size());
    for (std::size_t i = 0; i < got.mechanisms.size(); ++i) {
        const auto& g = got.mechanisms[i];
        const json& w = want["mechanisms"][i];
        const std::string what = g.mechanism + " " + g.metric;
        EXPECT_EQ(g.mechanism, w["mechanism"].get<std::string>()) << i;
        EXPECT_EQ(g.metric, w["metric"].get<std::string>()) << i;
        EXPECT_EQ(g.n, w["n"].get<std::size_t>()) << what;
        expect_close(g.mean, w["mean"], what + " mean");
        if (w["std"].is_null())
            EXPECT_FALSE(g.std) << what;
        else if (g.std)
            expect_close(*g.std, w["std"], what + " std");
        else
            ADD_FAILURE() << what << ": no std";
        expect_close(g.ci_low, w["ci_low"], what + " ci_low");
        expect_close(g.ci_high, w["ci_high"], what + " ci_high");
    }
    ASSERT_EQ(got.pairs.size(), want["pairs"].size());
    for (std::size_t i = 0; i < got.pairs.size(); ++i) {
        const auto& g = got.pairs[i];
        const json& w = want["pairs"][i];
        const std::string what = g.mechanism_a + "-" + g.mechanism_b + " " + g.metric;
        EXPECT_EQ(g.mechanism_a, w["mechanism_a"].get<std::string>()) << i;
        EXPECT_EQ(g.mechanism_b, w["mechanism_b"].get<std::string>()) << i;
        EXPECT_EQ(g.metric, w["metric"].get<std::string>()) << i;
        EXPECT_EQ(g.n, w["n"].get<std::size_t>()) << what;
        expect_close(g.mean_diff, w["mean_diff"], what + " mean_diff");
        expect_close(g.ci_low, w["ci_low"], what + " ci_low");
        expect_close(g.ci_high, w["ci_high"], what + " ci_high");
        expect_close(g.p_sign, w["p_sign"], what + " p_sign");
    }
    for (std::size_t i = 0; i < counts.size(); ++i)
        expect_close(analysis::sign_test_p(counts[i].first, counts[i].second), want["sign_p"][i],
                     "sign test " + std::to_string(counts[i].first) + "/" + std::to_string(counts[i].second));
    // The JSON form carries the same rows (what aggregate.json holds).
    const json doc = analysis::aggregate_json(got);
    EXPECT_EQ(doc["mechanisms"].size(), want["mechanisms"].size());
    EXPECT_EQ(doc["pairs"].size(), want["pairs"].size());
}

TEST(Aggregate, RowsAreWhatTheRecordsHold)
{
    const Aggregate a = analysis::aggregate(analysis::batch_unit_metrics(fixed_records()));
    bool mixing_rank = false;
    for (const auto& s : a.mechanisms) {
        EXPECT_NE(s.metric, "seconds");   // provenance is not a metric
        EXPECT_NE(s.metric, "exact");     // nor a boolean
        EXPECT_EQ(s.metric.find("singular_values"), std::string::npos);
        EXPECT_LE(s.ci_low, s.mean + 1e-12) << s.mechanism << " " << s.metric;
        EXPECT_GE(s.ci_high, s.mean - 1e-12) << s.mechanism << " " << s.metric;
        if (s.metric == "entropy.std") {
            EXPECT_EQ(s.n, s.mechanism == "mhla" ? 5u : 6u);   // the null of unit 3 is left out
        }
        mixing_rank = mixing_rank || s.metric == "mixing_rank";
    }
    EXPECT_TRUE(mixing_rank);
    for (const auto& s : a.pairs) {
        EXPECT_NE(s.metric, "mixing_rank");   // only one mechanism has it
        EXPECT_EQ(s.n, s.mechanism_b == "mhla" ? (s.metric == "entropy.std" ? 5u : 6u) : (s.metric == "entropy.std" ? 6u : 7u));
        EXPECT_GT(s.p_sign, 0.0);
        EXPECT_LE(s.p_sign, 1.0);
    }
}

TEST(Aggregate, OneUnitHasNoSpread)
{
    analysis::UnitMetrics u{"0", "softmax", {{"rank", 4.0}}};
    const Aggregate a = analysis::aggregate({u});
    ASSERT_EQ(a.mechanisms.size(), 1u);
    EXPECT_EQ(a.mechanisms[0].n, 1u);
    EXPECT_FALSE(a.mechanisms[0].std);
    EXPECT_EQ(a.mechanisms[0].ci_low, 4.0);
    EXPECT_EQ(a.mechanisms[0].ci_high, 4.0);
    EXPECT_TRUE(a.pairs.empty());
}

TEST(Aggregate, SignTestAtOneTwoAndAThousand)
{
    EXPECT_EQ(analysis::sign_test_p(0, 0), 1.0);
    EXPECT_EQ(analysis::sign_test_p(1, 0), 1.0);
    EXPECT_EQ(analysis::sign_test_p(2, 0), 0.5);
    EXPECT_EQ(analysis::sign_test_p(1, 1), 1.0);
    EXPECT_LE(rel(analysis::sign_test_p(1000, 0), std::ldexp(1.0, -999)), 1e-12);
    EXPECT_EQ(analysis::sign_test_p(500, 500), 1.0);
    // Far past the exact range the log-space sum neither overflows nor underflows to nonsense.
    const double p = analysis::sign_test_p(5'000'000, 5'010'000);
    EXPECT_GT(p, 0.0);
    EXPECT_LT(p, 1.0);
    EXPECT_EQ(analysis::sign_test_p(0, 5'000'000), 0.0);   // below the smallest double
}

TEST(Aggregate, Errors)
{
    analysis::UnitMetrics u{"0", "softmax", {{"rank", 4.0}}};
    EXPECT_NE(test::message_of([&] { analysis::aggregate({u, u}); }).find("appears twice"), std::string::npos);
    analysis::AggregateOptions none;
    none.resamples = 0;
    EXPECT_NE(test::message_of([&] { analysis::aggregate({u}, none); }).find("resamples"), std::string::npos);
    EXPECT_NE(test::message_of([&] { analysis::batch_unit_metrics({json{{"mechanism", "softmax"}}}); }).find("unit index"),
              std::string::npos);
}

TEST(Aggregate, CsvHasOneRowPerStatistic)
{
    const Aggregate a = analysis::aggregate(analysis::batch_unit_metrics(fixed_records()));
    const std::string csv = analysis::aggregate_csv(a);
    std::size_t lines = 0;
    for (const char c : csv)
        lines += c == '\n';
    EXPECT_EQ(lines, 1 + a.mechanisms.size() + a.pairs.size());
    EXPECT_EQ(csv.rfind("kind,mechanism,mechanism_a,mechanism_b,metric,n,mean,std,mean_diff,ci_low,ci_high,p_sign\n", 0), 0u);
}

// `--at b=all`: the axes given as `all` are set apart from the indices; one axis may not be both.
TEST(Aggregate, AtAllParses)
{
    std::map<char, std::int64_t> at;
    std::set<char> all;
    io::parse_at_units(" b = all , h=2", at, all);
    EXPECT_EQ(at, (std::map<char, std::int64_t>{{'h', 2}}));
    EXPECT_EQ(all, (std::set<char>{'b'}));
    at.clear();
    all.clear();
    io::parse_at_units("", at, all);
    EXPECT_TRUE(at.empty() && all.empty());
    EXPECT_NE(test::message_of([&] { io::parse_at_units("b=all,b=1", at, all); }).find("given twice"), std::string::npos);
    all.clear();
    EXPECT_NE(test::message_of([&] { io::parse_at_units("b=all,b=all", at, all); }).find("given twice"), std::string::npos);
    all.clear();
    EXPECT_NE(test::message_of([&] { io::parse_at_units(",b=all", at, all); }).find("empty item"), std::string::npos);
    all.clear();
    EXPECT_NE(test::message_of([&] { io::parse_at_units("b=al", at, all); }).find("non-negative integer"), std::string::npos);
}

}  // namespace
}  // namespace attnscope
