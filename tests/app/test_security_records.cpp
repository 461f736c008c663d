// Issue 30 on the real binary: what small or hostile records, jobs and options may make `aggregate`, `merge`,
// `batch` and the analysis commands do (docs/security.md "Counts and sizes", "Batch and merge"; docs/hardening.md
// "Issue 30"). Every command runs under an address-space limit (ulimit -v 4000000) and `timeout`, so that an
// unchecked count fails as "out of memory" or "timed out" instead of passing, and a hang fails.
//
// - aggregate and merge check the records' size against the memory budget before reading them, refuse
//   mechanism names a batch never writes, cap the metrics and the bootstrap's work (naming what to narrow),
//   read a whole last line without its newline and refuse a torn one.
// - merge's output folder follows the umask; its disk-full error names the destination.
// - --threads is capped at the cores; under an address-space limit OpenBLAS gets its buffers or the run
//   ends with one error line, never a hang.
// - batch refuses an impossible past split before creating its folder; job values are strict (sizes, NULs).
// - a grid attribute whose product overflows is refused; decay on a grid needs only the grid.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/writers.h"
#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::expect_one_error;
using attnscope::test::run_command;
using attnscope::test::shell_quote;
using nlohmann::json;

namespace {

// `attnscope ARGS` under a 4 GB address-space limit and a timeout (a hang fails as status 124).
CommandResult run_limited(const std::string& args, int seconds = 60, const std::string& limit_kb = "4000000")
{
    return run_command("sh -c " + shell_quote("ulimit -v " + limit_kb + "; exec timeout " + std::to_string(seconds) + " " +
                                              ATTNSCOPE_BINARY + " " + args));
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read_text(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// One results.jsonl line as a batch writes it (the fields aggregate reads).
std::string record(std::uint64_t unit, const std::string& mechanism, const std::string& metrics)
{
    return "{\"key\":\"u" + std::to_string(unit) + "|" + mechanism + "\",\"unit\":" + std::to_string(unit) +
           ",\"mechanism\":\"" + mechanism + "\"" + (metrics.empty() ? "" : "," + metrics) + "}";
}

class SecurityRecords : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_root = attnscope::test::fresh_work_dir("security_records");
        // 2 heads x 32 tokens x 4 features: queries and keys of a small batch.
        std::vector<double> q(2 * 32 * 4), k(2 * 32 * 4);
        for (std::size_t i = 0; i < q.size(); ++i) {
            q[i] = std::sin(0.37 * double(i)) + 0.1;
            k[i] = std::cos(0.23 * double(i)) + 0.2;
        }
        attnscope::io::write_hdf5(s_root + "/x.h5", {{"/q", {2, 32, 4}, q}, {"/k", {2, 32, 4}, k}});
    }

    static std::string folder(const std::string& name)
    {
        const std::string dir = s_root + "/" + name;
        fs::remove_all(dir);
        fs::create_directories(dir);
        return dir;
    }

    static std::string s_root;
};

std::string SecurityRecords::s_root;

}  // namespace

// An 8 GB results.jsonl (sparse: it costs no disk) was read until memory ran out (exit 1), by aggregate and by
// merge; its size is now checked against the memory budget before anything is read.
TEST_F(SecurityRecords, ResultsSizeIsCheckedBeforeReading)
{
    const std::string dir = folder("huge");
    fs::create_directories(dir + "/agg");
    fs::create_directories(dir + "/shard");
    for (const std::string sub : {"agg", "shard"}) {
        const std::string file = dir + "/" + sub + "/results.jsonl";
        put(file, "");
        fs::resize_file(file, std::uintmax_t{8} << 30);
    }
    put(dir + "/shard/shard.json", "{}");
    expect_one_error(run_limited("aggregate " + shell_quote(dir + "/agg")), {"results.jsonl", "8.0 GiB", "--max-memory"},
                     "aggregate of 8 GiB");
    expect_one_error(run_limited("merge " + shell_quote(dir + "/shard") + " --out " + shell_quote(dir + "/m")),
                     {"results.jsonl", "8.0 GiB", "--max-memory"}, "merge of 8 GiB");
    EXPECT_FALSE(fs::exists(dir + "/m"));
    // The limit follows --max-memory: 2 MB of records under --max-memory 8M (512 KiB of records) is refused, and
    // read with the default budget.
    std::string text;
    for (std::uint64_t u = 0; text.size() < (2u << 20); ++u)
        text += record(u, "softmax", "\"rank\":" + std::to_string(u % 7)) + "\n";
    fs::remove(dir + "/agg/results.jsonl");
    put(dir + "/agg/results.jsonl", text);
    expect_one_error(run_limited("aggregate " + shell_quote(dir + "/agg") + " --max-memory 8M"), {"results.jsonl", "--max-memory"},
                     "aggregate over --max-memory");
    const CommandResult ok = run_limited("aggregate " + shell_quote(dir + "/agg") + " --json");
    EXPECT_EQ(ok.status, 0) << ok.err;
}

// Names are rows: 60,000 mechanism names in a 4 MB file asked for a 60,000 x 60,000 table (5.6 GB reached),
// 30,000 metric names the same, 3,000 mechanisms ran 4.5 million pairs for minutes. Now a name that is not a
// mechanism is refused (a batch records only the table's), metrics are capped, and the bootstrap's work is
// bounded with a message saying what to narrow.
TEST_F(SecurityRecords, AggregateRefusesNamesItCannotCompare)
{
    const std::string dir = folder("names");
    std::string text;
    for (std::uint64_t u = 0; u < 60000; ++u)
        text += record(u, std::string("m").append(std::to_string(u)), "\"rank\":1") + "\n";
    put(dir + "/results.jsonl", text);
    expect_one_error(run_limited("aggregate " + shell_quote(dir)), {"results.jsonl:1", "'m0' is not a mechanism", "softmax"},
                     "60,000 mechanism names");
    text.clear();
    for (std::uint64_t u = 0; u < 3000; ++u)
        text += record(u, std::string("x").append(std::to_string(u)), "\"rank\":1") + "\n";
    put(dir + "/results.jsonl", text);
    expect_one_error(run_limited("aggregate " + shell_quote(dir), 30), {"is not a mechanism"}, "3,000 mechanism names");
    text.clear();
    for (std::uint64_t u = 0; u < 30000; ++u)
        text += record(u, "softmax", "\"metric" + std::to_string(u) + "\":1.5") + "\n";
    put(dir + "/results.jsonl", text);
    expect_one_error(run_limited("aggregate " + shell_quote(dir)), {"30000 metric names", "--metric"}, "30,000 metric names");
    // --metric narrows before anything is computed.
    const CommandResult some = run_limited("aggregate " + shell_quote(dir) + " --metric metric7,metric9 --json");
    ASSERT_EQ(some.status, 0) << some.err;
    EXPECT_EQ(json::parse(some.out)["groups"][0]["mechanisms"].size(), 2u);
}

// The bootstrap draws resamples x values for every row and pair: 6 mechanisms x 1000 metrics over 500 units is
// 2.1e10 draws (minutes), refused at once naming --metric; with --metric it runs.
TEST_F(SecurityRecords, AggregateBootstrapWorkIsBounded)
{
    const std::string dir = folder("draws");
    std::string metrics;
    for (int m = 0; m < 1000; ++m)
        metrics += std::string(metrics.empty() ? "" : ",") + "\"m" + std::to_string(m) + "\":" + std::to_string((m * 7) % 13) + ".25";
    std::string text;
    for (std::uint64_t u = 0; u < 500; ++u)
        for (const std::string mech : {"softmax", "linear", "mhla", "decay", "gated", "cosformer"})
            text += record(u, mech, metrics) + "\n";
    put(dir + "/results.jsonl", text);
    expect_one_error(run_limited("aggregate " + shell_quote(dir), 30), {"bootstrap", "--metric"}, "2.1e10 draws");
    expect_one_error(run_limited("aggregate " + shell_quote(dir) + " --by head", 30), {"bootstrap", "--metric"}, "2.1e10 draws by head");
    const CommandResult one = run_limited("aggregate " + shell_quote(dir) + " --metric m1 --json", 30);
    ASSERT_EQ(one.status, 0) << one.err;
    const json doc = json::parse(one.out);
    EXPECT_EQ(doc["groups"][0]["mechanisms"].size(), 6u);
    EXPECT_EQ(doc["groups"][0]["pairs"].size(), 15u);
}

// A results.jsonl whose writer appends whole lines: a last line without its newline that parses as a whole
// record counts (before: dropped in silence); a torn one (a write cut short) is refused naming the line.
TEST_F(SecurityRecords, AggregateReadsAWholeLastLineAndRefusesATornOne)
{
    const std::string dir = folder("last_line");
    const std::string lines = record(0, "softmax", "\"rank\":3") + "\n" + record(1, "softmax", "\"rank\":5") + "\n" +
                              record(2, "softmax", "\"rank\":7");
    put(dir + "/results.jsonl", lines);
    const CommandResult r = run_limited("aggregate " + shell_quote(dir) + " --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const json row = json::parse(r.out)["groups"][0]["mechanisms"][0];
    EXPECT_EQ(row["n"], 3);
    EXPECT_DOUBLE_EQ(row["mean"].get<double>(), 5.0);
    put(dir + "/results.jsonl", lines + "\n" + record(3, "softmax", "\"rank\":9").substr(0, 30));
    expect_one_error(run_limited("aggregate " + shell_quote(dir)), {"line 4", "no newline", "cut short"}, "torn last line");
    // A unit index of 64 bits is an index (before: "a batch record without a unit index").
    put(dir + "/results.jsonl", record(18446744073709551615ull, "softmax", "\"rank\":3") + "\n" + record(0, "softmax", "\"rank\":5") + "\n");
    const CommandResult big = run_limited("aggregate " + shell_quote(dir) + " --json");
    ASSERT_EQ(big.status, 0) << big.err;
    EXPECT_EQ(json::parse(big.out)["groups"][0]["units"], 2);
}

// merge's output folder was made by mkdtemp (0700) and renamed into place: it follows the umask now, like the
// batch's own folders; and a full disk while the merge is built names the destination, never the hidden
// folder it is built in.
TEST_F(SecurityRecords, MergeOutputFollowsTheUmaskAndNamesItsDestination)
{
    const std::string dir = folder("merge");
    fs::copy_file(s_root + "/x.h5", dir + "/x.h5");
    put(dir + "/job.toml", "inputs = [\"x.h5\"]\nq = \"/q\"\nk = \"/k\"\nheads = \"all\"\nmechanisms = [\"linear\", \"softmax\"]\n");
    for (const std::string shard : {"0", "1"}) {
        const CommandResult b = run_limited("batch " + shell_quote(dir + "/job.toml") + " --out " + shell_quote(dir + "/s" + shard) +
                                            " --shard " + shard + "/2");
        ASSERT_EQ(b.status, 0) << b.err;
    }
    const CommandResult m = run_command("sh -c " + shell_quote("umask 022; exec " + std::string(ATTNSCOPE_BINARY) + " merge " + dir +
                                                               "/s0 " + dir + "/s1 --out " + dir + "/m"));
    ASSERT_EQ(m.status, 0) << m.err;
    struct stat st {};
    ASSERT_EQ(::stat((dir + "/m").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755u);
    // Disk full at the first byte written in the merge's folder.
    const std::string log = dir + "/fault.log";
    fs::create_directories(dir + "/out");
    const CommandResult full2 = run_command("env LD_PRELOAD=" + std::string(ATTNSCOPE_FAULT_SHIM) + " ATTNSCOPE_FAULT_DIR=" + dir +
                                            "/out ATTNSCOPE_FAULT=enospc_after=0 ATTNSCOPE_FAULT_LOG=" + log + " " +
                                            ATTNSCOPE_BINARY + " merge " + dir + "/s0 " + dir + "/s1 --out " + dir + "/out/m");
    expect_one_error(full2, {"--out " + dir + "/out/m/results.jsonl", "No space left on device"}, "merge on a full disk");
    EXPECT_EQ(full2.err.find(".merge-"), std::string::npos) << full2.err;
    EXPECT_FALSE(read_text(log).empty()) << "the fault was never injected";
    EXPECT_FALSE(fs::exists(dir + "/out/m"));
}

// --threads 32 on a 2-core machine under `ulimit -v 2000000` never exited: each OpenBLAS thread maps a
// 128 MiB buffer and OpenBLAS retries a failing mmap forever. Threads are capped at the cores (a note says
// so), OpenBLAS's buffers are reserved while there is room, and a limit that leaves none is one error line.
// The numbers are those of the threads used.
TEST_F(SecurityRecords, ThreadsAreCappedAndOpenBlasNeverHangs)
{
    const std::string x = shell_quote(s_root + "/x.h5");
    const std::string analyze = "analyze --q " + x + ":/q --k " + x + ":/k --json - ";
    const CommandResult many = run_limited(analyze + "--threads 32", 60, "2000000");
    ASSERT_EQ(many.status, 0) << many.err;
    EXPECT_NE(many.err.find("note: --threads 32 is more than the"), std::string::npos) << many.err;
    const CommandResult cores = run_limited(analyze + "--threads " + std::to_string(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN))), 60);
    ASSERT_EQ(cores.status, 0) << cores.err;
    json a = json::parse(many.out), b = json::parse(cores.out);
    EXPECT_EQ(a["results"], b["results"]);
    // Tight limits: a result or one error line, never a hang (before: status 124 from 200 MB to 400 MB).
    for (const std::string kb : {"200000", "300000", "400000", "500000"}) {
        const CommandResult r = run_limited(analyze, 60, kb);
        EXPECT_NE(r.status, 124) << "ulimit -v " << kb << ": hung";
        if (r.status != 0)
            expect_one_error(r, {}, "ulimit -v " + kb);
    }
}

// A batch with past_split = 32 on N = 32 created its folder (res/) and then refused every unit; the split is
// checked with the other settings of every unit before anything is created.
TEST_F(SecurityRecords, BatchRefusesAnImpossiblePastSplitBeforeItsFolder)
{
    const std::string dir = folder("past_split");
    fs::copy_file(s_root + "/x.h5", dir + "/x.h5");
    for (const std::string split : {"32", "0", "40"}) {
        put(dir + "/job.toml", "inputs = [\"x.h5\"]\nq = \"/q\"\nk = \"/k\"\n[metrics]\npast_split = " + split + "\n");
        expect_one_error(run_limited("batch " + shell_quote(dir + "/job.toml") + " --out " + shell_quote(dir + "/res")),
                         {split == "0" ? "past-split" : "nothing was created"}, "past_split = " + split);
        EXPECT_FALSE(fs::exists(dir + "/res")) << split;
    }
    put(dir + "/job.toml", "inputs = [\"x.h5\"]\nq = \"/q\"\nk = \"/k\"\n[metrics]\npast_split = 31\n");
    const CommandResult ok = run_limited("batch " + shell_quote(dir + "/job.toml") + " --out " + shell_quote(dir + "/res"));
    EXPECT_EQ(ok.status, 0) << ok.err;
}

// Job values are read whole and in range: width = 4294967312 wrapped to 16 px; a NUL in a string cut a path.
TEST_F(SecurityRecords, JobValuesAreStrict)
{
    const std::string dir = folder("job_values");
    fs::copy_file(s_root + "/x.h5", dir + "/x.h5");
    const std::string head = "inputs = [\"x.h5\"]\nq = \"/q\"\nk = \"/k\"\n";
    const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
        {head + "[[figure]]\nview = \"maps\"\nwidth = 4294967312\n", {"width", "16..20000"}},
        {head + "[[figure]]\nview = \"maps\"\nheight = 8\n", {"height", "16..20000"}},
        {head + "[[figure]]\nview = \"maps\"\nwidth = -1\n", {"width"}},
        {head + "[[figure]]\nview = \"maps\"\nquery = 4294967296\n", {"query"}},
        {head + "[[figure]]\nview = \"maps\"\ndpi = 1e300\n", {"dpi"}},
        {"inputs = [\"x.h5\\u0000.txt\"]\nq = \"/q\"\nk = \"/k\"\n", {"NUL"}},
        {head + "[attention]\nmixing = \"m.npy\\u0000x\"\n", {"NUL"}},
        {head + "layout = \"h\\u0000nd\"\n", {"NUL"}},
        {"inputs = [\"x.h5\"]\nq = \"/q\\u0000\"\nk = \"/k\"\n", {"NUL"}},
    };
    for (const auto& [job, needles] : cases) {
        put(dir + "/job.toml", job);
        expect_one_error(run_limited("batch " + shell_quote(dir + "/job.toml") + " --out " + shell_quote(dir + "/res")), needles, job);
        EXPECT_FALSE(fs::exists(dir + "/res")) << job;
    }
}

// A file's grid attribute [2^62, 2^62] was reported as "holds 0 tokens" (the product wrapped); it is refused
// naming the attribute. Decay on a grid needs only the grid (docs/maths.md 1.8: the Manhattan distance of the
// grid positions): `--grid 8,4` without --block-grid was refused as MHLA's option.
TEST_F(SecurityRecords, GridsAreCountedWithoutOverflowAndDecayNeedsOnlyTheGrid)
{
    const std::string dir = folder("grids");
    std::vector<double> q(32 * 4), k(32 * 4);
    for (std::size_t i = 0; i < q.size(); ++i) {
        q[i] = std::sin(0.31 * double(i));
        k[i] = std::cos(0.17 * double(i));
    }
    attnscope::io::write_hdf5(dir + "/g.h5", {{"/q", {32, 4}, q}, {"/k", {32, 4}, k}},
                              {{"grid", json::array({4611686018427387904LL, 4611686018427387904LL})}});
    const std::string g = shell_quote(dir + "/g.h5");
    expect_one_error(run_limited("analyze --q " + g + ":/q --k " + g + ":/k"), {"grid", "overflows"}, "grid attribute [2^62, 2^62]");
    // An explicit choice of blocks wins over the attribute, as for any unusable attribute.
    const CommandResult chosen = run_limited("analyze --q " + g + ":/q --k " + g + ":/k --blocks 4 --json -");
    EXPECT_EQ(chosen.status, 0) << chosen.err;
    // Decay on the grid 8 x 4: raster order needs no block grid, and the numbers are those with any block grid.
    const std::string x = shell_quote(s_root + "/x.h5");
    const std::string decay = "analyze --q " + x + ":/q --k " + x + ":/k --mechanism decay --grid 8,4 --json - ";
    const CommandResult alone = run_limited(decay);
    ASSERT_EQ(alone.status, 0) << alone.err;
    const CommandResult with = run_limited(decay + "--block-grid 2,2");
    ASSERT_EQ(with.status, 0) << with.err;
    json a = json::parse(alone.out)["results"][0], b = json::parse(with.out)["results"][0];
    EXPECT_EQ(a["singular_values"], b["singular_values"]);
    EXPECT_EQ(a["entropy"], b["entropy"]);
    // MHLA's blocks on a grid still need the blocks per axis, and say so.
    expect_one_error(run_limited("analyze --q " + x + ":/q --k " + x + ":/k --mechanism mhla --grid 8,4"), {"--block-grid"},
                     "mhla on a grid without blocks");
}
