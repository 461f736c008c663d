#include "analysis/batch_store.h"
#include "analysis/batch_store_detail.h"
#include "analysis/measure.h"

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

#include "analysis/metric_table.h"
#include "attention/options.h"
#include "util/atomic_file.h"
#include "util/csv.h"
#include "util/json_text.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;
using namespace store_detail;   // the pieces merge shares (analysis/batch_store_detail.h)
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

std::string sha256_hex_prefix(std::string_view text, std::size_t bytes)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
    std::string hex;
    for (std::size_t i = 0; i < std::min<std::size_t>(bytes, len); ++i)
        hex += fmt::format("{:02x}", digest[i]);
    return hex;
}

std::string settings_hash(const nlohmann::ordered_json& settings) { return sha256_hex_prefix(json_text(settings), 8); }

namespace store_detail {

// ------------------------------------------------------------------------------------------ reading safely

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

std::string read_all(int fd, const std::string& shown, std::uint64_t limit, const std::string& over)
{
    const auto refuse = [&](std::uint64_t size) {
        throw InputError(shown + ": " + human_bytes(size) + " is more than " + over);
    };
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0 && static_cast<std::uint64_t>(st.st_size) > limit)
        refuse(static_cast<std::uint64_t>(st.st_size));
    std::string text;
    char buf[1 << 16];
    off_t at = 0;
    while (true) {
        if (text.size() > limit)   // it grew while read
            refuse(text.size());
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

}  // namespace store_detail

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
    store_detail::write_final(m_dir, m_records);
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

namespace store_detail {

std::string shortened(const std::string& s, std::size_t max)
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

}  // namespace store_detail

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

std::string results_size_limit_text(const std::string& command, std::uint64_t max_bytes)
{
    const std::uint64_t budget = max_bytes ? max_bytes : default_memory_limit();
    return "what " + command + " reads within the memory budget (" + human_bytes(budget / k_results_memory_factor) +
           " of records: 1/" + std::to_string(k_results_memory_factor) + " of --max-memory " + human_bytes(budget) +
           ", as records take up to " + std::to_string(k_results_memory_factor) + " times their text); give a larger --max-memory";
}

}  // namespace attnscope::analysis
