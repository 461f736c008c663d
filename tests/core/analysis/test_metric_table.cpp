// The metric table (analysis/metric_table.h): names unique, every reader equal to the field it reads on
// each spectrum path, the analyze JSON and the flat files written from it, and the pooling of a sweep's
// points (metrics/pooling.h, analysis::sweep_curves) against a direct computation over the values.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "analysis/metric_table.h"
#include "analysis/sweep.h"
#include "metrics/pooling.h"

using namespace attnscope;
using analysis::MechanismResult;
using analysis::MetricEntry;
using analysis::MetricGroup;

namespace {

// A result on the dense path with distinct values everywhere.
MechanismResult full_result()
{
    MechanismResult r;
    metrics::SpectrumMetrics s;
    s.singular_values = {3.5, 1.25, 0.5};
    s.tol = 1e-13;
    s.rank = 3;
    s.relative_rank = 0.75;
    s.effective_rank = 2.25;
    s.stable_rank = 1.375;
    s.energy_rank_90 = 2;
    s.energy_rank_99 = 3;
    s.rank_at_rtol = {1, 2, 3, 4, 5, 6, 7};   // distinct, to catch a reader of the wrong tolerance
    r.spectrum = s;
    r.spectrum_method = "dense";
    metrics::EntropyStats e;
    e.mean = 1.5;
    e.std = 0.25;
    e.min = 0.125;
    e.max = 2.75;
    e.normalized_mean = 0.625;
    e.rows = {1.0, 2.0};
    r.entropy = e;
    r.support_normalized_mean = 0.875;
    metrics::SpectrumMetrics b;
    b.rank = 9;
    b.effective_rank = 1.75;
    b.stable_rank = 1.125;
    b.energy_rank_90 = 11;
    b.energy_rank_99 = 12;
    metrics::EntropyStats be;
    be.mean = 2.5;
    be.normalized_mean = 0.9375;
    r.baseline = analysis::BaselineResult{b, be};
    metrics::SpectrumMetrics p;
    p.rank = 13;
    p.effective_rank = 4.5;
    p.energy_rank_90 = 14;
    p.energy_rank_99 = 15;
    r.past_block_asked = true;
    r.past_block = analysis::PastBlockResult{16, 17, 18, p};
    analysis::PastProfileResult profile;
    profile.splits = {{4, 31, 4, 4, 3}, {16, 19, 16, 19, 9}};
    profile.semiseparable_rank = 19;
    profile.method = "factors";
    r.past_profile = profile;
    r.logit_norm = 6.5;
    r.locality_asked = true;
    r.locality = analysis::Locality{3.25, {{1, 0.125}, {2, 0.25}, {4, 0.5}, {8, 0.75}, {16, 0.875}}};
    metrics::SpectrumMetrics out;
    out.rank = 21;
    out.effective_rank = 5.5;
    out.energy_rank_99 = 22;
    r.output_asked = true;
    r.output = out;
    r.retrieval_asked = true;
    r.retrieval_mass = 0.375;
    r.retrieval_rank = 2.5;
    return r;
}

// The field each key names, read by hand (the table's readers must agree).
std::map<std::string, double> fields_of(const MechanismResult& r)
{
    const auto& s = *r.spectrum;
    const auto& e = *r.entropy;
    return {{"rank", static_cast<double>(s.rank)},
            {"rank_tol", s.tol},
            {"relative_rank", s.relative_rank},
            {"effective_rank", s.effective_rank},
            {"stable_rank", s.stable_rank},
            {"s1", s.singular_values.front()},
            {"entropy_mean", e.mean},
            {"entropy_std", e.std},
            {"entropy_min", e.min},
            {"entropy_max", e.max},
            {"entropy_normalized_mean", e.normalized_mean},
            {"energy_rank_90", 2.0},
            {"energy_rank_99", 3.0},
            {"rank_at_rtol_1e-2", 1.0},
            {"rank_at_rtol_1e-3", 2.0},
            {"rank_at_rtol_1e-4", 3.0},
            {"rank_at_rtol_1e-6", 4.0},
            {"rank_at_rtol_1e-8", 5.0},
            {"rank_at_rtol_1e-10", 6.0},
            {"rank_at_rtol_1e-12", 7.0},
            {"entropy_support_normalized_mean", 0.875},
            {"baseline_rank", 9.0},
            {"baseline_effective_rank", 1.75},
            {"baseline_stable_rank", 1.125},
            {"baseline_energy_rank_90", 11.0},
            {"baseline_energy_rank_99", 12.0},
            {"baseline_entropy_mean", 2.5},
            {"baseline_entropy_normalized_mean", 0.9375},
            {"excess_effective_rank", s.effective_rank - 1.75},
            {"entropy_below_baseline", 2.5 - e.mean},
            {"past_block_rows", 17.0},
            {"past_block_cols", 18.0},
            {"past_block_rank", 13.0},
            {"past_block_effective_rank", 4.5},
            {"past_block_energy_rank_90", 14.0},
            {"past_block_energy_rank_99", 15.0},
            {"semiseparable_rank", 19.0},
            {"logit_norm", 6.5},
            {"mean_distance", 3.25},
            {"mass_within_1", 0.125},
            {"mass_within_4", 0.5},
            {"mass_within_16", 0.875},
            {"retrieval_mass", 0.375},
            {"retrieval_rank", 2.5},
            {"output_rank", 21.0},
            {"output_effective_rank", 5.5},
            {"output_energy_rank_99", 22.0}};
}

}  // namespace

TEST(MetricTable, NamesAreUnique)
{
    std::set<std::string> keys, fields, csv_keys, labels, titles;
    std::set<int> rows;
    for (const MetricEntry& e : analysis::metric_table()) {
        EXPECT_TRUE(keys.insert(std::string(e.key)).second) << e.key;
        EXPECT_TRUE(fields.insert(std::string(analysis::json_object_of(e.group)) + "/" + std::string(e.field)).second) << e.key;
        EXPECT_TRUE(labels.insert(std::string(e.label)).second) << e.key;
        EXPECT_TRUE(titles.insert(std::string(e.title)).second) << e.key;
        EXPECT_NE(e.read, nullptr) << e.key;
        // The flat key joins the group's object and the field (a nested field's '.' written '_').
        const std::string_view object = analysis::json_object_of(e.group);
        std::string field(e.field);
        std::replace(field.begin(), field.end(), '.', '_');
        EXPECT_EQ(e.key, object.empty() ? field : std::string(object) + "_" + field);
        if (e.used_in(analysis::use_metrics_view)) {
            EXPECT_TRUE(rows.insert(e.view_row).second) << e.key;
            EXPECT_TRUE(csv_keys.insert(std::string(e.metrics_csv_key())).second) << e.key;
        }
        EXPECT_EQ(analysis::find_metric(e.key), &e);
    }
    EXPECT_EQ(analysis::find_metric("no_such_metric"), nullptr);
    EXPECT_FALSE(keys.count("seconds"));   // a sweep's own column, never a metric's key
}

TEST(MetricTable, ReadersMatchTheResultFields)
{
    const MechanismResult r = full_result();
    const auto fields = fields_of(r);
    ASSERT_EQ(fields.size(), analysis::metric_table().size());
    for (const MetricEntry& e : analysis::metric_table()) {
        const auto v = e.read(r);
        ASSERT_TRUE(v) << e.key;
        EXPECT_EQ(*v, fields.at(std::string(e.key))) << e.key;
    }

    // No entropy (undefined), no spectrum, no baseline, no past block: every reader has nothing.
    MechanismResult none = r;
    none.entropy.reset();
    none.spectrum.reset();
    none.support_normalized_mean.reset();
    none.baseline.reset();
    none.past_block.reset();
    none.past_profile.reset();
    none.logit_norm.reset();
    none.locality.reset();
    none.output.reset();
    none.retrieval_mass.reset();
    none.retrieval_rank.reset();
    for (const MetricEntry& e : analysis::metric_table())
        EXPECT_FALSE(e.read(none)) << e.key;

    // The top-k values alone: s_1 is known, the ranks are not.
    MechanismResult top = r;
    top.partial_spectrum = true;
    for (const MetricEntry& e : analysis::metric_table()) {
        if (e.group != MetricGroup::spectrum)
            continue;
        EXPECT_EQ(e.read(top).has_value(), e.key == "s1") << e.key;
    }

    // A randomized bracket: rank_tol always, the rank only when the bounds meet.
    MechanismResult bracket = r;
    bracket.partial_spectrum = true;
    bracket.spectrum->singular_values.clear();
    bracket.rank_bracket = metrics::RandomizedRank{};
    bracket.rank_bracket->lower = 4;
    bracket.rank_bracket->upper = 6;
    bracket.rank_bracket->tol = 0.01;
    const MetricEntry& rank = *analysis::find_metric("rank");
    const MetricEntry& tol = *analysis::find_metric("rank_tol");
    EXPECT_FALSE(rank.read(bracket));
    EXPECT_EQ(tol.read(bracket), 0.01);
    bracket.rank_bracket->upper = 4;
    EXPECT_EQ(rank.read(bracket), 4.0);
    for (const char* key : {"relative_rank", "effective_rank", "stable_rank", "s1"})
        EXPECT_FALSE(analysis::find_metric(key)->read(bracket)) << key;
}

TEST(MetricTable, AnalyzeJsonIsWrittenFromTheReaders)
{
    const MechanismResult r = full_result();
    analysis::MetricOptions mo;
    mo.row_entropy = true;
    const nlohmann::ordered_json j = analysis::result_json(r, mo);
    // The order of docs/cli.md: the ranks, the singular values, the entropy object, the rows.
    std::vector<std::string> keys;
    for (const auto& [k, v] : j.items())
        keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"mechanism", "params", "method", "rank", "rank_tol", "relative_rank",
                                              "effective_rank", "stable_rank", "energy_rank_90", "energy_rank_99",
                                              "singular_values", "rank_at_rtol", "entropy", "row_entropy", "baseline",
                                              "excess_effective_rank", "entropy_below_baseline", "logit_norm",
                                              "mean_distance", "mass_within", "retrieval_mass", "retrieval_rank",
                                              "output", "past_block", "semiseparable_rank",
                                              "past_profile", "warnings"}));
    EXPECT_EQ(j["mass_within"].dump(), R"({"1":0.125,"2":0.25,"4":0.5,"8":0.75,"16":0.875})");
    EXPECT_EQ(j["past_profile"].dump(), R"([{"h":4,"rows":31,"cols":4,"rank":4,"energy_rank_99":3},)"
                                        R"({"h":16,"rows":19,"cols":16,"rank":19,"energy_rank_99":9}])");
    EXPECT_EQ(j["method"]["past_profile"], "factors");
    EXPECT_EQ(j["output"].dump(), R"({"rank":21,"effective_rank":5.5,"energy_rank_99":22})");
    std::vector<std::string> entropy_keys;
    for (const auto& [k, v] : j["entropy"].items())
        entropy_keys.push_back(k);
    EXPECT_EQ(entropy_keys, (std::vector<std::string>{"mean", "std", "min", "max", "normalized_mean", "support_normalized_mean"}));
    EXPECT_EQ(j["rank_at_rtol"].dump(), R"({"1e-2":1,"1e-3":2,"1e-4":3,"1e-6":4,"1e-8":5,"1e-10":6,"1e-12":7})");
    EXPECT_EQ(j["baseline"]["entropy"].dump(), R"({"mean":2.5,"normalized_mean":0.9375})");
    EXPECT_EQ(j["past_block"].dump(),
              R"({"rows":17,"cols":18,"rank":13,"effective_rank":4.5,"energy_rank_90":14,"energy_rank_99":15})");
    EXPECT_TRUE(j["rank"].is_number_integer());
    for (const MetricEntry* e : analysis::metric_entries(analysis::use_analyze))
        EXPECT_EQ(analysis::metric_json(*e, j).get<double>(), *e->read(r)) << e->key;
    EXPECT_TRUE(analysis::metric_json(*analysis::find_metric("s1"), j).is_null());   // not an analyze field

    // Undefined entropy: the object is null, and so is each metric read from it.
    MechanismResult no_entropy = r;
    no_entropy.entropy.reset();
    const auto k = analysis::result_json(no_entropy, mo);
    EXPECT_TRUE(k["entropy"].is_null());
    EXPECT_TRUE(analysis::metric_json(*analysis::find_metric("entropy_mean"), k).is_null());
    EXPECT_TRUE(k["entropy_below_baseline"].is_null());

    // No baseline (not defined) and a past block that could not be formed: null objects; not asked: no field.
    MechanismResult no_parts = r;
    no_parts.baseline.reset();
    no_parts.past_block.reset();
    const auto np = analysis::result_json(no_parts, mo);
    EXPECT_TRUE(np["baseline"].is_null());
    EXPECT_TRUE(np["excess_effective_rank"].is_null());
    EXPECT_TRUE(np["past_block"].is_null());
    EXPECT_TRUE(analysis::metric_json(*analysis::find_metric("baseline_entropy_mean"), np).is_null());
    no_parts.past_block_asked = false;
    EXPECT_FALSE(analysis::result_json(no_parts, mo).contains("past_block"));
    // A baseline with negative entries: its entropy null, the rest there.
    MechanismResult signed_base = r;
    signed_base.baseline->entropy.reset();
    const auto sb = analysis::result_json(signed_base, mo);
    EXPECT_TRUE(sb["baseline"]["entropy"].is_null());
    EXPECT_EQ(sb["baseline"]["rank"], 9);

    // The randomized bracket: rank null (bounds apart), rank_bounds right after rank_tol.
    MechanismResult bracket = r;
    bracket.partial_spectrum = true;
    bracket.rank_bracket = metrics::RandomizedRank{};
    bracket.rank_bracket->lower = 2;
    bracket.rank_bracket->upper = 3;
    bracket.rank_bracket->tol = 0.5;
    const auto b = analysis::result_json(bracket, mo);
    keys.clear();
    for (const auto& [key, v] : b.items())
        keys.push_back(key);
    EXPECT_EQ(keys[3], "rank");
    EXPECT_EQ(keys[4], "rank_tol");
    EXPECT_EQ(keys[5], "rank_bounds");
    EXPECT_EQ(keys[6], "relative_rank");
    EXPECT_TRUE(b["rank"].is_null());
    EXPECT_EQ(b["rank_tol"], 0.5);
    EXPECT_TRUE(b["stable_rank"].is_null());
}

TEST(MetricTable, FlatNumbers)
{
    const MetricEntry& rank = *analysis::find_metric("rank");
    const MetricEntry& eff = *analysis::find_metric("effective_rank");
    EXPECT_EQ(analysis::csv_number(rank, 12.0), "12");
    EXPECT_EQ(analysis::csv_number(eff, 0.1), "0.10000000000000001");   // reads back as the same double
    EXPECT_EQ(analysis::csv_number(eff, std::nan("")), "");
    EXPECT_EQ(analysis::csv_number(eff, std::nullopt), "");
}

TEST(MetricTable, SweepMetricsAndColumns)
{
    const std::vector<std::string> names = analysis::sweep_metric_names();
    EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6),
              (std::vector<std::string>{"rank", "relative_rank", "effective_rank", "stable_rank", "entropy_mean",
                                        "entropy_normalized_mean"}));
    for (const char* key : {"energy_rank_90", "rank_at_rtol_1e-3", "entropy_support_normalized_mean", "baseline_effective_rank",
                            "excess_effective_rank", "entropy_below_baseline", "past_block_rank"})
        EXPECT_NE(std::find(names.begin(), names.end(), key), names.end()) << key;
    EXPECT_EQ(names.back(), "seconds");
    for (const std::string& name : analysis::sweep_metric_names())
        EXPECT_FALSE(analysis::sweep_metric_title(name).empty()) << name;
    EXPECT_TRUE(analysis::sweep_metric_title("s1").empty());   // a Metrics-view metric, not a sweep metric
    analysis::SweepRecord rec;
    rec.mechanism = "softmax";
    rec.result = full_result();
    rec.seconds = 0.5;
    const std::string csv = analysis::sweep_csv({rec});
    EXPECT_EQ(csv.substr(0, csv.find('\n')).substr(0, 162),
              "mechanism,n,m,layer,head,at,draw,rank,rank_tol,relative_rank,effective_rank,stable_rank,entropy_mean,"
              "entropy_normalized_mean,energy_rank_90,energy_rank_99,rank_at");
    EXPECT_EQ(analysis::sweep_metric_value(rec, "seconds"), 0.5);
    EXPECT_EQ(analysis::sweep_metric_value(rec, "stable_rank"), 1.375);
    EXPECT_TRUE(std::isnan(analysis::sweep_metric_value(rec, "no_such_metric")));
}

// A session keeps every sweep metric: those of its first layout in it, any newer one through its store.
TEST(MetricTable, SessionsKeepEverySweepMetric)
{
    const std::set<std::string_view> first_layout = {"rank", "relative_rank", "effective_rank", "stable_rank", "entropy_mean",
                                                     "entropy_normalized_mean"};
    for (const MetricEntry* e : analysis::metric_entries(analysis::use_sweep))
        EXPECT_TRUE(first_layout.count(e->key) || e->store) << e->key << " is not kept in a session: give it a store";
    // Today's metrics: the layout of the first release, nothing more.
    analysis::SweepRecord rec;
    rec.mechanism = "softmax";
    rec.result = full_result();
    const auto doc = analysis::sweep_result_json(analysis::SweepResult{{}, {rec}});
    EXPECT_EQ(doc["records"][0].contains("metrics"), std::any_of(analysis::metric_table().begin(), analysis::metric_table().end(),
                                                                 [](const MetricEntry& e) { return e.store != nullptr; }));
    // A stored value goes back where its reader finds it, and a metric this build does not know is skipped.
    nlohmann::json j = nlohmann::json::parse(doc.dump());
    j["records"][0]["metrics"]["no_such_metric"] = 1.0;
    const auto back = analysis::sweep_result_from_json(j);
    ASSERT_EQ(back.records.size(), 1u);
    for (const MetricEntry* e : analysis::metric_entries(analysis::use_sweep))
        EXPECT_EQ(e->read(back.records[0].result), e->read(rec.result)) << e->key;
}

TEST(Pooling, SpreadOfEqualsTheDirectComputation)
{
    const std::vector<double> v = {0.5, 2.0, -1.25, 3.75, 1.0};
    const metrics::Spread s = metrics::spread_of(v);
    // By hand: sum 6, mean 1.2; squared deviations 0.49 + 0.64 + 6.0025 + 6.5025 + 0.04 = 13.675.
    EXPECT_EQ(s.count, 5);
    EXPECT_NEAR(s.mean, 1.2, 1e-15);
    EXPECT_NEAR(s.std, std::sqrt(13.675 / 5), 1e-15);
    EXPECT_EQ(s.min, -1.25);
    EXPECT_EQ(s.max, 3.75);
    EXPECT_EQ(metrics::spread_of({}).count, 0);
}

TEST(Pooling, PooledGroupsEqualTheUnion)
{
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(3.0, 2.0);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<double> all;
        std::vector<metrics::Spread> groups;
        const int count = 1 + trial % 5;
        for (int g = 0; g < count; ++g) {
            std::vector<double> values(static_cast<std::size_t>(1 + (g * 7 + trial) % 9));
            for (double& x : values)
                x = normal(rng);
            groups.push_back(metrics::spread_of(values));
            all.insert(all.end(), values.begin(), values.end());
        }
        groups.push_back(metrics::Spread{});   // an empty group adds nothing
        // Direct: the mean and population std of every value.
        long double sum = 0, sq = 0;
        for (const double x : all)
            sum += x;
        const long double mean = sum / static_cast<long double>(all.size());
        for (const double x : all)
            sq += (x - mean) * (x - mean);
        const metrics::Spread p = metrics::pooled(groups);
        EXPECT_EQ(p.count, static_cast<double>(all.size()));
        EXPECT_NEAR(p.mean, static_cast<double>(mean), 1e-12);
        EXPECT_NEAR(p.std, static_cast<double>(std::sqrt(sq / static_cast<long double>(all.size()))), 1e-10);
        EXPECT_EQ(p.min, *std::min_element(all.begin(), all.end()));
        EXPECT_EQ(p.max, *std::max_element(all.begin(), all.end()));
    }
    EXPECT_EQ(metrics::pooled({}).count, 0);
}

// A sweep over M whose points hold several N each: a curve's point pools them.
TEST(Pooling, SweepCurvesPoolEveryRecordAtX)
{
    analysis::SweepResult sweep;
    sweep.spec.vary = 'm';
    sweep.spec.mechanisms = {attention::Mechanism::mhla};
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> uniform(0.5, 4.0);
    std::map<Eigen::Index, std::vector<double>> by_m;
    for (const Eigen::Index m : {1, 2, 4})
        for (const Eigen::Index n : {16, 32})
            for (int head = 0; head < 3; ++head) {
                analysis::SweepRecord r;
                r.mechanism = "mhla";
                r.n = n;
                r.m = m;
                r.result = full_result();
                r.result.spectrum->effective_rank = uniform(rng);
                if (head == 2 && n == 32)
                    r.result.spectrum.reset();   // a record without a value
                else
                    by_m[m].push_back(r.result.spectrum->effective_rank);
                sweep.records.push_back(std::move(r));
            }
    const auto summary = analysis::sweep_summary(sweep.spec, sweep.records);
    const auto curves = analysis::sweep_curves(sweep, summary, "effective_rank", /*by_m=*/true);
    ASSERT_EQ(curves.size(), 1u);
    EXPECT_EQ(curves[0].mechanism, "mhla");
    ASSERT_EQ(curves[0].points.size(), 3u);
    for (const auto& [x, s] : curves[0].points) {
        const std::vector<double>& v = by_m.at(static_cast<Eigen::Index>(x));
        double mean = 0, sq = 0;
        for (const double y : v)
            mean += y / static_cast<double>(v.size());
        for (const double y : v)
            sq += (y - mean) * (y - mean);
        EXPECT_EQ(s.count, static_cast<double>(v.size()));
        EXPECT_NEAR(s.mean, mean, 1e-12);
        EXPECT_NEAR(s.std, std::sqrt(sq / static_cast<double>(v.size())), 1e-12);
        EXPECT_EQ(s.min, *std::min_element(v.begin(), v.end()));
        EXPECT_EQ(s.max, *std::max_element(v.begin(), v.end()));
    }
    EXPECT_TRUE(analysis::sweep_curves(sweep, summary, "no_such_metric", true).empty());
}
