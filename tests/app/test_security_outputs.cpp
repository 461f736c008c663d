// Outputs (docs/security.md "Outputs"): one writer for every output file. A special file (a character
// device, a FIFO, /dev/stdout) is written in place or refused, never replaced by a regular file; a full
// disk is an error for every output, sessions included; a run whose standard output fails publishes no
// file; two outputs on one file, or an output that is one of the inputs, are refused before any work; a
// signal (SIGINT, SIGTERM, SIGHUP, SIGPIPE) during a write leaves no temporary file. Character devices
// are made with mknod (root, as in CI; the tests that need one are skipped otherwise).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::read_text;
using attnscope::test::expect_one_error;
using attnscope::test::run_attnscope;
using attnscope::test::run_command;
using attnscope::test::shell_quote;

namespace {

const std::string kData = ATTNSCOPE_DATA_DIR;
const std::string kSample = kData + "/vit_local2d.h5";
const std::string kQk = "--q " + kSample + ":/q --k " + kSample + ":/k --head 0";
const std::string kEnv = "env QT_QPA_PLATFORM=offscreen ";

std::string g_dir;

class SecurityOutputs : public ::testing::Test {
protected:
    static void SetUpTestSuite() { g_dir = attnscope::test::fresh_work_dir("security_outputs"); }

    // A fresh folder for one case.
    static std::string folder(const std::string& name)
    {
        const std::string d = g_dir + "/" + name;
        fs::remove_all(d);
        fs::create_directories(d);
        return d;
    }

    static CommandResult run(const std::string& args) { return run_attnscope(args, kEnv); }

    // A character device like /dev/null (1, 3) at `path`; false when mknod is not allowed (not root).
    static bool make_null_device(const std::string& path)
    {
        return ::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
    }

    static bool is_character_device(const std::string& path)
    {
        struct stat st {};
        return ::lstat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
    }

    static bool is_fifo(const std::string& path)
    {
        struct stat st {};
        return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
    }

    // Every entry of `dir` (hidden temporaries included), sorted.
    static std::vector<std::string> listing(const std::string& dir)
    {
        std::vector<std::string> names;
        for (const auto& e : fs::directory_iterator(dir))
            names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }

    static bool has_temporary(const std::string& dir)
    {
        const auto names = listing(dir);
        return std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find(".tmp-") != std::string::npos; });
    }

    static void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
};

// Runs attnscope with `args` (no shell), standard output on `out_fd` (or /dev/null), standard error on
// /dev/null, SIGPIPE at its default action. Returns the child's pid.
pid_t spawn(const std::vector<std::string>& args, int out_fd = -1, int close_fd = -1)
{
    std::vector<std::string> all{ATTNSCOPE_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::signal(SIGPIPE, SIG_DFL);
        if (close_fd >= 0)
            ::close(close_fd);
        const int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(out_fd >= 0 ? out_fd : null, 1);
        ::dup2(null, 2);
        std::vector<char*> argv;
        for (auto& a : all)
            argv.push_back(a.data());
        argv.push_back(nullptr);
        ::setenv("QT_QPA_PLATFORM", "offscreen", 1);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

int wait_status(pid_t pid)
{
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

// Starts `args`, waits (inotify) for a hidden temporary file to appear in `dir`, sends `sig`. Returns the
// wait status, or -1 when the run ended before its temporary file was seen.
int signal_during_write(const std::vector<std::string>& args, const std::string& dir, int sig)
{
    const int in = ::inotify_init1(IN_CLOEXEC);
    if (in < 0 || ::inotify_add_watch(in, dir.c_str(), IN_CREATE) < 0)
        return -1;
    const pid_t pid = spawn(args);
    bool sent = false;
    alignas(inotify_event) char buf[8192];
    for (int waited_ms = 0; !sent && waited_ms < 600000;) {
        pollfd p{in, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) {
            waited_ms += 100;
            int status = 0;
            if (::waitpid(pid, &status, WNOHANG) == pid) {   // ended without a temporary file
                ::close(in);
                return -1;
            }
            continue;
        }
        const ssize_t n = ::read(in, buf, sizeof buf);
        for (ssize_t at = 0; at < n;) {
            const auto* e = reinterpret_cast<const inotify_event*>(buf + at);
            if (e->len && std::strstr(e->name, ".tmp-")) {
                ::kill(pid, sig);
                sent = true;
                break;
            }
            at += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
        }
    }
    ::close(in);
    if (!sent)
        ::kill(pid, SIGKILL);
    return wait_status(pid);
}

}  // namespace

// --json, sweep --csv/--json and --save-session into a character device write into it; the device stays.
TEST_F(SecurityOutputs, TextOutputsWriteIntoACharacterDevice)
{
    const std::string dir = folder("chardev_text");
    const std::string null = dir + "/null";
    if (!make_null_device(null))
        GTEST_SKIP() << "mknod not allowed (needs root): " << std::strerror(errno);
    const CommandResult a = run("analyze " + kQk + " --mechanism linear --top-k 4 --json " + null);
    EXPECT_EQ(a.status, 0) << a.err;
    EXPECT_TRUE(is_character_device(null)) << "analyze --json replaced the device";

    const CommandResult s = run("sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear --csv " + null + " --json " +
                                dir + "/s.json");
    EXPECT_EQ(s.status, 0) << s.err;
    EXPECT_TRUE(is_character_device(null)) << "sweep --csv replaced the device";
    EXPECT_TRUE(fs::exists(dir + "/s.json"));

    const std::string session = dir + "/dev.attnscope";
    ASSERT_TRUE(make_null_device(session));
    const CommandResult g = run(kSample + " --save-session " + session);
    EXPECT_EQ(g.status, 0) << g.err;
    EXPECT_TRUE(is_character_device(session)) << "--save-session replaced the device";
    EXPECT_FALSE(has_temporary(dir)) << ::testing::PrintToString(listing(dir));
}

// HDF5, .npy and figures need a regular file: a device there is refused, before the work, and stays.
TEST_F(SecurityOutputs, BinaryOutputsRefuseACharacterDevice)
{
    const std::string dir = folder("chardev_binary");
    std::vector<std::pair<std::string, std::string>> cases = {
        {"null.npy", "matrix " + kQk + " --mechanism softmax --out "},
        {"null.h5", "matrix " + kQk + " --mechanism softmax --out "},
        {"synth.h5", "synth --n 16 --d 4 --out "},
    };
    if (ATTNSCOPE_WITH_FIGURES) {
        cases.push_back({"fig.png", "figure --view spectrum " + kQk + " --width 320 --height 240 --dpi 96 --out "});
        cases.push_back({"plot.png", "sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear --csv " + dir +
                                         "/c.csv --plot "});
        cases.push_back({"shot.png", kSample + " --screenshot "});
    }
    for (const auto& [name, args] : cases) {
        const std::string dev = dir + "/" + name;
        if (!make_null_device(dev))
            GTEST_SKIP() << "mknod not allowed (needs root): " << std::strerror(errno);
        expect_one_error(run(args + dev), {dev, "character device", "refusing to replace it"}, args + dev);
        EXPECT_TRUE(is_character_device(dev)) << args << dev << " replaced the device";
    }
    EXPECT_FALSE(fs::exists(dir + "/c.csv")) << "sweep wrote its CSV although --plot was refused";
    EXPECT_FALSE(has_temporary(dir)) << ::testing::PrintToString(listing(dir));
}

// A FIFO is written in place for text (a reader gets the document) and refused for binary formats.
TEST_F(SecurityOutputs, FifoIsWrittenInPlaceOrRefused)
{
    const std::string dir = folder("fifo");
    const std::string fifo = dir + "/pipe.json";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0) << std::strerror(errno);
    const std::string copy = dir + "/copy.txt";
    // A bounded reader: if attnscope never opened the FIFO, `timeout` ends the wait.
    const CommandResult a = run_command("timeout 120 cat " + shell_quote(fifo) + " > " + shell_quote(copy) + " & " + kEnv +
                                        ATTNSCOPE_BINARY + " analyze " + kQk + " --mechanism linear --top-k 4 --json " +
                                        shell_quote(fifo) + "; s=$?; wait; exit $s");
    EXPECT_EQ(a.status, 0) << a.err;
    EXPECT_TRUE(is_fifo(fifo)) << "analyze --json replaced the FIFO";
    const auto doc = nlohmann::json::parse(read_text(copy), nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << "the reader did not get the JSON: " << read_text(copy);

    const std::string session = dir + "/pipe.attnscope";
    ASSERT_EQ(::mkfifo(session.c_str(), 0666), 0);
    const CommandResult g = run_command("timeout 120 cat " + shell_quote(session) + " > " + shell_quote(copy) + " & " + kEnv +
                                        ATTNSCOPE_BINARY + " " + kSample + " --save-session " + shell_quote(session) +
                                        "; s=$?; wait; exit $s");
    EXPECT_EQ(g.status, 0) << g.err;
    EXPECT_TRUE(is_fifo(session)) << "--save-session replaced the FIFO";
    EXPECT_NE(read_text(copy).find("attnscope_session"), std::string::npos) << read_text(copy);

    for (const std::string name : {"m.npy", "s.h5"}) {
        const std::string p = dir + "/" + name;
        ASSERT_EQ(::mkfifo(p.c_str(), 0666), 0);
        const std::string args = name == std::string("m.npy") ? "matrix " + kQk + " --mechanism linear --out " + p
                                                              : "synth --n 16 --d 4 --out " + p;
        expect_one_error(run(args), {p, "FIFO", "refusing to replace it"}, args);
        EXPECT_TRUE(is_fifo(p));
    }
    EXPECT_FALSE(has_temporary(dir)) << ::testing::PrintToString(listing(dir));
}

// /dev/stdout is this process's standard output, also when the shell sends it to a file.
TEST_F(SecurityOutputs, DevStdoutIsStandardOutput)
{
    const std::string dir = folder("dev_stdout");
    const std::string out = dir + "/redirected.json";
    const CommandResult a = run("analyze " + kQk + " --mechanism linear --top-k 4 --json /dev/stdout > " + out);
    ASSERT_EQ(a.status, 0) << a.err;
    const auto doc = nlohmann::json::parse(read_text(out), nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << read_text(out);
    const std::string csv = dir + "/redirected.csv";
    const CommandResult s = run("sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear --csv /dev/stdout > " + csv);
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_EQ(read_text(csv).rfind("mechanism,n,m,", 0), 0u) << read_text(csv);
    EXPECT_EQ(listing(dir), (std::vector<std::string>{"redirected.csv", "redirected.json"}));
    // Two outputs on standard output, by either name, are refused.
    expect_one_error(run("sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear --csv - --json /dev/stdout"),
                     {"--csv", "--json", "standard output"}, "csv - and json /dev/stdout");
}

// A full device is an error for every output; a session on a full disk is not committed.
TEST_F(SecurityOutputs, FullDiskIsAnErrorForEveryOutput)
{
    if (fs::exists("/dev/full")) {
        expect_one_error(run("analyze " + kQk + " --mechanism linear --top-k 4 --json /dev/full"), {"/dev/full", "No space left"},
                         "analyze --json /dev/full");
        expect_one_error(run("sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear --csv /dev/full"),
                         {"/dev/full", "No space left"}, "sweep --csv /dev/full");
    }
    // --save-session through the failure injector (tests/support/fault_inject.c): ENOSPC after N bytes.
    const std::string dir = folder("session_full");
    const std::string session = dir + "/s.attnscope";
    const CommandResult ok = run(kSample + " --save-session " + session);
    ASSERT_EQ(ok.status, 0) << ok.err;
    const auto size = fs::file_size(session);
    for (const std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{1}, size / 2, size - 1}) {
        for (const bool precious : {false, true}) {
            fs::remove(session);
            if (precious)
                put(session, "precious");
            const std::string log = g_dir + "/fault.log";
            fs::remove(log);
            const CommandResult r =
                run_command(kEnv + "ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=" + std::string(ATTNSCOPE_FAULT_SHIM) +
                            " ATTNSCOPE_FAULT_DIR=" + dir + " ATTNSCOPE_FAULT=enospc_after=" + std::to_string(offset) +
                            " ATTNSCOPE_FAULT_LOG=" + log + " " + ATTNSCOPE_BINARY + " " + kSample + " --save-session " + session);
            const std::string what = "--save-session full after " + std::to_string(offset) + " bytes" + (precious ? " (existing)" : "");
            EXPECT_FALSE(read_text(log).empty()) << what << ": the fault was never injected";
            expect_one_error(r, {session, "No space left"}, what);
            EXPECT_EQ(r.err.find("wrote"), std::string::npos) << what << ": " << r.err;
            EXPECT_EQ(listing(dir), precious ? std::vector<std::string>{"s.attnscope"} : std::vector<std::string>{}) << what;
            if (precious) {
                EXPECT_EQ(read_text(session), "precious") << what;
            }
        }
    }
}

// A run whose standard output fails publishes no file.
TEST_F(SecurityOutputs, StandardOutputFailureLeavesNoFile)
{
    if (!fs::exists("/dev/full"))
        GTEST_SKIP() << "no /dev/full";
    const std::string dir = folder("stdout_full");
    expect_one_error(run("analyze " + kQk + " --mechanism linear --top-k 4 --json " + dir + "/o.json > /dev/full"),
                     {"standard output"}, "analyze --json o.json > /dev/full");
    expect_one_error(run("sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear --csv - --json " + dir +
                         "/s.json > /dev/full"),
                     {"standard output"}, "sweep --json s.json > /dev/full");
    EXPECT_TRUE(listing(dir).empty()) << ::testing::PrintToString(listing(dir));
    // Standard output a pipe whose reader is gone: SIGPIPE ends the run; the JSON file is not published.
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    ::close(fds[0]);   // no reader, ever
    const pid_t pid = spawn({"analyze", "--q", kSample + ":/q", "--k", kSample + ":/k", "--head", "0", "--mechanism", "linear",
                             "--top-k", "4", "--json", dir + "/p.json"},
                            fds[1]);
    ::close(fds[1]);
    const int status = wait_status(pid);
    EXPECT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0)) << status;
    EXPECT_TRUE(listing(dir).empty()) << ::testing::PrintToString(listing(dir));
}

// Two outputs that resolve to one file are refused before any work, whatever their spelling.
TEST_F(SecurityOutputs, TwoOutputsOnOneFileAreRefused)
{
    const std::string dir = folder("two_outputs");
    const std::string sweep = "sweep --synth gaussian --d 8 --vary n=16,32 --mechanism linear ";
    // `x.out` and `./x.out`, run from the folder (the file does not exist yet).
    const CommandResult dot = run_command("cd " + shell_quote(dir) + " && " + kEnv + ATTNSCOPE_BINARY + " " + sweep +
                                          "--csv x.out --json ./x.out");
    expect_one_error(dot, {"--csv", "--json", "x.out"}, "x.out and ./x.out");
    fs::create_directories(dir + "/sub");
    expect_one_error(run(sweep + "--csv " + dir + "/y.out --json " + dir + "/sub/../y.out"), {"--csv", "--json"}, "sub/..");
    // A symlink and a hard link to an existing file.
    put(dir + "/a.csv", "keep");
    fs::create_symlink(dir + "/a.csv", dir + "/link.json");
    fs::create_hard_link(dir + "/a.csv", dir + "/hard.json");
    expect_one_error(run(sweep + "--csv " + dir + "/a.csv --json " + dir + "/link.json"), {"--csv", "--json"}, "symlink");
    expect_one_error(run(sweep + "--csv " + dir + "/a.csv --json " + dir + "/hard.json"), {"--csv", "--json"}, "hard link");
    // analyze: --json and the summary on standard output sent to the same file by the shell.
    expect_one_error(run("analyze " + kQk + " --mechanism linear --top-k 4 --json " + dir + "/both.txt > " + dir + "/both.txt"),
                     {"--json", "standard output"}, "analyze --json f > f");
    if (ATTNSCOPE_WITH_FIGURES)
        expect_one_error(run(sweep + "--csv " + dir + "/p.svg --plot " + dir + "/./p.svg"), {"--csv", "--plot"}, "csv and plot");
    EXPECT_EQ(read_text(dir + "/a.csv"), "keep");
    const auto names = listing(dir);
    EXPECT_EQ(names, (std::vector<std::string>{"a.csv", "both.txt", "hard.json", "link.json", "sub"}));
}

// An output that is one of the inputs is refused before any work, and the input is untouched.
TEST_F(SecurityOutputs, OutputThatIsAnInputIsRefused)
{
    const std::string dir = folder("output_is_input");
    const std::string a = dir + "/a.npy";
    ASSERT_EQ(run("matrix " + kQk + " --mechanism softmax --out " + a).status, 0);   // a 196 x 196 matrix as input data
    const std::string before = read_text(a);
    expect_one_error(run("matrix --q " + a + " --k " + a + " --mechanism linear --out " + a), {"--out", "--q", "input"},
                     "matrix --out = --q");
    fs::create_symlink(a, dir + "/link.npy");
    fs::create_hard_link(a, dir + "/hard.npy");
    expect_one_error(run("matrix --q " + a + " --k " + a + " --mechanism linear --out " + dir + "/link.npy"), {"--out", "input"},
                     "matrix --out symlink to --q");
    expect_one_error(run("matrix --q " + a + " --k " + a + " --mechanism linear --out " + dir + "/hard.npy"), {"--out", "input"},
                     "matrix --out hard link to --q");
    expect_one_error(run("analyze --q " + a + " --k " + a + " --mechanism linear --json " + a), {"--json", "--q", "input"},
                     "analyze --json = --q");
    expect_one_error(run("sweep --q " + a + " --k " + a + " --vary n=16,32 --mechanism linear --csv " + dir + "/./a.npy"),
                     {"--csv", "input"}, "sweep --csv = --q");
    // A learned mixing file is an input too (refused before it is read: its content does not matter).
    const std::string mix = dir + "/mix.npy";
    put(mix, "not read");
    expect_one_error(run("analyze " + kQk + " --blocks 4 --mixing " + mix + " --json " + mix), {"--json", "--mixing", "input"},
                     "analyze --json = --mixing");
    EXPECT_EQ(read_text(mix), "not read");
    if (ATTNSCOPE_WITH_FIGURES) {
        fs::create_symlink(a, dir + "/fig.png");
        expect_one_error(run("figure --view spectrum --q " + a + " --k " + a + " --mechanism linear --out " + dir + "/fig.png"),
                         {"--out", "input"}, "figure --out symlink to --q");
    }
    EXPECT_EQ(read_text(a), before) << "an input was changed";
    EXPECT_FALSE(has_temporary(dir));
}

// SIGINT, SIGTERM and SIGHUP while an output is being written: the process ends by the signal, the
// temporary file is removed and the destination never appears.
TEST_F(SecurityOutputs, SignalDuringWriteLeavesNoTemporary)
{
    const std::string dir = folder("signals");
    const std::string big = dir + "/big.h5";
    ASSERT_EQ(run("synth --n 3000 --d 16 --out " + big).status, 0);
    const std::string out_dir = dir + "/out";
    fs::create_directories(out_dir);
    struct Case {
        int sig;
        std::vector<std::string> args;
        std::string out;
    };
    const std::vector<Case> cases = {
        {SIGINT, {"matrix", "--q", big + ":/q", "--k", big + ":/k", "--mechanism", "softmax", "--out", out_dir + "/m.npy"}, "m.npy"},
        {SIGTERM, {"matrix", "--q", big + ":/q", "--k", big + ":/k", "--mechanism", "softmax", "--out", out_dir + "/m.h5"}, "m.h5"},
        {SIGHUP, {"synth", "--n", "100000", "--d", "64", "--out", out_dir + "/s.h5"}, "s.h5"},
    };
    for (const Case& c : cases) {
        int status = -1;
        for (int attempt = 0; attempt < 3 && status == -1; ++attempt) {
            status = signal_during_write(c.args, out_dir, c.sig);
            if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                fs::remove(out_dir + "/" + c.out);   // finished before the signal arrived: try again
                status = -1;
            }
        }
        if (status == -1) {
            ADD_FAILURE() << c.out << ": never caught the run writing its temporary file";
            continue;
        }
        EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == c.sig) << c.out << ": status " << status;
        EXPECT_TRUE(listing(out_dir).empty()) << c.out << " left " << ::testing::PrintToString(listing(out_dir));
    }
    // A run blocked writing to standard output (a pipe nobody reads) with its files written but not yet
    // published: SIGTERM removes the temporaries.
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = spawn({"sweep", "--synth", "gaussian", "--d", "8", "--vary", "n=16,24,32,40,48,56,64", "--seeds", "200",
                             "--mechanism", "linear", "--csv", "-", "--json", out_dir + "/s.json"},
                            fds[1], fds[0]);
    ::close(fds[1]);
    // Wait for the JSON's temporary file to exist (the CSV, larger than a pipe's buffer, then blocks).
    bool seen = false;
    for (int i = 0; i < 6000 && !seen; ++i) {
        seen = has_temporary(out_dir);
        if (!seen)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(seen) << "the sweep never wrote its temporary file";
    ::kill(pid, SIGTERM);
    const int status = wait_status(pid);
    ::close(fds[0]);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
    EXPECT_TRUE(listing(out_dir).empty()) << ::testing::PrintToString(listing(out_dir));
}
