// A sweep over every input of a file (`--at b=all`): each point's 95% interval of the mean over its
// units (analysis::sweep_curves and sweep_summary) is the interval aggregate() gives the same values (one
// procedure, docs/maths.md 5: the NumPy check of that procedure is test_aggregate's) and it brackets the mean (a
// t interval over five units may reach past their range, unlike a bootstrap: it is about the population's mean,
// not a resample of these five); input_axes names the axes that make every input a unit.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/aggregate.h"
#include "analysis/sweep.h"
#include "analysis/synth.h"
#include "io/writers.h"
#include "support/test_support.h"

namespace attnscope {
namespace {

analysis::SweepResult batch_axis_sweep(const std::string& dir)
{
    analysis::SynthOptions so;
    so.n = 32;
    so.d = 6;
    so.heads = 5;   // five slices: written as five inputs on a b axis
    so.kind = "local1d";
    const auto data = analysis::synthesize(so, 1ULL << 30);
    io::write_hdf5(dir + "/b.h5", {{"/q", {5, 32, 6}, data.q}, {"/k", {5, 32, 6}, data.k}});
    analysis::SweepResult out;
    analysis::TensorSource src{io::parse_tensor_ref(dir + "/b.h5:/q"), io::parse_tensor_ref(dir + "/b.h5:/k"), std::nullopt, {}};
    src.selection.layout = "bnd";
    EXPECT_EQ(analysis::input_axes(src), std::vector<char>{'b'});
    src.selection.all = {'b'};
    out.spec.inputs = {src};
    out.spec.vary = 'm';
    out.spec.values = {1, 2, 4};
    out.records = analysis::run_sweep(analysis::plan_sweep(out.spec), analysis::JobContext{});
    return out;
}

TEST(SweepIntervals, EachPointIsTheAggregateIntervalOfItsUnits)
{
    const analysis::SweepResult sweep = batch_axis_sweep(test::fresh_work_dir("sweep_intervals"));
    ASSERT_EQ(sweep.records.size(), 5u * 3u * 3u);   // inputs x M x mechanisms
    const auto summary = analysis::sweep_summary(sweep.spec, sweep.records);
    const std::string metric = "effective_rank";
    // The values of each (mechanism, M) in record order, and the same as units for aggregate().
    std::map<std::pair<std::string, double>, std::vector<double>> values;
    std::map<double, std::vector<analysis::UnitMetrics>> units;
    for (const auto& r : sweep.records) {
        const double v = analysis::sweep_metric_value(r, metric);
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_EQ(r.at.count('b'), 1u);
        values[{r.mechanism, static_cast<double>(r.m)}].push_back(v);
        units[static_cast<double>(r.m)].push_back({std::to_string(r.at.at('b')), r.mechanism, {{metric, v}}});
    }
    const auto curves = analysis::sweep_curves(sweep, summary, metric, true);
    ASSERT_EQ(curves.size(), 3u);
    int wide = 0;
    for (const auto& c : curves) {
        ASSERT_EQ(c.points.size(), 3u) << c.mechanism;
        for (const auto& [x, s] : c.points) {
            const std::vector<double>& v = values.at({c.mechanism, x});
            EXPECT_EQ(s.count, 5.0);
            const analysis::MeanInterval ci = analysis::mean_interval(v);   // five units: a t interval
            EXPECT_EQ(ci.method, analysis::CiMethod::t);
            EXPECT_EQ(s.ci_low, ci.low) << c.mechanism << " M=" << x;
            EXPECT_EQ(s.ci_high, ci.high) << c.mechanism << " M=" << x;
            EXPECT_LE(s.ci_low, s.mean + 1e-12);
            EXPECT_GE(s.ci_high, s.mean - 1e-12);
            wide += s.ci_high > s.ci_low;
            // aggregate() over the same units: the same interval, to the last bit.
            const analysis::Aggregate a = analysis::aggregate(units.at(x));
            bool found = false;
            for (const auto& row : a.mechanisms)
                if (row.mechanism == c.mechanism && row.metric == metric) {
                    EXPECT_EQ(row.ci_low, s.ci_low);
                    EXPECT_EQ(row.ci_high, s.ci_high);
                    EXPECT_DOUBLE_EQ(row.mean, s.mean);
                    found = true;
                }
            EXPECT_TRUE(found) << c.mechanism;
        }
    }
    EXPECT_GT(wide, 0);   // five different inputs: some interval has a width
    // The JSON summary carries the same interval per point.
    for (const auto& p : summary["points"]) {
        const auto& v = values.at({p["mechanism"].get<std::string>(), p["m"].get<double>()});
        const analysis::MeanInterval ci = analysis::mean_interval(v);
        EXPECT_EQ(p[metric]["ci_low"].get<double>(), ci.low);
        EXPECT_EQ(p[metric]["ci_high"].get<double>(), ci.high);
        EXPECT_EQ(p[metric]["ci_method"], "t");
    }
}

// The rule of aggregate rows: the bootstrap from ten units, a t interval from two, none for one.
TEST(SweepIntervals, TheFewUnitsRule)
{
    std::vector<double> v = {1.0, 2.0, 4.0};
    analysis::MeanInterval ci = analysis::mean_interval(v);
    EXPECT_EQ(ci.method, analysis::CiMethod::t);
    EXPECT_NEAR(ci.high - (7.0 / 3.0), (7.0 / 3.0) - ci.low, 1e-12);   // symmetric about the mean
    for (int i = 0; i < 7; ++i)
        v.push_back(i);
    ci = analysis::mean_interval(v);
    EXPECT_EQ(ci.method, analysis::CiMethod::bootstrap);
    const auto [lo, hi] = analysis::bootstrap_interval(v);
    EXPECT_EQ(ci.low, lo);
    EXPECT_EQ(ci.high, hi);
    ci = analysis::mean_interval({3.5});
    EXPECT_EQ(ci.method, analysis::CiMethod::none);
    EXPECT_TRUE(std::isnan(ci.low) && std::isnan(ci.high));
}

TEST(SweepIntervals, OneUnitHasNoWidthAndNoValueIsAnError)
{
    const auto [lo, hi] = analysis::bootstrap_interval({3.5});
    EXPECT_EQ(lo, 3.5);
    EXPECT_EQ(hi, 3.5);
    EXPECT_NE(test::message_of([] { analysis::bootstrap_interval({}); }).find("no values"), std::string::npos);
}

}  // namespace
}  // namespace attnscope
