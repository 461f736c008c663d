// expand_inputs: a glob that matches an entry stat() cannot follow (a symlink loop) skips it instead of
// letting std::filesystem_error escape (found by fuzz_toml_job with inputs = ["/*/*/*/*"]).
#include <filesystem>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>

#include "analysis/batch.h"
#include "io/writers.h"
#include "support/test_support.h"
#include "util/error.h"

namespace fs = std::filesystem;

TEST(BatchInputs, SymlinkLoopIsSkippedNotThrown)
{
    const fs::path dir = attnscope::test::fresh_work_dir("batch_inputs_loop");
    std::ofstream(dir / "a.h5") << "x";
    fs::create_symlink("loop.h5", dir / "loop.h5");   // loop.h5 -> itself: stat fails with ELOOP
    const auto files = attnscope::analysis::expand_inputs({"*.h5"}, dir.string());
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(fs::path(files[0]).filename(), "a.h5");
    EXPECT_THROW(attnscope::analysis::expand_inputs({"loop.h5"}, dir.string()), attnscope::InputError);
}

// A batch's workers take a cancel token: a cancel stops them between units, the records made so far stay,
// and the final files (written only when every unit is recorded) are not written.
TEST(BatchCancel, StopsBetweenUnitsAndKeepsRecords)
{
    using namespace attnscope;
    const fs::path dir = test::fresh_work_dir("batch_cancel");
    analysis::SynthOptions so;
    so.n = 32;
    so.d = 4;
    so.heads = 4;
    so.kind = "local1d";
    test::write_synthetic_h5((dir / "s.h5").string(), so, 1ULL << 30);
    analysis::BatchPlan plan;
    plan.files = {(dir / "s.h5").string()};
    plan.q_name = "/q";
    plan.k_name = "/k";
    plan.heads = analysis::AxisChoice::all("heads");
    analysis::BatchRunOptions opt;
    opt.out_dir = (dir / "out").string();
    opt.on_progress = [&](const analysis::BatchProgress& p) {
        if (p.done == 1)
            opt.cancel.cancel();
    };
    const analysis::BatchReport report = analysis::run_batch(plan, opt);
    EXPECT_TRUE(report.cancelled);
    EXPECT_EQ(report.units, 4u);
    EXPECT_EQ(report.analysed, 1u);
    EXPECT_EQ(report.records, 3u);   // one unit, three mechanisms
    EXPECT_TRUE(fs::exists(dir / "out" / "results.jsonl"));
    EXPECT_FALSE(fs::exists(dir / "out" / "summary.csv"));
    // A rerun goes on from there and completes.
    analysis::BatchRunOptions again;
    again.out_dir = opt.out_dir;
    const analysis::BatchReport rest = analysis::run_batch(plan, again);
    EXPECT_FALSE(rest.cancelled);
    EXPECT_EQ(rest.skipped, 1u);
    EXPECT_EQ(rest.analysed, 3u);
    EXPECT_TRUE(fs::exists(dir / "out" / "summary.csv"));
}

// Per-layer datasets (/layers/<i>/q as the PyTorch bridge writes them) are a batch's layers: `layers = "all"`
// or a list plans one input per layer, each with its own attributes (here each layer's learned mixing
// matrix); a layer the file lacks is refused naming it.
TEST(BatchInputs, PerLayerDatasetsAreLayers)
{
    using namespace attnscope;
    const fs::path dir = test::fresh_work_dir("batch_per_layer");
    std::vector<io::DatasetOut> ds;
    for (int l = 0; l < 3; ++l) {
        std::vector<double> q(2 * 16 * 4), k(q.size());
        for (std::size_t i = 0; i < q.size(); ++i) {
            q[i] = std::sin(0.3 * static_cast<double>(i) + l);
            k[i] = std::cos(0.7 * static_cast<double>(i) - l);
        }
        const std::string g = "/layers/" + std::to_string(l);
        ds.push_back({g + "/q", {2, 16, 4}, q, false, false, {{"mixing", g + "/mixing"}}});
        ds.push_back({g + "/k", {2, 16, 4}, k});
        ds.push_back({g + "/mixing", {4, 4}, std::vector<double>(16, 1.0 + l)});
    }
    const std::string file = (dir / "bridge.h5").string();
    io::write_hdf5(file, ds);
    analysis::BatchPlan plan;
    plan.files = {file};
    plan.q_name = "/layers/0/q";
    plan.k_name = "/layers/0/k";
    plan.heads = analysis::AxisChoice::all("heads");
    plan.layers = analysis::AxisChoice::all("layers");
    plan.options.blocks.kind = attention::BlockSpec::Kind::count;
    plan.options.blocks.blocks = 4;
    plan.given.blocks = true;
    const auto units = analysis::plan_batch_units(plan);
    ASSERT_EQ(units.size(), 6u);   // 3 layers x 2 heads, in layer order
    for (std::size_t i = 0; i < units.size(); ++i) {
        const auto l = static_cast<Eigen::Index>(i / 2);
        EXPECT_EQ(units[i].index, i);
        EXPECT_EQ(units[i].layer, l);
        EXPECT_EQ(units[i].head, static_cast<Eigen::Index>(i % 2));
        EXPECT_EQ(units[i].source.q_ref.text, file + ":/layers/" + std::to_string(l) + "/q");
        EXPECT_EQ(units[i].defaults_from_file["mixing"], "/layers/" + std::to_string(l) + "/mixing");
        ASSERT_TRUE(units[i].options.mixing.matrix);
        EXPECT_EQ((*units[i].options.mixing.matrix)(0, 0), 1.0 + static_cast<double>(l));
    }
    plan.layers = analysis::AxisChoice::list({2, 0}, "layers");
    const auto two = analysis::plan_batch_units(plan);
    ASSERT_EQ(two.size(), 4u);
    EXPECT_EQ(two[0].layer, 0);
    EXPECT_EQ(two[2].layer, 2);
    plan.layers = analysis::AxisChoice::list({5}, "layers");
    EXPECT_THROW(analysis::plan_batch_units(plan), InputError);
}
