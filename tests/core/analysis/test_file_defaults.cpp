// The one file-attribute rule (analysis/file_defaults.h, docs/cli.md): what a file says is a default, an
// explicit choice wins, and every front end that calls it (sweeps and batches here; the command line in
// tests/app, the desktop app in tests/widgets) reports what came from the file.
#include <cmath>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "analysis/batch.h"
#include "analysis/explore.h"
#include "analysis/file_defaults.h"
#include "analysis/inputs.h"
#include "analysis/sweep.h"
#include "io/writers.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace attnscope;

namespace {

// /q, /k [2, 1 + 16, 6]: one prefix token and a 4x4 grid; root attributes as given.
std::string write_attributed(const std::string& dir, const nlohmann::json& attributes)
{
    std::vector<double> q(2 * 17 * 6), k(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) {
        q[i] = std::sin(0.37 * static_cast<double>(i));
        k[i] = std::cos(0.23 * static_cast<double>(i) + 0.5);
    }
    const std::string path = dir + "/attributed.h5";
    io::write_hdf5(path, {{"/q", {2, 17, 6}, q}, {"/k", {2, 17, 6}, k}}, attributes);
    return path;
}

const nlohmann::json k_lm_like = {{"prefix_tokens", 1}, {"causal", true}};
const nlohmann::json k_vit_like = {{"prefix_tokens", 1}, {"grid", {4, 4}}};

// A selection that drops one prefix token (named fields: the selection has more of them than this test sets).
io::AxisSelection prefix_one()
{
    io::AxisSelection sel;
    sel.prefix_tokens = 1;
    return sel;
}

}  // namespace

TEST(FileDefaults, AttributesFillWhatIsNotGiven)
{
    const std::string file = write_attributed(test::fresh_work_dir("defaults_rule"), k_vit_like);
    analysis::AnalysisSetup setup;
    const auto used = analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), setup);
    EXPECT_EQ(setup.selection.prefix_tokens, 1);
    EXPECT_EQ(setup.options.blocks.kind, attention::BlockSpec::Kind::grid);
    EXPECT_EQ(setup.options.blocks.grid, (std::vector<Eigen::Index>{4, 4}));
    EXPECT_EQ(setup.options.blocks.block_grid, (std::vector<Eigen::Index>{4, 4}));
    EXPECT_EQ(used["prefix_tokens"], 1);
    EXPECT_EQ(used["grid"], nlohmann::json({4, 4}));
    EXPECT_FALSE(used.contains("causal"));

    // Explicit choices win: no prefix tokens (17 tokens do not fill the grid: 1-D blocks stay), blocks given.
    analysis::AnalysisSetup mine;
    mine.given.prefix_tokens = true;
    const auto taken = analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), mine);
    EXPECT_EQ(taken.size(), 1u) << taken.dump();   // nothing taken; the grid that does not fit is said
    EXPECT_EQ(taken["not_applied"]["grid"], "the grid [4,4] holds 16 tokens, the selection has 17");
    EXPECT_EQ(mine.selection.prefix_tokens, 0);
    EXPECT_EQ(mine.options.blocks.kind, attention::BlockSpec::Kind::count);
}

TEST(FileDefaults, BlockGridAndMixingAttributes)
{
    const std::string dir = test::fresh_work_dir("defaults_block_grid");
    nlohmann::json attrs = k_vit_like;
    attrs["block_grid"] = {2, 4};
    attrs["mixing"] = "identity";
    const std::string file = write_attributed(dir, attrs);
    analysis::AnalysisSetup setup;
    const auto used = analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), setup);
    EXPECT_EQ(setup.options.blocks.block_grid, (std::vector<Eigen::Index>{2, 4}));
    EXPECT_EQ(setup.options.mixing.preset, "identity");
    EXPECT_EQ(used["mixing"], "identity");
    // A block grid that does not divide the grid is refused by name (unless a block option overrides it).
    attrs["block_grid"] = {3, 4};
    const std::string odd = write_attributed(test::fresh_work_dir("defaults_block_grid_odd"), attrs);
    analysis::AnalysisSetup other;
    try {
        analysis::resolve_file_defaults(io::parse_tensor_ref(odd + ":/q"), other);
        ADD_FAILURE() << "an unusable block_grid attribute was applied";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("attribute block_grid"), std::string::npos) << e.what();
    }
    analysis::AnalysisSetup chosen;
    chosen.given.blocks = true;
    EXPECT_NO_THROW(analysis::resolve_file_defaults(io::parse_tensor_ref(odd + ":/q"), chosen));
}

TEST(FileDefaults, SweepAppliesEachInputsAttributes)
{
    const std::string file = write_attributed(test::fresh_work_dir("defaults_sweep"), k_lm_like);
    analysis::SweepSpec spec;
    spec.inputs.push_back({io::parse_tensor_ref(file + ":/q"), io::parse_tensor_ref(file + ":/k"), std::nullopt, {}});
    spec.vary = 'n';
    spec.values = {8, 16};
    spec.options.blocks.blocks = 4;
    spec.given.blocks = true;
    const analysis::SweepPlan plan = analysis::plan_sweep(spec);
    ASSERT_EQ(plan.inputs.size(), 1u);
    EXPECT_EQ(plan.inputs[0]["defaults_from_file"]["prefix_tokens"], 1);
    EXPECT_EQ(plan.inputs[0]["defaults_from_file"]["causal"], true);
    const auto records = analysis::run_sweep(plan, analysis::JobContext{});
    ASSERT_EQ(records.size(), 6u);
    // N = 16 is every token after the prefix token, analysed causally: analyze() on those rows agrees.
    const analysis::LoadedInputs in = analysis::load_inputs(io::parse_tensor_ref(file + ":/q"), io::parse_tensor_ref(file + ":/k"), std::nullopt, prefix_one());
    attention::AttentionOptions causal = spec.options;
    causal.causal = true;
    for (const auto& r : records) {
        if (r.n != 16)
            continue;
        const auto ref = analysis::analyze(in.q.values, in.k.values, {attention::parse_mechanism(r.mechanism)}, causal,
                                           spec.metrics, 1ULL << 32);
        ASSERT_TRUE(r.result.entropy && ref[0].entropy);
        EXPECT_EQ(r.result.entropy->rows, ref[0].entropy->rows) << r.mechanism;
    }
    // The summary names what came from the file.
    const auto summary = analysis::sweep_summary(plan.spec, records, plan.inputs);
    EXPECT_EQ(summary["inputs"][0]["defaults_from_file"]["causal"], true);
    // A sweep that chooses causal explicitly (--no-causal) is not overridden.
    spec.given.causal = true;
    EXPECT_FALSE(analysis::plan_sweep(spec).inputs[0]["defaults_from_file"].contains("causal"));
}

TEST(FileDefaults, BatchUnitsCarryTheirFilesDefaults)
{
    const std::string dir = test::fresh_work_dir("defaults_batch");
    const std::string file = write_attributed(dir, k_lm_like);
    analysis::BatchPlan plan;
    plan.files = {file};
    plan.q_name = "/q";
    plan.k_name = "/k";
    plan.heads = analysis::AxisChoice::all("heads");
    const auto units = analysis::plan_batch_units(plan);
    ASSERT_EQ(units.size(), 2u);
    for (const auto& u : units) {
        EXPECT_TRUE(u.options.causal);
        EXPECT_EQ(u.source.selection.prefix_tokens, 1);
        EXPECT_EQ(u.defaults_from_file["causal"], true);
    }
    plan.given.causal = true;   // causal = false in the job
    EXPECT_FALSE(analysis::plan_batch_units(plan)[0].options.causal);
}

// The file's tokens and image reach the app's result for display: `text` one token per character (prefix
// tokens dropped), an image attribute as rows x cols.
TEST(FileDefaults, TokensAndImageForDisplay)
{
    const std::string dir = test::fresh_work_dir("defaults_tokens");
    nlohmann::json attrs = {{"prefix_tokens", 1}, {"text", "Ab\xc3\xa9" "cdefghijklmnop"}};   // 'é' is one character
    attrs["image_8x8"] = {{0, 1, 2}, {3, 4, 5}};
    const std::string file = write_attributed(dir, attrs);
    const analysis::FileDefaults d = analysis::read_file_defaults(io::parse_tensor_ref(file + ":/q"));
    ASSERT_EQ(d.tokens.size(), 17u);
    EXPECT_EQ(d.tokens[2], "\xc3\xa9");
    ASSERT_TRUE(d.image);
    EXPECT_EQ(d.image->rows, 2);
    EXPECT_EQ(d.image->cols, 3);
    EXPECT_EQ(d.image->values[4], 4.0);
    analysis::ExploreRequest req;
    req.source = {io::parse_tensor_ref(file + ":/q"), io::parse_tensor_ref(file + ":/k"), std::nullopt, prefix_one()};
    const analysis::ExploreResult r = analysis::explore(req, analysis::JobContext{});
    ASSERT_EQ(r.tokens.size(), 16u);   // the 16 analysed tokens after the prefix token
    EXPECT_EQ(r.tokens[0], "b");
    EXPECT_EQ(r.tokens[1], "\xc3\xa9");
    ASSERT_TRUE(r.image);
}

TEST(FileDefaults, MaskOtherIsSaidNotApplied)
{
    // A mask the model applied that is neither causal nor padding (docs/pytorch.md): nothing applies it,
    // and what was taken from the file says so whatever the user chose.
    const std::string dir = test::fresh_work_dir("defaults_mask");
    nlohmann::json attrs = k_lm_like;
    attrs["mask"] = "other";
    const std::string file = write_attributed(dir, attrs);
    analysis::AnalysisSetup setup;
    setup.given.causal = true;
    const auto used = analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), setup);
    ASSERT_TRUE(used.contains("not_applied")) << used.dump();
    EXPECT_NE(used["not_applied"]["mask"].get<std::string>().find("mask = \"other\""), std::string::npos);
    EXPECT_EQ(analysis::read_file_defaults(io::parse_tensor_ref(file + ":/q")).mask, "other");

    attrs["mask"] = "causal";
    const std::string causal = write_attributed(dir, attrs);
    analysis::AnalysisSetup plain;
    EXPECT_FALSE(analysis::resolve_file_defaults(io::parse_tensor_ref(causal + ":/q"), plain).contains("not_applied"));
}

// The softmax scale the model used (the bridge records it per layer): a default when it differs from 1/sqrt(d),
// silent when it is 1/sqrt(d), an error naming it when it is not a positive number, overridden by --scale.
TEST(FileDefaults, ScaleAttributeOtherThanTheDefault)
{
    const std::string dir = test::fresh_work_dir("defaults_scale");
    nlohmann::json attrs = {{"scale", 0.7}};
    std::string file = write_attributed(dir, attrs);
    analysis::AnalysisSetup setup;
    auto used = analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), setup);
    ASSERT_TRUE(setup.options.scale);
    EXPECT_EQ(*setup.options.scale, 0.7);
    EXPECT_EQ(used["scale"], 0.7);

    analysis::AnalysisSetup mine;
    mine.given.scale = true;
    EXPECT_FALSE(analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), mine).contains("scale"));
    EXPECT_FALSE(mine.options.scale);

    attrs["scale"] = 1.0 / std::sqrt(6.0);   // d = 6: the default, nothing to report
    file = write_attributed(dir, attrs);
    analysis::AnalysisSetup plain;
    EXPECT_FALSE(analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), plain).contains("scale"));
    EXPECT_FALSE(plain.options.scale);

    attrs["scale"] = -1.0;
    file = write_attributed(dir, attrs);
    analysis::AnalysisSetup bad;
    try {
        analysis::resolve_file_defaults(io::parse_tensor_ref(file + ":/q"), bad);
        ADD_FAILURE() << "a negative scale attribute was accepted";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("scale"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("choose the scale yourself"), std::string::npos) << e.what();
    }
}
