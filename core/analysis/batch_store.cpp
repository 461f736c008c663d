#include "analysis/batch_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "attention/options.h"
#include "util/atomic_file.h"
#include "util/json_text.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::string file_sha256(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw InputError(path + ": cannot read");
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
        EVP_MD_CTX_free(ctx);
        throw std::runtime_error("SHA-256 unavailable");
    }
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        EVP_DigestUpdate(ctx, buf.data(), static_cast<std::size_t>(in.gcount()));
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, digest, &len);
    EVP_MD_CTX_free(ctx);
    std::string hex;
    for (unsigned int i = 0; i < len; ++i)
        hex += fmt::format("{:02x}", digest[i]);
    return hex;
}

std::string settings_hash(const nlohmann::ordered_json& settings)
{
    const std::string text = json_text(settings);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
    std::string hex;
    for (unsigned int i = 0; i < 8; ++i)
        hex += fmt::format("{:02x}", digest[i]);
    return hex;
}

namespace {

// ------------------------------------------------------------------------------------------ reading safely

// An open file descriptor, closed on scope exit.
struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    ~Fd()
    {
        if (fd >= 0)
            ::close(fd);
    }
    Fd(Fd&& o) noexcept : fd(o.release()) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd& operator=(Fd&&) = delete;
    int release()
    {
        const int f = fd;
        fd = -1;
        return f;
    }
};

std::string why(int err) { return std::strerror(err); }

// Opens `name` inside the folder `dirfd` for reading without following a symbolic link (O_NOFOLLOW) and
// without blocking on a FIFO (O_NONBLOCK); it must be a regular file. -1 when it does not exist; throws
// InputError naming `shown` otherwise.
int open_regular_at(int dirfd, const std::string& name, const std::string& shown)
{
    const int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT)
            return -1;
        if (err == ELOOP)
            throw InputError(shown + ": is a symbolic link; a shard folder's files must be its own (links are never followed)");
        throw InputError(shown + ": cannot read (" + why(err) + ")");
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw InputError(shown + ": is not a regular file");
    }
    return fd;
}

std::string read_all(int fd, const std::string& shown)
{
    std::string text;
    char buf[1 << 16];
    off_t at = 0;
    while (true) {
        const ssize_t n = ::pread(fd, buf, sizeof buf, at);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw InputError(shown + ": cannot read (" + why(errno) + ")");
        }
        if (n == 0)
            return text;
        text.append(buf, static_cast<std::size_t>(n));
        at += n;
    }
}

// ------------------------------------------------------------------------------------------ records

const json& field(const json& obj, const char* key)
{
    static const json null;
    if (!obj.is_object())
        return null;
    const auto it = obj.find(key);
    return it == obj.end() ? null : *it;
}

std::string string_field(const json& obj, const char* key)
{
    const json& v = field(obj, key);
    return v.is_string() ? v.get<std::string>() : std::string();
}

// A non-negative integer (parsed as 64 bits: 4294967297 stays 4294967297), or nullopt.
std::optional<std::uint64_t> count_of(const json& v)
{
    if (v.is_number_unsigned())
        return v.get<std::uint64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
        return static_cast<std::uint64_t>(v.get<std::int64_t>());
    return std::nullopt;
}

constexpr std::uint64_t kNoUnit = std::numeric_limits<std::uint64_t>::max();

// Records and shard descriptions nest a few levels; copying, comparing and writing a JSON value recurse
// once per level, so a hostile line nested a million deep would overflow the stack. Counted before parsing.
constexpr int kMaxJsonDepth = 64;

bool nested_too_deeply(std::string_view text)
{
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

// The complete lines of a results.jsonl text: each must be a JSON object with a string "key". A last line
// without its newline is a torn write (a kill mid-append): it is left out and `good` ends before it.
struct RecordLines {
    std::vector<std::pair<std::size_t, json>> records;   // (line number, record)
    std::size_t good = 0;                                 // bytes of complete lines
};

RecordLines parse_record_lines(std::string_view text, const std::string& where)
{
    RecordLines out;
    std::size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        const std::size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos)
            break;   // torn tail
        ++line_no;
        const std::string_view line = text.substr(pos, nl - pos);
        if (nested_too_deeply(line))
            throw InputError(where + ": line " + std::to_string(line_no) + " is nested more than " +
                             std::to_string(kMaxJsonDepth) + " levels deep (not a batch record)");
        json rec = json::parse(line.begin(), line.end(), nullptr, false);
        if (rec.is_discarded())
            throw InputError(where + ": line " + std::to_string(line_no) + " is not a JSON record");
        if (!field(rec, "key").is_string())
            throw InputError(where + ": line " + std::to_string(line_no) + " is not a batch record (no \"key\")");
        out.records.emplace_back(line_no, std::move(rec));
        pos = nl + 1;
        out.good = pos;
    }
    return out;
}

std::string num(const json& v)
{
    if (!v.is_number())
        return "";
    if (v.is_number_unsigned())
        return std::to_string(v.get<std::uint64_t>());
    if (v.is_number_integer())
        return std::to_string(v.get<long long>());
    return fmt::format("{:.17g}", v.get<double>());
}

// A CSV field: quoted (RFC 4180) when it holds a comma, a quote or a line break (a file name may).
std::string csv_field(const std::string& s)
{
    if (s.find_first_of(",\"\r\n") == std::string::npos)
        return s;
    std::string q = "\"";
    for (const char c : s) {
        if (c == '"')
            q += '"';
        q += c;
    }
    return q + "\"";
}

std::string summary_csv(const std::vector<json>& records)
{
    std::ostringstream out;
    out << "unit,file,layer,head,mechanism,n,d,rank,rank_tol,relative_rank,effective_rank,stable_rank,entropy_mean,"
           "entropy_std,entropy_normalized_mean,seconds\n";
    for (const json& r : records) {
        const json& input = field(r, "input");
        const json& e = field(r, "entropy");
        auto ent = [&](const char* key) { return num(field(e, key)); };
        const json& seconds = field(r, "seconds");
        out << num(field(r, "unit")) << ',' << csv_field(string_field(input, "file")) << ',' << num(field(r, "layer")) << ','
            << num(field(r, "head")) << ',' << csv_field(string_field(r, "mechanism")) << ',' << num(field(input, "n")) << ','
            << num(field(input, "d")) << ',' << num(field(r, "rank")) << ',' << num(field(r, "rank_tol")) << ','
            << num(field(r, "relative_rank")) << ',' << num(field(r, "effective_rank")) << ','
            << num(field(r, "stable_rank")) << ',' << ent("mean") << ',' << ent("std") << ',' << ent("normalized_mean")
            << ',' << fmt::format("{:.6f}", seconds.is_number() ? seconds.get<double>() : 0.0) << '\n';
    }
    return out.str();
}

// Records sorted by (unit, mechanism order), then key.
std::vector<json> ordered(const std::map<std::string, json>& records)
{
    std::vector<std::pair<std::tuple<std::uint64_t, std::uint64_t, std::string>, const json*>> list;
    for (const auto& [key, r] : records)
        list.push_back({{count_of(field(r, "unit")).value_or(kNoUnit), count_of(field(r, "mechanism_index")).value_or(kNoUnit), key},
                        &r});
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<json> out;
    out.reserve(list.size());
    for (const auto& [k, r] : list)
        out.push_back(*r);
    return out;
}

std::string results_text(const std::vector<json>& list)
{
    std::string lines;
    for (const json& r : list)
        lines += json_text(r) + "\n";
    return lines;
}

// results.jsonl and summary.csv (results.partial.jsonl and summary.partial.csv for a partial merge, so that
// nothing reading the usual names takes an incomplete set for a complete one).
void write_final(const std::string& dir, const std::map<std::string, json>& records)
{
    const auto list = ordered(records);
    write_file_atomically((fs::path(dir) / "results.jsonl").string(), results_text(list));
    write_file_atomically((fs::path(dir) / "summary.csv").string(), summary_csv(list));
}

// Appends one line to the open results file and makes it durable before returning. On failure the file
// is cut back to where it ended, so that no torn record is left between complete ones.
void append_durably(int fd, const std::string& line, const std::string& path)
{
    const off_t end = ::lseek(fd, 0, SEEK_END);
    auto fail = [&](const char* what) {
        const int err = errno;
        if (end >= 0 && ::ftruncate(fd, end) == 0)
            ::fsync(fd);
        throw AppendFailure(path + ": cannot " + what + " (" + std::strerror(err) + ")");
    };
    std::size_t off = 0;
    while (off < line.size()) {
        const ssize_t w = ::write(fd, line.data() + off, line.size() - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            fail("append");
        }
        if (w == 0) {
            errno = EIO;
            fail("append");
        }
        off += static_cast<std::size_t>(w);
    }
    if (::fsync(fd) != 0)
        fail("sync");
}

}  // namespace

// ------------------------------------------------------------------------------------------ ResultStore

ResultStore::ResultStore(const std::string& dir, const std::string& settings)
    : m_dir(dir), m_path((fs::path(dir) / "results.jsonl").string())
{
    // Opened once, without following a link (a results.jsonl that links elsewhere would be appended to
    // there), read through the same descriptor, its torn tail cut with ftruncate.
    Fd fd(::open(m_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
    if (fd.fd < 0) {
        const int err = errno;
        if (err == ELOOP)
            throw InputError(m_path + ": is a symbolic link; a batch folder's files must be its own (use another --out folder)");
        throw InputError(m_path + ": cannot open for appending (" + why(err) + ")");
    }
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode))
        throw InputError(m_path + ": is not a regular file (use another --out folder)");
    const std::string text = read_all(fd.fd, m_path);
    RecordLines lines = parse_record_lines(text, m_path);
    for (auto& [line_no, rec] : lines.records) {
        if (!settings.empty() && string_field(rec, "settings") != settings)
            throw InputError(m_path + ": holds results of a job with other settings (line " + std::to_string(line_no) +
                             "); use another --out folder");
        std::string key = rec["key"].get<std::string>();
        m_records[std::move(key)] = std::move(rec);
    }
    if (lines.good < text.size() && ::ftruncate(fd.fd, static_cast<off_t>(lines.good)) != 0)
        throw InputError(m_path + ": cannot cut the torn last line (" + why(errno) + ")");
    m_fd = fd.release();
}

ResultStore::~ResultStore()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

void ResultStore::open_for_append()
{
    if (m_fd >= 0)
        ::close(m_fd);
    m_fd = ::open(m_path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (m_fd < 0)
        throw InputError(m_path + ": cannot open for appending (" + why(errno) + ")");
}

bool ResultStore::has(const std::string& key) const
{
    std::lock_guard lock(m_mutex);
    return m_records.count(key) != 0;
}

std::size_t ResultStore::size() const
{
    std::lock_guard lock(m_mutex);
    return m_records.size();
}

std::map<std::string, json> ResultStore::records() const
{
    std::lock_guard lock(m_mutex);
    return m_records;
}

void ResultStore::replace(std::map<std::string, json> records)
{
    std::lock_guard lock(m_mutex);
    write_file_atomically(m_path, results_text(ordered(records)));
    m_records = std::move(records);
    open_for_append();   // the old descriptor still points at the replaced file
}

void ResultStore::append(const json& record)
{
    std::lock_guard lock(m_mutex);
    append_durably(m_fd, json_text(record) + "\n", m_path);
    m_records[record["key"].get<std::string>()] = record;
}

void ResultStore::write_final() const
{
    std::lock_guard lock(m_mutex);
    analysis::write_final(m_dir, m_records);
}

void write_failures(const std::string& dir, std::vector<std::string>& failures)
{
    const std::string path = (fs::path(dir) / "failures.txt").string();
    std::error_code ec;
    if (failures.empty()) {
        fs::remove(path, ec);
        return;
    }
    std::string text;
    for (const auto& f : failures)
        text += f + "\n";
    try {
        write_file_atomically(path, text);
    } catch (const InputError& e) {
        // The failures are still reported (the caller prints them); a stale list must not stay.
        fs::remove(path, ec);
        failures.push_back(e.what());
    }
}

// ------------------------------------------------------------------------------------------ shard.json

namespace {

std::string shortened(const std::string& s, std::size_t max = 60)
{
    return s.size() <= max ? s : s.substr(0, max) + "...";
}

json shard_json(const ShardInfo& info)
{
    json j;
    j["attnscope_version"] = ATTNSCOPE_VERSION;
    j["settings"] = info.settings;
    j["shard"] = info.shard;
    j["shards"] = info.shards;
    j["units_total"] = info.units_total;
    j["units"] = info.units;
    j["mechanisms"] = info.mechanisms;
    if (!info.plan.empty())
        j["plan"] = info.plan;
    if (!info.settings_detail.is_null())
        j["job_settings"] = info.settings_detail;
    return j;
}

std::uint64_t count_field(const json& j, const char* key, const std::string& where)
{
    const auto v = count_of(field(j, key));
    if (!v)
        throw InputError(where + ": \"" + key + "\" must be a non-negative integer");
    return *v;
}

// Units of shard `shard` of `shards` in a job of `total` units: those with unit % shards == shard.
std::uint64_t shard_unit_count(std::uint64_t shard, std::uint64_t shards, std::uint64_t total)
{
    return total > shard ? (total - 1 - shard) / shards + 1 : 0;
}

}  // namespace

std::string settings_difference(const json& a, const json& b)
{
    if (!a.is_object() || !b.is_object())
        return "";
    for (const auto& [key, value] : a.items()) {
        const auto it = b.find(key);
        if (it == b.end())
            return key + ": " + shortened(json_text(value)) + " vs not set";
        if (*it != value)
            return key + ": " + shortened(json_text(value)) + " vs " + shortened(json_text(*it));
    }
    for (const auto& [key, value] : b.items())
        if (!a.contains(key))
            return key + ": not set vs " + shortened(json_text(value));
    return "";
}

ShardInfo parse_shard_info(std::string_view text, const std::string& where)
{
    if (nested_too_deeply(text))
        throw InputError(where + ": not a valid shard description (nested more than " + std::to_string(kMaxJsonDepth) +
                         " levels deep)");
    const json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw InputError(where + ": not a valid shard description (not a JSON object)");
    ShardInfo s;
    const json& settings = field(j, "settings");
    s.settings = settings.is_string() ? settings.get<std::string>() : std::string();
    if (s.settings.empty() || s.settings.size() > 64 ||
        s.settings.find_first_not_of("0123456789abcdef") != std::string::npos)
        throw InputError(where + ": \"settings\" must be the job's settings hash (hex digits)");
    s.settings_detail = field(j, "job_settings");
    if (!s.settings_detail.is_null() && (!s.settings_detail.is_object() || settings_hash(s.settings_detail) != s.settings))
        throw InputError(where + ": \"job_settings\" do not match the settings hash " + s.settings +
                         " (the shard description was edited)");
    const json& plan = field(j, "plan");
    if (!plan.is_null()) {
        s.plan = plan.is_string() ? plan.get<std::string>() : std::string();
        if (s.plan.empty() || s.plan.size() > 64 || s.plan.find_first_not_of("0123456789abcdef") != std::string::npos)
            throw InputError(where + ": \"plan\" must be the hash of the job's units (hex digits)");
    }
    s.shards = count_field(j, "shards", where);
    s.shard = count_field(j, "shard", where);
    s.units_total = count_field(j, "units_total", where);
    if (s.shards < 1 || s.shards > kMaxShards)
        throw InputError(where + ": \"shards\": " + std::to_string(s.shards) + " is not between 1 and " +
                         std::to_string(kMaxShards));
    if (s.shard >= s.shards)
        throw InputError(where + ": \"shard\": " + std::to_string(s.shard) + " is not below \"shards\": " +
                         std::to_string(s.shards));
    // The units are implied by the shard and the job's size: the list must be exactly them (checked against
    // the list's own length, so a huge units_total allocates nothing).
    const json& units = field(j, "units");
    const std::uint64_t want = shard_unit_count(s.shard, s.shards, s.units_total);
    if (!units.is_array() || units.size() != want)
        throw InputError(where + ": \"units\" must list the " + std::to_string(want) + " units of shard " +
                         std::to_string(s.shard) + "/" + std::to_string(s.shards) + " of " +
                         std::to_string(s.units_total) + " (those with unit % shards == shard)");
    s.units.reserve(units.size());
    for (std::size_t i = 0; i < units.size(); ++i) {
        const auto u = count_of(units[i]);
        if (!u || *u != s.shard + i * s.shards)
            throw InputError(where + ": \"units\" must list the units of shard " + std::to_string(s.shard) + "/" +
                             std::to_string(s.shards) + " in order (item " + std::to_string(i) + " is " +
                             shortened(json_text(units[i])) + ")");
        s.units.push_back(*u);
    }
    const json& mechs = field(j, "mechanisms");
    if (!mechs.is_array() || mechs.empty())
        throw InputError(where + ": \"mechanisms\" must list the job's mechanisms (at least one)");
    for (const json& m : mechs) {
        if (!m.is_string())
            throw InputError(where + ": \"mechanisms\" must hold mechanism names");
        const std::string name = m.get<std::string>();
        try {
            (void)attention::parse_mechanism(name);
        } catch (const std::invalid_argument&) {
            throw InputError(where + ": \"mechanisms\": '" + display_path(name) + "' is not a mechanism");
        }
        if (std::find(s.mechanisms.begin(), s.mechanisms.end(), name) != s.mechanisms.end())
            throw InputError(where + ": \"mechanisms\": '" + name + "' is listed twice");
        s.mechanisms.push_back(name);
    }
    return s;
}

void write_shard_info(const std::string& dir, const ShardInfo& info)
{
    const std::string path = (fs::path(dir) / "shard.json").string();
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd.fd < 0)
        throw InputError(dir + ": cannot open the output folder (" + why(errno) + ")");
    Fd fd(open_regular_at(dfd.fd, "shard.json", path));
    if (fd.fd >= 0) {
        const ShardInfo old = parse_shard_info(read_all(fd.fd, path), path);
        if (old.settings != info.settings) {
            const std::string diff = settings_difference(old.settings_detail, info.settings_detail);
            throw InputError(dir + ": holds shard " + std::to_string(old.shard) + "/" + std::to_string(old.shards) +
                             " of a job with other settings (" + (diff.empty() ? "settings " + old.settings : diff) +
                             "); use another --out folder");
        }
        if (old.shard != info.shard || old.shards != info.shards)
            throw InputError(dir + ": holds shard " + std::to_string(old.shard) + "/" + std::to_string(old.shards) +
                             " of this job, not " + std::to_string(info.shard) + "/" + std::to_string(info.shards) +
                             "; use another --out folder");
        if (old.units_total == info.units_total && old.units == info.units && old.mechanisms == info.mechanisms &&
            old.settings_detail == info.settings_detail && old.plan == info.plan)
            return;
        // The same shard of a job whose inputs changed: described anew (run_batch drops the records of units
        // no longer in it).
    }
    write_file_atomically(path, json_text(shard_json(info), 2) + "\n");
}

// ------------------------------------------------------------------------------------------ merge

namespace {

// A record's own description of its unit (file, layer, head), as its key spells it.
std::string unit_identity(const json& rec)
{
    const auto index = [](const json& v) -> std::string {
        if (v.is_null())
            return "-";
        if (v.is_number_integer())
            return num(v);
        return "?";
    };
    return string_field(field(rec, "input"), "file") + "|l=" + index(field(rec, "layer")) + "|h=" + index(field(rec, "head"));
}

std::string list_text(const json& list, std::size_t max = 20)
{
    if (list.size() <= max)
        return json_text(list);
    std::string s = "[";
    for (std::size_t i = 0; i < max; ++i)
        s += json_text(list[i]) + ",";
    return s + "... " + std::to_string(list.size() - max) + " more]";
}

}  // namespace

MergedSet merge_shard_texts(const std::vector<ShardText>& shards, bool partial)
{
    if (shards.empty())
        throw std::invalid_argument("merge: name the shard folders");
    std::vector<ShardInfo> infos;
    for (const ShardText& s : shards)
        infos.push_back(parse_shard_info(s.shard_json, s.dir + "/shard.json"));

    // One job's shards: the same settings, sharding, plan size and mechanisms; each shard once.
    const ShardInfo& first = infos.front();
    const std::string& first_dir = shards.front().dir;
    std::set<std::uint64_t> seen;
    for (std::size_t i = 0; i < infos.size(); ++i) {
        const ShardInfo& s = infos[i];
        if (s.settings != first.settings) {
            const std::string diff = settings_difference(first.settings_detail, s.settings_detail);
            throw InputError(shards[i].dir + ": results come from a job with other settings than " + first_dir +
                             (diff.empty() ? std::string() : " (" + diff + ")"));
        }
        if (s.mechanisms != first.mechanisms)
            throw InputError(shards[i].dir + ": its shard.json lists the mechanisms " + json_text(json(s.mechanisms)) + ", " +
                             first_dir + "'s " + json_text(json(first.mechanisms)));
        if (!s.plan.empty() && !first.plan.empty() && s.plan != first.plan)
            throw InputError(shards[i].dir + ": is a shard of a job with other inputs than " + first_dir +
                             " (the same settings, but other files, layers or heads)");
        if (s.shards != first.shards || s.units_total != first.units_total)
            throw InputError(shards[i].dir + ": shard " + std::to_string(s.shard) + "/" + std::to_string(s.shards) +
                             " does not belong to the same sharding as " + first_dir + " (shard " +
                             std::to_string(first.shard) + "/" + std::to_string(first.shards) + ")");
        if (!seen.insert(s.shard).second)
            throw InputError(shards[i].dir + ": shard " + std::to_string(s.shard) + "/" + std::to_string(s.shards) +
                             " is given twice");
    }

    // Every record must be what its shard says: its settings, one of the shard's units, one of the job's
    // mechanisms in its place, a key that spells its own fields, one input per unit.
    std::map<std::string, json> merged;
    std::map<std::uint64_t, std::string> unit_input;   // unit -> file|l=|h=
    std::map<std::string, std::uint64_t> input_unit;
    std::set<std::pair<std::uint64_t, std::uint64_t>> present;   // (unit, mechanism index)
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const ShardInfo& s = infos[i];
        const std::string where = shards[i].dir + "/results.jsonl";
        for (auto& [line_no, rec] : parse_record_lines(shards[i].results_jsonl, where).records) {
            const std::string at = where + " line " + std::to_string(line_no);
            const std::string settings = string_field(rec, "settings");
            if (settings != s.settings)
                throw InputError(at + ": a record made with other settings (" + shortened(display_path(settings), 20) +
                                 ") than its shard's (" + s.settings + ")");
            const auto unit = count_of(field(rec, "unit"));
            const auto mi = count_of(field(rec, "mechanism_index"));
            if (!unit || !mi || !field(rec, "mechanism").is_string() || !field(field(rec, "input"), "file").is_string())
                throw InputError(at + ": not a batch record (it lacks unit, mechanism_index, mechanism or input.file)");
            if (*unit >= s.units_total || *unit % s.shards != s.shard)
                throw InputError(at + ": unit " + std::to_string(*unit) + " is not one of the units of shard " +
                                 std::to_string(s.shard) + "/" + std::to_string(s.shards) + " of " +
                                 std::to_string(s.units_total));
            const std::string mechanism = rec["mechanism"].get<std::string>();
            if (*mi >= s.mechanisms.size() || s.mechanisms[*mi] != mechanism)
                throw InputError(at + ": mechanism '" + shortened(display_path(mechanism), 20) + "' (index " +
                                 std::to_string(*mi) + ") is not the shard's mechanism at that place");
            const std::string identity = unit_identity(rec);
            const std::string key = rec["key"].get<std::string>();
            if (key != identity + "|" + mechanism)
                throw InputError(at + ": key '" + shortened(key) + "' does not spell the record's input, layer, head and mechanism");
            const auto [u_it, u_new] = unit_input.emplace(*unit, identity);
            const auto [i_it, i_new] = input_unit.emplace(identity, *unit);
            if (u_it->second != identity || i_it->second != *unit)
                throw InputError(at + ": unit " + std::to_string(*unit) + " (" + shortened(identity) +
                                 ") disagrees with another record (a unit is one input, layer and head)");
            // A shard's run writes each record once (a resume skips what it has): a second record under one key
            // is more than the shard made, and which of the two is right cannot be told.
            if (!present.insert({*unit, *mi}).second || merged.count(key))
                throw InputError(at + ": a second record of '" + shortened(key) + "' (unit " + std::to_string(*unit) +
                                 ", " + mechanism + "); a shard holds one record per unit and mechanism");
            merged[key] = std::move(rec);
        }
    }

    // What the set lacks: shards not given (bounded by kMaxShards), units of given shards without all their
    // records (bounded by the units lists read).
    json missing_shards = json::array(), missing_units = json::array();
    for (std::uint64_t i = 0; i < first.shards; ++i)
        if (!seen.count(i))
            missing_shards.push_back(i);
    std::vector<std::uint64_t> lacking;
    for (const ShardInfo& s : infos)
        for (const std::uint64_t u : s.units)
            for (std::uint64_t m = 0; m < s.mechanisms.size(); ++m)
                if (!present.count({u, m})) {
                    lacking.push_back(u);
                    break;
                }
    std::sort(lacking.begin(), lacking.end());
    for (const std::uint64_t u : lacking)
        missing_units.push_back(u);

    MergedSet out;
    out.complete = missing_shards.empty() && missing_units.empty();
    out.report["complete"] = out.complete;
    out.report["shards"] = first.shards;
    out.report["units_total"] = first.units_total;
    out.report["missing_shards"] = missing_shards;
    out.report["missing_units"] = missing_units;
    if (!out.complete && !partial) {
        std::string what;
        if (!missing_shards.empty())
            what += "shards " + list_text(missing_shards) + " of " + std::to_string(first.shards) + " are not given";
        if (!missing_units.empty())
            what += std::string(what.empty() ? "" : "; ") + std::to_string(missing_units.size()) +
                    " units of the given shards are not recorded (their shards did not finish: run them again)";
        throw InputError("merge: incomplete shard set: " + what + "; give --partial to merge what there is (its outputs "
                         "are then named results.partial.jsonl and summary.partial.csv)");
    }
    const auto list = ordered(merged);
    out.results_jsonl = results_text(list);
    out.summary_csv = summary_csv(list);
    return out;
}

namespace {

// The names a merge writes at the top of its folder; an existing --out may hold nothing else (it is
// replaced whole).
const std::set<std::string>& merge_output_names()
{
    static const std::set<std::string> names = {"results.jsonl", "summary.csv", "results.partial.jsonl",
                                                "summary.partial.csv", "merge.json", "sweeps", "figures"};
    return names;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

// An existing --out must be an empty folder or an earlier merge's (merge.json and only what a merge writes,
// no links): it is replaced whole, so it may hold nothing that a merge did not write.
void check_replaceable(const fs::path& out, const std::string& shown)
{
    std::error_code ec;
    bool empty = true, has_report = false;
    for (const auto& e : fs::directory_iterator(out, ec)) {
        empty = false;
        const std::string name = e.path().filename().string();
        const fs::file_status st = e.symlink_status();
        const bool sub = name == "sweeps" || name == "figures";
        if (!merge_output_names().count(name) || fs::is_symlink(st) || (sub ? !fs::is_directory(st) : !fs::is_regular_file(st)))
            throw InputError("--out " + shown + " already holds '" + display_path(name) +
                             "', which a merge does not write: choose a new folder (an earlier merge's folder is replaced whole)");
        has_report = has_report || name == "merge.json";
        if (sub)
            for (const auto& f : fs::directory_iterator(e.path(), ec))
                if (!fs::is_regular_file(f.symlink_status()))
                    throw InputError("--out " + shown + " already holds " + display_path(f.path().string()) +
                                     ", which is not a file a merge writes: choose a new folder");
    }
    if (ec)
        throw InputError("--out " + shown + ": cannot list the folder (" + ec.message() + ")");
    if (!empty && !has_report)
        throw InputError("--out " + shown + " is a folder that an earlier merge did not write (no merge.json): choose a new folder");
}

// A fresh folder beside the output, removed (with what was written into it) unless released.
struct TempFolder {
    fs::path path;
    explicit TempFolder(const fs::path& out)
    {
        std::string name = ".";
        name += out.filename().string();
        name += ".merge-XXXXXX";
        std::string tmpl = (out.parent_path() / name).string();
        if (!::mkdtemp(tmpl.data()))
            throw InputError("--out " + out.string() + ": cannot create a folder beside it (" + why(errno) + ")");
        path = tmpl;
    }
    ~TempFolder()
    {
        std::error_code ec;
        if (!path.empty())
            fs::remove_all(path, ec);   // ours: remove_all removes links, it never follows them
    }
    TempFolder(const TempFolder&) = delete;
    TempFolder& operator=(const TempFolder&) = delete;
};

// Copies the regular files of DIR/sub (never through a link: the folder and each file are opened with
// O_NOFOLLOW, each must be a regular file) into to/sub. Hidden files (temporaries of a killed write) are
// left out.
void copy_shard_folder(int dirfd, const std::string& dir, const char* sub, const fs::path& to)
{
    const std::string shown = dir + "/" + sub;
    Fd fd(::openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.fd < 0) {
        const int err = errno;
        if (err == ENOENT)
            return;
        struct stat st {};
        if (::fstatat(dirfd, sub, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
            throw InputError(shown + ": is a symbolic link; a shard folder's files must be its own (links are never followed)");
        throw InputError(shown + ": cannot open the folder (" + why(err) + ")");
    }
    DIR* d = ::fdopendir(::dup(fd.fd));
    if (!d)
        throw InputError(shown + ": cannot list the folder (" + why(errno) + ")");
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (!name.empty() && name[0] != '.')
            names.push_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    if (names.empty())
        return;
    const fs::path target = to / sub;
    std::error_code ec;
    fs::create_directories(target, ec);
    for (const std::string& name : names) {
        const std::string file = shown + "/" + name;
        const int f = open_regular_at(fd.fd, name, display_path(file));
        if (f < 0)
            continue;   // gone since listed
        Fd src(f);
        write_text_file((target / name).string(), read_all(src.fd, display_path(file)));
    }
}

}  // namespace

void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir, bool partial)
{
    if (dirs.empty())
        throw std::invalid_argument("merge: name the shard folders");
    if (out_dir.empty())
        throw std::invalid_argument("merge: --out is empty");

    // The output: never a shard, never a folder holding one (it is replaced whole), compared by device and
    // inode (so ./s0, s0/ and a link to s0 are s0).
    std::error_code ec;
    fs::path out = fs::absolute(out_dir, ec).lexically_normal();
    if (out.filename().empty())
        out = out.parent_path();
    struct stat out_st {};
    const bool out_exists = ::stat(out.c_str(), &out_st) == 0;
    if (out_exists) {
        if (!S_ISDIR(out_st.st_mode))
            throw InputError("--out " + out_dir + ": exists and is not a folder");
        out = fs::canonical(out, ec);
        if (ec)
            throw InputError("--out " + out_dir + ": " + ec.message());
    }
    std::vector<Fd> dir_fds;
    std::vector<ShardText> texts;
    for (const std::string& dir : dirs) {
        Fd& dfd = dir_fds.emplace_back(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (dfd.fd < 0)
            throw InputError(dir + ": not a folder (" + why(errno) + ")");
        if (out_exists) {
            struct stat st {};
            if (::fstat(dfd.fd, &st) == 0 && same_file(st, out_st))
                throw InputError("--out " + out_dir + " is the shard folder " + dir + ": choose a new folder for the merge");
            for (fs::path p = fs::canonical(dir, ec); !ec && p != p.parent_path(); p = p.parent_path()) {
                struct stat up {};
                if (::stat(p.parent_path().c_str(), &up) == 0 && same_file(up, out_st))
                    throw InputError("--out " + out_dir + " holds the shard folder " + dir +
                                     ": choose a new folder for the merge (it would be replaced)");
            }
        }
        ShardText t;
        t.dir = dir;
        {
            Fd f(open_regular_at(dfd.fd, "shard.json", dir + "/shard.json"));
            if (f.fd < 0)
                throw InputError(dir + ": no shard.json (not the output folder of a batch shard; a folder made by an older "
                                       "attnscope gets one when its shard is run again)");
            t.shard_json = read_all(f.fd, dir + "/shard.json");
        }
        {
            Fd f(open_regular_at(dfd.fd, "results.jsonl", dir + "/results.jsonl"));
            if (f.fd < 0)
                throw InputError(dir + ": no results.jsonl (not a batch output folder)");
            t.results_jsonl = read_all(f.fd, dir + "/results.jsonl");
        }
        texts.push_back(std::move(t));
    }
    MergedSet merged = merge_shard_texts(texts, partial);
    texts.clear();
    if (out_exists)
        check_replaceable(out, out_dir);

    // Built whole in a fresh folder beside the output, then swapped into place: an earlier merge's files
    // never stay, and a failure leaves the output as it was.
    fs::create_directories(out.parent_path(), ec);
    TempFolder temp(out);
    for (std::size_t i = 0; i < dirs.size(); ++i)
        for (const char* sub : {"sweeps", "figures"})
            copy_shard_folder(dir_fds[i].fd, dirs[i], sub, temp.path);
    const std::string tag = merged.complete ? "" : ".partial";
    write_file_atomically((temp.path / ("results" + tag + ".jsonl")).string(), merged.results_jsonl);
    write_file_atomically((temp.path / ("summary" + tag + ".csv")).string(), merged.summary_csv);
    json report = merged.report;
    json folders = json::array();
    for (const std::string& d : dirs)
        folders.push_back(display_path(d));
    report["shard_folders"] = folders;
    write_file_atomically((temp.path / "merge.json").string(), json_text(report, 2) + "\n");

    if (!out_exists) {
        if (::rename(temp.path.c_str(), out.c_str()) != 0)
            throw InputError("--out " + out_dir + ": cannot create the folder (" + why(errno) + ")");
        temp.path.clear();
        return;
    }
    // Atomic exchange where the file system has it; else the old folder is moved aside first.
    if (::renameat2(AT_FDCWD, temp.path.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) == 0)
        return;   // temp.path now holds the earlier merge: removed by TempFolder
    TempFolder old(out);
    if (::rename(out.c_str(), (old.path / "old").c_str()) != 0)
        throw InputError("--out " + out_dir + ": cannot replace the earlier merge (" + why(errno) + ")");
    if (::rename(temp.path.c_str(), out.c_str()) != 0) {
        const int err = errno;
        ::rename((old.path / "old").c_str(), out.c_str());
        throw InputError("--out " + out_dir + ": cannot replace the earlier merge (" + why(err) + ")");
    }
    temp.path.clear();
}

}  // namespace attnscope::analysis
