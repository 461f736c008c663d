// Sessions, figure sizes and Qt's platform as an attacker or a clumsy user would try them
// (docs/security.md "Sessions", "Counts and sizes" > Figures, "Environment and caches"), on the real
// binary: `attnscope --session S --screenshot OUT` and `attnscope figure --session S`.
//
// - A session's "generate" recipe writes only a plain .h5 name inside the session's own folder (one
//   subfolder at most, never through a symlink, never over a file), with sizes in the memory budget;
//   anything else refuses the whole session with one `error:` line naming the key, and nothing is written.
// - Every path of a session (data files, the learned mixing file) is relative to the session file: it
//   opens from any working directory.
// - Indices out of range (head, prefix tokens, query) are refused naming the key and the range.
// - Figure sizes Qt cannot draw, overflowing --size values and NaN sizes are refused; a Qt platform that
//   cannot start gives one `error:` line, never an abort.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/writers.h"
#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::kNoDisplay;
using attnscope::test::expect_one_error;
using attnscope::test::run_attnscope;
using attnscope::test::run_command;
using attnscope::test::shell_quote;
using nlohmann::json;

namespace {

// The offscreen platform asked for explicitly, no display.
const std::string kOffscreen = "env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=offscreen ";

class SecuritySessions : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        s_root = attnscope::test::fresh_work_dir("security_sessions");
        // 2 heads x 16 tokens x 4 features (layout hnd), and a learned 4 x 4 mixing matrix beside it.
        std::vector<double> q(2 * 16 * 4), k(2 * 16 * 4);
        for (std::size_t i = 0; i < q.size(); ++i) {
            q[i] = std::sin(0.37 * double(i)) + 0.1;
            k[i] = std::cos(0.23 * double(i)) + 0.2;
        }
        attnscope::io::write_hdf5(s_root + "/data.h5", {{"/q", {2, 16, 4}, q}, {"/k", {2, 16, 4}, k}});
        Eigen::MatrixXd mix = Eigen::MatrixXd::Identity(4, 4) * 0.7;
        mix.diagonal(-1).setConstant(0.3);
        attnscope::io::write_npy(s_root + "/mix.npy", mix);
    }

    static std::string s_root;

    // A fresh folder under the suite's root.
    static std::string folder(const std::string& name)
    {
        const std::string dir = s_root + "/" + name;
        fs::remove_all(dir);
        fs::create_directories(dir);
        return dir;
    }

    // A session on ../data.h5-like absolute data (the suite's data.h5), with `extra` merged in.
    static json session_on_data(const json& extra = json::object())
    {
        json s = {{"attnscope_session", 1},
                  {"files", {s_root + "/data.h5"}},
                  {"tensors", {{"q", {{"file", s_root + "/data.h5"}, {"name", "/q"}}}, {"k", {{"file", s_root + "/data.h5"}, {"name", "/k"}}}}},
                  {"mechanism", {{"mixing", ""}, {"blocks", 4}}},
                  {"view", "maps"}};
        s.merge_patch(extra);
        return s;
    }

    static std::string write_session(const std::string& dir, const json& s, const std::string& name = "s.attnscope")
    {
        const std::string path = dir + "/" + name;
        std::ofstream(path) << s.dump(2);
        return path;
    }

    // Every path under `dir` (links not followed), for "nothing appeared".
    static std::set<std::string> listing(const std::string& dir)
    {
        std::set<std::string> out;
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator(); it.increment(ec))
            out.insert(it->path().string());
        return out;
    }

    // `attnscope --session S --screenshot OUT.png` and `attnscope figure --session S`: both refused with
    // `needles` in their one error line, no output.
    static void expect_session_refused(const std::string& session, const std::vector<std::string>& needles, const std::string& what)
    {
        const std::string png = fs::path(session).parent_path().string() + "/shot.png";
        const std::string fig = fs::path(session).parent_path().string() + "/fig.png";
        expect_one_error(run_attnscope("--session " + shell_quote(session) + " --screenshot " + shell_quote(png), kNoDisplay), needles,
                         what + " (--screenshot)");
        expect_one_error(run_attnscope("figure --session " + shell_quote(session) + " --view maps --out " + shell_quote(fig), kNoDisplay),
                         needles, what + " (figure --session)");
        EXPECT_FALSE(fs::exists(png)) << what;
        EXPECT_FALSE(fs::exists(fig)) << what;
    }
};

std::string SecuritySessions::s_root;

}  // namespace

// Keys that name a place outside the session's folder, or a name that is not ours: refused, nothing written
// anywhere (before: `.bashrc` was written, absolute and `../..` keys honoured, folders created).
TEST_F(SecuritySessions, GenerateWritesNothingOutsideTheSessionFolder)
{
    const std::string top = folder("generate_outside");
    const std::string dir = top + "/a/b";
    fs::create_directories(dir);
    // A folder beside the session that is a symlink to a fresh folder in /tmp.
    char outside_template[] = "/tmp/attnscope_sec_outsideXXXXXX";
    ASSERT_NE(::mkdtemp(outside_template), nullptr);
    const std::string outside = outside_template;
    fs::create_directory_symlink(outside, dir + "/out");
    const std::string absolute = outside + "/abs.h5";
    const std::set<std::string> before = listing(top);

    const json recipe = {{"kind", "gaussian"}, {"n", 16}, {"d", 4}};
    const std::vector<std::string> keys = {".bashrc", absolute, "../../x.h5", "sub/../../x.h5", "out/x.h5", "x.txt",
                                           "a/b/c.h5", ".hidden/x.h5", "sub/.x.h5", "-rf.h5", "..", "../b/x.h5", "~/x.h5",
                                           "sub\\x.h5", ".h5", ""};
    for (const std::string& key : keys) {
        const std::string session = write_session(dir, {{"attnscope_session", 1}, {"generate", {{key, recipe}}}, {"files", {key}}});
        expect_session_refused(session, {"generate[" + json(key).dump() + "]"}, "key " + key);
        fs::remove(session);
    }
    EXPECT_EQ(listing(top), before);
    EXPECT_TRUE(fs::is_empty(outside)) << outside;
    EXPECT_FALSE(fs::exists(top + "/x.h5"));
    EXPECT_FALSE(fs::exists(s_root + "/x.h5"));
    fs::remove_all(outside);
}

// Recipe values: negative, huge, of the wrong type, or over the memory budget; one bad recipe refuses the
// session before the good one beside it is written.
TEST_F(SecuritySessions, GenerateValuesAreBoundedAndCheckedFirst)
{
    const std::string dir = folder("generate_values");
    const std::set<std::string> before = listing(dir);
    struct Case {
        json recipe;
        std::string key;   // after generate["v.h5"]
    };
    const std::vector<Case> cases = {
        {{{"n", -5}, {"d", 4}}, ".n"},
        {{{"n", 0}, {"d", 4}}, ".n"},
        {{{"n", 16}, {"d", "4"}}, ".d"},
        {{{"n", 16}, {"d", 4}, {"heads", 1e300}}, ".heads"},
        {{{"n", 16}, {"d", 4}, {"heads", 4294967296LL}}, ".heads"},
        {{{"n", 1 << 30}, {"d", 1 << 20}}, "MiB"},   // over the memory budget
        {{{"n", 16}, {"d", 4}, {"seed", -1}}, ".seed"},
        {{{"n", 16}, {"d", 4}, {"grid", {3}}}, ".grid"},
        {{{"n", 16}, {"d", 4}, {"grid", {4294967296LL, 4294967296LL}}}, ".grid"},
        {{{"n", 16}, {"d", 4}, {"kind", "evil"}}, "--kind"},
        {{{"N", 16}, {"d", 4}}, ".N"},
        {json::array({1, 2}), "expected an object"},
    };
    for (const Case& c : cases) {
        const std::string session = write_session(dir, {{"attnscope_session", 1}, {"generate", {{"good.h5", {{"n", 16}, {"d", 4}}}, {"v.h5", c.recipe}}}});
        expect_session_refused(session, {"generate[\"v.h5\"]", c.key}, c.recipe.dump());
        fs::remove(session);
    }
    EXPECT_EQ(listing(dir), before) << "good.h5 written although the session was refused";
}

// A recipe of ours is made on first use in its subfolder, which is created; an existing file is kept.
TEST_F(SecuritySessions, GenerateMakesItsFileInsideTheSessionFolder)
{
    const std::string dir = folder("generate_ok");
    json s = {{"attnscope_session", 1},
              {"generate", {{"generated/g.h5", {{"kind", "gaussian"}, {"n", 16}, {"d", 4}, {"heads", 1}, {"seed", 3}}}}},
              {"files", {"generated/g.h5"}},
              {"tensors", {{"q", {{"file", "generated/g.h5"}, {"name", "/q"}}}, {"k", {{"file", "generated/g.h5"}, {"name", "/k"}}}}},
              {"mechanism", {{"blocks", 4}}},
              {"view", "maps"}};
    const std::string session = write_session(dir, s);
    const CommandResult r = run_attnscope("figure --session " + shell_quote(session) + " --view maps --out " + shell_quote(dir + "/f.png"),
                                          kNoDisplay);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(dir + "/generated/g.h5"));
    EXPECT_TRUE(fs::exists(dir + "/f.png"));
    const auto made = fs::last_write_time(dir + "/generated/g.h5");
    const CommandResult again = run_attnscope("figure --session " + shell_quote(session) + " --view maps --out " + shell_quote(dir + "/f.png"),
                                              kNoDisplay);
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_EQ(fs::last_write_time(dir + "/generated/g.h5"), made) << "an existing file was written again";
    std::set<std::string> expected = {dir + "/s.attnscope", dir + "/f.png", dir + "/generated", dir + "/generated/g.h5"};
    EXPECT_EQ(listing(dir), expected);
}

// The learned mixing file and the data files are relative to the session file, so the session opens from
// another working directory (before, mixing_file was read relative to the working directory).
TEST_F(SecuritySessions, PathsAreRelativeToTheSessionFromAnyWorkingDirectory)
{
    const std::string dir = folder("relative");
    fs::copy_file(s_root + "/data.h5", dir + "/data.h5");
    fs::copy_file(s_root + "/mix.npy", dir + "/mix.npy");
    const json s = {{"attnscope_session", 1},
                    {"files", {"data.h5"}},
                    {"tensors", {{"q", {{"file", "data.h5"}, {"name", "/q"}}}, {"k", {{"file", "data.h5"}, {"name", "/k"}}}}},
                    {"selection", {{"layout", "hnd"}, {"at", {{"h", 1}}}}},
                    {"mechanism", {{"block_mode", "blocks"}, {"blocks", 4}, {"mixing", "file"}, {"mixing_file", "mix.npy"}}},
                    {"view", "mixing"}};
    const std::string session = write_session(dir, s);
    const std::string png = dir + "/shot.png";
    const CommandResult r = run_command("cd / && " + kNoDisplay + ATTNSCOPE_BINARY + " --session " + shell_quote(session) +
                                        " --screenshot " + shell_quote(png) + " --size 800x600");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(png));
    // The mixing file is really read: without it, the session fails naming it.
    fs::rename(dir + "/mix.npy", dir + "/gone.npy");
    const CommandResult missing = run_command("cd / && " + kNoDisplay + ATTNSCOPE_BINARY + " --session " + shell_quote(session) +
                                              " --screenshot " + shell_quote(dir + "/shot2.png"));
    EXPECT_EQ(missing.status, 2) << missing.err;
    EXPECT_NE(missing.err.find("mix.npy"), std::string::npos) << missing.err;
    EXPECT_FALSE(fs::exists(dir + "/shot2.png"));
}

// Indices outside the data are refused naming the key and its range (before: head 99 rendered the last head).
TEST_F(SecuritySessions, IndicesOutOfRangeAreRefused)
{
    const std::string dir = folder("indices");
    struct Case {
        json extra;
        std::vector<std::string> needles;
    };
    const std::vector<Case> cases = {
        {{{"selection", {{"layout", "hnd"}, {"at", {{"h", 99}}}}}}, {"selection.at.h", "99", "0..1"}},
        {{{"selection", {{"at", {{"h", 2}}}}}}, {"selection.at.h", "0..1"}},
        {{{"selection", {{"at", {{"h", -1}}}}}}, {"selection.at.h"}},
        {{{"selection", {{"at", {{"h", 4294967297LL}}}}}}, {"selection.at.h"}},
        {{{"selection", {{"prefix_tokens", 16}}}}, {"selection.prefix_tokens", "0..15"}},
        {{{"query", 16}}, {"query", "-1..15"}},
        {{{"query", -2}}, {"query"}},
        {{{"query", 1e300}}, {"query"}},
        {{{"attnscope_session", 2}}, {"newer"}},
        {{{"files", "data.h5"}}, {"files"}},
        {{{"tensors", {{"x", {{"file", "data.h5"}}}}}}, {"tensors.x"}},
        // The other open files' states are checked as the session's own selection and mechanism are.
        {{{"file_states", "data.h5"}}, {"file_states"}},
        {{{"file_states", {{{"file", 7}}}}}, {"file_states[0].file"}},
        {{{"file_states", {{{"file", "data.h5"}, {"selection", {{"at", {{"h", 4294967297LL}}}}}}}}}, {"file_states[0].selection.at.h"}},
        {{{"file_states", {{{"file", "data.h5"}, {"mechanism", {{"mixing_file", 3}}}}}}}, {"file_states[0].mechanism.mixing_file"}},
        {{{"file_states", {{{"file", "data.h5"}, {"tensors", {"q", "k", "v", "w"}}}}}}, {"file_states[0].tensors"}},
    };
    for (const Case& c : cases) {
        const std::string session = write_session(dir, session_on_data(c.extra));
        expect_session_refused(session, c.needles, c.extra.dump());
    }
    // Text Qt keeps but that is not Unicode (an unpaired surrogate escape): refused in words, not as a
    // JSON library's exception text.
    const std::string surrogate = dir + "/surrogate.attnscope";
    std::ofstream(surrogate) << R"({"attnscope_session": 1, "data_note": "\ud800x", "files": []})";
    expect_session_refused(surrogate, {"not valid Unicode"}, "unpaired surrogate");
    // In range: renders.
    const std::string ok = write_session(dir, session_on_data({{"selection", {{"at", {{"h", 1}}}}}, {"query", 15}}), "ok.attnscope");
    const CommandResult r = run_attnscope("figure --session " + shell_quote(ok) + " --view maps --out " + shell_quote(dir + "/ok.png"), kNoDisplay);
    EXPECT_EQ(r.status, 0) << r.err;
}

// --size is parsed whole, with overflow detected (before: 4294967616x240 gave a 320 x 240 window).
TEST_F(SecuritySessions, WindowSizeOverflowIsRefused)
{
    const std::string dir = folder("size");
    const std::string data = shell_quote(s_root + "/data.h5");
    for (const std::string size : {"4294967616x240", "1280x4294967536", "99999999999999999999x720", "1280x720x", "+1280x720",
                                   "1280x-720", " 1280x720", "1280 x720", "0x0", "x", "1e3x720"}) {
        const std::string png = dir + "/shot.png";
        expect_one_error(run_attnscope(data + " --screenshot " + shell_quote(png) + " --size " + shell_quote(size), kNoDisplay),
                         {"--size"}, size);
        EXPECT_FALSE(fs::exists(png)) << size;
    }
}

// Figure sizes: NaN and infinite sizes are refused by name (before: ignored); a size Qt cannot draw is
// refused stating the largest that works (before: 20000 x 20000 PDF crashed inside Qt at 6.7 GiB).
TEST_F(SecuritySessions, FigureSizesAreFiniteAndDrawable)
{
    const std::string dir = folder("figure_sizes");
    const std::string qk = "figure --view maps --q " + shell_quote(s_root + "/data.h5:/q") + " --k " + shell_quote(s_root + "/data.h5:/k") +
                           " --mechanism softmax ";
    struct Case {
        std::string options;
        std::string file;
        std::vector<std::string> needles;
    };
    const std::vector<Case> cases = {
        {"--width-mm nan", "f.pdf", {"--width-mm"}},
        {"--width-mm 80 --height-mm nan", "f.pdf", {"--height-mm"}},
        {"--width-mm 80 --font-size nan", "f.pdf", {"--font-size"}},
        {"--preset column --font-size nan", "f.pdf", {"--font-size"}},
        {"--width-mm inf", "f.pdf", {"--width-mm"}},
        {"--dpi nan", "f.png", {"--dpi"}},
        {"--font-scale nan", "f.png", {"--font-scale"}},
        {"--width 20000 --height 20000", "f.pdf", {"--width", "largest"}},
        {"--width 20000 --height 20000", "f.svg", {"--width", "largest"}},
        {"--width 20000 --height 20000 --dpi 300", "f.png", {"pixels", "largest"}},
        {"--width-mm 2000 --height-mm 2000 --dpi 2400", "f.png", {"pixels", "largest"}},
        {"--width 4294967312", "f.png", {"--width"}},
    };
    for (const Case& c : cases) {
        const std::string out = dir + "/" + c.file;
        expect_one_error(run_attnscope(qk + c.options + " --out " + shell_quote(out), kNoDisplay), c.needles, c.options + " " + c.file);
        EXPECT_FALSE(fs::exists(out)) << c.options;
    }
    EXPECT_TRUE(fs::is_empty(dir));
}

// QT_QPA_PLATFORM=xcb without a display: `figure` renders offscreen as every subcommand does (before: Qt
// aborted, exit 134); the desktop app says in one line why it cannot start.
TEST_F(SecuritySessions, QtPlatformFailuresAreOneErrorLine)
{
    const std::string dir = folder("platform");
    const std::string data = shell_quote(s_root + "/data.h5");
    const std::string fig = "figure --view maps --q " + shell_quote(s_root + "/data.h5:/q") + " --k " +
                            shell_quote(s_root + "/data.h5:/k") + " --mechanism softmax --out ";
    for (const std::string env : {"env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=xcb ", "env -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM DISPLAY=:9731 ",
                                  "env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=nosuchplatform "}) {
        const CommandResult r = run_attnscope(fig + shell_quote(dir + "/f.png"), "timeout 300 " + env);
        EXPECT_EQ(r.status, 0) << env << r.err;
        EXPECT_TRUE(fs::exists(dir + "/f.png")) << env;
        fs::remove(dir + "/f.png");
    }
    // The window: refused, never opened (timeout guards against a window that would wait for a user).
    expect_one_error(run_attnscope(data, "timeout 60 env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=xcb "),
                     {"no display", "DISPLAY is not set"}, "window, xcb, no DISPLAY");
    expect_one_error(run_attnscope(data, "timeout 60 env -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM DISPLAY=:9731 "),
                     {"no display", "DISPLAY=:9731"}, "window, unreachable X server");
    expect_one_error(run_attnscope(data, "timeout 60 env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=nosuchplatform "),
                     {"nosuchplatform"}, "window, no such platform");
    // Scripted runs: an explicit platform that cannot start is an error; an unreachable default display
    // falls back to the offscreen platform.
    expect_one_error(run_attnscope(data + " --screenshot " + shell_quote(dir + "/s.png"), "timeout 300 env -u DISPLAY -u WAYLAND_DISPLAY QT_QPA_PLATFORM=xcb "),
                     {"QT_QPA_PLATFORM=xcb", "DISPLAY"}, "--screenshot, xcb, no DISPLAY");
    EXPECT_FALSE(fs::exists(dir + "/s.png"));
    const CommandResult fallback =
        run_attnscope(data + " --screenshot " + shell_quote(dir + "/s.png") + " --size 640x480", "timeout 300 env -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM DISPLAY=:9731 ");
    EXPECT_EQ(fallback.status, 0) << fallback.err;
    EXPECT_TRUE(fs::exists(dir + "/s.png"));
}

// Issue 30, data loss: `attnscope d.h5 --screenshot d.h5` exited 0 and replaced the data with a PNG, and
// `--session s.attnscope --screenshot s.attnscope` the session. An output of a scripted run is now none of its
// inputs, by file identity (a hard link or a symlink to the data is the data): the data files, the session
// and every file the session names; and --screenshot writes only a .png name. Each refusal leaves every
// input byte for byte.
TEST_F(SecuritySessions, ScreenshotNeverReplacesAnInput)
{
    const std::string dir = folder("screenshot_inputs");
    const std::string data = dir + "/d.h5";
    fs::copy_file(s_root + "/data.h5", data);
    const std::string session = write_session(dir, session_on_data({{"files", {data}},
                                                                     {"tensors", {{"q", {{"file", "d.h5"}, {"name", "/q"}}},
                                                                                  {"k", {{"file", "d.h5"}, {"name", "/k"}}}}}}));
    const auto bytes = [](const std::string& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string data_bytes = bytes(data), session_bytes = bytes(session);
    fs::create_hard_link(data, dir + "/hard.png");
    fs::create_symlink(data, dir + "/soft.png");
    fs::create_symlink(session, dir + "/session-link.png");
    fs::copy_file(s_root + "/mix.npy", dir + "/mix.npy");
    fs::create_hard_link(dir + "/mix.npy", dir + "/mix.png");
    const std::string mixing_session =
        write_session(dir, session_on_data({{"mechanism", {{"mixing_file", "mix.npy"}}}}), "mixing.attnscope");
    struct Case {
        std::string args;
        std::vector<std::string> needles;
    };
    const std::string q = shell_quote(data), s = shell_quote(session);
    const std::vector<Case> cases = {
        {q + " --screenshot " + q, {"--screenshot", "name a .png file"}},
        {"--session " + s + " --screenshot " + s, {"--screenshot", "name a .png file"}},
        {s + " --screenshot " + s, {"--screenshot", "name a .png file"}},
        {q + " --screenshot " + shell_quote(dir + "/shot.h5"), {"--screenshot", ".png"}},
        {q + " --screenshot " + shell_quote(dir + "/shot.PNG.txt"), {"--screenshot", ".png"}},
        {q + " --screenshot " + shell_quote(dir + "/hard.png"), {"--screenshot", "is the input", "replace the input"}},
        {q + " --screenshot " + shell_quote(dir + "/soft.png"), {"--screenshot", "is the input"}},
        {"--session " + s + " --screenshot " + shell_quote(dir + "/session-link.png"), {"--screenshot", "--session"}},
        {"--session " + s + " --screenshot " + shell_quote(dir + "/hard.png"), {"--screenshot", "files[0]"}},
        {"--session " + s + " --screenshot " + shell_quote(dir + "/soft.png"), {"--screenshot", "is the input"}},
        {"--session " + shell_quote(mixing_session) + " --screenshot " + shell_quote(dir + "/mix.png"),
         {"--screenshot", "mechanism.mixing_file"}},
    };
    for (const Case& c : cases) {
        expect_one_error(run_attnscope(c.args, kNoDisplay), c.needles, c.args);
        EXPECT_EQ(bytes(data), data_bytes) << c.args;
        EXPECT_EQ(bytes(session), session_bytes) << c.args;
        EXPECT_TRUE(fs::is_symlink(dir + "/soft.png")) << c.args;
        EXPECT_FALSE(fs::exists(dir + "/shot.h5")) << c.args;
    }
    // figure --session: its --out is none of the files the session names either.
    expect_one_error(run_attnscope("figure --session " + s + " --view maps --out " + shell_quote(dir + "/hard.png"), kNoDisplay),
                     {"--out", "files[0]"}, "figure --session onto a hard link of its data");
    EXPECT_EQ(bytes(data), data_bytes);
    // A .png beside them is written.
    const CommandResult ok = run_attnscope(q + " --screenshot " + shell_quote(dir + "/shot.png") + " --size 640x400", kNoDisplay);
    EXPECT_EQ(ok.status, 0) << ok.err;
    EXPECT_TRUE(fs::exists(dir + "/shot.png"));
}

// --save-session writes a session, never over one of the data files it names (a symlink or hard link named
// .attnscope that leads to the data).
TEST_F(SecuritySessions, SaveSessionNeverReplacesAnInput)
{
    const std::string dir = folder("save_session_inputs");
    const std::string data = dir + "/d.h5";
    fs::copy_file(s_root + "/data.h5", data);
    fs::create_symlink(data, dir + "/soft.attnscope");
    fs::create_hard_link(data, dir + "/hard.attnscope");
    const auto size = fs::file_size(data);
    for (const std::string out : {"soft.attnscope", "hard.attnscope"}) {
        expect_one_error(run_attnscope(shell_quote(data) + " --save-session " + shell_quote(dir + "/" + out), kNoDisplay),
                         {"--save-session", "is the input", "FILE"}, out);
        EXPECT_EQ(fs::file_size(data), size) << out;
        EXPECT_TRUE(fs::is_symlink(dir + "/soft.attnscope")) << out;
    }
    const CommandResult ok = run_attnscope(shell_quote(data) + " --save-session " + shell_quote(dir + "/new.attnscope"), kNoDisplay);
    EXPECT_EQ(ok.status, 0) << ok.err;
}

// Every open file's state is checked against that file's data when the session opens it, like the shown
// file's selection (before: file_states[...].selection.at.h = 99 on a file of 2 heads was taken, and clamped
// in silence when the window came back to that file).
TEST_F(SecuritySessions, FileStatesIndicesAreCheckedAgainstTheData)
{
    const std::string dir = folder("file_states_data");
    fs::copy_file(s_root + "/data.h5", dir + "/other.h5");
    const auto state = [&](const json& selection, const json& tensors = json::array({"/q", "/k", ""})) {
        return json{{"files", {s_root + "/data.h5", dir + "/other.h5"}},
                    {"file_states", {{{"file", "other.h5"}, {"tensors", tensors}, {"selection", selection}}}}};
    };
    const std::vector<std::pair<json, std::vector<std::string>>> cases = {
        {state({{"layout", "hnd"}, {"at", {{"h", 99}}}}), {"file_states[0].selection.at.h", "99", "0..1"}},
        {state({{"at", {{"h", 2}}}}), {"file_states[0].selection.at.h", "0..1"}},
        {state({{"prefix_tokens", 16}}), {"file_states[0].selection.prefix_tokens", "0..15"}},
        {state({{"layout", "bhnd"}}), {"file_states[0].selection.layout"}},
        {state(json::object(), {"/nope", "/k", ""}), {"file_states[0].tensors[0]", "/nope"}},
    };
    for (const auto& [extra, needles] : cases)
        expect_session_refused(write_session(dir, session_on_data(extra)), needles, extra.dump());
    const std::string ok = write_session(dir, session_on_data(state({{"at", {{"h", 1}}}, {"prefix_tokens", 3}})), "ok.attnscope");
    const CommandResult r = run_attnscope("figure --session " + shell_quote(ok) + " --view maps --out " + shell_quote(dir + "/ok.png"), kNoDisplay);
    EXPECT_EQ(r.status, 0) << r.err;
}

// Whole numbers of a session and of --view-state are JSON integers in range (before: the Heads view's
// first_head took 2^31, -8, "8" and 8.5; a recipe's seed 2^63 and more; the mechanism's seed 2^63 became 0;
// --view-state '{"log": "yes"}' was read as false).
TEST_F(SecuritySessions, SessionAndViewStateNumbersAreStrict)
{
    const std::string dir = folder("strict_numbers");
    const std::vector<std::pair<json, std::vector<std::string>>> cases = {
        {{{"views", {{"heads", {{"first_head", 2147483648LL}}}}}}, {"views.heads.first_head"}},
        {{{"views", {{"heads", {{"first_head", -8}}}}}}, {"views.heads.first_head"}},
        {{{"views", {{"heads", {{"first_head", "8"}}}}}}, {"views.heads.first_head", "string"}},
        {{{"views", {{"heads", {{"first_head", 8.5}}}}}}, {"views.heads.first_head", "8.5"}},
        {{{"views", {{"maps", {{"query", -2}}}}}}, {"views.maps.query"}},
        {{{"views", {{"maps", {{"query", 1e300}}}}}}, {"views.maps.query"}},
        {{{"generate", {{"g.h5", {{"n", 8}, {"d", 4}, {"seed", 9223372036854775808ULL}}}}}}, {"generate[\"g.h5\"].seed"}},
        {{{"generate", {{"g.h5", {{"n", 8}, {"d", 4}, {"seed", 18446744073709551615ULL}}}}}}, {"generate[\"g.h5\"].seed"}},
        {{{"mechanism", {{"seed", 9223372036854775808ULL}}}}, {"mechanism.seed"}},
        {{{"mechanism", {{"seed", -1}}}}, {"mechanism.seed"}},
        {{{"mechanism", {{"favor_features", 0}}}}, {"mechanism.favor_features"}},
        {{{"mechanism", {{"blocks", 4294967296LL}}}}, {"mechanism.blocks"}},
        {{{"mechanism", {{"causal", "yes"}}}}, {"mechanism.causal"}},
        {{{"file_states", {{{"file", "x.h5"}, {"mechanism", {{"seed", 9223372036854775808ULL}}}}}}}, {"file_states[0].mechanism.seed"}},
    };
    for (const auto& [extra, needles] : cases)
        expect_session_refused(write_session(dir, session_on_data(extra)), needles, extra.dump());
    // figure --view-state: the same numbers, and every key of the type the view saves.
    const std::string data = s_root + "/data.h5";
    const std::string base = "figure --q " + shell_quote(data + ":/q") + " --k " + shell_quote(data + ":/k") + " --out " +
                             shell_quote(dir + "/f.png") + " ";
    const std::vector<std::pair<std::string, std::vector<std::string>>> states = {
        {"--view heads --view-state '{\"first_head\": 2147483648}'", {"--view-state.first_head"}},
        {"--view heads --view-state '{\"first_head\": -8}'", {"--view-state.first_head"}},
        {"--view heads --view-state '{\"first_head\": \"8\"}'", {"--view-state.first_head"}},
        {"--view heads --view-state '{\"first_head\": 8.5}'", {"--view-state.first_head"}},
        {"--view maps --view-state '{\"query\": \"3\"}'", {"--view-state.query"}},
        {"--view maps --view-state '{\"log\": \"yes\"}'", {"--view-state", "'log'", "true or false"}},
        {"--view maps --view-state '{\"colormap\": 3}'", {"--view-state", "'colormap'", "a string"}},
        {"--view maps --view-state '{\"x_range\": [0, \"a\"]}'", {"--view-state", "x_range"}},
        {"--view maps --view-state '{\"x_range\": 5}'", {"--view-state", "x_range", "an array"}},
    };
    for (const auto& [args, needles] : states) {
        expect_one_error(run_attnscope(base + args, kNoDisplay), needles, args);
        EXPECT_FALSE(fs::exists(dir + "/f.png")) << args;
    }
    const CommandResult ok = run_attnscope(base + "--view heads --view-state '{\"first_head\": 1}'", kNoDisplay);
    EXPECT_EQ(ok.status, 0) << ok.err;
}
