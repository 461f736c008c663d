// Statistics over units (analysis/aggregate.h) against the NumPy reference (tests/reference/attnref.py,
// aggregate() and sign_test_p(), run by aggregate_reference.py) to 1e-12, on fixed batch-like records with
// nested metrics, nulls, ties, a unit one mechanism lacks and a metric one mechanism lacks; the sign test at
// n = 1, 2, 1000 and beyond the exact range; and the errors.
#include <cmath>
#include <limits>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "analysis/small_sample.h"
#include "core/analysis/aggregate_compare.h"
#include "io/selection.h"
#include "support/test_support.h"
#include "util/rng.h"

namespace attnscope {
namespace {

using json = nlohmann::ordered_json;
using analysis::Aggregate;

// `units` units (seven: t intervals, fewer than ten; twelve: the bootstrap) x three mechanisms, shaped like
// results.jsonl records (provenance fields, lists, strings, booleans, nested objects), the values drawn from a
// fixed generator.
std::vector<json> fixed_records(int units = 7)
{
    SplitMix64 rng(42);
    std::vector<json> out;
    const std::vector<std::string> mechanisms = {"softmax", "linear", "mhla"};
    for (int unit = 0; unit < units; ++unit)
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

// Seven units (t intervals over the units, agree, t tests, Holm) and twelve (the percentile bootstrap).
TEST(Aggregate, MatchesTheNumPyReference)
{
    const std::vector<std::pair<int, int>> counts = {{0, 0},  {1, 0},     {1, 1},     {0, 2},     {2, 0},    {3, 7},
                                                     {31, 31}, {0, 62},   {10, 53},   {0, 63},    {20, 60},  {400, 600},
                                                     {500, 500}, {0, 1000}, {1, 999}, {480, 520}, {2000, 2600}};
    for (const int units : {7, 12}) {
        SCOPED_TRACE(std::to_string(units) + " units");
        const std::vector<json> records = fixed_records(units);
        const std::string dir = test::fresh_work_dir(std::string("aggregate_reference_").append(std::to_string(units)));
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
        EXPECT_EQ(got.units, static_cast<std::size_t>(units));
        test::expect_aggregate_matches(got, want);
        for (const auto& s : got.mechanisms)
            EXPECT_EQ(s.ci_method, units < 10 ? analysis::CiMethod::t : analysis::CiMethod::bootstrap) << s.metric;
        for (std::size_t i = 0; i < counts.size(); ++i)
            expect_close(analysis::sign_test_p(counts[i].first, counts[i].second), want["sign_p"][i],
                         "sign test " + std::to_string(counts[i].first) + "/" + std::to_string(counts[i].second));
        // The JSON form carries the same rows (what aggregate.json holds), and the sentence when G < 10.
        const json doc = analysis::aggregate_json(got);
        EXPECT_EQ(doc["mechanisms"].size(), want["mechanisms"].size());
        EXPECT_EQ(doc["pairs"].size(), want["pairs"].size());
        EXPECT_EQ(doc.contains("note"), units < 10);
    }
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
    EXPECT_TRUE(std::isnan(a.mechanisms[0].ci_low));   // one unit: no interval, and the documents say so
    EXPECT_TRUE(std::isnan(a.mechanisms[0].ci_high));
    EXPECT_EQ(a.mechanisms[0].ci_method, analysis::CiMethod::none);
    EXPECT_TRUE(a.pairs.empty());
    const json doc = analysis::aggregate_json(a);
    EXPECT_TRUE(doc["mechanisms"][0]["ci_low"].is_null());
    EXPECT_EQ(doc["mechanisms"][0]["ci_method"], "none");
    EXPECT_NE(doc["note"].get<std::string>().find("no interval can be given"), std::string::npos);
    EXPECT_NE(analysis::aggregate_csv(a).find("mechanism,softmax,,,rank,1,4,,,,,,1,none,1,,\n"), std::string::npos);
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
    EXPECT_EQ(csv.rfind("kind,mechanism,mechanism_a,mechanism_b,metric,n,mean,std,mean_diff,ci_low,ci_high,p_sign,clusters,"
                        "ci_method,agree,p_t,p_holm\n", 0), 0u);
}

// Student's t (analysis/small_sample.h) against mpmath at 40 digits (attnref.py): quantiles at the levels
// intervals use and the tails t tests use, from 1 to 1000 degrees of freedom, to 1e-12 relative.
TEST(SmallSample, StudentTMatchesScipy)
{
    json cases;
    cases["quantile"] = json::array();
    cases["sf"] = json::array();
    for (const double df : {1.0, 2.0, 3.0, 4.0, 5.0, 8.0, 9.0, 29.0, 1000.0}) {
        for (const double q : {0.975, 0.995, 0.9, 0.6, 0.025, 0.5000001})
            cases["quantile"].push_back({q, df});
        for (const double t : {0.0, 0.1, 1.0, 2.0, 4.3, 12.7, 100.0, -1.5, 1e4})
            cases["sf"].push_back({t, df});
    }
    const std::string dir = test::fresh_work_dir("student_t");
    std::ofstream(dir + "/cases.json") << cases.dump();
    test::run_python("core/analysis/small_sample_reference.py", {dir + "/cases.json", dir + "/out.json"});
    const json want = json::parse(test::read_text(dir + "/out.json"));
    for (std::size_t i = 0; i < cases["quantile"].size(); ++i) {
        const double q = cases["quantile"][i][0], df = cases["quantile"][i][1];
        const double w = want["quantile"][i];
        // Relative to the quantile, or 1e-15 absolute next to the median (t ~ 2.5e-7 at q = 0.5000001, where the
        // tail's last bit is worth 1e-10 of t).
        EXPECT_LE(std::abs(analysis::student_t_quantile(q, df) - w), std::max(1e-12 * std::abs(w), 1e-15)) << q << " " << df;
    }
    for (std::size_t i = 0; i < cases["sf"].size(); ++i) {
        const double t = cases["sf"][i][0], df = cases["sf"][i][1];
        const std::string what = std::string("sf(").append(std::to_string(t)).append(", ").append(std::to_string(df)).append(")");
        expect_close(analysis::student_t_sf(t, df), want["sf"][i], what);
    }
    EXPECT_TRUE(std::isnan(analysis::student_t_quantile(1.0, 3.0)));
    EXPECT_TRUE(std::isnan(analysis::student_t_sf(1.0, 0.0)));
}

// Holm's adjustment on a known table (p sorted 0.01, 0.02, 0.03, 0.5 of four: 0.04, 0.06, 0.06, 0.5), with a
// missing p left out of the count.
TEST(SmallSample, HolmStepDown)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::vector<double> adj = analysis::holm_adjust({0.03, 0.5, nan, 0.01, 0.02});
    EXPECT_DOUBLE_EQ(adj[0], 0.06);
    EXPECT_DOUBLE_EQ(adj[1], 0.5);
    EXPECT_TRUE(std::isnan(adj[2]));
    EXPECT_DOUBLE_EQ(adj[3], 0.04);
    EXPECT_DOUBLE_EQ(adj[4], 0.06);
    EXPECT_DOUBLE_EQ(analysis::holm_adjust({0.4, 0.9})[1], 0.9);
    EXPECT_DOUBLE_EQ(analysis::holm_adjust({0.6, 0.9})[0], 1.0);   // capped at 1
}

// Three seeds as clusters: t intervals over the seed means (wide, as they must be), agree = 3 of 3 only when
// every seed agrees, the cluster-level t test, and the sentence; thirty seeds: the two-stage bootstrap, no
// sentence.
TEST(SmallSample, ThreeSeedsAreJudgedAsThree)
{
    const auto records_of = [](int seeds, const std::vector<double>& shift) {
        std::vector<analysis::UnitMetrics> out;
        SplitMix64 rng(3);
        for (int u = 0; u < 10 * seeds; ++u) {
            const int seed = u % seeds;
            const double base = rng.uniform();
            out.push_back({std::to_string(u), "mhla", {{"x", base + shift[static_cast<std::size_t>(seed) % shift.size()]}},
                           std::string("s").append(std::to_string(seed))});
            out.push_back({std::to_string(u), "linear", {{"x", base}}, std::string("s").append(std::to_string(seed))});
        }
        return out;
    };
    const Aggregate three = analysis::aggregate(records_of(3, {0.3, 0.2, -0.1}));
    ASSERT_EQ(three.pairs.size(), 1u);
    const analysis::PairStats& p = three.pairs[0];
    EXPECT_EQ(p.ci_method, analysis::CiMethod::t);
    EXPECT_EQ(p.clusters, 3u);
    EXPECT_EQ(p.agree, 2u);   // the third seed goes the other way
    EXPECT_LT(p.ci_low, 0.0);  // so the interval over three seeds holds 0
    EXPECT_GT(p.ci_high, 0.0);
    // By hand: seed means of the differences 0.3, 0.2, -0.1 exactly (the base cancels), t_{0.975,2} = 4.30265272975 (mpmath;
    // scipy says 4.3026527299).
    const double mean = 0.4 / 3, sd = std::sqrt(((0.3 - mean) * (0.3 - mean) + (0.2 - mean) * (0.2 - mean) +
                                                 (-0.1 - mean) * (-0.1 - mean)) / 2.0);
    EXPECT_NEAR(p.ci_high - p.ci_low, 2 * 4.302652729749462 * sd / std::sqrt(3.0), 1e-12);
    EXPECT_DOUBLE_EQ(p.p_sign, 1.0);          // 2 of 3: p = 1
    EXPECT_DOUBLE_EQ(p.p_holm, p.p_t);        // one comparison
    EXPECT_GT(p.p_t, 0.05);
    const std::string note = analysis::few_clusters_note(three);
    EXPECT_NE(note.find("with 3 clusters no two-sided sign test can reach p < 0.05 (the smallest possible p is 0.25)"),
              std::string::npos) << note;
    const Aggregate thirty = analysis::aggregate(records_of(30, {0.3, 0.2, 0.1}));
    EXPECT_EQ(thirty.pairs[0].ci_method, analysis::CiMethod::two_stage_bootstrap);
    EXPECT_EQ(thirty.pairs[0].agree, 30u);
    EXPECT_TRUE(analysis::few_clusters_note(thirty).empty());
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
