// merge (analysis/batch_store.h): shard folders read without following links, checked against their
// shard.json and their records, and combined in a fresh folder swapped in atomically (docs/security.md).
#include "analysis/batch_store.h"
#include "analysis/batch_store_detail.h"


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

#include "analysis/measure.h"
#include "attention/options.h"
#include "util/atomic_file.h"
#include "util/json_text.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;
using namespace store_detail;

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
    std::string id = string_field(field(rec, "input"), "file") + "|l=" + index(field(rec, "layer")) + "|h=" + index(field(rec, "head"));
    if (const json& at = field(rec, "unit_at"); at.is_object())   // axes given as `all` (analysis/batch.h, BatchUnit::key)
        for (const auto& [axis, v] : at.items())
            id += "|" + axis + "=" + index(v);
    return id;
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

// One job's shards: the same settings, sharding, plan size and mechanisms; each shard once. Returns the
// shard numbers given.
std::set<std::uint64_t> check_one_job(const std::vector<ShardText>& shards, const std::vector<ShardInfo>& infos)
{
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
    return seen;
}

// The records of all shards, each checked to be what its shard says: its settings, one of the shard's units,
// one of the job's mechanisms in its place, a key that spells its own fields, one input per unit.
class RecordSet {
public:
    void add(json rec, const ShardInfo& s, const std::string& at)
    {
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
        const auto [u_it, u_new] = m_unit_input.emplace(*unit, identity);
        const auto [i_it, i_new] = m_input_unit.emplace(identity, *unit);
        if (u_it->second != identity || i_it->second != *unit)
            throw InputError(at + ": unit " + std::to_string(*unit) + " (" + shortened(identity) +
                             ") disagrees with another record (a unit is one input, layer and head)");
        // A shard's run writes each record once (a resume skips what it has): a second record under one key
        // is more than the shard made, and which of the two is right cannot be told.
        if (!m_present.insert({*unit, *mi}).second || m_merged.count(key))
            throw InputError(at + ": a second record of '" + shortened(key) + "' (unit " + std::to_string(*unit) +
                             ", " + mechanism + "); a shard holds one record per unit and mechanism");
        m_merged[key] = std::move(rec);
    }

    // Units of the given shards without all their records (bounded by the units lists read), ascending.
    json missing_units(const std::vector<ShardInfo>& infos) const
    {
        std::vector<std::uint64_t> lacking;
        for (const ShardInfo& s : infos)
            for (const std::uint64_t u : s.units)
                for (std::uint64_t m = 0; m < s.mechanisms.size(); ++m)
                    if (!m_present.count({u, m})) {
                        lacking.push_back(u);
                        break;
                    }
        std::sort(lacking.begin(), lacking.end());
        json out = json::array();
        for (const std::uint64_t u : lacking)
            out.push_back(u);
        return out;
    }

    const std::map<std::string, json>& records() const { return m_merged; }

private:
    std::map<std::string, json> m_merged;
    std::map<std::uint64_t, std::string> m_unit_input;   // unit -> file|l=|h=
    std::map<std::string, std::uint64_t> m_input_unit;
    std::set<std::pair<std::uint64_t, std::uint64_t>> m_present;   // (unit, mechanism index)
};

}  // namespace

MergedSet merge_shard_texts(const std::vector<ShardText>& shards, bool partial)
{
    if (shards.empty())
        throw std::invalid_argument("merge: name the shard folders");
    std::vector<ShardInfo> infos;
    for (const ShardText& s : shards)
        infos.push_back(parse_shard_info(s.shard_json, s.dir + "/shard.json"));
    const ShardInfo& first = infos.front();
    const std::set<std::uint64_t> seen = check_one_job(shards, infos);

    RecordSet records;
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const std::string where = shards[i].dir + "/results.jsonl";
        for (auto& [line_no, rec] : parse_record_lines(shards[i].results_jsonl, where, LastLine::keep_whole).records)
            records.add(std::move(rec), infos[i], where + " line " + std::to_string(line_no));
    }

    // What the set lacks: shards not given (bounded by kMaxShards), units of given shards without all their
    // records.
    json missing_shards = json::array();
    for (std::uint64_t i = 0; i < first.shards; ++i)
        if (!seen.count(i))
            missing_shards.push_back(i);
    const json missing_units = records.missing_units(infos);

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
                         "are then named results.partial.jsonl, summary.partial.csv, aggregate.partial.csv and "
                         "aggregate.partial.json)");
    }
    const auto list = ordered(records.records());
    out.results_jsonl = results_text(list);
    out.summary_csv = summary_csv(list);
    AggregateTexts stats = aggregate_texts(list);
    out.aggregate_csv = std::move(stats.csv);
    out.aggregate_json = std::move(stats.json);
    return out;
}

namespace {

// The names a merge writes at the top of its folder; an existing --out may hold nothing else (it is
// replaced whole).
const std::set<std::string>& merge_output_names()
{
    static const std::set<std::string> names = {"results.jsonl",          "summary.csv",           "aggregate.csv",
                                                "aggregate.json",         "results.partial.jsonl", "summary.partial.csv",
                                                "aggregate.partial.csv",  "aggregate.partial.json", "merge.json",
                                                "sweeps",                 "figures",               "depth"};
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
        const bool sub = name == "sweeps" || name == "figures" || name == "depth";
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
        // mkdtemp makes the folder 0700; renamed into place it is the output, which follows the umask like
        // every folder a batch makes (0755 under the usual 022).
        const mode_t mask = ::umask(0);
        ::umask(mask);
        if (::chmod(path.c_str(), 0777 & ~mask) != 0)
            throw InputError("--out " + out.string() + ": cannot set the folder's permissions (" + why(errno) + ")");
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

// Copies the open file `fd` (shown as `shown`) to a new file `to`, in pieces: a figure of any size never
// sits in memory whole.
void copy_file_to(int fd, const std::string& shown, const std::string& to)
{
    Fd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (out.fd < 0)
        throw InputError(to + ": cannot write (" + why(errno) + ")");
    std::vector<char> buf(1 << 20);
    off_t at = 0;
    while (true) {
        const ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            throw InputError(shown + ": cannot read (" + why(errno) + ")");
        }
        if (n == 0)
            break;
        for (ssize_t done = 0; done < n;) {
            const ssize_t w = ::write(out.fd, buf.data() + done, static_cast<std::size_t>(n - done));
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                throw InputError(to + ": cannot write (" + why(errno) + ")");
            }
            done += w;
        }
        at += n;
    }
    if (::fsync(out.fd) != 0 || ::close(out.release()) != 0)
        throw InputError(to + ": cannot write (" + why(errno) + ")");
}

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
        copy_file_to(src.fd, display_path(file), (target / name).string());
    }
}

}  // namespace

void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir, bool partial, std::uint64_t max_bytes)
{
    const std::uint64_t budget = max_bytes ? max_bytes : default_memory_limit();
    const std::uint64_t records_limit = budget / k_results_memory_factor;
    std::uint64_t records_read = 0;   // bytes of results.jsonl so far, over every shard
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
            t.shard_json = read_all(f.fd, dir + "/shard.json", k_max_shard_json_bytes,
                                    "a shard.json holds (" + human_bytes(k_max_shard_json_bytes) + ")");
        }
        {
            Fd f(open_regular_at(dfd.fd, "results.jsonl", dir + "/results.jsonl"));
            if (f.fd < 0)
                throw InputError(dir + ": no results.jsonl (not a batch output folder)");
            // The shards' records together within the budget, checked from each size before it is read.
            struct stat st {};
            const std::uint64_t size = ::fstat(f.fd, &st) == 0 && st.st_size > 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
            if (size > records_limit - std::min(records_read, records_limit))
                throw InputError(dir + "/results.jsonl: " + human_bytes(size) +
                                 (records_read ? " (after " + human_bytes(records_read) + " of the shards before it)" : std::string()) +
                                 " is more than " + results_size_limit_text("merge", budget));
            t.results_jsonl = read_all(f.fd, dir + "/results.jsonl", records_limit - records_read,
                                       results_size_limit_text("merge", budget));
            records_read += t.results_jsonl.size();
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
    // Messages name the destination (`--out m/results.jsonl: cannot write (No space left on device)`), never
    // the hidden folder the merge is built in.
    try {
        for (std::size_t i = 0; i < dirs.size(); ++i)
            for (const char* sub : {"sweeps", "figures", "depth"})
                copy_shard_folder(dir_fds[i].fd, dirs[i], sub, temp.path);
        const std::string tag = merged.complete ? "" : ".partial";
        write_file_atomically((temp.path / ("results" + tag + ".jsonl")).string(), merged.results_jsonl);
        write_file_atomically((temp.path / ("summary" + tag + ".csv")).string(), merged.summary_csv);
        write_file_atomically((temp.path / ("aggregate" + tag + ".csv")).string(), merged.aggregate_csv);
        write_file_atomically((temp.path / ("aggregate" + tag + ".json")).string(), merged.aggregate_json);
        json report = merged.report;
        json folders = json::array();
        for (const std::string& d : dirs)
            folders.push_back(display_path(d));
        report["shard_folders"] = folders;
        write_file_atomically((temp.path / "merge.json").string(), json_text(report, 2) + "\n");
    } catch (const InputError& e) {
        std::string what = e.what();
        const std::string hidden = temp.path.string();
        const std::string shown = "--out " + (fs::path(out_dir).filename().empty() ? fs::path(out_dir).parent_path() : fs::path(out_dir)).string();
        for (std::size_t at = what.find(hidden); at != std::string::npos; at = what.find(hidden, at + shown.size()))
            what.replace(at, hidden.size(), shown);
        throw InputError(what);
    }

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
