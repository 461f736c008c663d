#include "analysis/batch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "analysis/inputs.h"
#include "io/tensor_file.h"
#include "util/atomic_file.h"
#include "util/error.h"

extern "C" void openblas_set_num_threads(int);

namespace attnscope::analysis {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using attention::Mechanism;
using Eigen::Index;

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

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns, const std::string& base_dir)
{
    std::set<std::string> files;
    for (const std::string& pattern : patterns) {
        const std::string full = fs::path(pattern).is_absolute() || base_dir.empty() ? pattern : (fs::path(base_dir) / pattern).string();
        glob_t g{};
        const int rc = ::glob(full.c_str(), 0, nullptr, &g);
        std::size_t found = 0;
        if (rc == 0)
            for (std::size_t i = 0; i < g.gl_pathc; ++i)
                if (std::error_code ec; fs::is_regular_file(g.gl_pathv[i], ec)) {   // a symlink loop or unreadable entry: not a file, no throw
                    files.insert(g.gl_pathv[i]);
                    ++found;
                }
        ::globfree(&g);
        if (found == 0)
            throw InputError("inputs: '" + pattern + "' matches no file" + (base_dir.empty() ? "" : " (relative to " + base_dir + ")"));
    }
    return {files.begin(), files.end()};
}

namespace {

struct Unit {
    std::size_t index = 0;        // in plan order
    std::string file;
    std::optional<Index> layer, head;
    std::string key;              // file|l=..|h=..
};

std::string unit_key(const std::string& file, std::optional<Index> layer, std::optional<Index> head)
{
    return file + "|l=" + (layer ? std::to_string(*layer) : "-") + "|h=" + (head ? std::to_string(*head) : "-");
}

// Identifies the analysis settings: records made with other settings are not reused.
std::string settings_hash(const BatchPlan& plan)
{
    json j;
    j["q"] = plan.q_name;
    j["k"] = plan.k_name;
    j["layout"] = plan.selection.layout;
    j["prefix_tokens"] = plan.selection.prefix_tokens;
    json at = json::object();
    for (const auto& [a, i] : plan.selection.at)
        at[std::string(1, a)] = i;
    j["at"] = at;
    std::vector<std::string> mechs;
    for (auto m : plan.mechanisms)
        mechs.emplace_back(attention::to_string(m));
    j["mechanisms"] = mechs;
    // Parameters as every record reports them, for a nominal N (blocks may depend on N: included per record).
    const auto& o = plan.options;
    j["scale"] = o.scale ? *o.scale : -1.0;
    j["causal"] = o.causal;
    j["feature_map"] = std::string(attention::to_string(o.feature_map.kind));
    j["favor"] = {o.feature_map.favor_features, o.feature_map.seed};
    j["blocks"] = {static_cast<int>(o.blocks.kind), o.blocks.blocks, o.blocks.chunk};
    j["grid"] = o.blocks.grid;
    j["block_grid"] = o.blocks.block_grid;
    j["token_order"] = std::string(attention::to_string(o.blocks.order));
    j["mixing"] = {o.mixing.preset, o.mixing.sigma, o.mixing.threshold};
    if (o.mixing.matrix)
        j["mixing_matrix"] = std::vector<double>(o.mixing.matrix->data(), o.mixing.matrix->data() + o.mixing.matrix->size());
    j["normalize"] = std::string(attention::to_string(o.normalize));
    j["metrics"] = {plan.metrics.spectrum, plan.metrics.entropy, std::string(to_string(plan.metrics.method)),
                    plan.metrics.rank_rtol ? *plan.metrics.rank_rtol : -1.0,
                    plan.metrics.top_k ? *plan.metrics.top_k : Index{-1}, plan.metrics.row_entropy};
    const std::string text = j.dump();
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
    std::string hex;
    for (unsigned int i = 0; i < 8; ++i)
        hex += fmt::format("{:02x}", digest[i]);
    return hex;
}

std::vector<Unit> plan_units(const BatchPlan& plan)
{
    std::vector<Unit> units;
    for (const std::string& file : plan.files) {
        const auto tf = io::open_tensor_file(file);
        const io::TensorInfo& info = tf->find(plan.q_name);
        const std::string layout = io::resolve_layout(info, plan.selection, file + ":" + plan.q_name);
        const auto layers = axis_values(info, layout, 'l', plan.layers, plan.all_layers, plan.selection, "layers");
        const auto heads = axis_values(info, layout, 'h', plan.heads, plan.all_heads, plan.selection, "heads");
        for (std::size_t li = 0; li < std::max<std::size_t>(layers.size(), 1); ++li)
            for (std::size_t hi = 0; hi < std::max<std::size_t>(heads.size(), 1); ++hi) {
                Unit u;
                u.index = units.size();
                u.file = file;
                if (!layers.empty())
                    u.layer = layers[li];
                if (!heads.empty())
                    u.head = heads[hi];
                u.key = unit_key(file, u.layer, u.head);
                units.push_back(std::move(u));
            }
    }
    return units;
}

std::string ref(const std::string& file, const std::string& name) { return name.empty() ? file : file + ":" + name; }

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

void write_file_atomically(const std::string& path, const std::string& text)
{
    AtomicOutput out(path);
    FILE* f = std::fopen(out.temp_path().c_str(), "wb");
    if (!f)
        throw InputError(path + ": cannot write (" + std::strerror(errno) + ")");
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    int err = errno;
    const bool closed = std::fclose(f) == 0;
    if (ok)
        err = errno;
    if (!ok || !closed)
        throw InputError(path + ": cannot write (" + std::strerror(err) + ")");
    out.commit();
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

void write_final(const std::string& dir, const std::map<std::string, json>& records)
{
    const auto list = ordered(records);
    std::string lines;
    for (const json& r : list)
        lines += r.dump() + "\n";
    write_file_atomically((fs::path(dir) / "results.jsonl").string(), lines);
    write_file_atomically((fs::path(dir) / "summary.csv").string(), summary_csv(list));
}

// results.jsonl could not be appended to (a full disk, an I/O error): the batch stops, keeping the records
// before it, instead of computing units whose results cannot be saved.
struct AppendFailure : InputError {
    using InputError::InputError;
};

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

BatchReport run_batch(const BatchPlan& plan, const BatchRunOptions& opt)
{
    if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
        throw std::invalid_argument("--shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
                                    ": expected I/N with 0 <= I < N");
    if (opt.jobs < 1)
        throw std::invalid_argument("--jobs must be at least 1");
    if (plan.files.empty())
        throw InputError("the job names no input file");

    const std::string settings = settings_hash(plan);
    const std::vector<Unit> all_units = plan_units(plan);
    auto sweep_spec = [&](const BatchSweep& sw) {
        SweepSpec spec = sw.spec;
        spec.inputs.clear();
        for (const std::string& file : plan.files)
            spec.inputs.push_back({ref(file, plan.q_name), ref(file, plan.k_name), std::nullopt, plan.selection});
        return spec;
    };
    for (const BatchSweep& sw : plan.sweeps) {   // an impossible sweep fails the job before any work
        try {
            validate_sweep(sweep_spec(sw));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("sweep " + sw.name + ": " + e.what());
        } catch (const InputError& e) {
            throw InputError("sweep " + sw.name + ": " + e.what());
        }
    }
    std::error_code ec;   // the folder is made only once the whole plan is known to be possible
    fs::create_directories(opt.out_dir, ec);
    if (!fs::is_directory(opt.out_dir))
        throw InputError(opt.out_dir + ": cannot create the output folder (" + ec.message() + ")");
    if (::access(opt.out_dir.c_str(), W_OK) != 0)
        throw InputError(opt.out_dir + ": the output folder is not writable (" + std::strerror(errno) + ")");
    std::vector<Unit> units;
    for (const Unit& u : all_units)
        if (static_cast<int>(u.index % static_cast<std::size_t>(opt.shard_count)) == opt.shard_index)
            units.push_back(u);

    const std::string results_path = (fs::path(opt.out_dir) / "results.jsonl").string();
    std::map<std::string, json> records = read_records(results_path, settings, true);
    auto mechanism_key = [](const Unit& u, Mechanism m) { return u.key + "|" + std::string(attention::to_string(m)); };

    BatchReport report;
    report.units = units.size();
    std::vector<const Unit*> todo;
    for (const Unit& u : units) {
        bool complete = true;
        for (Mechanism m : plan.mechanisms)
            complete = complete && records.count(mechanism_key(u, m));
        if (complete)
            ++report.skipped;
        else
            todo.push_back(&u);
    }

    const int fd = ::open(results_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        throw InputError(results_path + ": cannot open for appending (" + std::string(std::strerror(errno)) + ")");
    std::mutex mutex;   // guards records, report, the file, sha cache, progress, fatal
    std::string fatal;  // set when results.jsonl cannot be appended to: the batch stops
    std::map<std::string, std::string> sha_cache;
    std::atomic<std::size_t> next{0};
    std::size_t finished = report.skipped;
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t limit = plan.memory_limit ? plan.memory_limit : default_memory_limit() / static_cast<unsigned>(opt.jobs);
    if (opt.jobs > 1)
        openblas_set_num_threads(1);   // parallel units instead of parallel BLAS

    auto worker = [&]() {
        for (;;) {
            const std::size_t i = next++;
            if (i >= todo.size())
                return;
            const Unit& u = *todo[i];
            const auto unit_start = std::chrono::steady_clock::now();
            std::string failure;
            try {
                std::string sha;
                {
                    std::lock_guard lock(mutex);
                    sha = sha_cache[u.file];
                }
                if (sha.empty()) {
                    sha = file_sha256(u.file);
                    std::lock_guard lock(mutex);
                    sha_cache[u.file] = sha;
                }
                io::AxisSelection sel = plan.selection;
                if (u.layer)
                    sel.at['l'] = *u.layer;
                if (u.head)
                    sel.at['h'] = *u.head;
                const LoadedInputs in = load_inputs(ref(u.file, plan.q_name), ref(u.file, plan.k_name), std::nullopt, sel);
                for (std::size_t mi = 0; mi < plan.mechanisms.size(); ++mi) {
                    const Mechanism m = plan.mechanisms[mi];
                    {
                        std::lock_guard lock(mutex);
                        if (records.count(mechanism_key(u, m)))
                            continue;
                    }
                    const auto t0 = std::chrono::steady_clock::now();
                    auto results = analyze(in.q.values, in.k.values, {m}, plan.options, plan.metrics, limit);
                    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    json rec;
                    rec["key"] = mechanism_key(u, m);
                    rec["unit"] = u.index;
                    rec["mechanism_index"] = mi;
                    rec["settings"] = settings;
                    rec["attnscope_version"] = ATTNSCOPE_VERSION;
                    json input = in.input_json;
                    input["file"] = u.file;
                    input["sha256"] = sha;
                    rec["input"] = std::move(input);
                    rec["layer"] = u.layer ? json(*u.layer) : json();
                    rec["head"] = u.head ? json(*u.head) : json();
                    const json result = result_json(results.front(), plan.metrics);
                    for (const auto& [key, value] : result.items())
                        rec[key] = value;
                    rec["seconds"] = seconds;
                    std::lock_guard lock(mutex);
                    if (!fatal.empty())
                        return;
                    append_durably(fd, rec.dump() + "\n", results_path);
                    records[rec["key"].get<std::string>()] = rec;
                    ++report.records;
                }
            } catch (const AppendFailure& e) {
                std::lock_guard lock(mutex);
                if (fatal.empty())
                    fatal = e.what();
                next = todo.size();   // no more units: their results could not be saved
                return;
            } catch (const InputError& e) {
                failure = e.what();
            } catch (const std::invalid_argument& e) {
                failure = e.what();
            }
            std::lock_guard lock(mutex);
            ++finished;
            if (failure.empty())
                ++report.analysed;
            else
                report.failures.push_back(u.key + ": " + failure);
            if (opt.on_progress) {
                BatchProgress p;
                p.done = finished;
                p.total = units.size();
                const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                const std::size_t run = finished - report.skipped;
                if (run > 0)
                    p.eta_seconds = elapsed / static_cast<double>(run) * static_cast<double>(units.size() - finished);
                p.label = u.key + (failure.empty() ? "" : " (failed)") +
                          fmt::format(" {:.2f}s", std::chrono::duration<double>(std::chrono::steady_clock::now() - unit_start).count());
                opt.on_progress(p);
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 1; t < opt.jobs; ++t)
        threads.emplace_back(worker);
    worker();
    for (auto& t : threads)
        t.join();
    ::close(fd);
    if (!fatal.empty())
        throw InputError(fatal + "; the " + std::to_string(records.size()) +
                         " records before it are kept: run the batch again to go on");

    // Sweeps of this shard (after the units: they are the long-running part).
    const fs::path sweep_dir = fs::path(opt.out_dir) / "sweeps";
    for (std::size_t j = 0; j < plan.sweeps.size(); ++j) {
        if (static_cast<int>((all_units.size() + j) % static_cast<std::size_t>(opt.shard_count)) != opt.shard_index)
            continue;
        const BatchSweep& sw = plan.sweeps[j];
        const fs::path csv = sweep_dir / (sw.name + ".csv"), js = sweep_dir / (sw.name + ".json");
        if (fs::exists(csv) && fs::exists(js))
            continue;
        const SweepSpec spec = sweep_spec(sw);
        try {
            fs::create_directories(sweep_dir, ec);
            if (!fs::is_directory(sweep_dir))
                throw InputError(sweep_dir.string() + ": cannot create the folder (" + ec.message() + ")");
            auto recs = run_sweep(spec, JobContext{});
            // Figures first: a rerun skips a sweep whose files exist, so they are written only once its
            // figures are (a figure that failed, e.g. on a full disk, is then drawn by the rerun).
            if (opt.on_sweep_figures)
                opt.on_sweep_figures(sw, SweepResult{spec, recs});
            write_file_atomically(js.string(), sweep_summary(spec, recs).dump(2) + "\n");
            write_file_atomically(csv.string(), sweep_csv(recs));
            ++report.sweeps;
        } catch (const InputError& e) {
            report.failures.push_back("sweep " + sw.name + ": " + e.what());
        } catch (const std::invalid_argument& e) {
            report.failures.push_back("sweep " + sw.name + ": " + e.what());
        }
    }

    if (opt.on_unit_figures)
        for (const Unit& u : units) {
            try {
                opt.on_unit_figures(BatchUnit{u.index, u.file, u.layer, u.head});
            } catch (const InputError& e) {
                report.failures.push_back("figures of " + u.key + ": " + e.what());
            } catch (const std::invalid_argument& e) {
                report.failures.push_back("figures of " + u.key + ": " + e.what());
            }
        }

    bool all_recorded = true;
    for (const Unit& u : units)
        for (Mechanism m : plan.mechanisms)
            all_recorded = all_recorded && records.count(mechanism_key(u, m));
    if (all_recorded)
        write_final(opt.out_dir, records);   // every unit of this shard is recorded: final order and summary
    const std::string failures_path = (fs::path(opt.out_dir) / "failures.txt").string();
    if (report.failures.empty()) {
        fs::remove(failures_path, ec);
    } else {
        std::string text;
        for (const auto& f : report.failures)
            text += f + "\n";
        try {
            write_file_atomically(failures_path, text);
        } catch (const InputError& e) {
            // The failures are still reported (the caller prints them); a stale list must not stay.
            fs::remove(failures_path, ec);
            report.failures.push_back(e.what());
        }
    }
    return report;
}

void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir)
{
    if (dirs.empty())
        throw std::invalid_argument("merge: name the shard folders");
    std::map<std::string, json> merged;
    std::string settings;
    for (const std::string& dir : dirs) {
        const std::string path = (fs::path(dir) / "results.jsonl").string();
        if (!fs::exists(path))
            throw InputError(dir + ": no results.jsonl (not a batch output folder)");
        for (auto& [key, rec] : read_records(path, "", false)) {
            const std::string s = rec.value("settings", std::string());
            if (settings.empty())
                settings = s;
            else if (s != settings)
                throw InputError(dir + ": results come from a job with other settings than " + dirs.front());
            const auto it = merged.find(key);
            if (it != merged.end() && it->second["unit"] != rec["unit"])
                throw InputError(dir + ": record " + key + " disagrees with another shard");
            merged[key] = std::move(rec);
        }
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
    write_final(out_dir, merged);
}

}  // namespace attnscope::analysis
