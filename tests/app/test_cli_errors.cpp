// Bad input at the command line (docs/cli.md): exit status 2, exactly one `error:` line naming the culprit,
// no output file left behind, an existing output never clobbered.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::run_attnscope;

namespace {

std::string g_dir;

class CliErrors : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        // CTest runs each test in its own process, in parallel: one folder per process.
        g_dir = attnscope::test::fresh_work_dir("cli_errors");
        attnscope::test::run_python("app/make_cli_fixtures.py", {g_dir});
    }

    static std::string f(const std::string& name) { return g_dir + "/" + name; }

    // Exit 2, one line on stderr starting "error: ", containing every needle.
    static void expect_error(const std::string& args, const std::vector<std::string>& needles)
    {
        const CommandResult r = run_attnscope(args);
        EXPECT_EQ(r.status, 2) << "args: " << args << "\nstderr: " << r.err;
        EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << "args: " << args << "\nstderr: " << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "args: " << args << "\nstderr: " << r.err;
        for (const auto& needle : needles)
            EXPECT_NE(r.err.find(needle), std::string::npos) << "args: " << args << "\nmissing '" << needle << "' in: " << r.err;
        EXPECT_TRUE(r.out.empty() || r.out.find("error") == std::string::npos);
    }

    // expect_error(command + args) for each case.
    struct BadArgs {
        std::string args;
        std::vector<std::string> needles;
    };
    static void expect_errors(const std::string& command, const std::vector<BadArgs>& cases)
    {
        for (const BadArgs& c : cases)
            expect_error(command + c.args, c.needles);
    }

    static std::string qk(const std::string& file) { return "--q " + f(file) + ":/q --k " + f(file) + ":/k"; }

    // No temporary or partial output in the work folder.
    static void expect_no_leftovers()
    {
        for (const auto& e : fs::directory_iterator(g_dir))
            EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << "leftover " << e.path();
    }
};

}  // namespace

TEST_F(CliErrors, MissingFileAndTensor)
{
    expect_error("analyze --q " + f("nope.h5") + ":/q --k " + f("good.h5") + ":/k", {"nope.h5"});
    expect_error("analyze --q " + f("good.h5") + ":/query --k " + f("good.h5") + ":/k", {"query"});
    expect_error("info " + f("nope.npz"), {"nope.npz"});
}

// A malformed reference is refused as the command line is read, with its option named, in every command that
// takes one (app::add_tensor_option), before any output is opened.
TEST_F(CliErrors, MalformedReferenceNamesItsOption)
{
    const std::string good = f("good.h5");
    expect_error("analyze --q " + f("q.npy") + ":x --k " + good + ":/k", {"--q", "q.npy:x", "one unnamed tensor"});
    expect_error("analyze --q " + good + ":/q --k '' ", {"--k", "empty tensor reference"});
    expect_error("analyze " + qk("good.h5") + " --v " + f("v.npy") + ":v", {"--v", "v.npy:v"});
    expect_error("matrix --q " + good + ":/q --k " + f("k.npy") + ":k --mechanism softmax --out " + f("m.npy"),
                 {"--k", "k.npy:k"});
    expect_error("sweep " + qk("good.h5") + " --q " + f("q2.npy") + ":y --k " + good + ":/k --vary m=2 --csv " +
                     f("s.csv"),
                 {"--q", "q2.npy:y"});
    EXPECT_FALSE(fs::exists(f("m.npy")));
    EXPECT_FALSE(fs::exists(f("s.csv")));
    expect_no_leftovers();
}

TEST_F(CliErrors, ShapeMismatch)
{
    expect_error("analyze --q " + f("good.h5") + ":/q --k " + f("k47.h5") + ":/k", {"--k", "47", "48"});
    expect_error("analyze --q " + f("good.h5") + ":/q --k " + f("k47.h5") + ":/k6", {"--k", "6", "8"});
}

TEST_F(CliErrors, NonFiniteValues)
{
    expect_error("analyze --q " + f("nan.h5") + ":/q --k " + f("good.h5") + ":/k --head 1", {"nan.h5", "token 3", "feature 2"});
    expect_error("analyze --q " + f("nan.h5") + ":/qinf --k " + f("good.h5") + ":/k", {"qinf", "token 5"});
}

TEST_F(CliErrors, CorruptAndHostileFiles)
{
    expect_error("info " + f("trunc.npy"), {"trunc.npy"});
    expect_error("analyze --q " + f("trunc.npy") + " --k " + f("q.npy"), {"trunc.npy"});
    expect_error("info " + f("huge.npy"), {"huge.npy"});
    expect_error("analyze --q " + f("corrupt.npz") + ":q --k " + f("good.npz") + ":k --head 0", {"corrupt.npz"});
    expect_error("info " + f("model.pt"), {"model.pt", "pickle"});
    expect_error("info " + f("empty.h5"), {"empty.h5"});
    expect_error("info " + f("garbage.h5"), {"garbage.h5"});
    expect_error("analyze --q " + f("nan.h5") + ":/text --k " + f("good.h5") + ":/k", {"text"});
    expect_error("analyze --q " + f("cplx.npy") + " --k " + f("q.npy"), {"cplx.npy", "complex"});
}

TEST_F(CliErrors, ImpossibleOptions)
{
    expect_errors("analyze " + qk("good.h5"), {
        {" --blocks 0", {"--blocks"}},
        {" --blocks 100", {"M=100", "N=48"}},
        {" --chunk 0", {"--chunk"}},
        {" --grid 7,7 --block-grid 1,1", {"grid", "48"}},
        {" --grid 6,8 --block-grid 4,4", {"6", "4"}},
        {" --grid 6,8", {"--block-grid"}},
        {" --blocks 4 --chunk 4", {"--blocks"}},
        {" --feature-map tanh", {"tanh"}},
        {" --normalize official --causal", {"official"}},
        {" --normalize official --blocks 5", {"official"}},
        {" --normalize maybe", {"maybe"}},
        {" --mechanism softmax,attn", {"attn"}},
        {" --mixing " + f("missing_mix.npy"), {"missing_mix.npy"}},
        {" --blocks 4 --mixing " + f("mix_3x4.npy"), {"3"}},
        {" --mixing-sigma -1", {"--mixing-sigma"}},
        {" --scale nan", {"--scale"}},
        {" --favor-features 0 --feature-map favor", {"--favor-features"}},
        {" --top-k 0", {"--top-k"}},
        {" --rank-rtol 2", {"--rank-rtol"}},
        {" --metrics spectrum,rank", {"rank"}},
        {" --frobnicate", {"frobnicate"}},
        {" --method fast", {"--method", "fast"}},
        {" --method structured", {"softmax", "structured"}},
        {" --mechanism linear --causal --method structured", {"causal", "structured"}},
    });
    expect_error("analyze --q " + f("good.h5") + ":/q", {"--k"});
    expect_error("frobnicate", {"frobnicate"});
}

TEST_F(CliErrors, BadSelection)
{
    expect_errors("analyze " + qk("good.h5"), {
        {" --layout nd", {"nd"}},
        {" --layout hnn", {"hnn"}},
        {" --at z=1", {"z"}},
        {" --head 2", {"2"}},
        {" --at h=-1", {"h"}},
        {" --prefix-tokens 48", {"48"}},
        {" --head 1 --at h=0", {"--head"}},
    });
}

TEST_F(CliErrors, MemoryLimits)
{
    expect_errors("analyze " + qk("good.h5"), {{" --max-memory 10K", {"memory"}}, {" --max-memory lots", {"--max-memory"}}});
    const std::string out = f("huge_synth.h5");
    expect_error("synth --n 1000000000 --d 1000000 --heads 1000 --out " + out, {"synth"});
    EXPECT_FALSE(fs::exists(out));
    expect_error("synth --n 10 --d 4 --kind local2d --out " + out, {"local2d"});
    expect_error("synth --n 10 --d 4 --kind perlin --out " + out, {"perlin"});
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliErrors, OutputsAreAtomic)
{
    const std::string in = qk("good.h5");
    // A folder that does not exist: nothing is created.
    expect_error("matrix " + in + " --mechanism softmax --out " + f("no_such_dir/a.npy"), {"no_such_dir"});
    EXPECT_FALSE(fs::exists(f("no_such_dir")));
    // Unsupported extension.
    expect_error("matrix " + in + " --mechanism softmax --out " + f("a.txt"), {"a.txt"});
    EXPECT_FALSE(fs::exists(f("a.txt")));
    // An existing file is never clobbered by a failing run.
    const std::string keep = f("keep.npy");
    {
        std::ofstream o(keep);
        o << "precious";
    }
    expect_error("matrix " + in + " --mechanism mhla --blocks 100 --out " + keep, {"M=100"});
    expect_error("matrix --q " + f("nan.h5") + ":/q --k " + f("good.h5") + ":/k --head 1 --mechanism softmax --out " + keep,
                 {"nan.h5"});
    EXPECT_EQ(attnscope::test::read_text(keep), "precious");
    const std::string json = f("keep.json");
    {
        std::ofstream o(json);
        o << "precious";
    }
    expect_error("analyze " + in + " --blocks 100 --json " + json, {"M=100"});
    EXPECT_EQ(attnscope::test::read_text(json), "precious");
    // A successful run replaces it.
    const CommandResult ok = run_attnscope("matrix " + in + " --mechanism linear --out " + keep);
    EXPECT_EQ(ok.status, 0) << ok.err;
    EXPECT_EQ(attnscope::test::read_text(keep).rfind("\x93NUMPY", 0), 0u);
    expect_no_leftovers();
}

TEST_F(CliErrors, HelpAndVersionSucceed)
{
    EXPECT_EQ(run_attnscope("--help").status, 0);
    EXPECT_EQ(run_attnscope("analyze --help").status, 0);
    const CommandResult v = run_attnscope("--version");
    EXPECT_EQ(v.status, 0);
    EXPECT_NE(v.out.find("attnscope"), std::string::npos);
}
