#include "analysis/batch.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include <glob.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "analysis/inputs.h"
#include "analysis/plan.h"
#include "attention/operator.h"
#include "io/tensor_file.h"
#include "kernels/kernels.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/parallel.h"


namespace attnscope::analysis {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using attention::Mechanism;
using Eigen::Index;

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
    for (const Eigen::MatrixXd& m : o.mixing.head_matrices)
        j["mixing_head_matrices"].push_back(std::vector<double>(m.data(), m.data() + m.size()));
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

std::string ref(const std::string& file, const std::string& name) { return name.empty() ? file : file + ":" + name; }

std::string mechanism_key(const BatchUnit& u, Mechanism m) { return u.key + "|" + std::string(attention::to_string(m)); }

// A [[sweep]] over every file of the job, with the job's options and selection.
SweepSpec sweep_spec(const BatchPlan& plan, const BatchSweep& sw)
{
    SweepSpec spec = sw.spec;
    spec.inputs.clear();
    for (const std::string& file : plan.files)
        spec.inputs.push_back({ref(file, plan.q_name), ref(file, plan.k_name), std::nullopt, plan.selection});
    spec.given = plan.given;
    return spec;
}

// Every sweep planned (and so checked) before any work: an impossible sweep fails the whole job.
std::vector<SweepPlan> plan_sweeps(const BatchPlan& plan)
{
    std::vector<SweepPlan> plans;
    for (const BatchSweep& sw : plan.sweeps) {
        try {
            plans.push_back(plan_sweep(sweep_spec(plan, sw)));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("sweep " + sw.name + ": " + e.what());
        } catch (const InputError& e) {
            throw InputError("sweep " + sw.name + ": " + e.what());
        }
    }
    return plans;
}

// Every unit of the whole job is checked from the headers before anything is created: its inputs and
// head pairing, its memory budget, and every mechanism's options on its N and d. The job is refused whole,
// naming the first unit that cannot run, so a batch never writes part of an impossible job.
void check_units(const BatchPlan& plan, const std::vector<BatchUnit>& units, std::uint64_t limit)
{
    std::vector<std::string> problems;
    for (const BatchUnit& u : units) {
        try {
            const TensorSource& s = u.source;
            const attention::AttentionOptions options = with_head_mixing(u.options, pair_heads(s.q_ref, s.k_ref, s.selection));
            const std::uint64_t need = input_budget_bytes(s.q_ref, s.k_ref, std::nullopt, s.selection);
            if (need > limit)
                throw InputError("needs about " + human_bytes(need) + ", above the memory limit of " + human_bytes(limit) +
                                 " per unit (max_memory, divided by --jobs)");
            const io::TensorRef ref = io::parse_tensor_ref(s.q_ref);
            const auto file = io::open_tensor_file(ref.file);
            const io::TensorInfo& info = file->find(ref.name);
            const std::string layout = io::resolve_layout(info, s.selection, "--q " + s.q_ref);
            const Index n = selected_tokens(s), d = info.shape[layout.find('d')];
            for (const Mechanism m : plan.mechanisms) {
                (void)mechanism_params(m, options_for(m, options), n, d);
                if (m == Mechanism::mhla)
                    if (const std::string p = attention::mhla_options_problem(options, n); !p.empty())
                        throw std::invalid_argument("mhla: " + p);
            }
        } catch (const std::exception& e) {
            problems.push_back(u.key + ": " + e.what());
        }
    }
    if (problems.empty())
        return;
    throw InputError("the job cannot run as written (nothing was created): " + problems.front() +
                     (problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) + " more units)" : std::string()));
}

void make_output_folder(const std::string& dir)
{
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (!fs::is_directory(dir))
        throw InputError(dir + ": cannot create the output folder (" + ec.message() + ")");
    if (::access(dir.c_str(), W_OK) != 0)
        throw InputError(dir + ": the output folder is not writable (" + std::strerror(errno) + ")");
}

// Runs the units of one shard on the job's threads into the store: progress, failures and the first
// fatal error (results that cannot be saved) are gathered here.
class UnitRunner {
public:
    UnitRunner(const BatchPlan& plan, const BatchRunOptions& opt, const std::string& settings, ResultStore& store,
               BatchReport& report)
        : m_plan(plan), m_opt(opt), m_settings(settings), m_store(store), m_report(report)
    {
    }

    void run(const std::vector<const BatchUnit*>& todo)
    {
        m_start = std::chrono::steady_clock::now();
        m_finished = m_report.skipped;
        m_limit = m_plan.memory_limit ? m_plan.memory_limit : default_memory_limit() / static_cast<unsigned>(m_opt.jobs);
        io::set_read_limit_bytes(m_limit);   // every unit's inputs are checked against it before they are read
        if (m_opt.jobs > 1)
            kernels::set_threads(1);   // parallel units instead of parallel BLAS
        parallel_for(todo.size(), m_opt.jobs, [&](std::size_t i) {
            if (m_opt.cancel.cancelled())
                return false;
            return run_one(*todo[i]);
        });
        if (!m_fatal.empty())
            throw InputError(m_fatal + "; the " + std::to_string(m_store.size()) +
                             " records before it are kept: run the batch again to go on");
        m_report.cancelled = m_opt.cancel.cancelled();
    }

private:
    // False when the batch must stop (results can no longer be saved).
    bool run_one(const BatchUnit& u)
    {
        const auto unit_start = std::chrono::steady_clock::now();
        std::string failure;
        try {
            analyse(u);
        } catch (const AppendFailure& e) {
            std::lock_guard lock(m_mutex);
            if (m_fatal.empty())
                m_fatal = e.what();
            return false;
        } catch (const InputError& e) {
            failure = e.what();
        } catch (const std::invalid_argument& e) {
            failure = e.what();
        }
        finished(u, failure, unit_start);
        return true;
    }

    std::string sha256(const std::string& file)
    {
        {
            std::lock_guard lock(m_mutex);
            if (const auto it = m_sha.find(file); it != m_sha.end())
                return it->second;
        }
        const std::string sha = file_sha256(file);
        std::lock_guard lock(m_mutex);
        return m_sha[file] = sha;
    }

    void analyse(const BatchUnit& u)
    {
        const std::string sha = sha256(u.file);
        const LoadedInputs in = load_inputs(u.source.q_ref, u.source.k_ref, std::nullopt, u.source.selection);
        const attention::AttentionOptions options = with_head_mixing(u.options, in.heads);
        for (std::size_t mi = 0; mi < m_plan.mechanisms.size(); ++mi) {
            const Mechanism m = m_plan.mechanisms[mi];
            if (m_store.has(mechanism_key(u, m)))
                continue;
            const auto t0 = std::chrono::steady_clock::now();
            auto results = analyze(in.q.values, in.k.values, {m}, options, m_plan.metrics, m_limit);
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            json rec;
            rec["key"] = mechanism_key(u, m);
            rec["unit"] = u.index;
            rec["mechanism_index"] = mi;
            rec["settings"] = m_settings;
            rec["attnscope_version"] = ATTNSCOPE_VERSION;
            json input = in.input_json;
            if (!u.defaults_from_file.empty())
                input["defaults_from_file"] = u.defaults_from_file;
            input["file"] = u.file;
            input["sha256"] = sha;
            rec["input"] = std::move(input);
            rec["layer"] = u.layer ? json(*u.layer) : json();
            rec["head"] = u.head ? json(*u.head) : json();
            const json result = result_json(results.front(), m_plan.metrics);
            for (const auto& [k, value] : result.items())
                rec[k] = value;
            rec["seconds"] = seconds;
            {
                std::lock_guard lock(m_mutex);
                if (!m_fatal.empty())
                    return;
            }
            m_store.append(rec);
            std::lock_guard lock(m_mutex);
            ++m_report.records;
        }
    }

    void finished(const BatchUnit& u, const std::string& failure, std::chrono::steady_clock::time_point unit_start)
    {
        std::lock_guard lock(m_mutex);
        ++m_finished;
        if (failure.empty())
            ++m_report.analysed;
        else
            m_report.failures.push_back(u.key + ": " + failure);
        if (!m_opt.on_progress)
            return;
        const auto now = std::chrono::steady_clock::now();
        BatchProgress p;
        p.done = m_finished;
        p.total = m_report.units;
        const std::size_t run = m_finished - m_report.skipped;
        if (run > 0)
            p.eta_seconds = std::chrono::duration<double>(now - m_start).count() / static_cast<double>(run) *
                            static_cast<double>(m_report.units - m_finished);
        p.label = u.key + (failure.empty() ? "" : " (failed)") +
                  fmt::format(" {:.2f}s", std::chrono::duration<double>(now - unit_start).count());
        m_opt.on_progress(p);
    }

    const BatchPlan& m_plan;
    const BatchRunOptions& m_opt;
    const std::string& m_settings;
    ResultStore& m_store;
    BatchReport& m_report;
    std::mutex m_mutex;          // guards the report, the SHA cache, the progress count and m_fatal
    std::string m_fatal;
    std::map<std::string, std::string> m_sha;
    std::size_t m_finished = 0;
    std::uint64_t m_limit = 0;
    std::chrono::steady_clock::time_point m_start;
};

// The sweeps of this shard (after the units: they are the long-running part). A sweep whose files exist
// is done; figures come first, so a figure that failed (e.g. on a full disk) is drawn by the rerun.
void run_sweeps(const BatchPlan& plan, const std::vector<SweepPlan>& plans, std::size_t units, const BatchRunOptions& opt,
                BatchReport& report)
{
    const fs::path dir = fs::path(opt.out_dir) / "sweeps";
    JobContext ctx;
    ctx.token = opt.cancel;
    for (std::size_t j = 0; j < plan.sweeps.size(); ++j) {
        if (static_cast<int>((units + j) % static_cast<std::size_t>(opt.shard_count)) != opt.shard_index)
            continue;
        const BatchSweep& sw = plan.sweeps[j];
        const fs::path csv = dir / (sw.name + ".csv"), js = dir / (sw.name + ".json");
        if (fs::exists(csv) && fs::exists(js))
            continue;
        try {
            std::error_code ec;
            fs::create_directories(dir, ec);
            if (!fs::is_directory(dir))
                throw InputError(dir.string() + ": cannot create the folder (" + ec.message() + ")");
            auto recs = run_sweep(plans[j], ctx);
            if (opt.on_sweep_figures)
                opt.on_sweep_figures(sw, SweepResult{plans[j].spec, recs});
            write_file_atomically(js.string(), sweep_summary(plans[j].spec, recs, plans[j].inputs).dump(2) + "\n");
            write_file_atomically(csv.string(), sweep_csv(recs));
            ++report.sweeps;
        } catch (const JobCancelled&) {
            report.cancelled = true;
            return;
        } catch (const InputError& e) {
            report.failures.push_back("sweep " + sw.name + ": " + e.what());
        } catch (const std::invalid_argument& e) {
            report.failures.push_back("sweep " + sw.name + ": " + e.what());
        }
    }
}

void run_unit_figures(const std::vector<const BatchUnit*>& units, const BatchRunOptions& opt, BatchReport& report)
{
    if (!opt.on_unit_figures)
        return;
    for (const BatchUnit* u : units) {
        if (opt.cancel.cancelled()) {
            report.cancelled = true;
            return;
        }
        try {
            opt.on_unit_figures(*u);
        } catch (const InputError& e) {
            report.failures.push_back("figures of " + u->key + ": " + e.what());
        } catch (const std::invalid_argument& e) {
            report.failures.push_back("figures of " + u->key + ": " + e.what());
        }
    }
}

}  // namespace

namespace {

// The layers of a file to plan: one input per per-layer dataset (/layers/<i>/q as the PyTorch bridge writes
// them, each with its own attributes) when the queries have no 'l' axis and layers were chosen; else the
// file's queries as one input.
struct BatchInput {
    TensorSource source;
    std::optional<Index> layer;   // a per-layer dataset's layer
};

std::vector<BatchInput> batch_inputs(const BatchPlan& plan, const std::string& file)
{
    const std::string q = ref(file, plan.q_name), k = ref(file, plan.k_name);
    if (plan.layers.kind != AxisChoice::Kind::selection) {
        const io::TensorRef qr = io::parse_tensor_ref(q);
        const auto f = io::open_tensor_file(qr.file);
        const std::string layout = io::resolve_layout(f->find(qr.name), plan.selection, "--q " + q);
        if (layout.find('l') == std::string::npos) {
            std::vector<BatchInput> out;
            for (const LayerTensors& l : layer_tensors(q, k, std::nullopt))
                if (plan.layers.kind == AxisChoice::Kind::all ||
                    std::find(plan.layers.indices.begin(), plan.layers.indices.end(), l.layer) != plan.layers.indices.end())
                    out.push_back({{l.q_ref, l.k_ref, std::nullopt, plan.selection}, l.layer});
            for (const Index want : plan.layers.indices)
                if (std::none_of(out.begin(), out.end(), [&](const BatchInput& b) { return b.layer == want; }))
                    throw InputError(file + ": " + plan.layers.what + " names layer " + std::to_string(want) +
                                     ", which the file's per-layer datasets (like " + plan.q_name + ") do not hold");
            if (!out.empty())
                return out;   // else: plan_units says the layout has no 'l' axis
        }
    }
    return {{{q, k, std::nullopt, plan.selection}, std::nullopt}};
}

}  // namespace

std::vector<BatchUnit> plan_batch_units(const BatchPlan& plan)
{
    std::vector<BatchUnit> units;
    for (const std::string& file : plan.files)
        for (const BatchInput& in : batch_inputs(plan, file)) {
            AnalysisSetup setup{in.source.selection, plan.options, plan.given};
            const json from_file = resolve_file_defaults(in.source.q_ref, setup);
            const TensorSource source{in.source.q_ref, in.source.k_ref, std::nullopt, setup.selection};
            const AxisChoice layers = in.layer ? AxisChoice{} : plan.layers;
            for (Unit& u : plan_units({source}, layers, plan.heads, {in.layer})) {
                BatchUnit b;
                b.index = units.size();
                b.file = file;
                b.layer = u.layer;
                b.head = u.head;
                b.key = unit_key(b.file, b.layer, b.head);
                b.source = std::move(u.source);
                b.options = setup.options;
                b.defaults_from_file = from_file;
                units.push_back(std::move(b));
            }
        }
    return units;
}

BatchReport run_batch(const BatchPlan& plan, const BatchRunOptions& opt)
{
    if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count)
        throw std::invalid_argument("--shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
                                    ": expected I/N with 0 <= I < N");
    if (opt.jobs < 1)
        throw std::invalid_argument("--jobs must be at least 1");
    if (plan.files.empty())
        throw InputError("the job names no input file");

    // The whole plan is known to be possible before the folder is made.
    const std::string settings = settings_hash(plan);
    const std::vector<BatchUnit> all_units = plan_batch_units(plan);
    const std::vector<SweepPlan> sweep_plans = plan_sweeps(plan);
    check_units(plan, all_units,
                plan.memory_limit ? plan.memory_limit : default_memory_limit() / static_cast<unsigned>(opt.jobs));
    make_output_folder(opt.out_dir);
    std::vector<const BatchUnit*> units;
    ShardInfo shard{settings, opt.shard_index, opt.shard_count, all_units.size(), {}, {}};
    for (const BatchUnit& u : all_units)
        if (static_cast<int>(u.index % static_cast<std::size_t>(opt.shard_count)) == opt.shard_index) {
            units.push_back(&u);
            shard.units.push_back(u.index);
        }
    for (const Mechanism m : plan.mechanisms)
        shard.mechanisms.emplace_back(attention::to_string(m));
    write_shard_info(opt.out_dir, shard);

    ResultStore store(opt.out_dir, settings);
    const auto recorded = [&](const BatchUnit& u) {
        for (Mechanism m : plan.mechanisms)
            if (!store.has(mechanism_key(u, m)))
                return false;
        return true;
    };
    BatchReport report;
    report.units = units.size();
    std::vector<const BatchUnit*> todo;
    for (const BatchUnit* u : units) {
        if (recorded(*u))
            ++report.skipped;
        else
            todo.push_back(u);
    }
    UnitRunner(plan, opt, settings, store, report).run(todo);
    if (!report.cancelled)
        run_sweeps(plan, sweep_plans, all_units.size(), opt, report);
    if (!report.cancelled)
        run_unit_figures(units, opt, report);

    if (std::all_of(units.begin(), units.end(), [&](const BatchUnit* u) { return recorded(*u); }))
        store.write_final();   // every unit of this shard is recorded: final order and summary
    write_failures(opt.out_dir, report.failures);
    return report;
}

}  // namespace attnscope::analysis
