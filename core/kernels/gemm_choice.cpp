// Which matrix product runs each shape class: OpenBLAS or our kernels, chosen by measurement (kernels.h).
#include "kernels/kernels.h"

#include <algorithm>
#include <atomic>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/atomic_file.h"
#include "util/fd_io.h"

extern "C" char* openblas_get_corename(void);

namespace attnscope::kernels {

namespace {

constexpr const char* k_cache_version = "gemm-choice-v1";

// The cache holds a few lines per machine configuration: anything larger is not ours (docs/security.md
// "Environment and caches").
constexpr std::size_t k_max_cache_bytes = 64 * 1024;
constexpr std::size_t k_max_cache_line = 1024;

// Unknown values are refused by check_environment() before any work; here they leave the choice automatic.
GemmPath path_from_env()
{
    if (const char* env = std::getenv("ATTNSCOPE_GEMM")) {
        const std::string v = env;
        if (v == "own")
            return GemmPath::own;
        if (v == "openblas")
            return GemmPath::openblas;
    }
    return GemmPath::automatic;
}

std::atomic<GemmPath>& pinned()
{
    static std::atomic<GemmPath> path{path_from_env()};
    return path;
}

std::string read_cpu_model()
{
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            std::string v = colon == std::string::npos ? line : line.substr(colon + 1);
            v.erase(0, v.find_first_not_of(' '));
            return v;
        }
    return "unknown CPU";
}

const std::string& cpu_model()   // read once: every cache lookup names it
{
    static const std::string model = read_cpu_model();
    return model;
}

std::string cache_key(Isa isa, int threads)
{
    std::string key = std::string(k_cache_version) + "|" + cpu_model() + "|" + std::string(to_string(isa)) + "|" +
                      openblas_core() + "|threads=" + std::to_string(threads);
    std::replace(key.begin(), key.end(), '\t', ' ');
    return key;
}

double seconds_since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One run of one product on the given path, in seconds.
double time_product(GemmPath path, char ta, char tb, Index m, Index n, Index k, const double* A, Index lda,
                    const double* B, Index ldb, double* C, Index ldc)
{
    const auto t0 = std::chrono::steady_clock::now();
    gemm_on(path, ta, tb, m, n, k, 1.0, A, lda, B, ldb, 0.5, C, ldc);
    return seconds_since(t0);
}

// Representative products of each class, at sizes where either path is well past its start-up costs
// (~0.4 s for the whole calibration on two cores): general 1024^3; rank-k the stage-1 updates C - V W
// (2048 x 2048, k = 32, both operand layouts); thin output the stage-1 panels V^T C and C V (32 x 2048 and
// 2048 x 32, inner 2048).
GemmChoice measure(Isa isa)
{
    GemmChoice choice;
    choice.source = "measured";
    if (isa == Isa::generic)
        return choice;   // nothing of our own to set against OpenBLAS
    constexpr Index big = 2048, w = 32, sq = 1024;
    std::vector<double> a(static_cast<std::size_t>(big * big)), b(static_cast<std::size_t>(big * big)),
        c(static_cast<std::size_t>(big * big));
    for (std::size_t i = 0; i < a.size(); ++i) {   // any well-scaled values
        a[i] = static_cast<double>((i * 2654435761u) % 1000) / 1000.0 - 0.5;
        b[i] = static_cast<double>((i * 40503u) % 997) / 997.0 - 0.5;
    }
    auto time_class = [&](GemmPath p, int cls) {
        switch (cls) {
        case 0: return time_product(p, 'N', 'N', sq, sq, sq, a.data(), sq, b.data(), sq, c.data(), sq);
        case 1:
            return time_product(p, 'N', 'N', big, big, w, a.data(), big, b.data(), w, c.data(), big) +
                   time_product(p, 'N', 'T', big, big, w, a.data(), big, b.data(), big, c.data(), big);
        default:
            return time_product(p, 'T', 'N', w, big, big, a.data(), big, b.data(), big, c.data(), w) +
                   time_product(p, 'N', 'N', big, w, big, a.data(), big, b.data(), big, c.data(), big);
        }
    };
    // Best of five runs after a warm-up, our kernels first: OpenBLAS's idle workers spin on sched_yield for
    // ~0.1 s after each threaded call (its THREAD_TIMEOUT), and would take a core from any timing that came
    // after one. For the same reason a pause first, in case OpenBLAS ran just before the calibration.
    auto best_of = [&](GemmPath p, int cls) {
        double best = 1e300;
        for (int run = 0; run < 6; ++run) {
            const double t = time_class(p, cls);
            if (run > 0)
                best = std::min(best, t);
        }
        return best;
    };
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    for (int cls = 0; cls < 3; ++cls)
        choice.seconds_own[static_cast<std::size_t>(cls)] = best_of(GemmPath::own, cls);
    for (int cls = 0; cls < 3; ++cls)
        choice.seconds_openblas[static_cast<std::size_t>(cls)] = best_of(GemmPath::openblas, cls);
    for (std::size_t cls = 0; cls < 3; ++cls)
        choice.own[cls] = choice.seconds_own[cls] <= choice.seconds_openblas[cls];
    return choice;
}

std::filesystem::path cache_file()
{
    namespace fs = std::filesystem;
    if (const char* dir = std::getenv("ATTNSCOPE_CACHE_DIR"); dir && *dir)
        return fs::path(dir) / "gemm-choice.txt";
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
        return fs::path(xdg) / "attnscope" / "gemm-choice.txt";
    if (const char* home = std::getenv("HOME"); home && *home)
        return fs::path(home) / ".cache" / "attnscope" / "gemm-choice.txt";
    return {};
}

// The cache file's bytes, or "" when it is anything but a regular file of at most k_max_cache_bytes: a
// symlink (it could lead anywhere, /dev/urandom say), a FIFO (reading would wait for a writer forever), a
// device or a huge file. O_NONBLOCK and O_NOFOLLOW make the open itself safe; fstat then decides.
std::string read_cache_text(const std::filesystem::path& file)
{
    struct stat link {};
    if (::lstat(file.c_str(), &link) != 0 || !S_ISREG(link.st_mode))
        return {};   // not even opened: opening some devices has effects of its own
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
    if (fd < 0)
        return {};
    std::string text;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) <= k_max_cache_bytes) {
        text.resize(static_cast<std::size_t>(st.st_size));
        text.resize(read_up_to(fd, text.data(), text.size()));
    }
    ::close(fd);
    return text;
}

std::map<std::string, std::string> read_cache(const std::filesystem::path& file)
{
    return parse_gemm_cache(read_cache_text(file));
}

bool parse_choice(const std::string& text, GemmChoice& choice)
{
    std::istringstream in(text);
    for (bool& own : choice.own) {
        std::string word;
        if (!(in >> word) || (word != "own" && word != "openblas"))
            return false;
        own = word == "own";
    }
    return true;
}

// Replaces the file in one step (concurrent processes: the last wins, and each one's lines are valid
// measurements). An unwritable cache only costs a measurement next time.
void store_cache(const std::filesystem::path& file, const std::map<std::string, std::string>& lines)
{
    std::string text;
    for (const auto& [k, v] : lines)
        text += k + "\t" + v + "\n";
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    // Only a regular file (or none) is replaced: never a symlink, FIFO or device someone put in its place.
    struct stat st {};
    if (::lstat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        return;
    try {
        write_file_atomically(file.string(), text);
    } catch (const std::exception&) {
    }
}

std::string format_choice(const GemmChoice& choice)
{
    std::string s;
    for (bool own : choice.own)
        s += std::string(s.empty() ? "" : " ") + (own ? "own" : "openblas");
    return s;
}

}  // namespace

std::map<std::string, std::string> parse_gemm_cache(std::string_view text)
{
    std::map<std::string, std::string> lines;
    auto usable = [](std::string_view s) {
        return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
            return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
        });
    };
    while (!text.empty()) {
        const auto end = text.find('\n');
        const std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        const auto tab = line.find('\t');
        if (line.size() > k_max_cache_line || tab == std::string_view::npos)
            continue;
        const std::string_view key = line.substr(0, tab), value = line.substr(tab + 1);
        if (usable(key) && usable(value))
            lines[std::string(key)] = std::string(value);
    }
    return lines;
}

void check_environment()
{
    auto check = [](const char* name, std::initializer_list<const char*> valid) {
        const char* env = std::getenv(name);
        if (!env || !*env)
            return;
        std::string list;
        for (const char* v : valid) {
            if (std::string_view(env) == v)
                return;
            list += std::string(list.empty() ? "" : ", ") + v;
        }
        std::string shown(env);
        if (shown.size() > 64)
            shown = shown.substr(0, 64) + "...";
        for (char& c : shown)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
                c = '?';
        throw std::invalid_argument(std::string(name) + "=" + shown + " is not one of " + list);
    };
    check("ATTNSCOPE_GEMM", {"own", "openblas"});
    check("ATTNSCOPE_SIMD", {"generic", "avx2", "avx512"});
}

std::string openblas_core()
{
    const char* core = openblas_get_corename();
    return core ? std::string(core) : std::string("unknown");
}

void set_gemm_path(GemmPath path) { pinned().store(path); }

GemmPath gemm_path() { return pinned().load(); }

GemmChoice calibrate_gemm(bool use_cache)
{
    const Isa isa = active_isa();
    const int count = threads();
    const auto file = use_cache ? cache_file() : std::filesystem::path{};
    const std::string key = cache_key(isa, count);
    if (!file.empty()) {
        const auto lines = read_cache(file);
        GemmChoice cached;
        cached.source = "cached";
        if (const auto it = lines.find(key); it != lines.end() && parse_choice(it->second, cached))
            return cached;
    }
    GemmChoice choice = measure(isa);
    if (!file.empty() && isa != Isa::generic) {
        auto lines = read_cache(file);
        lines[key] = format_choice(choice);
        store_cache(file, lines);
    }
    return choice;
}

namespace {
std::mutex& choice_mutex()
{
    static std::mutex mutex;
    return mutex;
}
std::map<std::pair<Isa, int>, GemmChoice>& known_choices()
{
    static std::map<std::pair<Isa, int>, GemmChoice> known;
    return known;
}
}  // namespace

std::optional<GemmChoice> gemm_choice_made()
{
    if (gemm_path() != GemmPath::automatic || active_isa() == Isa::generic)
        return gemm_choice();
    const std::lock_guard lock(choice_mutex());
    const auto it = known_choices().find(std::make_pair(active_isa(), threads()));
    return it == known_choices().end() ? std::nullopt : std::optional<GemmChoice>(it->second);
}

namespace {
std::map<std::string, GemmPath>& made_paths()   // by cache key
{
    static std::map<std::string, GemmPath> made;
    return made;
}
std::map<std::string, GemmPath>& reported_paths()   // by operation
{
    static std::map<std::string, GemmPath> reported;
    return reported;
}
}  // namespace

std::map<std::string, GemmPath> measured_paths_made()
{
    const std::lock_guard lock(choice_mutex());
    return reported_paths();
}

GemmPath measured_path(const std::string& operation, const std::function<double(GemmPath)>& time_it)
{
    if (active_isa() == Isa::generic)
        return GemmPath::openblas;
    if (gemm_path() != GemmPath::automatic)
        return gemm_path();
    const std::string key = cache_key(active_isa(), threads()) + "|" + operation;
    {
        const std::lock_guard lock(choice_mutex());
        if (const auto it = made_paths().find(key); it != made_paths().end())
            return it->second;
    }
    const auto file = cache_file();
    if (!file.empty()) {
        const auto lines = read_cache(file);
        if (const auto it = lines.find(key); it != lines.end() && (it->second == "own" || it->second == "openblas")) {
            const GemmPath path = it->second == "own" ? GemmPath::own : GemmPath::openblas;
            const std::lock_guard lock(choice_mutex());
            reported_paths()[operation] = path;
            return made_paths()[key] = path;
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(150));   // see measure()
    double own = 1e300, blas = 1e300;
    for (int run = 0; run < 2; ++run)
        own = std::min(own, time_it(GemmPath::own));
    for (int run = 0; run < 2; ++run)
        blas = std::min(blas, time_it(GemmPath::openblas));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));   // nor on the caller's work that follows
    const GemmPath path = own <= blas ? GemmPath::own : GemmPath::openblas;
    if (!file.empty()) {
        auto lines = read_cache(file);
        lines[key] = path == GemmPath::own ? "own" : "openblas";
        store_cache(file, lines);
    }
    const std::lock_guard lock(choice_mutex());
    reported_paths()[operation] = path;
    return made_paths()[key] = path;
}

GemmChoice gemm_choice()
{
    const GemmPath path = gemm_path();
    GemmChoice fixed;
    if (path != GemmPath::automatic || active_isa() == Isa::generic) {
        const bool own = path == GemmPath::own && active_isa() != Isa::generic;
        fixed.own = {own, own, own};
        fixed.source = active_isa() == Isa::generic ? "generic build: OpenBLAS"
                                                   : (own ? "ATTNSCOPE_GEMM=own" : "ATTNSCOPE_GEMM=openblas");
        return fixed;
    }
    // One calibration per (instruction set, thread count) in this process; the cache file spans processes.
    const std::lock_guard lock(choice_mutex());
    auto& known = known_choices();
    const auto key = std::make_pair(active_isa(), threads());
    if (const auto it = known.find(key); it != known.end())
        return it->second;
    return known[key] = calibrate_gemm(true);
}

}  // namespace attnscope::kernels
