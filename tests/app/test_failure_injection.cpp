// Failure injection (docs/hardening.md): a full disk or an unwritable output folder during matrix,
// figure, sweep, analyze, synth and batch gives exit status 2 and one `error:` line naming the problem
// and the file; no partial or temporary file is left; an existing output is never clobbered; a batch
// keeps its complete records and a rerun finishes it. The faults come from an LD_PRELOAD shim
// (tests/support/fault_inject.c), so they work as root and need no mount; every case checks from the
// shim's log that the fault was really injected, so that a command failing for another reason (or
// succeeding because the fault never hit) does not pass.
#include <algorithm>
#include <filesystem>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::read_text;
using attnscope::test::run_command;

namespace {

std::string g_dir;

const std::string kData = ATTNSCOPE_DATA_DIR;
const std::string kQk = " --q " + kData + "/vit_local2d.h5:/q --k " + kData + "/vit_local2d.h5:/k --head 0";
const std::string kNoSpace = "No space left on device";

struct Faulty {
    CommandResult r;
    std::size_t injected = 0;   // lines in the shim's log
};

class FailureInjection : public ::testing::Test {
protected:
    static void SetUpTestSuite() { g_dir = attnscope::test::fresh_work_dir("failure_injection"); }

    // A fresh output folder under the work folder.
    static std::string folder(const std::string& name)
    {
        const std::string d = g_dir + "/" + name;
        fs::remove_all(d);
        fs::create_directories(d);
        return d;
    }

    static std::string env_prefix()
    {
        return "env QT_QPA_PLATFORM=offscreen ASAN_OPTIONS=verify_asan_link_order=0 ";
    }

    static CommandResult run(const std::string& args) { return run_command(env_prefix() + ATTNSCOPE_BINARY + args); }

    // Runs attnscope with `fault` (see fault_inject.c) applied to everything under `dir`.
    static Faulty run_faulty(const std::string& dir, const std::string& fault, const std::string& args)
    {
        static int counter = 0;
        const std::string log = g_dir + "/fault_" + std::to_string(counter++) + ".log";
        fs::remove(log);
        Faulty f;
        f.r = run_command(env_prefix() + "LD_PRELOAD=" + ATTNSCOPE_FAULT_SHIM + " ATTNSCOPE_FAULT_DIR=" + dir +
                          " ATTNSCOPE_FAULT=" + fault + " ATTNSCOPE_FAULT_LOG=" + log + " " + ATTNSCOPE_BINARY + args);
        const std::string text = read_text(log);
        f.injected = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
        return f;
    }

    // The lines of stderr that start with "error:".
    static std::vector<std::string> error_lines(const std::string& err)
    {
        std::vector<std::string> lines;
        std::istringstream in(err);
        for (std::string line; std::getline(in, line);)
            if (line.rfind("error:", 0) == 0)
                lines.push_back(line);
        return lines;
    }

    // Exit 2 because of the injected fault: the shim fired, one `error:` line holding every needle and
    // never the hidden temporary name. `whole` also requires that stderr holds nothing else.
    static void expect_clean_failure(const Faulty& f, const std::string& what, std::initializer_list<std::string> needles,
                                     bool whole = true)
    {
        SCOPED_TRACE(what);
        EXPECT_GT(f.injected, 0u) << "the fault was never injected; stderr: " << f.r.err;
        EXPECT_EQ(f.r.status, 2) << f.r.err;
        const auto lines = error_lines(f.r.err);
        ASSERT_EQ(lines.size(), 1u) << f.r.err;
        if (whole) {
            EXPECT_EQ(f.r.err, lines.front() + "\n");
        }
        for (const auto& needle : needles)
            EXPECT_NE(lines.front().find(needle), std::string::npos) << "missing '" << needle << "' in: " << lines.front();
        EXPECT_EQ(lines.front().find(".tmp-"), std::string::npos) << "names the temporary file: " << lines.front();
    }

    // Every file below `dir`, relative, sorted (hidden temporary files included).
    static std::vector<std::string> listing(const std::string& dir)
    {
        std::vector<std::string> names;
        for (const auto& e : fs::recursive_directory_iterator(dir))
            if (e.is_regular_file())
                names.push_back(fs::relative(e.path(), dir).string());
        std::sort(names.begin(), names.end());
        return names;
    }

    static void put(const std::string& path, const std::string& text)
    {
        std::ofstream(path, std::ios::binary) << text;
    }

    // Byte offsets at which to run out of space for outputs of `size` bytes: at once, after one byte,
    // in the middle, near the end (`slack` bytes short: timing fields make some outputs vary in length).
    static std::vector<std::uint64_t> offsets(std::uint64_t size, std::uint64_t slack = 1)
    {
        return {0, 1, size / 2, size > 2 * slack ? size - slack : size / 2 + 1};
    }

    // One command writing `name` into a folder: with every fault, it fails cleanly, leaves only the
    // precious file it may not clobber, and the same command without fault writes `name`.
    static void check_single_output(const std::string& tag, const std::string& name,
                                    const std::function<std::string(const std::string&)>& args_for)
    {
        const std::string dir = folder(tag);
        const std::string out = dir + "/" + name;
        const CommandResult ok = run(args_for(out));
        ASSERT_EQ(ok.status, 0) << ok.err;
        const auto size = fs::file_size(out);
        ASSERT_GT(size, 2u);
        for (const auto offset : offsets(size)) {
            put(out, "precious");
            const Faulty f = run_faulty(dir, "enospc_after=" + std::to_string(offset), args_for(out));
            expect_clean_failure(f, tag + " full after " + std::to_string(offset) + " bytes", {kNoSpace, out});
            EXPECT_EQ(read_text(out), "precious") << tag << ": an existing output was clobbered";
            EXPECT_EQ(listing(dir), std::vector<std::string>{name}) << tag << " full after " << offset;
            fs::remove(out);
            const Faulty g = run_faulty(dir, "enospc_after=" + std::to_string(offset), args_for(out));
            expect_clean_failure(g, tag + " full after " + std::to_string(offset) + " bytes, new file", {kNoSpace, out});
            EXPECT_TRUE(listing(dir).empty()) << tag << ": left " << ::testing::PrintToString(listing(dir));
        }
        const std::vector<std::pair<std::string, std::vector<std::string>>> faults = {
            {"deny=EACCES", {"not writable", "Permission denied"}},          // the up-front folder check
            {"deny=EROFS,deny_access=0", {"Read-only file system"}},        // the check passes, the open fails
            {"fsync=EIO", {"Input/output error"}},
            {"rename=EIO", {"Input/output error"}},
        };
        for (const auto& [fault, needles] : faults) {
            put(out, "precious");
            const Faulty f = run_faulty(dir, fault, args_for(out));
            expect_clean_failure(f, tag + " " + fault, {out});
            for (const auto& needle : needles)
                EXPECT_NE(f.r.err.find(needle), std::string::npos) << tag << " " << fault << ": " << f.r.err;
            EXPECT_EQ(read_text(out), "precious") << tag << " " << fault;
            EXPECT_EQ(listing(dir), std::vector<std::string>{name}) << tag << " " << fault;
        }
    }
};

TEST_F(FailureInjection, MatrixNpyAndHdf5)
{
    for (const std::string ext : {"npy", "h5"})
        check_single_output("matrix_" + ext, "a." + ext,
                            [](const std::string& out) { return " matrix" + kQk + " --mechanism softmax --out " + out; });
}

TEST_F(FailureInjection, AnalyzeJsonAndSynth)
{
    check_single_output("analyze", "a.json", [](const std::string& out) {
        return " analyze" + kQk + " --mechanism linear --top-k 4 --json " + out;
    });
    check_single_output("synth", "s.h5",
                        [](const std::string& out) { return " synth --n 64 --d 8 --heads 2 --kind gaussian --out " + out; });
}

TEST_F(FailureInjection, Figures)
{
    if (!ATTNSCOPE_WITH_FIGURES)
        GTEST_SKIP() << "built without the desktop app's views";
    for (const std::string ext : {"png", "pdf", "svg"})
        check_single_output("figure_" + ext, "f." + ext, [](const std::string& out) {
            return " figure --view spectrum" + kQk + " --grid 16,16 --block-grid 4,4 --width 320 --height 240 --dpi 96 --out " + out;
        });
}

// sweep writes up to three files (CSV, JSON, figure) and renames them only when all are written.
TEST_F(FailureInjection, SweepOutputs)
{
    const std::string dir = folder("sweep");
    const bool plot = ATTNSCOPE_WITH_FIGURES;
    auto args = [&](const std::string& d) {
        return " sweep --synth gaussian --d 8 --vary n=32,64 --blocks 4 --csv " + d + "/s.csv --json " + d + "/s.json" +
               (plot ? " --plot " + d + "/s.svg" : std::string());
    };
    const CommandResult ok = run(args(dir));
    ASSERT_EQ(ok.status, 0) << ok.err;
    const std::vector<std::string> all = listing(dir);
    std::uint64_t total = 0;
    for (const auto& n : all) {
        total += fs::file_size(dir + "/" + n);
        put(dir + "/" + n, "precious " + n);
    }
    for (const auto offset : offsets(total, 200)) {
        const Faulty f = run_faulty(dir, "enospc_after=" + std::to_string(offset), args(dir));
        expect_clean_failure(f, "sweep full after " + std::to_string(offset), {kNoSpace, dir});
        EXPECT_EQ(listing(dir), all);
        for (const auto& n : all)
            EXPECT_EQ(read_text(dir + "/" + n), "precious " + n) << "clobbered " << n;
    }
    const Faulty f = run_faulty(dir, "deny=EROFS,deny_access=0", args(dir));
    expect_clean_failure(f, "sweep read-only", {"Read-only file system"});
    EXPECT_EQ(listing(dir), all);
}

// ----------------------------------------------------------------------------------------------- batch
class BatchFailureInjection : public FailureInjection {
protected:
    static void SetUpTestSuite()
    {
        FailureInjection::SetUpTestSuite();
        s_job = g_dir + "/job.toml";
        std::string text = "inputs = [\"" + kData + "/gaussian.h5\", \"" + kData +
                           "/lowrank.h5\"]\n"
                           "q = \"/q\"\nk = \"/k\"\nheads = \"all\"\n"
                           "[attention]\nblocks = 8\n[metrics]\ntop_k = 8\n"
                           "[[sweep]]\nname = \"first_n\"\nvary = \"n=64,128\"\nsubsample = \"first\"\nheads = [0]\n";
        if (ATTNSCOPE_WITH_FIGURES)
            text += "[[figure]]\nview = \"spectrum\"\nheads = [0]\nwidth = 320\nheight = 240\ndpi = 96\n"
                    "[[figure]]\nview = \"curves\"\nsweep = \"first_n\"\nformat = \"svg\"\n";
        put(s_job, text);
        s_clean = folder("batch_clean");
        const CommandResult r = run(" batch " + s_job + " --out " + s_clean);
        ASSERT_EQ(r.status, 0) << r.err;
        s_records = records(s_clean);
        ASSERT_EQ(s_records.size(), 12u);
    }

    // Records by key without the timing field; fails on torn, unparsable or duplicate lines.
    static std::map<std::string, nlohmann::json> records(const std::string& dir)
    {
        std::map<std::string, nlohmann::json> out;
        const std::string text = read_text(dir + "/results.jsonl");
        EXPECT_TRUE(text.empty() || text.back() == '\n') << dir << ": torn last line";
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            nlohmann::json r;
            try {
                r = nlohmann::json::parse(line);
            } catch (const std::exception&) {
                ADD_FAILURE() << dir << ": not a JSON record: " << line.substr(0, 80);
                continue;
            }
            r.erase("seconds");
            const std::string key = r.at("key").get<std::string>();
            EXPECT_EQ(out.count(key), 0u) << dir << ": duplicate record " << key;
            out[key] = r;
        }
        return out;
    }

    // Equal up to the last digits: a unit analysed with --jobs 2 runs BLAS single-threaded, which
    // changes the summation order (docs/batch.md).
    static bool near(const nlohmann::json& a, const nlohmann::json& b)
    {
        if (a.is_number_float() || b.is_number_float())
            return a.is_number() && b.is_number() &&
                   std::abs(a.get<double>() - b.get<double>()) <= 1e-12 * std::max(1.0, std::abs(b.get<double>()));
        if (a.is_array() || a.is_object()) {
            if (a.type() != b.type() || a.size() != b.size())
                return false;
            if (a.is_array()) {
                for (std::size_t i = 0; i < a.size(); ++i)
                    if (!near(a[i], b[i]))
                        return false;
                return true;
            }
            for (auto it = a.begin(); it != a.end(); ++it)
                if (!b.contains(it.key()) || !near(it.value(), b[it.key()]))
                    return false;
            return true;
        }
        return a == b;
    }

    static void expect_same_records(const std::map<std::string, nlohmann::json>& got)
    {
        EXPECT_EQ(got.size(), s_records.size());
        for (const auto& [key, r] : got) {
            ASSERT_TRUE(s_records.count(key)) << "unexpected record " << key;
            EXPECT_TRUE(near(r, s_records.at(key))) << key << ":\n" << r.dump() << "\nwant\n" << s_records.at(key).dump();
        }
    }

    // summary.csv as rows of fields without the timing column; numbers as JSON numbers for near().
    static nlohmann::json summary(const std::string& dir)
    {
        nlohmann::json rows = nlohmann::json::array();
        std::istringstream in(read_text(dir + "/summary.csv"));
        for (std::string line; std::getline(in, line);) {
            nlohmann::json row = nlohmann::json::array();
            std::istringstream fields(line.substr(0, line.rfind(',')));
            for (std::string field; std::getline(fields, field, ',');) {
                char* end = nullptr;
                const double v = std::strtod(field.c_str(), &end);
                if (!field.empty() && end == field.c_str() + field.size() && field.find_first_of(".eE") != std::string::npos)
                    row.push_back(v);
                else
                    row.push_back(field);
            }
            rows.push_back(row);
        }
        return rows;
    }

    // What a failed batch may leave: complete records (a subset of the clean run's), complete figures
    // and sweep files, no temporary file.
    static void expect_consistent(const std::string& dir, const std::string& what)
    {
        SCOPED_TRACE(what);
        if (!fs::exists(dir))
            return;
        for (const auto& name : listing(dir)) {
            const std::string base = fs::path(name).filename().string();
            EXPECT_NE(base.front(), '.') << "temporary file left: " << name;
            const std::string text = read_text(dir + "/" + name);
            if (name.ends_with(".png")) {
                EXPECT_TRUE(text.size() > 12 && text.compare(text.size() - 8, 4, "IEND") == 0) << "incomplete " << name;
            } else if (name.ends_with(".svg")) {
                EXPECT_NE(text.rfind("</svg>"), std::string::npos) << "incomplete " << name;
            } else if (name.ends_with(".json")) {
                EXPECT_TRUE(nlohmann::json::accept(text)) << "incomplete " << name;
            }
        }
        if (fs::exists(dir + "/results.jsonl"))
            for (const auto& [key, r] : records(dir)) {
                ASSERT_TRUE(s_records.count(key)) << key;
                EXPECT_TRUE(near(r, s_records.at(key))) << key;
            }
    }

    // A rerun without faults completes and equals the clean run.
    static void expect_rerun_completes(const std::string& dir, const std::string& what)
    {
        SCOPED_TRACE(what);
        const CommandResult r = run(" batch " + s_job + " --out " + dir);
        ASSERT_EQ(r.status, 0) << r.err;
        expect_same_records(records(dir));
        const nlohmann::json rows = summary(dir);
        EXPECT_TRUE(near(rows, summary(s_clean))) << rows.dump();
        EXPECT_EQ(listing(dir), listing(s_clean));
    }

    static std::string s_job, s_clean;
    static std::map<std::string, nlohmann::json> s_records;
};

std::string BatchFailureInjection::s_job, BatchFailureInjection::s_clean;
std::map<std::string, nlohmann::json> BatchFailureInjection::s_records;

// The disk fills up at points spread over everything a batch writes: while records are appended, in
// the sweep, the figures, the final rewrite of results.jsonl and summary.csv.
TEST_F(BatchFailureInjection, DiskFullAnywhere)
{
    const std::uint64_t appended = fs::file_size(s_clean + "/results.jsonl");
    std::uint64_t total = appended;   // results.jsonl is written twice: appended, then rewritten in order
    for (const auto& n : listing(s_clean))
        total += fs::file_size(s_clean + "/" + n);
    std::vector<std::uint64_t> at = {0, appended / 3, appended - 1};
    for (int k = 1; k <= 6; ++k)
        at.push_back(appended + (total - appended) * static_cast<std::uint64_t>(k) / 7);
    // In the middle of summary.csv, written last: the sizes before it vary between runs by up to ~200 bytes
    // (timing fields, and the spectrum figures' PNGs, whose near-zero tails differ in the last bits with
    // --jobs), so an offset 200 bytes from the end could fall past the run's last write.
    at.push_back(total - fs::file_size(s_clean + "/summary.csv") / 2);
    for (std::size_t i = 0; i < at.size(); ++i) {
        const int jobs = 1 + static_cast<int>(i % 2);
        const std::string what = "full after " + std::to_string(at[i]) + " of " + std::to_string(total) + " bytes, --jobs " +
                                 std::to_string(jobs);
        const std::string dir = folder("batch_full");
        const Faulty f = run_faulty(dir, "enospc_after=" + std::to_string(at[i]),
                                    " batch " + s_job + " --out " + dir + " --jobs " + std::to_string(jobs));
        expect_clean_failure(f, what, {kNoSpace}, false);
        expect_consistent(dir, what);
        expect_rerun_completes(dir, what);
    }
}

// The disk is full for one write only (another process frees space): the append that failed must not
// leave a torn record between complete ones.
TEST_F(BatchFailureInjection, TransientDiskFull)
{
    const std::uint64_t appended = fs::file_size(s_clean + "/results.jsonl");
    for (const auto offset : {appended / 4, appended / 2 + 7}) {
        const std::string dir = folder("batch_transient");
        const Faulty f = run_faulty(dir, "enospc_after=" + std::to_string(offset) + ",enospc_count=1", " batch " + s_job + " --out " + dir);
        expect_clean_failure(f, "transient at " + std::to_string(offset), {kNoSpace, "results.jsonl"}, false);
        expect_consistent(dir, "transient");
        expect_rerun_completes(dir, "transient");
    }
}

// A resumed batch whose folder became full or read-only: the records already there stay byte for byte.
TEST_F(BatchFailureInjection, EarlierRecordsStayIntact)
{
    const std::string dir = folder("batch_resume");
    const std::uint64_t appended = fs::file_size(s_clean + "/results.jsonl");
    const Faulty first = run_faulty(dir, "enospc_after=" + std::to_string(appended / 2), " batch " + s_job + " --out " + dir);
    expect_clean_failure(first, "half", {kNoSpace}, false);
    const std::string kept = read_text(dir + "/results.jsonl");
    ASSERT_FALSE(kept.empty());
    const std::vector<std::pair<std::string, std::string>> faults = {
        {"enospc_after=0", kNoSpace},
        {"enospc_after=100", kNoSpace},
        {"deny=EACCES", "not writable"},
        {"deny=EROFS,deny_access=0", "Read-only file system"},
        {"fsync=EIO", "Input/output error"},
    };
    for (const auto& [fault, needle] : faults) {
        const Faulty f = run_faulty(dir, fault, " batch " + s_job + " --out " + dir);
        expect_clean_failure(f, "resumed with " + fault, {needle}, false);
        EXPECT_EQ(read_text(dir + "/results.jsonl"), kept) << fault;
        expect_consistent(dir, fault);
    }
    // A complete batch whose final rewrite fails keeps its complete results too.
    expect_rerun_completes(dir, "after the faults");
    const std::string done = read_text(dir + "/results.jsonl");
    const std::string summary = read_text(dir + "/summary.csv");
    fs::remove(dir + "/summary.csv");
    const Faulty f = run_faulty(dir, "enospc_after=0", " batch " + s_job + " --out " + dir);
    expect_clean_failure(f, "final rewrite", {kNoSpace}, false);
    EXPECT_EQ(read_text(dir + "/results.jsonl"), done);
    expect_consistent(dir, "final rewrite");
    expect_rerun_completes(dir, "final rewrite");
}

// SIGKILL at seeded random points (records, sweep, figures, final rewrite), rerun: the clean results.
TEST_F(FailureInjection, BatchKilledAtRandomPointsResumes)
{
    const std::string dir = folder("batch_kill");
    EXPECT_NO_THROW(attnscope::test::run_python("app/check_batch_kill.py", {ATTNSCOPE_BINARY, dir, kData, "5"}));
}

}  // namespace
