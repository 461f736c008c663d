// The two-stage (cluster) bootstrap of analysis/aggregate.h (docs/maths.md 5): against the NumPy reference
// (tests/reference/attnref.py, cluster_bootstrap_interval() through aggregate(), run by aggregate_reference.py
// with a cluster field) to 1e-12 on batch-like records of unequal clusters; its statistical point (clustered
// data: the two-stage interval is wider than the one that treats every unit as independent, and covers the
// spread between clusters); the sign test over clusters; the errors; `aggregate_by` with a cluster field.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "core/analysis/aggregate_compare.h"
#include "support/test_support.h"
#include "util/rng.h"

namespace attnscope {
namespace {

using json = nlohmann::ordered_json;
using analysis::Aggregate;

// 23 units in three "seeds" (files) of 10, 8 and 5 units (or, with `many`, 60 units in twelve files of five),
// three mechanisms; each file shifts every value, so units of one file are alike (what clustering is for).
// mhla lacks unit 4; entropy is null on unit 7.
std::vector<json> clustered_records(bool many = false)
{
    SplitMix64 rng(7);
    std::vector<json> out;
    const std::vector<std::string> mechanisms = {"softmax", "linear", "mhla"};
    for (int unit = 0; unit < (many ? 60 : 23); ++unit) {
        const int file = many ? unit / 5 : unit < 10 ? 0 : unit < 18 ? 1 : 2;
        for (std::size_t mi = 0; mi < mechanisms.size(); ++mi) {
            if (mechanisms[mi] == "mhla" && unit == 4)
                continue;
            json r;
            r["unit"] = unit;
            r["input"] = {{"file", "model_s" + std::to_string(file) + ".h5"}, {"n", 64}, {"d", 8}, {"at", {{"b", unit}}}};
            r["layer"] = unit % 2;
            r["head"] = unit % 3;
            r["mechanism"] = mechanisms[mi];
            r["rank"] = 8 + static_cast<int>(rng.uniform() * 3) + file;
            r["effective_rank"] = 3.0 * file + rng.uniform() * static_cast<double>(mi + 1);
            r["entropy"] = {{"mean", unit == 7 ? json() : json(1.0 + 0.5 * file + rng.uniform())}};
            out.push_back(std::move(r));
        }
    }
    return out;
}

// Three files: t intervals over the file means; twelve: the two-stage bootstrap.
TEST(AggregateCluster, MatchesTheNumPyReference)
{
    for (const bool many : {false, true}) {
        SCOPED_TRACE(many ? "twelve files" : "three files");
        const std::vector<json> records = clustered_records(many);
        const std::string dir = test::fresh_work_dir(many ? "aggregate_cluster_reference_12" : "aggregate_cluster_reference");
        std::ofstream(dir + "/records.json") << json(records).dump();
        std::ofstream(dir + "/counts.json") << "[]";
        test::run_python("core/analysis/aggregate_reference.py",
                         {dir + "/records.json", dir + "/counts.json", dir + "/out.json", "file"});
        const json want = json::parse(test::read_text(dir + "/out.json"));

        const Aggregate got = analysis::aggregate(analysis::batch_unit_metrics(records, "file"));
        EXPECT_TRUE(got.clustered);
        test::expect_aggregate_matches(got, want);
        for (const auto& g : got.mechanisms) {
            EXPECT_EQ(g.clusters, many ? 12u : 3u) << g.metric;
            EXPECT_EQ(g.ci_method, many ? analysis::CiMethod::two_stage_bootstrap : analysis::CiMethod::t) << g.metric;
        }
        // The JSON and CSV forms say how many clusters and how each interval was made.
        const json doc = analysis::aggregate_json(got);
        EXPECT_EQ(doc["mechanisms"][0]["clusters"], many ? 12 : 3);
        EXPECT_EQ(doc["mechanisms"][0]["ci_method"], many ? "two-stage bootstrap" : "t");
        const std::string csv = analysis::aggregate_csv(got);
        EXPECT_EQ(csv.substr(0, csv.find('\n')), "kind,mechanism,mechanism_a,mechanism_b,metric,n,mean,std,mean_diff,ci_low,"
                                                 "ci_high,p_sign,clusters,ci_method,agree,p_t,p_holm");
    }
}

// Three clusters whose means are 0, 10 and 20 with a small spread inside: units are far from independent.
// Treating the 300 units as independent gives an interval of about +-0.9 around 10; resampling the clusters
// first gives one that reaches towards the cluster means (a resample of three clusters has mean 10 only when it
// draws one of each), and it still contains the mean.
TEST(AggregateCluster, WiderThanTheUnitBootstrapOnClusteredData)
{
    SplitMix64 rng(3);
    std::vector<std::vector<double>> clusters(3);
    std::vector<double> all;
    for (int c = 0; c < 3; ++c)
        for (int i = 0; i < 100; ++i) {
            clusters[static_cast<std::size_t>(c)].push_back(10.0 * c + rng.normal());
            all.push_back(clusters[static_cast<std::size_t>(c)].back());
        }
    const auto [ulo, uhi] = analysis::bootstrap_interval(all);
    const auto [clo, chi] = analysis::cluster_bootstrap_interval(clusters);
    double mean = 0;
    for (const double v : all)
        mean += v / static_cast<double>(all.size());
    EXPECT_LT(uhi - ulo, 2.5);
    EXPECT_GT(chi - clo, 8.0);
    EXPECT_LT(clo, mean);
    EXPECT_GT(chi, mean);
    EXPECT_GE(clo, 0.0 - 1.0);   // no resample leaves the range of the clusters' means
    EXPECT_LE(chi, 20.0 + 1.0);
    // One cluster: the second stage alone, a plain bootstrap of its units (other draws, same kind of width).
    const auto [olo, ohi] = analysis::cluster_bootstrap_interval({clusters[1]});
    EXPECT_LT(olo, 10.5);
    EXPECT_GT(ohi, 9.5);
    EXPECT_LT(ohi - olo, 1.0);
    // Constant clusters: no spread to resample.
    const auto [klo, khi] = analysis::cluster_bootstrap_interval({{2.0, 2.0}, {2.0}, {2.0, 2.0, 2.0}});
    EXPECT_EQ(klo, 2.0);
    EXPECT_EQ(khi, 2.0);
}

// A pair's sign test over clusters: three clusters can never give p below 0.25, whatever the units say.
TEST(AggregateCluster, SignTestIsOverClusters)
{
    std::vector<analysis::UnitMetrics> records;
    for (int u = 0; u < 30; ++u)
        for (const char* m : {"a", "b"})
            records.push_back({std::to_string(u), m, {{"x", std::string(m) == "a" ? 1.0 + u : 0.0}}, std::string("s").append(std::to_string(u % 3))});
    const Aggregate clustered = analysis::aggregate(records);
    ASSERT_EQ(clustered.pairs.size(), 1u);
    EXPECT_EQ(clustered.pairs[0].clusters, 3u);
    EXPECT_DOUBLE_EQ(clustered.pairs[0].p_sign, 0.25);   // 3 of 3 positive: 2 / 2^3
    for (auto& r : records)
        r.cluster.clear();
    const Aggregate units = analysis::aggregate(records);
    EXPECT_EQ(units.pairs[0].clusters, 30u);   // unclustered: every unit is its own cluster
    EXPECT_LT(units.pairs[0].p_sign, 1e-8);   // 30 of 30 positive
    EXPECT_EQ(units.pairs[0].mean_diff, clustered.pairs[0].mean_diff);
}

TEST(AggregateCluster, Errors)
{
    const analysis::UnitMetrics a{"0", "softmax", {{"rank", 4.0}}, "s0"};
    const analysis::UnitMetrics b{"1", "softmax", {{"rank", 5.0}}, ""};
    EXPECT_NE(test::message_of([&] { analysis::aggregate({a, b}); }).find("names no cluster"), std::string::npos);
    EXPECT_NE(test::message_of([&] { analysis::aggregate({b, a}); }).find("names a cluster"), std::string::npos);
    const analysis::UnitMetrics moved{"0", "linear", {{"rank", 4.0}}, "s1"};
    EXPECT_NE(test::message_of([&] { analysis::aggregate({a, moved}); }).find("two clusters"), std::string::npos);
    EXPECT_NE(test::message_of([&] { analysis::cluster_bootstrap_interval({}); }).find("no clusters"), std::string::npos);
    EXPECT_NE(test::message_of([&] { analysis::cluster_bootstrap_interval({{1.0}, {}}); }).find("empty cluster"),
              std::string::npos);
    const std::vector<json> records = clustered_records();
    EXPECT_NE(test::message_of([&] { analysis::aggregate_by(records, {"file"}, "--by", {}, "file"); }).find("also a --by"),
              std::string::npos);
    EXPECT_NE(test::message_of([&] { analysis::aggregate_by(records, {}, "--by", {}, "seed"); }).find("--cluster: 'seed'"),
              std::string::npos);
}

// Grouped by layer and clustered by file: each group's rows count the files its units come from.
TEST(AggregateCluster, GroupsKeepTheirClusters)
{
    const auto groups = analysis::aggregate_by(clustered_records(), {"layer"}, "--by", {}, "file");
    ASSERT_EQ(groups.size(), 2u);
    for (const auto& g : groups) {
        EXPECT_TRUE(g.stats.clustered);
        for (const auto& r : g.stats.mechanisms)
            EXPECT_EQ(r.clusters, 3u) << r.mechanism << " " << r.metric;
    }
}

}  // namespace
}  // namespace attnscope
