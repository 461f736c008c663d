#include "io_fixtures.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "support/test_support.h"

namespace attnscope::test::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kScript = "core/io/make_io_fixtures.py";
constexpr const char* kFolder = "io_fixtures";

std::string generate()
{
    const fs::path work(ATTNSCOPE_TEST_WORK_DIR);
    fs::create_directories(work);
    const std::string lock_path = (work / "io_fixtures.lock").string();
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0)
        throw std::runtime_error("cannot lock " + lock_path);
    struct Unlock {
        int fd;
        ~Unlock()
        {
            ::flock(fd, LOCK_UN);
            ::close(fd);
        }
    } unlock{fd};

    // The stamp is the script's text: an edited script regenerates everything.
    const std::string script = read_text(tests_path(kScript));
    const fs::path dir = work / kFolder;
    const fs::path stamp = dir / "STAMP";
    if (fs::exists(stamp) && read_text(stamp.string()) == script)
        return dir.string();
    // Shared by every test process (under the lock), so not a per-process fresh_work_dir().
    fs::remove_all(dir);
    fs::create_directories(dir);
    run_python(kScript, {dir.string()});
    std::ofstream(stamp, std::ios::binary) << script;
    return dir.string();
}

}  // namespace

const std::string& fixtures_dir()
{
    static const std::string dir = generate();
    return dir;
}

std::string fixture(const std::string& relative) { return fixtures_dir() + "/" + relative; }

const nlohmann::json& manifest()
{
    static const nlohmann::json m = [] {
        std::ifstream in(fixture("manifest.json"));
        return nlohmann::json::parse(in);
    }();
    return m;
}

std::vector<double> read_f8(const std::string& relative)
{
    const std::string bytes = read_text(fixture(relative));
    std::vector<double> v(bytes.size() / 8);
    if (!v.empty())
        std::memcpy(v.data(), bytes.data(), v.size() * 8);   // little-endian host (x86-64, aarch64)
    return v;
}

bool same_value(double a, double b)
{
    if (std::isnan(a) || std::isnan(b))
        return std::isnan(a) && std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
}

std::ptrdiff_t first_difference(const std::vector<double>& a, const std::vector<double>& b)
{
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (!same_value(a[i], b[i]))
            return static_cast<std::ptrdiff_t>(i);
    return a.size() == b.size() ? -1 : static_cast<std::ptrdiff_t>(std::min(a.size(), b.size()));
}

}  // namespace attnscope::test::io
