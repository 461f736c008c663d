// expand_inputs: a glob that matches an entry stat() cannot follow (a symlink loop) skips it instead of
// letting std::filesystem_error escape (found by fuzz_toml_job with inputs = ["/*/*/*/*"]).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analysis/batch.h"
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
