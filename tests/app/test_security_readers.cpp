// Untrusted data files, the kernel-choice cache and the environment (docs/security.md, "Data files" and
// "Environment and caches"), through the real executable: an HDF5 file never makes AttnScope read another
// file (external raw storage, external links, virtual datasets outside its folder or without --allow-virtual)
// or load a filter plugin; a FIFO or a device is never opened as data (every command runs under `timeout`, so
// a regression fails instead of hanging); a kernel cache that is a FIFO, a symlink to /dev/urandom or a huge
// file neither blocks nor allocates and is never replaced; a misspelt ATTNSCOPE_* value is one `error:` line;
// a recording whose padded keys are still in the file is refused naming key_padding_mask.
#include <filesystem>
#include <fstream>

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernels/kernels.h"
#include "support/attnscope_binary.h"

namespace fs = std::filesystem;
using attnscope::test::CommandResult;
using attnscope::test::expect_one_error;
using attnscope::test::run_attnscope;
using attnscope::test::shell_quote;

namespace {

std::string g_dir;

// Generous: the slowest case calibrates the kernels once (~1 s); a hang is killed and fails the test.
const std::string kTimeout = "timeout -s KILL 120 ";

class SecurityReaders : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        g_dir = attnscope::test::fresh_work_dir("security_readers");
        attnscope::test::run_python("app/make_security_fixtures.py", {g_dir});
        fs::create_symlink("../outside/src.h5", g_dir + "/inner/link.h5");
        ASSERT_EQ(::mkfifo((g_dir + "/fifo").c_str(), 0600), 0);
        ASSERT_EQ(::mkfifo((g_dir + "/vfifo.h5").c_str(), 0600), 0);
        for (const char* name : {"x.npy", "x.h5", "x.hdf5", "x.npz", "x.safetensors"})
            ASSERT_EQ(::mkfifo((g_dir + "/" + name).c_str(), 0600), 0) << name;
        fs::create_symlink("/dev/zero", g_dir + "/zero.npy");
    }
    static std::string f(const std::string& name) { return g_dir + "/" + name; }

    // `env` (assignments, or `env ...`) comes first: timeout runs what follows it. Commands run in the fixtures'
    // folder: HDF5 looks for a relative external file in the working folder, where the fixtures put theirs.
    static CommandResult run(const std::string& args, const std::string& env = {})
    {
        return run_attnscope(args, "cd " + shell_quote(g_dir) + " && " + env + kTimeout);
    }

    // `matrix` of the queries `q` against src.h5's keys into `out` (removed first).
    static CommandResult matrix(const std::string& q, const std::string& out, const std::string& extra = {})
    {
        fs::remove(out);
        return run("matrix --mechanism softmax --q " + q + " --k " + f("src.h5") + ":/k --out " + out + " " + extra);
    }
};

}  // namespace

// External raw storage names any file of the machine: its bytes must never reach an output.
TEST_F(SecurityReaders, ExternalRawStorageIsRefused)
{
    const std::string out = f("leak.npy");
    expect_one_error(matrix(f("ext.h5") + ":/q", out), {"ext.h5", "/q", "external file", "secret.bin", "refused"},
                     "external storage in the same folder");
    EXPECT_FALSE(fs::exists(out));
    expect_one_error(matrix(f("ext_abs.h5") + ":/q", out), {"ext_abs.h5", "/q", "/etc/passwd", "refused"},
                     "external storage in /etc/passwd");
    EXPECT_FALSE(fs::exists(out));
    // `info` lists it as skipped, with the reason, and reads nothing.
    const CommandResult info = run("info --json " + f("ext.h5"));
    ASSERT_EQ(info.status, 0) << info.err;
    const auto doc = nlohmann::json::parse(info.out);
    ASSERT_TRUE(doc.contains("skipped")) << info.out;
    EXPECT_NE(doc["skipped"].dump().find("external file"), std::string::npos) << info.out;
}

// External storage on a FIFO hung `analyze` forever.
TEST_F(SecurityReaders, ExternalStorageOnAFifoNeitherHangsNorReads)
{
    expect_one_error(run("analyze --q " + f("ext_fifo.h5") + ":/q --k " + f("ext_fifo.h5") + ":/k"),
                     {"ext_fifo.h5", "/q", "external file", "fifo"}, "external storage on a FIFO");
}

TEST_F(SecurityReaders, ExternalLinksAreNeverFollowed)
{
    expect_one_error(matrix(f("elink.h5") + ":/q", f("elink.npy")), {"elink.h5", "/q", "external link", "src.h5"},
                     "external link");
    EXPECT_FALSE(fs::exists(f("elink.npy")));
}

// A virtual dataset reads other files: only with --allow-virtual, and then exactly its source's values.
TEST_F(SecurityReaders, VirtualDatasetsNeedTheFlag)
{
    for (const char* name : {"vds_ok.h5", "vds_fifo.h5"})   // a FIFO source is not even opened
        expect_one_error(matrix(f(name) + ":/q", f("vds.npy")), {name, "/q", "virtual", "--allow-virtual"},
                         std::string(name) + " without the flag");
    EXPECT_FALSE(fs::exists(f("vds.npy")));

    const CommandResult direct = matrix(f("src.h5") + ":/data", f("direct.npy"));
    ASSERT_EQ(direct.status, 0) << direct.err;
    for (const char* name : {"vds_ok.h5", "vds_same.h5", "vds_whole.h5"}) {
        const CommandResult r = matrix(f(name) + ":/q", f("vds.npy"), "--allow-virtual");
        ASSERT_EQ(r.status, 0) << name << ": " << r.err;
        EXPECT_EQ(attnscope::test::read_text(f("vds.npy")), attnscope::test::read_text(f("direct.npy"))) << name;
    }
}

// Even with --allow-virtual: a source missing, outside the folder (.., absolute, symlink), itself virtual,
// or a mapping that leaves elements to the fill value is refused, never read as zeros with exit 0.
TEST_F(SecurityReaders, VirtualDatasetsStayInsideTheirFolder)
{
    const std::pair<const char*, const char*> cases[] = {
        {"vds_missing.h5", "missing"},
        {"vds_fifo.h5", "not a regular file"},
        {"vds_partial.h5", "fill value"},
        {"vds_nested.h5", "itself virtual"},
        {"inner/vds_outside.h5", "outside the file's folder"},
        {"inner/vds_absolute.h5", "outside the file's folder"},
        {"inner/vds_link.h5", "outside the file's folder"},
    };
    for (const auto& [name, why] : cases) {
        expect_one_error(matrix(f(name) + ":/q", f("vds_bad.npy"), "--allow-virtual"), {name, "/q", why, "refused"}, name);
        EXPECT_FALSE(fs::exists(f("vds_bad.npy"))) << name;
    }
}

// A file's mixing attribute may name a matrix beside it, never one elsewhere on the machine.
TEST_F(SecurityReaders, MixingAttributeStaysInsideTheFolder)
{
    const auto analyze = [&](const std::string& name) {
        return run("analyze --mechanism mhla --q " + f(name) + ":/q --k " + f(name) + ":/k --json -");
    };
    const CommandResult ok = analyze("inner/mix_ok.h5");
    ASSERT_EQ(ok.status, 0) << ok.err;
    EXPECT_EQ(nlohmann::json::parse(ok.out)["input"]["defaults_from_file"]["mixing"], "mix.npy");
    for (const char* name : {"inner/mix_up.h5", "inner/mix_abs.h5"})
        expect_one_error(analyze(name), {name, "attribute mixing", "outside the file's folder", "choose the mixing matrix"}, name);
}

// HDF5 would dlopen() every lib*.so in HDF5_PLUGIN_PATH looking for a filter the file names.
TEST_F(SecurityReaders, FilterPluginsAreNeverLoaded)
{
    const std::string plugins = f("plugins"), marker = f("plugin_loaded");
    fs::create_directories(plugins);
    fs::copy_file(ATTNSCOPE_TEST_PLUGIN, plugins + "/libhostile_filter.so", fs::copy_options::overwrite_existing);
    const std::string env = "HDF5_PLUGIN_PATH=" + shell_quote(plugins) + " ATTNSCOPE_PLUGIN_MARKER=" + shell_quote(marker) + " ";
    for (const std::string& args : {"info " + f("plugin_filter.h5"),
                                    "matrix --mechanism softmax --q " + f("plugin_filter.h5") + ":/q --k " +
                                        f("plugin_filter.h5") + ":/k --out " + f("plugin.npy")}) {
        const CommandResult r = run(args, env);
        EXPECT_TRUE(r.status == 0 || r.status == 2) << args << ": " << r.err;
        EXPECT_FALSE(fs::exists(marker)) << args << ": a plugin was loaded";
    }
    expect_one_error(run("matrix --mechanism softmax --q " + f("plugin_filter.h5") + ":/q --k " + f("src.h5") +
                         ":/k --out " + f("plugin.npy"), env),
                     {"plugin_filter.h5:/q", "filter", "never loaded"}, "filter only a plugin provides");
}

// A FIFO blocks open() until a writer comes; a device never ends. Neither is ever opened as data, whatever
// its name says, for queries, keys or a mixing matrix.
TEST_F(SecurityReaders, FifosAndDevicesAreNeverOpened)
{
    for (const char* name : {"x.npy", "x.h5", "x.hdf5", "x.npz", "x.safetensors", "zero.npy"}) {
        expect_one_error(run("info " + f(name)), {name, "not a regular file"}, std::string("info ") + name);
        expect_one_error(run("analyze --q " + f(name) + " --k " + f("src.h5") + ":/k"), {name, "not a regular file"},
                         std::string("analyze ") + name);
    }
    expect_one_error(run("info /dev/zero"), {"/dev/zero", "not a regular file"}, "info /dev/zero");
    expect_one_error(run("analyze --q " + f("src.h5") + ":/data --k " + f("src.h5") + ":/k --mixing " + f("x.npy")),
                     {"x.npy", "not a regular file"}, "mixing matrix from a FIFO");
}

// The cache parser keeps "key<TAB>value" lines and drops everything else.
TEST(SecurityKernelCache, ParserIgnoresGarbage)
{
    const std::string long_line = "k" + std::string(5000, 'x') + "\town";
    const std::string binary("\x00\xff\xfe\n", 4);
    const auto lines = attnscope::kernels::parse_gemm_cache("good\town own openblas\n" + long_line +
                                                           "\nno tab here\n\tempty key\nctl\x01key\town\n"
                                                           "empty value\t\n" + binary + "nul\t" + binary + "last\topenblas");
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines.at("good"), "own own openblas");
    EXPECT_EQ(lines.at("last"), "openblas");
    EXPECT_TRUE(attnscope::kernels::parse_gemm_cache(std::string(1 << 20, '\n')).empty());
}

// The cache is read only as a small regular file and never replaced when it is something else: a FIFO hung
// every run, a symlink to /dev/urandom grew to 5.4 GiB. A huge regular file is ignored and rewritten small.
TEST_F(SecurityReaders, KernelCacheThatIsNotASmallRegularFileIsIgnored)
{
    // Products large enough to ask for the kernel choice (dense softmax SVD of N = 384).
    const std::string acts = f("acts.h5");
    ASSERT_EQ(run("synth --n 384 --d 64 --out " + acts).status, 0);
    const std::string args = "analyze --q " + acts + ":/q --k " + acts + ":/k --mechanism softmax --method dense --json -";

    const std::string fifo_dir = f("cache_fifo"), link_dir = f("cache_link"), big_dir = f("cache_big");
    for (const auto& d : {fifo_dir, link_dir, big_dir})
        fs::create_directories(d);
    ASSERT_EQ(::mkfifo((fifo_dir + "/gemm-choice.txt").c_str(), 0600), 0);
    fs::create_symlink("/dev/urandom", link_dir + "/gemm-choice.txt");
    {
        std::ofstream big(big_dir + "/gemm-choice.txt", std::ios::binary);
        const std::string garbage(1 << 16, 'g');
        for (int i = 0; i < 32; ++i)
            big << garbage << '\t' << "own own own\n";
    }
    for (const auto& d : {fifo_dir, link_dir, big_dir}) {
        const CommandResult r = run(args, "ATTNSCOPE_GEMM= ATTNSCOPE_CACHE_DIR=" + shell_quote(d) + " ");
        EXPECT_EQ(r.status, 0) << d << ": " << r.err;
    }
    const fs::file_status fifo = fs::symlink_status(fifo_dir + "/gemm-choice.txt");
    EXPECT_EQ(fifo.type(), fs::file_type::fifo) << "the FIFO was replaced";
    EXPECT_TRUE(fs::is_symlink(link_dir + "/gemm-choice.txt")) << "the symlink was replaced";
    EXPECT_EQ(fs::read_symlink(link_dir + "/gemm-choice.txt"), "/dev/urandom");
    // The huge file was not read (its garbage is gone) and was replaced atomically by a valid cache.
    EXPECT_LT(fs::file_size(big_dir + "/gemm-choice.txt"), 64u * 1024);
    const std::string text = attnscope::test::read_text(big_dir + "/gemm-choice.txt");
    EXPECT_NE(text.find("gemm-choice-v1"), std::string::npos) << text;
    EXPECT_EQ(text.find("ggg"), std::string::npos);
}

// A misspelt override was silently ignored; now it is one error line naming the valid values, before any work.
TEST_F(SecurityReaders, UnknownEnvironmentValuesAreErrors)
{
    const std::string info = "info " + f("src.h5");
    expect_one_error(run(info, "ATTNSCOPE_GEMM=opnblas "), {"ATTNSCOPE_GEMM=opnblas is not one of own, openblas"},
                     "ATTNSCOPE_GEMM typo");
    expect_one_error(run(info, "ATTNSCOPE_SIMD=avx3 "), {"ATTNSCOPE_SIMD=avx3 is not one of generic, avx2, avx512"},
                     "ATTNSCOPE_SIMD typo");
    for (const char* ok : {"ATTNSCOPE_GEMM=own ", "ATTNSCOPE_GEMM=openblas ", "ATTNSCOPE_SIMD=generic ",
                           "ATTNSCOPE_SIMD=avx512 ", "ATTNSCOPE_GEMM= "}) {
        const CommandResult r = run(info, ok);
        EXPECT_EQ(r.status, 0) << ok << r.err;
    }
#if ATTNSCOPE_WITH_FIGURES
    // The desktop app's scripted runs say the same.
    expect_one_error(run(f("src.h5") + " --screenshot " + f("shot.png"), attnscope::test::kNoDisplay + "ATTNSCOPE_GEMM=x "),
                     {"ATTNSCOPE_GEMM=x is not one of own, openblas"}, "--screenshot with a typo");
    EXPECT_FALSE(fs::exists(f("shot.png")));
#endif
}

// The PyTorch bridge recorded key_padding_mask = true but kept the padded tokens: analyze counted them as real.
TEST_F(SecurityReaders, RecordingWithPaddedKeysIsRefused)
{
    expect_one_error(run("analyze --q " + f("padding_old.h5") + ":/layers/0/q --k " + f("padding_old.h5") + ":/layers/0/k"),
                     {"padding_old.h5", "key_padding_mask", "padded_tokens"}, "key_padding_mask without padded_tokens");
    const CommandResult ok = run("analyze --q " + f("padding_none.h5") + ":/layers/0/q --k " + f("padding_none.h5") +
                                 ":/layers/0/k");
    EXPECT_EQ(ok.status, 0) << ok.err;
}

// The bridge drops the padded tokens of nn.MultiheadAttention's key_padding_mask (like SDPA's padding masks)
// and attnscope's matrix equals PyTorch's weights on the real tokens (skipped without torch).
TEST(SecurityBridge, KeyPaddingMaskDropsThePaddedTokens)
{
    const auto probe = attnscope::test::run_command(std::string("'") + ATTNSCOPE_TEST_PYTHON + "' -c 'import torch'");
    if (probe.status != 0)
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << probe.err;
    attnscope::test::expect_script_passes("app/check_padding_mask.py", "security_padding");
}
