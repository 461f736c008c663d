// Sweep building blocks: token subsets (first, random, crop) and records equal to analyze().
#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "analysis/sweep.h"
#include "analysis/synth.h"
#include "io/writers.h"
#include "support/test_support.h"

using namespace attnscope;
using analysis::Subsample;

TEST(Sweep, Subsets)
{
    EXPECT_EQ(analysis::subset_tokens(Subsample::first, 10, 3, 0, 0), (std::vector<Eigen::Index>{0, 1, 2}));
    const auto a = analysis::subset_tokens(Subsample::random, 100, 30, 7, 0);
    const auto b = analysis::subset_tokens(Subsample::random, 100, 30, 7, 0);
    const auto c = analysis::subset_tokens(Subsample::random, 100, 30, 7, 1);
    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
    EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
    EXPECT_EQ(std::set<Eigen::Index>(a.begin(), a.end()).size(), 30u);
    EXPECT_GE(a.front(), 0);
    EXPECT_LT(a.back(), 100);
    EXPECT_EQ(analysis::subset_tokens(Subsample::random, 5, 5, 1, 0), (std::vector<Eigen::Index>{0, 1, 2, 3, 4}));
    // Centred 2x2 crop of a 4x4 grid: rows 1-2, columns 1-2.
    EXPECT_EQ(analysis::subset_tokens(Subsample::crop, 16, 4, 0, 0, {4, 4}), (std::vector<Eigen::Index>{5, 6, 9, 10}));
    // 3-D: N=4 of a 2x4x4 grid is the 1x2x2 crop starting at (0, 1, 1).
    EXPECT_EQ(analysis::subset_tokens(Subsample::crop, 32, 4, 0, 0, {2, 4, 4}), (std::vector<Eigen::Index>{5, 6, 9, 10}));
    EXPECT_THROW(analysis::subset_tokens(Subsample::crop, 32, 6, 0, 0, {2, 4, 4}), std::invalid_argument);
    EXPECT_THROW(analysis::subset_tokens(Subsample::crop, 16, 5, 0, 0, {4, 4}), std::invalid_argument);
    EXPECT_THROW(analysis::subset_tokens(Subsample::first, 10, 11, 0, 0), std::invalid_argument);
}

TEST(Sweep, RecordsEqualAnalyze)
{
    const std::string dir = test::fresh_work_dir("sweep_records");
    analysis::SynthOptions so;
    so.n = 48;
    so.d = 6;
    so.heads = 2;
    so.kind = "local1d";
    const auto data = analysis::synthesize(so, 1ULL << 30);
    io::write_hdf5(dir + "/s.h5", {{"/q", {2, 48, 6}, data.q}, {"/k", {2, 48, 6}, data.k}});

    analysis::SweepSpec spec;
    spec.inputs.push_back({dir + "/s.h5:/q", dir + "/s.h5:/k", std::nullopt, {}});
    spec.vary = 'n';
    spec.values = {12, 48};
    spec.subsample = Subsample::random;
    spec.draws = 2;
    spec.seed = 3;
    spec.heads = analysis::AxisChoice::all("--heads");
    spec.options.blocks.blocks = 3;
    const auto records = analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{});
    ASSERT_EQ(records.size(), 2u * 2u * 2u * 3u);   // heads x N x draws x mechanisms

    const Eigen::Map<const Eigen::Matrix<double, -1, -1, Eigen::RowMajor>> q1(data.q.data() + 48 * 6, 48, 6);
    const Eigen::Map<const Eigen::Matrix<double, -1, -1, Eigen::RowMajor>> k1(data.k.data() + 48 * 6, 48, 6);
    for (const auto& r : records) {
        if (*r.head != 1)
            continue;
        const auto idx = analysis::subset_tokens(Subsample::random, 48, r.n, 3, r.draw);
        Eigen::MatrixXd q(r.n, 6), k(r.n, 6);
        for (Eigen::Index i = 0; i < r.n; ++i) {
            q.row(i) = q1.row(idx[static_cast<std::size_t>(i)]);
            k.row(i) = k1.row(idx[static_cast<std::size_t>(i)]);
        }
        const auto ref = analysis::analyze(q, k, {attention::parse_mechanism(r.mechanism)}, spec.options, spec.metrics, 1ULL << 32);
        ASSERT_TRUE(r.spectrum && ref[0].spectrum);
        EXPECT_EQ(r.spectrum->rank, ref[0].spectrum->rank);
        EXPECT_DOUBLE_EQ(r.spectrum->effective_rank, ref[0].spectrum->effective_rank);
        EXPECT_DOUBLE_EQ(r.entropy->mean, ref[0].entropy->mean);
        EXPECT_EQ(r.m, 3);
    }
    const auto summary = analysis::sweep_summary(spec, records);
    EXPECT_EQ(summary["points"].size(), 6u);
    EXPECT_EQ(summary["points"][0]["count"], 4);   // 2 heads x 2 draws
    const std::string csv = analysis::sweep_csv(records);
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), static_cast<long>(records.size() + 1));
}

TEST(Sweep, ImpossibleSpecsFailBeforeWork)
{
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"gaussian", 4, 1, 0};
    spec.vary = 'n';
    spec.values = {};
    EXPECT_THROW(analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{}), std::invalid_argument);
    spec.vary = 'm';
    spec.values = {2};
    EXPECT_THROW(analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{}), std::invalid_argument);   // no --n
    spec.synth->n = 16;
    spec.values = {2, 32};
    EXPECT_THROW(analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{}), std::invalid_argument);   // M=32 > N=16
    spec.values = {2, 4};
    EXPECT_EQ(analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{}).size(), 6u);
}

TEST(Sweep, OverviewWalksPerLayerDatasets)
{
    // The PyTorch bridge's layout: /layers/<i>/{q,k} of shape [heads, N, d], one dataset per layer.
    const std::string dir = test::fresh_work_dir("sweep_overview_layers");
    std::vector<io::DatasetOut> ds;
    for (int layer : {0, 1, 2})
        for (const char* name : {"q", "k"}) {
            std::vector<double> v(2 * 20 * 4);
            for (std::size_t i = 0; i < v.size(); ++i)
                v[i] = std::sin(0.1 * static_cast<double>(i) * (layer + 1) + (name[0] == 'q' ? 0.3 : 1.1));
            ds.push_back({"/layers/" + std::to_string(layer) + "/" + name, {2, 20, 4}, v});
        }
    io::write_hdf5(dir + "/m.h5", ds);
    analysis::TensorSource src{dir + "/m.h5:/layers/0/q", dir + "/m.h5:/layers/0/k", std::nullopt, {}};
    const auto spec = analysis::overview_spec(src, {}, {});
    ASSERT_EQ(spec.inputs.size(), 3u);
    EXPECT_EQ(spec.input_layers, (std::vector<std::optional<Eigen::Index>>{0, 1, 2}));
    EXPECT_EQ(spec.inputs[2].k_ref, dir + "/m.h5:/layers/2/k");
    const auto records = analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{});
    ASSERT_EQ(records.size(), 3u * 2u * 3u);   // layers x heads x mechanisms
    std::set<std::pair<Eigen::Index, Eigen::Index>> cells;
    for (const auto& r : records)
        cells.insert({*r.layer, *r.head});
    EXPECT_EQ(cells.size(), 6u);
    // A file with one such dataset keeps the plain single-input overview.
    io::write_hdf5(dir + "/one.h5", {{"/layers/0/q", {2, 20, 4}, ds[0].data}, {"/layers/0/k", {2, 20, 4}, ds[1].data}});
    EXPECT_EQ(analysis::overview_spec({dir + "/one.h5:/layers/0/q", dir + "/one.h5:/layers/0/k", std::nullopt, {}}, {}, {})
                  .inputs.size(),
              1u);
}
