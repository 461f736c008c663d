// Hostile and clumsy use of the command line, one class of silent loss per test (issue classes of
// docs/hardening.md): output that cannot be written is an error, merge refuses incomplete or mixed shard
// sets, a batch refuses an impossible job before creating anything, two outputs never share a path, a
// mechanism that is not defined is null with a reason while the others go on, every value is used or
// refused naming where it came from, and messages speak the command line's language.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/writers.h"
#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::expect_one_error;
using attnscope::test::run_attnscope;

namespace {

std::string g_dir;

class CliHostile : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        g_dir = attnscope::test::fresh_work_dir("cli_hostile");
        attnscope::test::run_python("app/make_cli_fixtures.py", {g_dir});
    }
    static std::string f(const std::string& name) { return g_dir + "/" + name; }
    static std::string qk(const std::string& file) { return "--q " + f(file) + ":/q --k " + f(file) + ":/k"; }

};

}  // namespace

// Class 2: standard output that cannot be written (a full device, a closed stream) is an error.
TEST_F(CliHostile, StandardOutputFailuresAreErrors)
{
    const std::string cases[] = {
        "analyze " + qk("good.h5") + " --json - >/dev/full",
        "analyze " + qk("good.h5") + " >/dev/full",
        "info --json " + f("good.h5") + " >/dev/full",
        "info " + f("good.h5") + " >&-",
        "sweep " + qk("good.h5") + " --vary n=16,48 --mechanism linear >/dev/full",
    };
    for (const std::string& args : cases)
        expect_one_error(run_attnscope(args), {"standard output"}, args);
}

// Class 5: two outputs on one path would keep one and report both written.
TEST_F(CliHostile, TwoOutputsNeverShareAPath)
{
    const std::string out = f("same.out");
    expect_one_error(run_attnscope("sweep " + qk("good.h5") + " --vary n=16,48 --csv " + out + " --json " + out),
                     {"--csv", "--json", "same.out"}, "csv and json on one path");
    EXPECT_FALSE(fs::exists(out));
    expect_one_error(run_attnscope("sweep " + qk("good.h5") + " --vary n=16,48 --csv - --json -"), {"standard output"},
                     "csv and json on standard output");
}

// Class 6: a mechanism whose row normaliser vanishes is null with a warning naming it; the others go on.
TEST_F(CliHostile, UndefinedMechanismIsNullAndTheOthersGoOn)
{
    // Zero queries with identity features: every linear / MHLA row sums to 0; softmax is uniform.
    attnscope::io::write_hdf5(f("zeros.h5"), {{"/q", {1, 16, 4}, std::vector<double>(64, 0.0)},
                                              {"/k", {1, 16, 4}, std::vector<double>(64, 1.0)}});
    const CommandResult r = run_attnscope("analyze " + qk("zeros.h5") + " --feature-map identity --blocks 4 --json -");
    ASSERT_EQ(r.status, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    for (const auto& res : doc["results"]) {
        const std::string m = res["mechanism"];
        if (m == "softmax") {
            EXPECT_TRUE(res["rank"].is_number());
            continue;
        }
        EXPECT_TRUE(res["rank"].is_null()) << m;
        EXPECT_TRUE(res["entropy"].is_null()) << m;
        ASSERT_FALSE(res["warnings"].empty()) << m;
        const std::string w = res["warnings"][0];
        EXPECT_NE(w.find(m == "mhla" ? "MHLA" : "linear"), std::string::npos) << w;
        EXPECT_NE(w.find("sum to 0"), std::string::npos) << w;
        EXPECT_EQ(w.find("normalize="), std::string::npos) << "names an MHLA option: " << w;
    }
    // An all-zero learned mixing matrix: MHLA null, linear and softmax computed.
    const CommandResult z = run_attnscope("analyze " + qk("good.h5") + " --blocks 4 --mixing " + f("mix_zero_4.npy") + " --json -");
    ASSERT_EQ(z.status, 0) << z.err;
    const auto zd = nlohmann::json::parse(z.out);
    EXPECT_TRUE(zd["results"][1]["rank"].is_number());   // linear
    EXPECT_TRUE(zd["results"][2]["rank"].is_null());     // mhla
    // Scores that overflow: softmax says so (not a "zero normaliser").
    attnscope::io::write_hdf5(f("huge.h5"), {{"/q", {1, 8, 2}, std::vector<double>(16, 1e200)},
                                             {"/k", {1, 8, 2}, std::vector<double>(16, 1e200)}});
    const CommandResult h = run_attnscope("analyze " + qk("huge.h5") + " --mechanism softmax --json -");
    ASSERT_EQ(h.status, 0) << h.err;
    const std::string hw = nlohmann::json::parse(h.out)["results"][0]["warnings"][0];
    EXPECT_NE(hw.find("overflow"), std::string::npos) << hw;
    // matrix refuses to write an undefined matrix.
    expect_one_error(run_attnscope("matrix " + qk("zeros.h5") + " --feature-map identity --mechanism linear --out " +
                                   f("undefined.npy")),
                     {"linear", "sum to 0"}, "matrix of an undefined mechanism");
    EXPECT_FALSE(fs::exists(f("undefined.npy")));
}

// Class 7: values are used or refused, naming where they came from.
TEST_F(CliHostile, ValuesAreUsedOrRefused)
{
    expect_one_error(run_attnscope("analyze " + qk("good.h5") + " --seed -1 --feature-map favor"), {"--seed", "-1"}, "seed");
    expect_one_error(run_attnscope("synth --n 8 --d 2 --seed -3 --out " + f("s.h5")), {"--seed"}, "synth seed");
    // A file attribute that cannot be used is refused by name, unless an option overrides it.
    attnscope::io::write_hdf5(f("badattr.h5"), {{"/q", {1, 9, 4}, std::vector<double>(36, 0.5)},
                                                {"/k", {1, 9, 4}, std::vector<double>(36, 0.25)}},
                              {{"prefix_tokens", -1}, {"grid", {2, 2, 2, 2}}});
    expect_one_error(run_attnscope("analyze " + qk("badattr.h5")), {"attribute prefix_tokens", "-1", "choose the prefix tokens"},
                     "bad prefix_tokens attribute");
    expect_one_error(run_attnscope("analyze " + qk("badattr.h5") + " --prefix-tokens 0"), {"attribute grid"},
                     "bad grid attribute");
    EXPECT_EQ(run_attnscope("analyze " + qk("badattr.h5") + " --prefix-tokens 0 --blocks 3").status, 0);
    // A safetensors header with a key given twice.
    std::string header = R"({"q":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]},"q":{"dtype":"F64","shape":[2,2],"data_offsets":[0,32]}})";
    std::ofstream st(f("dup.safetensors"), std::ios::binary);
    const std::uint64_t n = header.size();
    st.write(reinterpret_cast<const char*>(&n), 8);
    st << header << std::string(32, '\0');
    st.close();
    expect_one_error(run_attnscope("info " + f("dup.safetensors")), {"dup.safetensors", "twice"}, "duplicate key");
}

// Class 8: parser phrases never reach the user; the memory option is named.
TEST_F(CliHostile, MessagesSpeakTheCommandLinesLanguage)
{
    const struct {
        std::string args;
        std::vector<std::string> needles;
        std::string banned;
    } cases[] = {
        {"analyze " + qk("good.h5") + " extra words", {"unexpected argument"}, "were not expected"},
        {"analyze " + qk("good.h5") + " --blocks many", {"--blocks", "many"}, "Could not convert"},
        {"analyze " + qk("good.h5") + " --causal --no-causal", {"--causal", "--no-causal"}, "excludes"},
        {"analyze " + qk("good.h5") + " --max-memory 1", {"--max-memory"}, "read limit of 1 bytes"},
    };
    for (const auto& c : cases) {
        const CommandResult r = run_attnscope(c.args);
        expect_one_error(r, c.needles, c.args);
        EXPECT_EQ(r.err.find(c.banned), std::string::npos) << c.args << ": " << r.err;
    }
    const CommandResult help = run_attnscope("--help");
    EXPECT_NE(help.out.find("--session"), std::string::npos) << help.out;
    EXPECT_NE(help.out.find("--screenshot"), std::string::npos) << help.out;
}

// Class 4: a batch checks every unit before it creates anything.
TEST_F(CliHostile, BatchRefusesAnImpossibleJobWhole)
{
    attnscope::io::write_hdf5(f("small.h5"), {{"/q", {2, 8, 4}, std::vector<double>(64, 0.5)},
                                              {"/k", {2, 8, 4}, std::vector<double>(64, 0.25)}});
    std::ofstream(f("impossible.toml")) << "inputs = [\"good.h5\", \"small.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\n"
                                           "[attention]\nblocks = 16\n";
    const std::string out = f("impossible_out");
    expect_one_error(run_attnscope("batch " + f("impossible.toml") + " --out " + out), {"small.h5", "nothing was created", "16"},
                     "impossible unit");
    EXPECT_FALSE(fs::exists(out));
}

// Class 3: merge takes only a complete set of one job's shards, or says it is partial.
TEST_F(CliHostile, MergeRefusesIncompleteOrMixedShardSets)
{
    std::ofstream(f("study.toml")) << "inputs = [\"good.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\n"
                                      "mechanisms = [\"linear\"]\n";
    for (const std::string shard : {"0/2", "1/2", "0/3"}) {
        const std::string dir = f("shard_" + shard.substr(0, 1) + "_of_" + shard.substr(2));
        ASSERT_EQ(run_attnscope("batch " + f("study.toml") + " --out " + dir + " --shard " + shard).status, 0) << shard;
    }
    const std::string s0 = f("shard_0_of_2"), s1 = f("shard_1_of_2"), t0 = f("shard_0_of_3");
    ASSERT_EQ(run_attnscope("merge " + s0 + " " + s1 + " --out " + f("merged")).status, 0);
    EXPECT_TRUE(fs::exists(f("merged/summary.csv")));
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(f("merged/merge.json")))["complete"], true);

    expect_one_error(run_attnscope("merge " + s0 + " --out " + f("half")), {"incomplete", "--partial"}, "one shard of two");
    EXPECT_FALSE(fs::exists(f("half")));
    expect_one_error(run_attnscope("merge " + s0 + " " + t0 + " --out " + f("mixed")), {"sharding"}, "mixed shard counts");
    expect_one_error(run_attnscope("merge " + s0 + " " + s0 + " --out " + f("twice")), {"twice"}, "a shard given twice");

    ASSERT_EQ(run_attnscope("merge " + s0 + " --partial --out " + f("partial")).status, 0);
    EXPECT_TRUE(fs::exists(f("partial/summary.partial.csv")));
    EXPECT_FALSE(fs::exists(f("partial/summary.csv")));
    const auto report = nlohmann::json::parse(std::ifstream(f("partial/merge.json")));
    EXPECT_EQ(report["complete"], false);
    EXPECT_EQ(report["missing_shards"], nlohmann::json::array({1}));
}
