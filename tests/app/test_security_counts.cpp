// Counts and numbers from the command line and job files (docs/security.md, "Counts and sizes"): every
// count that allocates or loops is checked against its cap or the memory budget before anything is
// allocated (run under a 4 GiB address-space limit, so that an unchecked count fails as "out of memory"
// instead of passing), numbers are plain decimal and finite (no clamping, no hexadecimal, no NaN), and the
// streamed analysis' memory estimate is an upper bound that is not a wild one.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::run_attnscope;

namespace {

std::string g_dir;

// Under 4 GiB of address space: the counts below would allocate far more if they were not checked first.
const std::string kMemoryCap = "ulimit -v 4194304; ";

class SecurityCounts : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        g_dir = attnscope::test::fresh_work_dir("security_counts");
        attnscope::test::run_python("app/make_count_fixtures.py", {g_dir});
    }
    static std::string f(const std::string& name) { return g_dir + "/" + name; }
    static std::string qk(const std::string& file) { return "--q " + f(file) + ":/q --k " + f(file) + ":/k"; }

    // Exit 2 with exactly one line, `error: ...`, holding every needle.
    static void expect_refused(const std::string& args, const std::vector<std::string>& needles)
    {
        const CommandResult r = run_attnscope(args, kMemoryCap);
        EXPECT_EQ(r.status, 2) << args << "\nstderr: " << r.err;
        EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << args << "\nstderr: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << "\nstderr: " << r.err;
        for (const auto& n : needles)
            EXPECT_NE(r.err.find(n), std::string::npos) << args << ": missing '" << n << "' in " << r.err;
    }
};

}  // namespace

// Draws, seeds, values, heads and synthetic sizes: each refused with its name and its cap, before allocating.
TEST_F(SecurityCounts, SweepCountsAreCheckedBeforeAllocating)
{
    const std::string sweep = "sweep " + qk("good.h5") + " --csv " + f("out.csv") + " ";
    expect_refused(sweep + "--vary n=16 --subsample random --draws 1000000000", {"--draws 1000000000", "1000000"});
    expect_refused(sweep + "--vary n=16 --subsample random --draws 9223372036854775807", {"--draws", "cap"});
    expect_refused(sweep + "--vary n=16 --subsample random --draws 400000", {"analyses", "1000000"});
    expect_refused(sweep + "--vary n=16 --subsample random --draws 200000 --mechanism linear --max-memory 64M",
                   {"memory limit", "--max-memory"});
    expect_refused("sweep --synth gaussian --vary n=16 --seeds 1000000000", {"--seeds 1000000000", "cap"});
    expect_refused("sweep --synth gaussian --vary n=16,32 --seeds 400000", {"analyses", "cap"});
    expect_refused("sweep --synth gaussian --vary m=1 --n 1000000000000 --d 64", {"--n 1000000000000", "memory limit"});
    expect_refused("sweep --synth gaussian --vary n=1000000000000 --d 64", {"--vary n=1000000000000", "memory limit"});
    expect_refused("sweep --synth gaussian --vary n=16 --d 1000000000000", {"--d", "memory limit"});
    expect_refused("sweep " + qk("huge_heads.h5") + " --layout hnd --heads all --vary n=4", {"--heads", "cap"});
    expect_refused("figure --view overview --out " + f("o.png") + " " + qk("huge_heads.h5") + " --layout hnd",
                   {"heads", "cap"});
    EXPECT_FALSE(fs::exists(f("out.csv")));
}

TEST_F(SecurityCounts, BatchSweepDrawsAreCheckedWhenTheJobIsRead)
{
    const std::string job = f("draws.toml");
    std::ofstream(job) << "inputs = [\"good.h5\"]\n\n[[sweep]]\nname = \"s\"\nvary = \"n=16\"\nsubsample = \"random\"\n"
                          "draws = 1000000000\n";
    expect_refused("batch " + job + " --out " + f("batch_out"), {"draws", "1000000000", "cap"});
    EXPECT_FALSE(fs::exists(f("batch_out")));
}

// Integers: plain decimal within range, never clamped to INT64_MAX, never read as hexadecimal or octal.
TEST_F(SecurityCounts, IntegerOptionsAreStrict)
{
    const std::string analyze = "analyze " + qk("good.h5") + " --json " + f("a.json") + " ";
    const std::string grid64 = "analyze " + qk("grid64.h5") + " --json " + f("a.json") + " ";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {analyze + "--seed 99999999999999999999", "--seed"},
        {analyze + "--seed 0x10", "--seed"},
        {analyze + "--seed 1e3", "--seed"},
        {analyze + "--seed -99999999999999999999", "--seed"},
        {analyze + "--favor-features 0x100", "--favor-features"},
        {analyze + "--blocks 0x4", "--blocks"},
        {analyze + "--blocks 4.0", "--blocks"},
        {analyze + "--chunk 99999999999999999999", "--chunk"},
        {analyze + "--head 99999999999999999999", "--head"},
        {analyze + "--head 0x1", "--head"},
        {analyze + "--kv-head +1", "--kv-head"},
        {analyze + "--prefix-tokens 1e1", "--prefix-tokens"},
        {analyze + "--top-k 0x5", "--top-k"},
        {analyze + "--threads 0x2", "--threads"},
        {analyze + "--threads 99999999999", "--threads"},
        {analyze + "--at h=99999999999999999999", "--at"},
        // N = 64: the products wrapped around to 64 (and 0) and were accepted.
        {grid64 + "--grid 17,4340410370284600384 --block-grid 1,1", "--grid"},
        {grid64 + "--grid 4611686018427387904,4 --block-grid 1,1", "--grid"},
        {analyze + "--grid 8,0x8 --block-grid 1,1", "--grid"},
        {analyze + "--grid 6,8 --block-grid 1,99999999999999999999", "--block-grid"},
        {"sweep " + qk("good.h5") + " --vary n=16,0x20", "--vary"},
        {"sweep " + qk("good.h5") + " --vary n=99999999999999999999", "--vary"},
        {"sweep " + qk("good.h5") + " --vary n=16 --subsample-seed 99999999999999999999", "--subsample-seed"},
        {"sweep " + qk("good.h5") + " --vary n=16 --heads 0x1", "--heads"},
        {"sweep --synth gaussian --vary n=16 --seeds 0x10", "--seeds"},
        {"sweep --synth gaussian --vary n=16 --d 1e2", "--d"},
        {"synth --n 0x40 --d 8 --out " + f("s.h5"), "--n"},
        {"synth --n 64 --d 8 --heads 99999999999999999999 --out " + f("s.h5"), "--heads"},
        {"synth --n 64 --d 8 --seed 99999999999999999999 --out " + f("s.h5"), "--seed"},
        {"synth --n 64 --d 8 --grid 17,4340410370284600384 --out " + f("s.h5"), "--grid"},
        {"batch " + f("none.toml") + " --jobs 0x2", "--jobs"},
        {"figure --view maps --out " + f("o.png") + " " + qk("good.h5") + " --query 1e3", "--query"},
        {"figure --view maps --out " + f("o.png") + " " + qk("good.h5") + " --width 0x100", "--width"},
    };
    for (const auto& [args, name] : cases)
        expect_refused(args, {name});
    EXPECT_FALSE(fs::exists(f("a.json")));
    EXPECT_FALSE(fs::exists(f("s.h5")));
}

// --shard I/N: decimal, 0 <= I < N <= 1000000.
TEST_F(SecurityCounts, ShardIsPlainDecimal)
{
    const std::string job = f("shard.toml");
    std::ofstream(job) << "inputs = [\"good.h5\"]\n";
    for (const char* shard : {"0x1/2", "1/0x2", "+1/2", "1/+2", "-1/2", "2/2", "1/0", "0/-1", "0/99999999999999999999",
                              "99999999999999999999/2", "0/1000001", "0/2x", "0/2/3", "1", "/2", "0/", " 0/2", "0 /2", "1e0/2"})
        expect_refused("batch " + job + " --out " + f("shard_out") + " --shard '" + shard + "'", {"--shard"});
    EXPECT_FALSE(fs::exists(f("shard_out")));
}

// Floating-point options: finite decimal numbers only, named when refused.
TEST_F(SecurityCounts, FloatOptionsAreFinite)
{
    const std::string analyze = "analyze " + qk("good.h5") + " --json " + f("a.json") + " ";
    const std::string figure = "figure --view maps --out " + f("o.png") + " " + qk("good.h5") + " ";
    for (const char* value : {"nan", "NaN", "-nan", "inf", "-inf", "1e999", "0x1p3", "''"}) {
        for (const char* option : {"--scale", "--mixing-sigma", "--mixing-threshold", "--rank-rtol"})
            expect_refused(analyze + option + " " + value + (std::string(option) == "--mixing-sigma" ? " --mixing exp" : ""),
                           {option});
        for (const char* option : {"--dpi", "--font-scale"})
            expect_refused(figure + option + " " + value, {option});
        expect_refused(figure + "--width-mm " + value, {"--width-mm"});
        for (const char* option : {"--height-mm", "--font-size"})
            expect_refused(figure + "--width-mm 80 " + option + " " + value, {option});
    }
    for (const char* value : {"nanG", "infG", "0x10G", "1e999", "-1G", "G", "1.5.2G"})
        expect_refused(analyze + "--max-memory " + value, {"--max-memory"});
    EXPECT_FALSE(fs::exists(f("a.json")));
}

// The streamed entropy's estimate (analysis::streaming_memory_bytes) is an upper bound of its peak, not
// a wild one: N = 16384, d = 64 peaks near 40 MiB (docs/performance.md), so 256 MiB is plenty, while the
// estimate before asked for 576 MiB. It still refuses what would not fit.
TEST_F(SecurityCounts, StreamingEstimateIsNotWild)
{
    const CommandResult s = run_attnscope("synth --n 16384 --d 64 --out " + f("n16k.h5"));
    ASSERT_EQ(s.status, 0) << s.err;
    const std::string analyze = "analyze " + qk("n16k.h5") + " --method streaming --metrics entropy --mechanism linear ";
    const CommandResult r = run_attnscope(analyze + "--max-memory 256M --json " + f("n16k.json"), kMemoryCap);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(f("n16k.json")));
    expect_refused(analyze + "--max-memory 12M --json " + f("n16k_small.json"), {"--max-memory"});
    EXPECT_FALSE(fs::exists(f("n16k_small.json")));
}
