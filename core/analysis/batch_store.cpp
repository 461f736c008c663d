#include "analysis/batch_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "util/atomic_file.h"

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

namespace {

// Reads results.jsonl: complete records by key. A torn last line (a kill mid-write) is cut off the file.
std::map<std::string, json> read_records(const std::string& path, const std::string& settings, bool truncate_torn)
{
    std::map<std::string, json> records;
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return records;
    std::string line;
    std::streamoff good = 0;
    std::size_t line_no = 0;
    while (true) {
        const std::streamoff start = in.tellg();
        if (!std::getline(in, line))
            break;
        ++line_no;
        const bool complete = !in.eof();   // getline stopped at a newline
        json rec;
        try {
            rec = json::parse(line);
        } catch (const std::exception&) {
            if (complete)
                throw InputError(path + ": line " + std::to_string(line_no) + " is not a JSON record");
            break;   // torn tail
        }
        if (!complete)
            break;
        if (!settings.empty() && rec.value("settings", std::string()) != settings)
            throw InputError(path + ": holds results of a job with other settings (line " + std::to_string(line_no) +
                             "); use another --out folder");
        std::string key = rec.at("key").get<std::string>();   // before the move below
        records[std::move(key)] = std::move(rec);
        good = start + static_cast<std::streamoff>(line.size()) + 1;
    }
    in.close();
    std::error_code ec;
    if (truncate_torn && fs::exists(path) && static_cast<std::uintmax_t>(good) < fs::file_size(path)) {
        fs::resize_file(path, static_cast<std::uintmax_t>(good), ec);
        if (ec)
            throw InputError(path + ": cannot cut the torn last line (" + ec.message() + ")");
    }
    return records;
}

std::string num(const json& v)
{
    if (!v.is_number())
        return "";
    if (v.is_number_integer())
        return std::to_string(v.get<long long>());
    return fmt::format("{:.17g}", v.get<double>());
}

std::string summary_csv(const std::vector<json>& records)
{
    std::ostringstream out;
    out << "unit,file,layer,head,mechanism,n,d,rank,rank_tol,relative_rank,effective_rank,stable_rank,entropy_mean,"
           "entropy_std,entropy_normalized_mean,seconds\n";
    for (const json& r : records) {
        const json& e = r.contains("entropy") ? r["entropy"] : json();
        auto ent = [&](const char* key) { return e.is_object() ? num(e[key]) : std::string(); };
        out << r["unit"] << ',' << r["input"]["file"].get<std::string>() << ',' << num(r["layer"]) << ','
            << num(r["head"]) << ',' << r["mechanism"].get<std::string>() << ',' << r["input"]["n"] << ','
            << r["input"]["d"] << ',' << num(r.value("rank", json())) << ',' << num(r.value("rank_tol", json())) << ','
            << num(r.value("relative_rank", json())) << ',' << num(r.value("effective_rank", json())) << ','
            << num(r.value("stable_rank", json())) << ',' << ent("mean") << ',' << ent("std") << ','
            << ent("normalized_mean") << ',' << fmt::format("{:.6f}", r.value("seconds", 0.0)) << '\n';
    }
    return out.str();
}

// Records sorted by (unit, mechanism order), one JSON line each.
std::vector<json> ordered(const std::map<std::string, json>& records)
{
    std::vector<json> list;
    for (const auto& [key, r] : records)
        list.push_back(r);
    std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
        return std::make_pair(a["unit"].get<std::size_t>(), a["mechanism_index"].get<std::size_t>()) <
               std::make_pair(b["unit"].get<std::size_t>(), b["mechanism_index"].get<std::size_t>());
    });
    return list;
}

// results.jsonl and summary.csv (results.partial.jsonl and summary.partial.csv for a partial merge, so that
// nothing reading the usual names takes an incomplete set for a complete one).
void write_final(const std::string& dir, const std::map<std::string, json>& records, bool partial = false)
{
    const auto list = ordered(records);
    std::string lines;
    for (const json& r : list)
        lines += r.dump() + "\n";
    const std::string tag = partial ? ".partial" : "";
    write_file_atomically((fs::path(dir) / ("results" + tag + ".jsonl")).string(), lines);
    write_file_atomically((fs::path(dir) / ("summary" + tag + ".csv")).string(), summary_csv(list));
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

ResultStore::ResultStore(const std::string& dir, const std::string& settings)
    : m_dir(dir), m_path((fs::path(dir) / "results.jsonl").string())
{
    m_records = read_records(m_path, settings, true);
    m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (m_fd < 0)
        throw InputError(m_path + ": cannot open for appending (" + std::string(std::strerror(errno)) + ")");
}

ResultStore::~ResultStore()
{
    if (m_fd >= 0)
        ::close(m_fd);
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

void ResultStore::append(const json& record)
{
    std::lock_guard lock(m_mutex);
    append_durably(m_fd, record.dump() + "\n", m_path);
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

void write_shard_info(const std::string& dir, const ShardInfo& info)
{
    const std::string path = (fs::path(dir) / "shard.json").string();
    if (fs::exists(path)) {
        const ShardInfo old = read_shard_info(dir);
        if (old.settings != info.settings || old.shard != info.shard || old.shards != info.shards ||
            old.units_total != info.units_total)
            throw InputError(dir + ": holds shard " + std::to_string(old.shard) + "/" + std::to_string(old.shards) +
                             " of a job with " + (old.settings != info.settings ? "other settings" : "another plan") +
                             "; use another --out folder");
        return;
    }
    json j;
    j["attnscope_version"] = ATTNSCOPE_VERSION;
    j["settings"] = info.settings;
    j["shard"] = info.shard;
    j["shards"] = info.shards;
    j["units_total"] = info.units_total;
    j["units"] = info.units;
    j["mechanisms"] = info.mechanisms;
    write_file_atomically(path, j.dump(2) + "\n");
}

ShardInfo read_shard_info(const std::string& dir)
{
    const std::string path = (fs::path(dir) / "shard.json").string();
    std::ifstream in(path);
    if (!in)
        throw InputError(dir + ": no shard.json (not the output folder of a batch shard; a folder made by an older "
                               "attnscope gets one when its shard is run again)");
    try {
        const json j = json::parse(in);
        ShardInfo s;
        s.settings = j.at("settings").get<std::string>();
        s.shard = j.at("shard").get<int>();
        s.shards = j.at("shards").get<int>();
        s.units_total = j.at("units_total").get<std::size_t>();
        s.units = j.at("units").get<std::vector<std::size_t>>();
        s.mechanisms = j.at("mechanisms").get<std::vector<std::string>>();
        return s;
    } catch (const json::exception& e) {
        throw InputError(path + ": not a valid shard description (" + std::string(e.what()) + ")");
    }
}

namespace {

// Checks that the shards are one job's (settings, shard count, plan) and finds what the set lacks: shards
// not given, and units of given shards without all their records. Throws InputError for an inconsistent set.
json shard_set_report(const std::vector<std::string>& dirs, const std::vector<ShardInfo>& infos,
                      const std::map<std::string, json>& merged)
{
    const ShardInfo& first = infos.front();
    std::set<int> seen;
    for (std::size_t i = 0; i < infos.size(); ++i) {
        const ShardInfo& s = infos[i];
        if (s.settings != first.settings)
            throw InputError(dirs[i] + ": results come from a job with other settings than " + dirs.front());
        if (s.shards != first.shards || s.units_total != first.units_total)
            throw InputError(dirs[i] + ": shard " + std::to_string(s.shard) + "/" + std::to_string(s.shards) +
                             " does not belong to the same sharding as " + dirs.front() + " (shard " +
                             std::to_string(first.shard) + "/" + std::to_string(first.shards) + ")");
        if (!seen.insert(s.shard).second)
            throw InputError(dirs[i] + ": shard " + std::to_string(s.shard) + "/" + std::to_string(s.shards) +
                             " is given twice");
    }
    json missing_shards = json::array(), missing_units = json::array();
    for (int i = 0; i < first.shards; ++i)
        if (!seen.count(i))
            missing_shards.push_back(i);
    std::set<std::size_t> recorded;
    std::map<std::size_t, std::size_t> per_unit;
    for (const auto& [key, rec] : merged)
        ++per_unit[rec["unit"].get<std::size_t>()];
    for (const ShardInfo& s : infos)
        for (const std::size_t u : s.units)
            if (per_unit[u] < s.mechanisms.size())
                missing_units.push_back(u);
    json report;
    report["complete"] = missing_shards.empty() && missing_units.empty();
    report["shards"] = first.shards;
    report["units_total"] = first.units_total;
    report["missing_shards"] = missing_shards;
    report["missing_units"] = missing_units;
    return report;
}

}  // namespace

void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir, bool partial)
{
    if (dirs.empty())
        throw std::invalid_argument("merge: name the shard folders");
    std::map<std::string, json> merged;
    std::vector<ShardInfo> infos;
    for (const std::string& dir : dirs) {
        infos.push_back(read_shard_info(dir));
        const std::string path = (fs::path(dir) / "results.jsonl").string();
        if (!fs::exists(path))
            throw InputError(dir + ": no results.jsonl (not a batch output folder)");
        for (auto& [key, rec] : read_records(path, "", false)) {
            const auto it = merged.find(key);
            if (it != merged.end() && it->second["unit"] != rec["unit"])
                throw InputError(dir + ": record " + key + " disagrees with another shard");
            merged[key] = std::move(rec);
        }
    }
    json report = shard_set_report(dirs, infos, merged);
    if (!report["complete"].get<bool>() && !partial) {
        std::string what;
        if (!report["missing_shards"].empty())
            what += "shards " + report["missing_shards"].dump() + " of " + std::to_string(infos.front().shards) +
                    " are not given";
        if (!report["missing_units"].empty())
            what += std::string(what.empty() ? "" : "; ") + std::to_string(report["missing_units"].size()) +
                    " units of the given shards are not recorded (their shards did not finish: run them again)";
        throw InputError("merge: incomplete shard set: " + what + "; give --partial to merge what there is (its outputs "
                         "are then named results.partial.jsonl and summary.partial.csv)");
    }
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (!fs::is_directory(out_dir))
        throw InputError(out_dir + ": cannot create the output folder");
    for (const std::string& dir : dirs)
        for (const char* sub : {"sweeps", "figures"}) {
            const fs::path from = fs::path(dir) / sub;
            if (!fs::is_directory(from))
                continue;
            fs::create_directories(fs::path(out_dir) / sub);
            for (const auto& e : fs::directory_iterator(from))
                if (e.is_regular_file())
                    fs::copy_file(e.path(), fs::path(out_dir) / sub / e.path().filename(), fs::copy_options::overwrite_existing);
        }
    const bool complete = report["complete"].get<bool>();
    write_final(out_dir, merged, !complete);
    report["shard_folders"] = dirs;
    write_file_atomically((fs::path(out_dir) / "merge.json").string(), report.dump(2) + "\n");
}

}  // namespace attnscope::analysis
