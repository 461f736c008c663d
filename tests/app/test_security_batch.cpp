// Batch and merge against untrusted folders and file names (docs/security.md, "Batch and merge"): figure
// names unique per input path, a rerun that recomputes changed inputs and drops inputs that left the job,
// merge checking shard.json against the records, never following links, never writing into a shard or
// leaving an earlier merge's files, and file names that are not UTF-8 through every JSON output.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/writers.h"
#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::expect_one_error;
using attnscope::test::run_attnscope;
using attnscope::test::shell_quote;
using json = nlohmann::json;

namespace {

std::string g_dir;

std::string read_text(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// heads x 16 x 4 activations whose values depend on `seed`.
void write_acts(const std::string& path, int seed, std::int64_t heads = 2)
{
    std::vector<double> q(static_cast<std::size_t>(heads * 64)), k(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) {
        q[i] = std::sin(0.37 * static_cast<double>(i) + seed);
        k[i] = std::cos(0.23 * static_cast<double>(i) * (seed + 1));
    }
    attnscope::io::write_hdf5(path, {{"/q", {heads, 16, 4}, q}, {"/k", {heads, 16, 4}, k}});
}

// Records of DIR/results.jsonl by key.
std::map<std::string, json> records(const std::string& dir)
{
    std::map<std::string, json> out;
    std::istringstream in(read_text(dir + "/results.jsonl"));
    for (std::string line; std::getline(in, line);) {
        const json r = json::parse(line);
        EXPECT_EQ(out.count(r["key"]), 0u) << "duplicate record " << r["key"];
        out[r["key"]] = r;
    }
    return out;
}

std::set<std::string> listing(const std::string& dir)
{
    std::set<std::string> names;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
        names.insert(e.path().filename().string());
    return names;
}

class SecurityBatch : public ::testing::Test {
protected:
    static void SetUpTestSuite() { g_dir = attnscope::test::fresh_work_dir("security_batch"); }
    static std::string f(const std::string& name) { return g_dir + "/" + name; }
    static CommandResult run(const std::string& args) { return run_attnscope(args); }

    // A two-shard job over two files, run into DIR/s0 and DIR/s1 (and unsharded into DIR/all).
    static void two_shards(const std::string& dir, const std::string& extra_settings = "")
    {
        fs::create_directories(dir);
        write_acts(dir + "/x.h5", 1);
        write_acts(dir + "/y.h5", 2);
        put(dir + "/job.toml", "inputs = [\"x.h5\", \"y.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\n"
                               "mechanisms = [\"softmax\", \"linear\"]\n" + extra_settings);
        for (const std::string shard : {"0", "1"}) {
            const CommandResult r = run("batch " + dir + "/job.toml --out " + dir + "/s" + shard + " --shard " + shard + "/2");
            ASSERT_EQ(r.status, 0) << r.err;
        }
    }

    // shard.json of DIR edited by `edit`.
    template <class Edit>
    static void edit_shard_json(const std::string& dir, Edit edit)
    {
        // ordered_json: the settings object keeps its order (its hash is checked).
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(read_text(dir + "/shard.json"));
        edit(j);
        put(dir + "/shard.json", j.dump(2));
    }
};

}  // namespace

// Inputs a/m.h5 and b/m.h5 draw two sets of figures (one was skipped as "already drawn"), named alike by a
// sharded and an unsharded run.
TEST_F(SecurityBatch, FigureNamesAreUniquePerInputPath)
{
    if (!ATTNSCOPE_WITH_FIGURES)
        GTEST_SKIP() << "figures need the desktop app's views (ATTNSCOPE_BUILD_GUI=OFF)";
    const std::string dir = f("names");
    fs::create_directories(dir + "/a");
    fs::create_directories(dir + "/b");
    write_acts(dir + "/a/m.h5", 1, 1);
    write_acts(dir + "/b/m.h5", 2, 1);
    write_acts(dir + "/solo.h5", 3, 1);
    put(dir + "/job.toml", "inputs = [\"a/m.h5\", \"b/m.h5\", \"solo.h5\"]\nq = \"/q\"\nk = \"/k\"\nmechanisms = [\"linear\"]\n"
                           "[[figure]]\nview = \"spectrum\"\nformat = \"svg\"\nwidth = 200\nheight = 150\n");
    const CommandResult r = run("batch " + dir + "/job.toml --out " + dir + "/all");
    ASSERT_EQ(r.status, 0) << r.err;
    const std::set<std::string> want = listing(dir + "/all/figures");
    ASSERT_EQ(want.size(), 3u) << r.err;
    std::string a_m, b_m;
    for (const std::string& name : want) {
        if (name.rfind("a_m_", 0) == 0)
            a_m = name;
        else if (name.rfind("b_m_", 0) == 0)
            b_m = name;
        else
            EXPECT_EQ(name.rfind("solo_", 0), 0u) << name;
    }
    ASSERT_FALSE(a_m.empty() || b_m.empty()) << r.err;
    EXPECT_NE(read_text(dir + "/all/figures/" + a_m), read_text(dir + "/all/figures/" + b_m));

    std::set<std::string> sharded;
    for (const std::string shard : {"0", "1", "2"}) {
        const CommandResult s = run("batch " + dir + "/job.toml --out " + dir + "/s" + shard + " --shard " + shard + "/3");
        ASSERT_EQ(s.status, 0) << s.err;
        const auto names = listing(dir + "/s" + shard + "/figures");
        sharded.insert(names.begin(), names.end());
    }
    EXPECT_EQ(sharded, want);
    ASSERT_EQ(run("merge " + dir + "/s0 " + dir + "/s1 " + dir + "/s2 --out " + dir + "/merged").status, 0);
    EXPECT_EQ(listing(dir + "/merged/figures"), want);
}

// A rerun after an input changed recomputes its records (new SHA-256), and removes its figures first.
TEST_F(SecurityBatch, RerunRecomputesAChangedInput)
{
    const std::string dir = f("changed");
    fs::create_directories(dir);
    write_acts(dir + "/x.h5", 1);
    write_acts(dir + "/y.h5", 2);
    put(dir + "/job.toml", "inputs = [\"x.h5\", \"y.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\nmechanisms = [\"linear\"]\n"
                           "[[sweep]]\nname = \"n\"\nvary = \"n=8,16\"\n");
    ASSERT_EQ(run("batch " + dir + "/job.toml --out " + dir + "/out").status, 0);
    const auto before = records(dir + "/out");
    const json sweep_before = json::parse(read_text(dir + "/out/sweeps/n.json"));
    ASSERT_EQ(before.size(), 4u);

    write_acts(dir + "/x.h5", 7);   // new values, same shape
    const CommandResult r = run("batch " + dir + "/job.toml --out " + dir + "/out");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("input changed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("x.h5"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("2 already recorded, 2 analysed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("sweep n"), std::string::npos) << r.err;   // the sweep runs again too
    const json sweep_after = json::parse(read_text(dir + "/out/sweeps/n.json"));
    EXPECT_NE(sweep_after["batch"]["fingerprint"], sweep_before["batch"]["fingerprint"]);
    EXPECT_NE(sweep_after["points"], sweep_before["points"]);
    const auto after = records(dir + "/out");
    ASSERT_EQ(after.size(), 4u);
    for (const auto& [key, rec] : after) {
        const bool is_x = rec["input"]["file"].get<std::string>().find("x.h5") != std::string::npos;
        if (is_x)
            EXPECT_NE(rec["input"]["sha256"], before.at(key)["input"]["sha256"]) << key;
        else
            EXPECT_EQ(rec["input"]["sha256"], before.at(key)["input"]["sha256"]) << key;
    }
    // A rerun with nothing changed changes nothing.
    const std::string text = read_text(dir + "/out/results.jsonl");
    const CommandResult again = run("batch " + dir + "/job.toml --out " + dir + "/out");
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(again.err.find("note:"), std::string::npos) << again.err;
    EXPECT_EQ(read_text(dir + "/out/results.jsonl"), text);
}

// After an input leaves the job (here replaced by another with as many units), results.jsonl holds only the
// job's inputs, and their records say which unit they are.
TEST_F(SecurityBatch, RerunDropsInputsNoLongerInTheJob)
{
    const std::string dir = f("dropped");
    fs::create_directories(dir);
    write_acts(dir + "/x.h5", 1);
    write_acts(dir + "/y.h5", 2);
    write_acts(dir + "/w.h5", 3);
    const std::string figure = ATTNSCOPE_WITH_FIGURES ? "[[figure]]\nview = \"spectrum\"\nformat = \"svg\"\nwidth = 200\nheight = 150\n" : "";
    put(dir + "/job.toml", "inputs = [\"x.h5\", \"y.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\nmechanisms = [\"linear\"]\n" + figure);
    ASSERT_EQ(run("batch " + dir + "/job.toml --out " + dir + "/out").status, 0);
    if (ATTNSCOPE_WITH_FIGURES) {
        EXPECT_TRUE(fs::exists(dir + "/out/figures/y_h1_spectrum.svg"));
    }
    put(dir + "/job.toml", "inputs = [\"w.h5\", \"x.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\nmechanisms = [\"linear\"]\n" + figure);
    const CommandResult r = run("batch " + dir + "/job.toml --out " + dir + "/out");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("no longer in"), std::string::npos) << r.err;
    const auto recs = records(dir + "/out");
    ASSERT_EQ(recs.size(), 4u);
    std::set<std::size_t> units;
    for (const auto& [key, rec] : recs) {
        EXPECT_EQ(key.find("y.h5"), std::string::npos) << key;
        const bool is_w = key.find("w.h5") != std::string::npos;
        units.insert(rec["unit"].get<std::size_t>());
        EXPECT_EQ(rec["unit"].get<std::size_t>() < 2, is_w) << key;   // w.h5 sorts first now
    }
    EXPECT_EQ(units, (std::set<std::size_t>{0, 1, 2, 3}));
    if (ATTNSCOPE_WITH_FIGURES) {   // the figures of the input that left the job are gone
        EXPECT_EQ(listing(dir + "/out/figures"), (std::set<std::string>{"w_h0_spectrum.svg", "w_h1_spectrum.svg",
                                                                        "x_h0_spectrum.svg", "x_h1_spectrum.svg"}));
    }
    const std::string summary = read_text(dir + "/out/summary.csv");
    EXPECT_EQ(std::count(summary.begin(), summary.end(), '\n'), 5) << summary;
    // Other settings are still refused, naming the setting.
    put(dir + "/job.toml", "inputs = [\"w.h5\", \"x.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\nmechanisms = [\"softmax\"]\n");
    expect_one_error(run("batch " + dir + "/job.toml --out " + dir + "/out"), {"other settings", "mechanisms"}, "other settings");
}

// merge trusts shard.json no further than the records bear it out.
TEST_F(SecurityBatch, MergeChecksShardJsonAgainstTheRecords)
{
    const std::string dir = f("lies");
    two_shards(dir);
    const std::string s0 = dir + "/s0", s1 = dir + "/s1";
    ASSERT_EQ(run("merge " + s0 + " " + s1 + " --out " + dir + "/good").status, 0);
    const std::string original = read_text(s0 + "/shard.json");
    const auto restore = [&] { put(s0 + "/shard.json", original); };

    // Half a set claiming to be a whole one: shards 1 (with a units list to match) must not merge as complete.
    edit_shard_json(s0, [](nlohmann::ordered_json& j) {
        j["shards"] = 1;
        j["shard"] = 0;
        j["units"] = nlohmann::ordered_json::array({0, 1, 2, 3});
    });
    expect_one_error(run("merge " + s0 + " --out " + dir + "/m1"), {"incomplete", "2 units"}, "shards: 1");
    EXPECT_FALSE(fs::exists(dir + "/m1"));
    edit_shard_json(s0, [](nlohmann::ordered_json& j) { j["shards"] = 1; });
    expect_one_error(run("merge " + s0 + " --out " + dir + "/m2"), {"units"}, "shards: 1, units of 0/2");
    restore();
    edit_shard_json(s0, [](nlohmann::ordered_json& j) { j["units"] = nlohmann::ordered_json::array(); });
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m3"), {"\"units\""}, "units: []");
    restore();
    edit_shard_json(s0, [](nlohmann::ordered_json& j) { j["mechanisms"] = nlohmann::ordered_json::array(); });
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m4"), {"mechanisms"}, "mechanisms: []");
    restore();
    edit_shard_json(s0, [](nlohmann::ordered_json& j) { j["mechanisms"] = nlohmann::ordered_json::array({"linear"}); });
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m5"), {"mechanisms"}, "mechanisms: [linear]");
    expect_one_error(run("merge " + s0 + " --partial --out " + dir + "/m5"), {"mechanism", "softmax"}, "mechanisms: [linear], alone");
    restore();
    // 4294967297 = 2^32 + 1 would wrap to shard 1 in 32 bits.
    put(s0 + "/shard.json", std::string(original).replace(original.find("\"shard\": 0"), 10, "\"shard\": 4294967297"));
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m6"), {"shard", "4294967297"}, "shard 2^32+1");
    restore();
    // A count that would allocate 2e9 entries is refused before anything is allocated.
    edit_shard_json(s0, [](nlohmann::ordered_json& j) { j["shards"] = 2000000000; });
    edit_shard_json(s1, [](nlohmann::ordered_json& j) { j["shards"] = 2000000000; });
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m7"), {"shards", "2000000000"}, "shards: 2e9");
    edit_shard_json(s1, [](nlohmann::ordered_json& j) { j["shards"] = 2; });
    restore();
    // A record nested a million levels deep (copying or writing it would recurse that deep) is refused.
    const std::string results = read_text(s1 + "/results.jsonl");
    put(s1 + "/results.jsonl", results + std::string(1000000, '[') + "\n");
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m8"), {"line 5", "nested"}, "deep nesting");
    put(s1 + "/results.jsonl", results);
    for (const std::string m : {"m2", "m3", "m4", "m5", "m6", "m7", "m8"})
        EXPECT_FALSE(fs::exists(dir + "/" + m)) << m;
    ASSERT_EQ(run("merge " + s0 + " " + s1 + " --out " + dir + "/again").status, 0);
}

// Shards of other settings, and records of other settings inside a shard, are refused naming the folder.
TEST_F(SecurityBatch, MergeRefusesOtherSettings)
{
    const std::string a = f("settings_a"), b = f("settings_b");
    two_shards(a);
    two_shards(b, "[attention]\ncausal = true\n");
    expect_one_error(run("merge " + a + "/s0 " + b + "/s1 --out " + f("mixed")), {b + "/s1", "other settings", "causal"},
                     "shards of two settings");
    EXPECT_FALSE(fs::exists(f("mixed")));
    // The same settings over other files: shards of another job.
    const std::string c = f("settings_c");
    fs::create_directories(c);
    fs::copy_file(a + "/x.h5", c + "/x.h5");
    fs::copy_file(a + "/y.h5", c + "/z.h5");
    put(c + "/job.toml", std::regex_replace(read_text(a + "/job.toml"), std::regex("y\\.h5"), "z.h5"));
    ASSERT_EQ(run("batch " + c + "/job.toml --out " + c + "/s1 --shard 1/2").status, 0);
    expect_one_error(run("merge " + a + "/s0 " + c + "/s1 --out " + f("mixed")), {c + "/s1", "other inputs"}, "other inputs");
    EXPECT_FALSE(fs::exists(f("mixed")));
    // A record of b's settings smuggled into a's shard 1 (its own line replaced).
    std::string rec = read_text(b + "/s1/results.jsonl");
    rec = rec.substr(0, rec.find('\n') + 1);
    std::string own = read_text(a + "/s1/results.jsonl");
    put(a + "/s1/results.jsonl", rec + own.substr(own.find('\n') + 1));
    expect_one_error(run("merge " + a + "/s0 " + a + "/s1 --out " + f("smuggled")), {a + "/s1/results.jsonl", "other settings"},
                     "a record of other settings");
    EXPECT_FALSE(fs::exists(f("smuggled")));
}

// Nothing in a shard is read through a link: figures/ -> a private folder, a figure -> a file, results.jsonl.
TEST_F(SecurityBatch, MergeNeverFollowsLinks)
{
    const std::string dir = f("links");
    two_shards(dir);
    const std::string s0 = dir + "/s0", s1 = dir + "/s1";
    fs::create_directories(dir + "/private");
    put(dir + "/private/secret.png", "not yours");
    fs::create_directory_symlink(dir + "/private", s0 + "/figures");
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m1"), {s0 + "/figures", "symbolic link"}, "figures/ link");
    EXPECT_FALSE(fs::exists(dir + "/m1"));
    fs::remove(s0 + "/figures");
    fs::create_directories(s0 + "/figures");
    fs::create_symlink(dir + "/private/secret.png", s0 + "/figures/x_h0_maps.png");
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m2"), {"x_h0_maps.png", "symbolic link"}, "figure link");
    EXPECT_FALSE(fs::exists(dir + "/m2"));
    fs::remove(s0 + "/figures/x_h0_maps.png");
    fs::rename(s1 + "/results.jsonl", dir + "/private/results.jsonl");
    fs::create_symlink(dir + "/private/results.jsonl", s1 + "/results.jsonl");
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/m3"), {"results.jsonl", "symbolic link"}, "results link");
    EXPECT_FALSE(fs::exists(dir + "/m3"));
    // A batch rerun into that folder refuses to append through the link.
    expect_one_error(run("batch " + dir + "/job.toml --out " + s1 + " --shard 1/2"), {"results.jsonl", "symbolic link"},
                     "batch appending through a link");
    EXPECT_EQ(read_text(dir + "/private/secret.png"), "not yours");
}

// The output of a merge is never one of its shards (nor a folder holding one), however it is spelt, and an
// earlier merge's files never stay.
TEST_F(SecurityBatch, MergeOutputIsFreshAndNeverAShard)
{
    const std::string dir = f("out");
    two_shards(dir);
    const std::string s0 = dir + "/s0", s1 = dir + "/s1";
    const std::string before = read_text(s0 + "/results.jsonl") + read_text(s0 + "/shard.json");
    fs::create_directory_symlink(s0, dir + "/link");
    for (const std::string& out : std::vector<std::string>{s0, s0 + "/", dir + "/./s0", dir + "/link"})
        expect_one_error(run("merge " + s0 + " " + s1 + " --out " + out), {"--out", "shard folder"}, "--out " + out);
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir), {"--out", "holds the shard folder"}, "--out parent");
    EXPECT_EQ(read_text(s0 + "/results.jsonl") + read_text(s0 + "/shard.json"), before);
    EXPECT_EQ(listing(s0),
              (std::set<std::string>{"aggregate.csv", "aggregate.json", "results.jsonl", "shard.json", "summary.csv"}));

    // A complete merge, then a partial one into the same folder: no complete-looking file of the first stays.
    const std::string out = dir + "/merged";
    ASSERT_EQ(run("merge " + s0 + " " + s1 + " --out " + out).status, 0);
    fs::create_directories(out + "/figures");
    put(out + "/figures/old_h0_maps.png", "from an earlier merge");
    ASSERT_EQ(run("merge " + s0 + " --partial --out " + out).status, 0);
    EXPECT_EQ(listing(out), (std::set<std::string>{"aggregate.partial.csv", "aggregate.partial.json", "merge.json",
                                                   "results.partial.jsonl", "summary.partial.csv"}));
    EXPECT_FALSE(fs::exists(out + "/figures/old_h0_maps.png"));
    // A folder that is not an earlier merge is never replaced.
    fs::create_directories(dir + "/mine");
    put(dir + "/mine/notes.txt", "keep");
    expect_one_error(run("merge " + s0 + " " + s1 + " --out " + dir + "/mine"), {"notes.txt", "choose a new folder"}, "user folder");
    EXPECT_EQ(read_text(dir + "/mine/notes.txt"), "keep");
    // No temporary folder is left beside the outputs.
    for (const std::string& name : listing(dir))
        EXPECT_EQ(name.find(".merge-"), std::string::npos) << name;
}

// --shard is read whole: 0x1/2 and 4294967297/2 are refused, not run as 0/2 or 1/2.
TEST_F(SecurityBatch, ShardOptionIsParsedWhole)
{
    const std::string dir = f("shard_option");
    fs::create_directories(dir);
    write_acts(dir + "/x.h5", 1);
    put(dir + "/job.toml", "inputs = [\"x.h5\"]\nq = \"/q\"\nk = \"/k\"\nmechanisms = [\"linear\"]\n");
    for (const std::string shard : {"0x1/2", "4294967297/2", "1/4294967298", "0/2000000000", "1/1", " 0/2", "0/2x"})
        expect_one_error(run("batch " + dir + "/job.toml --out " + dir + "/o --shard " + shell_quote(shard)), {"--shard"},
                         "--shard " + shard);
    EXPECT_FALSE(fs::exists(dir + "/o"));
}

// A file whose name is not UTF-8 (byte 0xff) goes through every JSON output, shown with U+FFFD.
TEST_F(SecurityBatch, FileNamesThatAreNotUtf8)
{
    const std::string dir = f("bytes");
    fs::create_directories(dir);
    const std::string bad = dir + "/m\xff.h5";
    write_acts(bad, 1);
    write_acts(dir + "/plain.h5", 2);
    const std::string qk = "--q " + shell_quote(bad + ":/q") + " --k " + shell_quote(bad + ":/k");
    const std::string shown = "m\xef\xbf\xbd.h5";   // U+FFFD in UTF-8

    const CommandResult info = run("info --json " + shell_quote(bad));
    ASSERT_EQ(info.status, 0) << info.err;
    EXPECT_NE(json::parse(info.out).dump().find(shown), std::string::npos) << info.out;
    const CommandResult analyze = run("analyze " + qk + " --mechanism linear --json -");
    ASSERT_EQ(analyze.status, 0) << analyze.err;
    EXPECT_NE(json::parse(analyze.out).dump().find(shown), std::string::npos);
    const CommandResult sweep = run("sweep " + qk + " --vary n=8,16 --mechanism linear --json " + dir + "/sweep.json");
    ASSERT_EQ(sweep.status, 0) << sweep.err;
    EXPECT_TRUE(json::parse(read_text(dir + "/sweep.json")).is_object());

    put(dir + "/job.toml", "inputs = [\"*.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\nmechanisms = [\"linear\"]\n"
                           "[[sweep]]\nname = \"n\"\nvary = \"n=8,16\"\n");
    const CommandResult batch = run("batch " + dir + "/job.toml --out " + dir + "/out --jobs 2");
    ASSERT_EQ(batch.status, 0) << batch.err;
    const auto recs = records(dir + "/out");
    EXPECT_EQ(recs.size(), 4u);
    EXPECT_EQ(std::count_if(recs.begin(), recs.end(), [&](const auto& r) { return r.first.find(shown) != std::string::npos; }), 2);
    // Resumed: the keys read back equal the keys planned (nothing analysed again, nothing dropped).
    const CommandResult again = run("batch " + dir + "/job.toml --out " + dir + "/out --jobs 2");
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.err.find("4 already recorded, 0 analysed"), std::string::npos) << again.err;
    EXPECT_EQ(again.err.find("note:"), std::string::npos) << again.err;
    ASSERT_EQ(run("merge " + dir + "/out --out " + dir + "/merged").status, 0);

    // Two names that differ only in bytes that are not UTF-8 would show alike: refused before anything runs.
    write_acts(dir + "/m\xfe.h5", 3);
    expect_one_error(run("batch " + dir + "/job.toml --out " + dir + "/out2 --jobs 2"), {"same name"}, "two names shown alike");
    EXPECT_FALSE(fs::exists(dir + "/out2"));
}
