// The subcommands doing their jobs: info (table and JSON), analyze's summary, synth's structure
// (checked by NumPy in check_synth.py), matrix round trips.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/writers.h"
#include "support/attnscope_binary.h"

#include <cmath>

using attnscope::test::CommandResult;
using attnscope::test::expect_script_passes;
using attnscope::test::run_attnscope;

TEST(CliCommands, SynthHasPromisedStructure)
{
    expect_script_passes("app/check_synth.py", "cli_synth");
}

TEST(CliCommands, InfoListsTensorsAndAttributes)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_info");
    const std::string file = dir + "/s.h5";
    ASSERT_EQ(run_attnscope("synth --n 36 --d 4 --heads 2 --kind local2d --seed 3 --out " + file).status, 0);
    const CommandResult table = run_attnscope("info " + file);
    ASSERT_EQ(table.status, 0) << table.err;
    for (const char* needle : {"hdf5", "/q", "/k", "/v", "float32", "[2, 36, 4]", "@kind", "local2d", "@grid"})
        EXPECT_NE(table.out.find(needle), std::string::npos) << needle << " not in:\n" << table.out;

    const CommandResult js = run_attnscope("info --json " + file);
    ASSERT_EQ(js.status, 0) << js.err;
    const auto doc = nlohmann::json::parse(js.out);
    EXPECT_EQ(doc["format"], "hdf5");
    EXPECT_EQ(doc["attributes"]["kind"], "local2d");
    EXPECT_EQ(doc["attributes"]["grid"], nlohmann::json::array({6, 6}));
    ASSERT_EQ(doc["tensors"].size(), 3u);
    EXPECT_EQ(doc["tensors"][0]["shape"], nlohmann::json::array({2, 36, 4}));
    EXPECT_EQ(doc["tensors"][0]["dtype"], "float32");
}

TEST(CliCommands, AnalyzeSummaryAndJsonFile)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_analyze");
    const std::string file = dir + "/s.h5";
    ASSERT_EQ(run_attnscope("synth --n 64 --d 8 --heads 2 --kind local2d --out " + file).status, 0);
    const std::string json = dir + "/r.json";
    const CommandResult r = run_attnscope("analyze --q " + file + ":/q --k " + file + ":/k --head 1 --grid 8,8 --block-grid 2,2 --json " + json);
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* needle : {"softmax", "linear", "mhla", "rank", "N=64", "d=8", "blocks=4", "mixing=cos"})
        EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in:\n" << r.out;
    const auto doc = nlohmann::json::parse(attnscope::test::read_text(json));
    EXPECT_EQ(doc["attnscope_version"], "0.1.0");
    EXPECT_EQ(doc["input"]["at"]["h"], 1);
    EXPECT_EQ(doc["input"]["layout"], "hnd");
    ASSERT_EQ(doc["results"].size(), 3u);
    EXPECT_EQ(doc["results"][2]["params"]["blocks"], 4);
    // linear rank <= feature dimension (8), softmax full rank on local data
    EXPECT_LE(doc["results"][1]["rank"].get<int>(), 8);
    EXPECT_GT(doc["results"][0]["rank"].get<int>(), 8);
}

TEST(CliCommands, SweepEqualsSeparateAnalyzeRuns)
{
    expect_script_passes("app/check_sweep.py", "cli_sweep");
}

TEST(CliCommands, BatchResumesShardsMergeAndSchema)
{
    expect_script_passes("app/check_batch.py", "cli_batch");
}

TEST(CliCommands, FileAttributesAreDefaults)
{
    // prefix_tokens, grid and causal written by the PyTorch bridge (root attributes) become defaults
    // that explicit options override.
    const std::string dir = attnscope::test::fresh_work_dir("cli_file_defaults");
    const std::string file = dir + "/acts.h5";
    std::vector<double> q(2 * 17 * 3), k(2 * 17 * 3);
    for (std::size_t i = 0; i < q.size(); ++i) {
        q[i] = std::sin(0.37 * static_cast<double>(i));
        k[i] = std::cos(0.11 * static_cast<double>(i));
    }
    nlohmann::json attrs = {{"prefix_tokens", 1}, {"grid", {4, 4}}, {"causal", false}};
    attnscope::io::write_hdf5(file, {{"/q", {2, 17, 3}, q}, {"/k", {2, 17, 3}, k}}, attrs);
    const CommandResult r = run_attnscope("analyze --q " + file + ":/q --k " + file + ":/k --json -");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["input"]["n"], 16);
    EXPECT_EQ(doc["input"]["prefix_tokens"], 1);
    EXPECT_EQ(doc["input"]["defaults_from_file"]["grid"], nlohmann::json::array({4, 4}));
    EXPECT_EQ(doc["results"][2]["params"]["block_grid"], nlohmann::json::array({4, 4}));
    EXPECT_EQ(doc["results"][0]["params"]["causal"], false);

    const CommandResult o = run_attnscope("analyze --q " + file + ":/q --k " + file + ":/k --prefix-tokens 0 --blocks 3 --json -");
    ASSERT_EQ(o.status, 0) << o.err;
    const auto own = nlohmann::json::parse(o.out);
    EXPECT_EQ(own["input"]["n"], 17);
    EXPECT_FALSE(own["input"].contains("defaults_from_file"));
    EXPECT_EQ(own["results"][2]["params"]["blocks"], 3);

    attrs["causal"] = true;
    attnscope::io::write_hdf5(file, {{"/q", {2, 17, 3}, q}, {"/k", {2, 17, 3}, k}}, attrs);
    const auto causal = nlohmann::json::parse(run_attnscope("analyze --q " + file + ":/q --k " + file + ":/k --json -").out);
    EXPECT_EQ(causal["results"][0]["params"]["causal"], true);
    const auto off = nlohmann::json::parse(run_attnscope("analyze --q " + file + ":/q --k " + file + ":/k --no-causal --json -").out);
    EXPECT_EQ(off["results"][0]["params"]["causal"], false);
}

// Learned mixing matrices per head, from --mixing or the layer's attribute (tests/app/check_head_mixing.py).
TEST(CliCommands, PerHeadMixingMatricesMatchTheReference)
{
    attnscope::test::expect_script_passes("app/check_head_mixing.py", "cli_head_mixing");
}

// The rank-cap sentence of docs/maths.md 1.6 in analyze's table and JSON and the sweep summary, against NumPy's
// rank of Mc (tests/app/check_rank_cap.py).
TEST(CliCommands, MixingRankCapIsSaidInWords)
{
    attnscope::test::expect_script_passes("app/check_rank_cap.py", "cli_rank_cap");
}

// A signed learned Mc (docs/maths.md 1.4) against the reference, per head, with the degenerate-normaliser rule
// (tests/app/check_signed_mixing.py).
TEST(CliCommands, SignedMixingMatricesMatchTheReference)
{
    attnscope::test::expect_script_passes("app/check_signed_mixing.py", "cli_signed_mixing");
}

// The decay, gated and cosformer families (docs/maths.md 1.8) against the NumPy reference, with their identities and
// errors (tests/app/check_families.py).
TEST(CliCommands, LinearAttentionFamiliesMatchTheReference)
{
    attnscope::test::expect_script_passes("app/check_families.py", "cli_families");
}

// Statistics over units (docs/batch.md, aggregate.csv): a batch over six heads, shards merged, `aggregate --by`,
// `--at b=all` units in analyze and batch, against the NumPy reference, and the errors (tests/app/check_aggregate.py).
TEST(CliCommands, AggregateOverUnitsMatchesTheReference)
{
    attnscope::test::expect_script_passes("app/check_aggregate.py", "cli_aggregate");
}

// The measures of docs/maths.md 2.2 (energy ranks, rank_at_rtol, support-normalised entropy, the content-free
// baseline, the past block) through analyze and batch against the NumPy reference (tests/app/check_measures.py).
TEST(CliCommands, MeasuresBeyondTheMaskMatchTheReference)
{
    attnscope::test::expect_script_passes("app/check_measures.py", "cli_measures");
}

// Issue 31: the semiseparable profile (past_profile, semiseparable_rank, --past-splits) at every split from the
// carried factors (1-D and raster grids, causal and not, learned Mc with zeros, every factored mechanism) and at
// N = 4096 without N x N, against the dense SVD of each block in NumPy (tests/app/check_profile.py).
TEST(CliCommands, SemiseparableProfileMatchesTheReference)
{
    attnscope::test::expect_script_passes("app/check_profile.py", "cli_profile");
}

// Issue 31: `attnscope depth` (products of the layers' attention matrices) against NumPy on the shipped ViT and causal
// LM, per-layer datasets and an `l` axis alike (tests/app/check_depth.py).
TEST(CliCommands, DepthProductsMatchNumPy)
{
    attnscope::test::expect_script_passes("app/check_depth.py", "cli_depth");
}

// Issue 32: retrieval mass and rank from a file's retrieval_targets (docs/formats.md) against NumPy, per batch
// element, causal and not, with prefix tokens, through analyze and batch; bad targets are one error line
// (tests/app/check_retrieval.py).
TEST(CliCommands, RetrievalMassMatchesNumPy)
{
    attnscope::test::expect_script_passes("app/check_retrieval.py", "cli_retrieval");
}

// Issue 32: the bundled MQAR models (data/trained_mqar_*.h5), one per mechanism, each under 2 MB, open in analyze with
// their causal flag, MHLA's blocks and Mc, gated's gates and the retrieval targets from the file; data/README.md's table
// gives each file's learning rate and accuracy as its attributes do (tests/app/check_bundled_mqar.py).
TEST(CliCommands, BundledMqarModelsOpenWithTheirLabels)
{
    attnscope::test::expect_script_passes("app/check_bundled_mqar.py", "cli_bundled_mqar");
}

// Issue 30: logits up to ~1e12 (queries x 1e6) make softmax rows one-hot with subnormal entries; every
// mechanism's spectrum still comes back equal to NumPy's, on both dense SVD paths, with no LAPACK message
// (tests/app/check_large_logits.py).
TEST(CliCommands, SpectraOfLargeLogitsMatchNumPy)
{
    attnscope::test::expect_script_passes("app/check_large_logits.py", "cli_large_logits");
}

// The grouped-query sample (data/char_llama_gqa.h5, 4 query heads sharing 2 key/value heads): query head 3
// pairs key/value head 1, and the summary says so; info lists its token strings.
TEST(CliCommands, GroupedQuerySamplePairsAndSaysSo)
{
    const std::string file = std::string(ATTNSCOPE_DATA_DIR) + "/char_llama_gqa.h5";
    const CommandResult r = run_attnscope("analyze --q " + file + ":/layers/1/q --k " + file + ":/layers/1/k --head 3");
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* needle : {"at h=3 kv=1", "4 query heads share 2 key/value heads",
                               "this query head pairs with key/value head 1", "causal=true", "N=256"})
        EXPECT_NE(r.out.find(needle), std::string::npos) << needle << " not in:\n" << r.out;
    const auto doc = nlohmann::json::parse(
        run_attnscope("analyze --q " + file + ":/layers/1/q --k " + file + ":/layers/1/k --head 3 --json -").out);
    EXPECT_EQ(doc["input"]["kv_head"], 1);
    EXPECT_EQ(doc["input"]["grouped_query"]["kv_heads"], 2);

    const CommandResult info = run_attnscope("info " + file);
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_NE(info.out.find("tokens: 256 (@tokens): \" \" \"C\" \"o\" \"n\""), std::string::npos) << info.out;
    const auto js = nlohmann::json::parse(run_attnscope("info --json " + file).out);
    EXPECT_EQ(js["tokens"]["count"], 256);
    EXPECT_EQ(js["tokens"]["first"][1], "C");
    EXPECT_TRUE(js["image"].is_null());
}

// info lists an input image (here the digit of data/vit_digits.h5) and tokens taken from a `text` attribute.
TEST(CliCommands, InfoListsTokensAndImage)
{
    const CommandResult vit = run_attnscope("info " + std::string(ATTNSCOPE_DATA_DIR) + "/vit_digits.h5");
    ASSERT_EQ(vit.status, 0) << vit.err;
    EXPECT_NE(vit.out.find("image: 8 x 8 (@image_8x8)"), std::string::npos) << vit.out;
    EXPECT_EQ(vit.out.find("tokens:"), std::string::npos) << vit.out;
    const auto js = nlohmann::json::parse(run_attnscope("info --json " + std::string(ATTNSCOPE_DATA_DIR) + "/char_lm_licenses.h5").out);
    EXPECT_EQ(js["tokens"]["count"], 512);
    EXPECT_EQ(js["tokens"]["attribute"], "text");
}

// Compressed inputs never push a run over --max-memory (tests/app/check_memory_budget.py).
TEST(CliCommands, CompressedInputsStayWithinTheMemoryLimit)
{
    attnscope::test::expect_script_passes("app/check_memory_budget.py", "cli_memory_budget");
}

// Issue 36 (cli.md "Added for round 5"): `analyze --metric NAME[,...]` keeps only those metrics, in the table and
// the JSON (each a field named by its key, the value the full document gives); `--no-baseline` skips the
// content-free baseline and the fields that need it, and changes no other number; an unknown metric is one
// error line naming it, exit 2.
TEST(CliCommands, AnalyzeMetricFilterAndNoBaseline)
{
    const std::string file = std::string(ATTNSCOPE_DATA_DIR) + "/vit_digits.h5";
    const std::string refs = "analyze --q " + file + ":/layers/0/q --k " + file + ":/layers/0/k ";
    const CommandResult full = run_attnscope(refs + "--json -");
    ASSERT_EQ(full.status, 0) << full.err;
    const auto all = nlohmann::json::parse(full.out);
    const CommandResult some = run_attnscope(refs + "--metric effective_rank,entropy_mean,excess_effective_rank --json -");
    ASSERT_EQ(some.status, 0) << some.err;
    const auto kept = nlohmann::json::parse(some.out);
    ASSERT_EQ(kept["results"].size(), all["results"].size());
    for (std::size_t i = 0; i < kept["results"].size(); ++i) {
        const auto& r = kept["results"][i];
        const auto& f = all["results"][i];
        EXPECT_EQ(r["mechanism"], f["mechanism"]);
        EXPECT_FALSE(r.contains("rank"));
        EXPECT_FALSE(r.contains("entropy"));
        EXPECT_DOUBLE_EQ(r["effective_rank"].get<double>(), f["effective_rank"].get<double>());
        EXPECT_DOUBLE_EQ(r["entropy_mean"].get<double>(), f["entropy"]["mean"].get<double>());
        EXPECT_DOUBLE_EQ(r["excess_effective_rank"].get<double>(), f["excess_effective_rank"].get<double>());
    }
    const CommandResult table = run_attnscope(refs + "--metric effective_rank,entropy_mean");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("eff.rank"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("H mean"), std::string::npos) << table.out;
    EXPECT_EQ(table.out.find("stab.rank"), std::string::npos) << "a column not asked for:\n" << table.out;

    const CommandResult bad = run_attnscope(refs + "--metric rank,bogus");
    attnscope::test::expect_one_error(bad, {"--metric", "'bogus'", "effective_rank"}, "analyze --metric bogus");

    const CommandResult lean = run_attnscope(refs + "--no-baseline --json -");
    ASSERT_EQ(lean.status, 0) << lean.err;
    const auto nb = nlohmann::json::parse(lean.out);
    for (std::size_t i = 0; i < nb["results"].size(); ++i) {
        const auto& r = nb["results"][i];
        for (const char* gone : {"baseline", "excess_effective_rank", "entropy_below_baseline"})
            EXPECT_FALSE(r.contains(gone)) << gone << " in " << r["mechanism"];
        EXPECT_EQ(r["rank"], all["results"][i]["rank"]);
        EXPECT_DOUBLE_EQ(r["effective_rank"].get<double>(), all["results"][i]["effective_rank"].get<double>());
    }
}

// Issue 36 item 3: per-layer datasets (/layers/<i>/q, as the bridge writes them) sweep over their layers like
// batch takes them: `sweep --layers all` gives each layer's records (equal to a sweep of that layer's own
// datasets), a listed layer the file lacks is an error naming the layers there are, and a batch [[sweep]]
// without its own `layers` sweeps the job's `layers = "all"` (it once swept layer 0 alone, silently).
TEST(CliCommands, SweepOverPerLayerDatasets)
{
    const std::string file = std::string(ATTNSCOPE_DATA_DIR) + "/trained_lm_mhla.h5";
    const std::string common = " --vary n=64,128 --mechanism softmax,linear --csv -";
    const CommandResult all = run_attnscope("sweep --q " + file + ":/layers/0/q --k " + file + ":/layers/0/k --layers all" + common);
    ASSERT_EQ(all.status, 0) << all.err;
    const CommandResult one = run_attnscope("sweep --q " + file + ":/layers/1/q --k " + file + ":/layers/1/k" + common);
    ASSERT_EQ(one.status, 0) << one.err;
    auto lines = [](const std::string& text) {
        std::vector<std::string> out;
        std::size_t at = 0;
        while (at < text.size()) {
            const std::size_t end = text.find('\n', at);
            out.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
            at = end == std::string::npos ? text.size() : end + 1;
        }
        return out;
    };
    // Without the seconds column (last), the layer-1 rows of the all-layers sweep are the layer-1 sweep's rows
    // with 1 in their (there empty) layer column.
    auto cut = [](std::string row) { return row.substr(0, row.rfind(',')); };
    const auto a = lines(all.out), o = lines(one.out);
    ASSERT_EQ(a.size(), 1 + 2 * (o.size() - 1)) << all.out;
    int layer1 = 0;
    for (std::size_t i = 1; i < a.size(); ++i)
        if (a[i].find(",1,0,,") != std::string::npos) {
            ++layer1;
            bool found = false;
            for (std::size_t j = 1; j < o.size(); ++j) {
                std::string expect = cut(o[j]);
                const std::size_t at = expect.find(",,");   // the layer column: empty for one layer's own datasets
                ASSERT_NE(at, std::string::npos) << o[j];
                expect.replace(at, 2, ",1,");
                found = found || cut(a[i]) == expect;
            }
            EXPECT_TRUE(found) << a[i];
        }
    EXPECT_EQ(layer1, static_cast<int>(o.size()) - 1);
    attnscope::test::expect_one_error(run_attnscope("sweep --q " + file + ":/layers/0/q --k " + file + ":/layers/0/k --layers 0,5" + common),
                                      {"--layers", "no layer 5", "layers 0, 1"}, "sweep --layers 0,5");

    const std::string dir = attnscope::test::fresh_work_dir("cli_sweep_layers");
    {
        std::ofstream job(dir + "/job.toml");
        job << "inputs = [\"" << file << "\"]\nq = \"/layers/0/q\"\nk = \"/layers/0/k\"\nlayers = \"all\"\nmechanisms = [\"linear\"]\n"
            << "[[sweep]]\nname = \"n\"\nvary = \"n=64,128\"\n";
    }
    const CommandResult batch = run_attnscope("batch " + dir + "/job.toml --out " + dir + "/out");
    ASSERT_EQ(batch.status, 0) << batch.err;
    const std::string csv = attnscope::test::read_text(dir + "/out/sweeps/n.csv");
    EXPECT_NE(csv.find("linear,64,16,1,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("linear,64,16,0,"), std::string::npos) << csv;
}

// Issue 36 item 4: sweep without --csv prints a short summary (the means per mechanism and N, where the rest is)
// instead of a 40-column CSV; --csv - still gives the CSV, alone, on standard output.
TEST(CliCommands, SweepWithoutCsvPrintsASummary)
{
    const std::string common = "sweep --synth local1d --d 8 --seeds 2 --vary n=32,64 --blocks 4";
    const CommandResult summary = run_attnscope(common);
    ASSERT_EQ(summary.status, 0) << summary.err;
    EXPECT_EQ(summary.out.find("mechanism,n,m"), std::string::npos) << summary.out;
    EXPECT_NE(summary.out.find("12 records"), std::string::npos) << summary.out;
    EXPECT_NE(summary.out.find("eff.rank"), std::string::npos) << summary.out;
    EXPECT_NE(summary.out.find("--csv FILE"), std::string::npos) << summary.out;
    EXPECT_LE(std::count(summary.out.begin(), summary.out.end(), '\n'), 12) << summary.out;
    const CommandResult csv = run_attnscope(common + " --csv -");
    ASSERT_EQ(csv.status, 0) << csv.err;
    EXPECT_EQ(csv.out.rfind("mechanism,n,m,", 0), 0u) << csv.out;
    EXPECT_EQ(csv.out.find("records;"), std::string::npos) << csv.out;
}

// Issue 36 item 4: a long analyze shows its progress on standard error while that is a terminal (here a
// pseudo-terminal from util-linux's `script`), and never in a pipe, a file or a CI log.
TEST(CliCommands, AnalyzeProgressOnlyOnATerminal)
{
    if (std::system("command -v script > /dev/null 2>&1") != 0)
        GTEST_SKIP() << "no script(1)";
    const std::string file = std::string(ATTNSCOPE_DATA_DIR) + "/char_lm_licenses.h5";
    const std::string cmd = std::string(ATTNSCOPE_BINARY) + " analyze --q " + file + ":/layers/1/q --k " + file + ":/layers/1/k";
    const CommandResult tty = attnscope::test::run_command("env -u CI script -qc '" + cmd + "' /dev/null");
    ASSERT_EQ(tty.status, 0) << tty.err;
    EXPECT_NE(tty.out.find("%] softmax"), std::string::npos) << tty.out.substr(0, 400);
    const CommandResult pipe = attnscope::test::run_command("env -u CI " + cmd + " 2>&1 > /dev/null");
    ASSERT_EQ(pipe.status, 0);
    EXPECT_EQ(pipe.out, "") << "progress in a pipe";
    const CommandResult ci = attnscope::test::run_command("CI=true script -qc '" + cmd + "' /dev/null");
    EXPECT_EQ(ci.out.find("%] softmax"), std::string::npos) << "progress in a CI log";
}
