// Sweep building blocks: token subsets (first, random, crop), records equal to analyze(), the values that fit
// the data, a result as JSON and back, progress and cancellation inside one point, the check of every mechanism
// at every point.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "analysis/sweep.h"
#include "analysis/sweep_check.h"
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
    spec.inputs.push_back({io::parse_tensor_ref(dir + "/s.h5:/q"), io::parse_tensor_ref(dir + "/s.h5:/k"), std::nullopt, {}});
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
        ASSERT_TRUE(r.result.spectrum && ref[0].spectrum);
        EXPECT_EQ(r.result.spectrum->rank, ref[0].spectrum->rank);
        EXPECT_DOUBLE_EQ(r.result.spectrum->effective_rank, ref[0].spectrum->effective_rank);
        EXPECT_DOUBLE_EQ(r.result.entropy->mean, ref[0].entropy->mean);
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
    analysis::TensorSource src{io::parse_tensor_ref(dir + "/m.h5:/layers/0/q"), io::parse_tensor_ref(dir + "/m.h5:/layers/0/k"), std::nullopt, {}};
    const auto spec = analysis::overview_spec(src, {}, {});
    ASSERT_EQ(spec.inputs.size(), 3u);
    EXPECT_EQ(spec.input_layers, (std::vector<std::optional<Eigen::Index>>{0, 1, 2}));
    EXPECT_EQ(spec.inputs[2].k_ref.text, dir + "/m.h5:/layers/2/k");
    const auto records = analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{});
    ASSERT_EQ(records.size(), 3u * 2u * 3u);   // layers x heads x mechanisms
    std::set<std::pair<Eigen::Index, Eigen::Index>> cells;
    for (const auto& r : records)
        cells.insert({*r.layer, *r.head});
    EXPECT_EQ(cells.size(), 6u);
    // A file with one such dataset keeps the plain single-input overview.
    io::write_hdf5(dir + "/one.h5", {{"/layers/0/q", {2, 20, 4}, ds[0].data}, {"/layers/0/k", {2, 20, 4}, ds[1].data}});
    EXPECT_EQ(analysis::overview_spec({io::parse_tensor_ref(dir + "/one.h5:/layers/0/q"), io::parse_tensor_ref(dir + "/one.h5:/layers/0/k"), std::nullopt, {}}, {}, {})
                  .inputs.size(),
              1u);
}

namespace {

// A 16 x 16 grid of tokens (N = 256, d = 8), as data/vit_local2d.h5 holds them.
std::string gridFile()
{
    static const std::string path = [] {
        const std::string dir = test::fresh_work_dir("sweep_value_choice");
        analysis::SynthOptions so;
        so.n = 256;
        so.d = 8;
        so.kind = "local2d";
        const auto data = analysis::synthesize(so, 1ULL << 30);
        io::write_hdf5(dir + "/g.h5", {{"/q", {256, 8}, data.q}, {"/k", {256, 8}, data.k}});
        return dir + "/g.h5";
    }();
    return path;
}

}  // namespace

TEST(Sweep, ValueChoiceFitsTheData)
{
    analysis::SweepSpec spec;
    spec.inputs.push_back({io::parse_tensor_ref(gridFile() + ":/q"), io::parse_tensor_ref(gridFile() + ":/k"), std::nullopt, {}});
    spec.given = {true, true, true, true};
    spec.options.blocks.kind = attention::BlockSpec::Kind::grid;
    spec.options.blocks.grid = {16, 16};
    spec.options.blocks.block_grid = {4, 4};   // blocks of 4 x 4 tokens
    spec.vary = 'n';
    spec.subsample = Subsample::crop;
    spec.values = {64, 128, 256, 512};         // the values are not read
    auto choice = analysis::sweep_value_choice(spec);
    EXPECT_EQ(choice.tokens, 256);
    EXPECT_EQ(choice.grid, (std::vector<Eigen::Index>{16, 16}));
    // Crops of 4, 8, 12 and 16 tokens a side: the only ones holding whole 4 x 4 blocks.
    EXPECT_EQ(choice.valid, (std::vector<Eigen::Index>{16, 64, 144, 256}));
    EXPECT_EQ(choice.proposed, choice.valid);
    spec.values = choice.proposed;
    EXPECT_NO_THROW(analysis::plan_sweep(spec));
    for (Eigen::Index n : {32, 100, 512}) {
        spec.values = {n};
        EXPECT_THROW(analysis::plan_sweep(spec), std::invalid_argument) << n;
    }

    // First tokens of a grid with grid blocks: only all of them.
    spec.subsample = Subsample::first;
    choice = analysis::sweep_value_choice(spec);
    EXPECT_EQ(choice.proposed, (std::vector<Eigen::Index>{256}));

    // Block-grid sides that divide the grid.
    spec.vary = 'm';
    choice = analysis::sweep_value_choice(spec);
    EXPECT_EQ(choice.valid, (std::vector<Eigen::Index>{1, 2, 4, 8, 16}));
    spec.values = choice.proposed;
    EXPECT_NO_THROW(analysis::plan_sweep(spec));

    // 1-D blocks: N up to the tokens (halving from all of them), M dividing N.
    spec.options = {};
    spec.vary = 'n';
    choice = analysis::sweep_value_choice(spec);
    EXPECT_TRUE(choice.valid.empty());
    EXPECT_EQ(choice.proposed, (std::vector<Eigen::Index>{16, 32, 64, 128, 256}));
    spec.values = choice.proposed;
    EXPECT_NO_THROW(analysis::plan_sweep(spec));
    spec.vary = 'm';
    choice = analysis::sweep_value_choice(spec);
    EXPECT_EQ(choice.proposed, (std::vector<Eigen::Index>{1, 2, 4, 8, 16}));
    for (Eigen::Index m : choice.proposed)
        EXPECT_EQ(256 % m, 0);

    // Synthetic data: nothing to fit for N; M divides the synthetic N.
    analysis::SweepSpec synth;
    synth.synth = analysis::SynthSource{"local1d", 8, 1, 96};
    synth.vary = 'm';
    choice = analysis::sweep_value_choice(synth);
    EXPECT_EQ(choice.tokens, 96);
    EXPECT_EQ(choice.proposed, (std::vector<Eigen::Index>{1, 2, 4, 8, 16}));
    synth.vary = 'n';
    EXPECT_FALSE(analysis::sweep_value_choice(synth).proposed.empty());
}

TEST(Sweep, ResultJsonRoundTrip)
{
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"local1d", 6, 2, 0};
    spec.vary = 'n';
    spec.values = {16, 32};
    spec.mechanisms = {attention::Mechanism::softmax, attention::Mechanism::mhla};
    spec.options.feature_map.kind = attention::FeatureMapKind::elu1;
    spec.options.mixing.preset = "exp";
    analysis::SweepResult result{spec, analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{})};
    ASSERT_EQ(result.records.size(), 2u * 2u * 2u);
    result.records[1].result.entropy.reset();
    result.records[2].result.spectrum->stable_rank = std::nan("");
    result.records[3].head = 2;
    result.records[3].result.warnings = {"a warning"};

    // Through text, as a session file holds it.
    const std::string text = analysis::sweep_result_json(result).dump(2);
    const analysis::SweepResult back = analysis::sweep_result_from_json(nlohmann::json::parse(text));
    EXPECT_EQ(back.spec.vary, 'n');
    EXPECT_EQ(back.spec.values, spec.values);
    EXPECT_EQ(back.spec.mechanisms, spec.mechanisms);
    ASSERT_TRUE(back.spec.synth);
    EXPECT_EQ(back.spec.synth->kind, "local1d");
    EXPECT_EQ(back.spec.synth->d, 6);
    EXPECT_EQ(back.spec.synth->seeds, 2);
    EXPECT_EQ(back.spec.options.feature_map.kind, attention::FeatureMapKind::elu1);
    EXPECT_EQ(back.spec.options.mixing.preset, "exp");
    ASSERT_EQ(back.records.size(), result.records.size());
    for (std::size_t i = 0; i < back.records.size(); ++i) {
        const auto &a = result.records[i], &b = back.records[i];
        EXPECT_EQ(a.mechanism, b.mechanism);
        EXPECT_EQ(a.n, b.n);
        EXPECT_EQ(a.m, b.m);
        EXPECT_EQ(a.d, b.d);
        EXPECT_EQ(a.layer, b.layer);
        EXPECT_EQ(a.head, b.head);
        EXPECT_EQ(a.draw, b.draw);
        EXPECT_EQ(a.input, b.input);
        EXPECT_EQ(a.seconds, b.seconds);
        EXPECT_EQ(a.result.warnings, b.result.warnings);
        ASSERT_EQ(a.result.spectrum.has_value(), b.result.spectrum.has_value());
        if (a.result.spectrum) {
            EXPECT_EQ(a.result.spectrum->rank, b.result.spectrum->rank);
            EXPECT_EQ(a.result.spectrum->tol, b.result.spectrum->tol);
            EXPECT_EQ(a.result.spectrum->relative_rank, b.result.spectrum->relative_rank);
            EXPECT_EQ(a.result.spectrum->effective_rank, b.result.spectrum->effective_rank);
            if (std::isnan(a.result.spectrum->stable_rank))
                EXPECT_TRUE(std::isnan(b.result.spectrum->stable_rank));
            else
                EXPECT_EQ(a.result.spectrum->stable_rank, b.result.spectrum->stable_rank);
            EXPECT_TRUE(b.result.spectrum->singular_values.empty());   // not stored
        }
        ASSERT_EQ(a.result.entropy.has_value(), b.result.entropy.has_value());
        if (a.result.entropy) {
            EXPECT_EQ(a.result.entropy->mean, b.result.entropy->mean);
            EXPECT_EQ(a.result.entropy->normalized_mean, b.result.entropy->normalized_mean);
            EXPECT_EQ(a.result.entropy->max, b.result.entropy->max);
        }
    }
    // The summary the curves draw is the same.
    EXPECT_EQ(analysis::sweep_summary(back.spec, back.records)["points"].dump(),
              analysis::sweep_summary(result.spec, result.records)["points"].dump());
    EXPECT_THROW(analysis::sweep_result_from_json(nlohmann::json::parse(R"({"spec": {"vary": "x"}, "records": []})")),
                 std::invalid_argument);
    EXPECT_THROW(analysis::sweep_result_from_json(nlohmann::json::parse(R"({"spec": {}})")), std::invalid_argument);
    EXPECT_THROW(analysis::sweep_result_from_json(nlohmann::json::parse(R"({"records": [{"n": "many"}]})")), std::invalid_argument);
}

TEST(Sweep, ProgressInsideAPointAndPromptCancel)
{
    // Points of N = 1024 (synthetic): progress is reported inside each, and a cancel during the first one's
    // softmax singular values (the two-stage SVD, observed between its panels) stops it there. Prints the
    // latency; the bound is generous (the machine may be busy).
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"local1d", 32, 1, 0};
    spec.vary = 'n';
    spec.values = {1024, 1024, 1024};
    const auto plan = analysis::plan_sweep(spec);

    analysis::JobContext ctx;
    std::mutex mutex;
    std::vector<std::pair<double, std::string>> reports;
    std::atomic<bool> inside{false};
    ctx.on_progress = [&](double f, const std::string& stage) {
        std::lock_guard<std::mutex> lock(mutex);
        reports.emplace_back(f, stage);
        if (stage.find("softmax: singular values") != std::string::npos)
            inside = true;
    };
    std::atomic<bool> cancelled{false};
    std::chrono::steady_clock::time_point stopped;
    std::thread worker([&] {
        try {
            analysis::run_sweep(plan, ctx);
        } catch (const analysis::JobCancelled&) {
            cancelled = true;
        }
        stopped = std::chrono::steady_clock::now();
    });
    while (!inside)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));   // into the reduction
    const auto asked = std::chrono::steady_clock::now();
    ctx.token.cancel();
    worker.join();
    const double latency = std::chrono::duration<double>(stopped - asked).count();
    std::printf("sweep cancelled %.3f s after the request (during the first point's softmax SVD, N = 1024)\n", latency);
    EXPECT_TRUE(cancelled);
    EXPECT_LT(latency, 3.0);
    std::lock_guard<std::mutex> lock(mutex);
    // Stages inside the point, named by the point, with fractions inside its share (one third).
    bool named = false;
    for (const auto& [f, stage] : reports) {
        EXPECT_GE(f, 0.0);
        EXPECT_LT(f, 1.0 / 3.0 + 1e-12) << stage;
        named = named || (stage.find("N=1024") != std::string::npos && stage.find(", softmax: ") != std::string::npos);
    }
    EXPECT_TRUE(named);
}

// What a front end checks before it approves a sweep (analysis/sweep_check.h): every mechanism at every
// planned point, a loaded mixing matrix against the point's blocks; the message names the point.
TEST(Sweep, MechanismCheckNamesThePointAMixingMatrixDoesNotFit)
{
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"gaussian", 4, 1, 16};
    spec.vary = 'm';
    spec.values = {1, 4};
    spec.mechanisms = {attention::Mechanism::linear, attention::Mechanism::mhla};
    spec.options.mixing.matrix = Eigen::MatrixXd::Constant(4, 4, 0.25);
    spec.options.mixing.preset = "w.npy";
    try {
        analysis::check_sweep_mechanisms(analysis::plan_sweep(spec));
        ADD_FAILURE() << "M = 1 with a 4 x 4 mixing matrix was approved";
    } catch (const std::invalid_argument& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("--vary m=1: mhla: mixing matrix w.npy is 4x4"), std::string::npos) << what;
    }
    spec.values = {4};
    EXPECT_NO_THROW(analysis::check_sweep_mechanisms(analysis::plan_sweep(spec)));
    EXPECT_EQ(analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{}).size(), 2u);
}
