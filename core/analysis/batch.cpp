#include "analysis/batch.h"
#include "analysis/batch_outputs.h"
#include "analysis/batch_units.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "analysis/inputs.h"
#include "analysis/mask_measures.h"
#include "analysis/plan.h"
#include "attention/operator.h"
#include "io/tensor_file.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_text.h"


namespace attnscope::analysis {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using attention::Mechanism;
using Eigen::Index;

namespace {

// `display`: the file's path as shown (lossy UTF-8), so that a key read back from results.jsonl equals it.
std::string unit_key(const std::string& display, std::optional<Index> layer, std::optional<Index> head,
                     const std::map<char, Index>& at)
{
    std::string key = display + "|l=" + (layer ? std::to_string(*layer) : "-") + "|h=" + (head ? std::to_string(*head) : "-");
    for (const auto& [axis, index] : at)   // only axes given as `all`: the keys of other jobs are unchanged
        key.append("|").append(1, axis).append("=").append(std::to_string(index));
    return key;
}

// Identifies the analysis settings: records made with other settings are not reused. The JSON itself goes
// into shard.json, so that a refusal can name the setting that differs.
json settings_json(const BatchPlan& plan)
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
    if (!plan.selection.all.empty())   // only then: the settings hash of other jobs is unchanged
        j["at_all"] = std::string(plan.selection.all.begin(), plan.selection.all.end());
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
    if (o.decay.gamma)   // only when given: older settings keep their hash
        j["decay"] = *o.decay.gamma;
    if (!o.gates.source.empty()) {
        // The gates file's content too (like a learned mixing matrix's numbers above): a rerun after it changed is
        // refused like any changed setting instead of keeping records of the old gates. Only a regular file is
        // hashed; anything else is refused by the reader when the units run.
        const io::TensorRef gates = gates_ref(o.gates);   // an array in memory names no file to hash
        const std::string& file = gates.file;
        std::error_code ec;
        const bool regular = !gates.array && fs::is_regular_file(file, ec);
        j["gates"] = {o.gates.source, o.gates.log, regular ? file_sha256(file) : std::string()};
    }
    j["metrics"] = {plan.metrics.spectrum, plan.metrics.entropy, std::string(to_string(plan.metrics.method)),
                    plan.metrics.rank_rtol ? *plan.metrics.rank_rtol : -1.0,
                    plan.metrics.top_k ? *plan.metrics.top_k : Index{-1}, plan.metrics.row_entropy};
    if (plan.metrics.past_split)   // only when given: older settings keep their hash
        j["metrics"].push_back(*plan.metrics.past_split);
    if (plan.metrics.past_splits)   // the same
        j["metrics"].push_back(nlohmann::ordered_json{{"past_splits", *plan.metrics.past_splits}});
    return j;
}

// A [[sweep]] over every file of the job, with the job's options and selection.
SweepSpec sweep_spec(const BatchPlan& plan, const BatchSweep& sw)
{
    SweepSpec spec = sw.spec;
    spec.inputs.clear();
    for (const std::string& file : plan.files)
        spec.inputs.push_back({io::tensor_in(file, plan.q_name), io::tensor_in(file, plan.k_name), std::nullopt, plan.selection});
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
            const auto file = io::open_tensor(s.q_ref);
            const io::TensorInfo& info = file->find(s.q_ref.name);
            const std::string layout = io::resolve_layout(info, s.selection, "--q " + s.q_ref.text);
            const Index n = selected_tokens(s), d = info.shape[layout.find('d')];
            (void)past_split_of(options.causal, plan.metrics.past_split, n);   // a given split outside 1..N-1
            for (const Mechanism m : plan.mechanisms) {
                (void)mechanism_params(m, options_for(m, options), n, d);
                if (const std::string p = attention::mechanism_problem(m, options, n); !p.empty())
                    throw std::invalid_argument(std::string(attention::to_string(m)).append(": ").append(p));
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

// A folder of ours inside the output folder (figures/, sweeps/) must not be a link: a rerun removes files
// in it. False when it does not exist.
bool own_subfolder(const fs::path& dir)
{
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(dir, ec);
    if (!fs::exists(st))
        return false;
    if (fs::is_symlink(st) || !fs::is_directory(st))
        throw InputError(dir.string() + ": is " + (fs::is_symlink(st) ? "a symbolic link" : "not a folder") +
                         "; a batch folder's files must be its own (use another --out folder)");
    return true;
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
    const io::TensorRef q = io::tensor_in(file, plan.q_name), k = io::tensor_in(file, plan.k_name);
    if (plan.layers.kind != AxisChoice::Kind::selection) {
        const auto f = io::open_tensor(q);
        const std::string layout = io::resolve_layout(f->find(q.name), plan.selection, "--q " + q.text);
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
    const std::vector<std::string> names = input_names(plan.files);
    std::map<std::string, std::string> shown_as;   // display -> file
    std::vector<BatchUnit> units;
    for (std::size_t fi = 0; fi < plan.files.size(); ++fi) {
        const std::string& file = plan.files[fi];
        const std::string display = display_path(file);
        if (const auto [it, fresh] = shown_as.emplace(display, file); !fresh && it->second != file)
            throw InputError("inputs " + display + " and another file show as the same name (their paths differ only in "
                             "bytes that are not UTF-8): rename one");
        for (const BatchInput& in : batch_inputs(plan, file)) {
            AnalysisSetup setup{in.source.selection, plan.options, plan.given};
            const json from_file = resolve_file_defaults(in.source.q_ref, setup);
            const TensorSource source{in.source.q_ref, in.source.k_ref, std::nullopt, setup.selection};
            const AxisChoice layers = in.layer ? AxisChoice{} : plan.layers;
            for (Unit& u : plan_units({source}, layers, plan.heads, {in.layer})) {
                BatchUnit b;
                b.index = units.size();
                b.file = file;
                b.display = display;
                b.name = names[fi];
                b.layer = u.layer;
                b.head = u.head;
                b.at = u.at;
                b.key = unit_key(b.display, b.layer, b.head, b.at);
                b.source = std::move(u.source);
                b.options = setup.options;
                b.defaults_from_file = from_file;
                units.push_back(std::move(b));
            }
        }
    }
    return units;
}

namespace {

// Every figure file of the whole job, by name (refusing two different drawings on one name before
// anything is created), and those of this shard.
std::set<std::string> check_figure_files(const BatchPlan& plan, const std::vector<BatchUnit>& all_units,
                                         const BatchRunOptions& opt)
{
    std::map<std::string, std::string> what_of;
    std::set<std::string> ours;
    const auto add = [&](const FigureFile& f, bool this_shard) {
        if (f.name.empty() || f.name.find('/') != std::string::npos || f.name.front() == '.')
            throw std::invalid_argument("figure name '" + f.name + "' is not a plain file name");
        const auto [it, fresh] = what_of.emplace(f.name, f.what);
        if (!fresh && it->second != f.what)
            throw InputError("two figures of the job would be written to figures/" + f.name + ": " + it->second + " and " +
                             f.what + " (nothing was created)");
        if (this_shard)
            ours.insert(f.name);
    };
    const auto shard_of = [&](std::size_t i) { return static_cast<int>(i % static_cast<std::size_t>(opt.shard_count)); };
    if (opt.unit_figure_files)
        for (const BatchUnit& u : all_units)
            for (const FigureFile& f : opt.unit_figure_files(u))
                add(f, shard_of(u.index) == opt.shard_index);
    if (opt.sweep_figure_files)
        for (std::size_t j = 0; j < plan.sweeps.size(); ++j)
            for (const FigureFile& f : opt.sweep_figure_files(plan.sweeps[j]))
                add(f, shard_of(all_units.size() + j) == opt.shard_index);
    return ours;
}

// A rerun: the records of this shard's folder that still answer the job as it is now. A record of a unit no
// longer in this shard (its input left the job, the heads or layers changed) or whose input's SHA-256
// changed is dropped, and the figures of a changed input are removed first (a kill in between leaves
// records without figures, which the next run draws, never figures without their records); the rest keep
// their records with the unit's current index. results.jsonl is rewritten atomically, only when something
// changed.
void reconcile(ResultStore& store, const BatchPlan& plan, const std::vector<const BatchUnit*>& units, HashCache& hashes,
               const BatchRunOptions& opt, BatchReport& report)
{
    std::map<std::string, std::pair<const BatchUnit*, std::size_t>> wanted;
    for (const BatchUnit* u : units)
        for (std::size_t mi = 0; mi < plan.mechanisms.size(); ++mi)
            wanted[mechanism_key(*u, plan.mechanisms[mi])] = {u, mi};
    std::map<std::string, json> records = store.records();
    std::set<const BatchUnit*> changed;
    std::set<std::string> changed_files, gone_files;
    std::size_t gone = 0, renumbered = 0, dropped_changed = 0;
    for (auto it = records.begin(); it != records.end();) {
        json& rec = it->second;
        const auto w = wanted.find(it->first);
        if (w == wanted.end()) {
            const json& input = rec.contains("input") && rec["input"].is_object() ? rec["input"] : json();
            gone_files.insert(input.contains("file") && input["file"].is_string() ? input["file"].get<std::string>() : it->first);
            ++gone;
            it = records.erase(it);
            continue;
        }
        const BatchUnit& u = *w->second.first;
        const json sha = rec.contains("input") && rec["input"].is_object() && rec["input"].contains("sha256")
                             ? rec["input"]["sha256"]
                             : json();
        if (!sha.is_string() || sha.get<std::string>() != hashes.get(u.file)) {
            changed.insert(&u);
            changed_files.insert(u.display);
            ++dropped_changed;
            it = records.erase(it);
            continue;
        }
        if (rec["unit"] != json(u.index) || rec["mechanism_index"] != json(w->second.second)) {
            rec["unit"] = u.index;
            rec["mechanism_index"] = w->second.second;
            ++renumbered;
        }
        ++it;
    }
    if (gone == 0 && changed.empty() && renumbered == 0)
        return;
    const fs::path figures = fs::path(opt.out_dir) / "figures";
    if (opt.unit_figure_files && own_subfolder(figures))
        for (const BatchUnit* u : changed)
            for (const FigureFile& f : opt.unit_figure_files(*u))
                remove_file(figures / f.name);
    store.replace(std::move(records));
    report.dropped += gone + dropped_changed;
    for (const std::string& f : changed_files)
        report.notes.push_back("input changed since its records were made: " + f + " (its units are analysed again)");
    if (gone)
        report.notes.push_back(std::to_string(gone) + " records of units no longer in this shard of the job were dropped (" +
                               std::to_string(gone_files.size()) + " inputs, e.g. " + *gone_files.begin() + ")");
}

// Figures in DIR/figures/ that the job does not draw any more (their input left the job, a [[figure]] table
// changed): removed, so that the folder holds only what the job makes.
void remove_stale_figures(const BatchRunOptions& opt, const std::set<std::string>& ours, BatchReport& report)
{
    if (!opt.unit_figure_files && !opt.sweep_figure_files)
        return;
    const fs::path figures = fs::path(opt.out_dir) / "figures";
    if (!own_subfolder(figures))
        return;
    std::vector<fs::path> stale;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(figures, ec)) {
        const std::string ext = e.path().extension().string();
        const bool figure = ext == ".png" || ext == ".pdf" || ext == ".svg";
        // A link where a figure belongs is never taken for the figure (merge refuses links): drawn anew.
        if (figure && (!ours.count(e.path().filename().string()) || e.is_symlink(ec)))
            stale.push_back(e.path());
    }
    for (const fs::path& p : stale)
        remove_file(p);
    if (!stale.empty())
        report.notes.push_back(std::to_string(stale.size()) + " figures the job no longer draws were removed from " +
                               figures.string());
}

}  // namespace

BatchReport run_batch(const BatchPlan& plan, const BatchRunOptions& opt)
{
    if (opt.shard_count < 1 || opt.shard_index < 0 || opt.shard_index >= opt.shard_count ||
        static_cast<std::uint64_t>(opt.shard_count) > kMaxShards)
        throw std::invalid_argument("--shard " + std::to_string(opt.shard_index) + "/" + std::to_string(opt.shard_count) +
                                    ": expected I/N with 0 <= I < N <= " + std::to_string(kMaxShards));
    if (opt.jobs < 1)
        throw std::invalid_argument("--jobs must be at least 1");
    if (plan.files.empty())
        throw InputError("the job names no input file");

    // The whole plan is known to be possible before the folder is made.
    const json settings_detail = settings_json(plan);
    const std::string settings = settings_hash(settings_detail);
    const std::vector<BatchUnit> all_units = plan_batch_units(plan);
    const std::vector<SweepPlan> sweep_plans = plan_sweeps(plan);
    check_units(plan, all_units,
                plan.memory_limit ? plan.memory_limit : default_memory_limit() / static_cast<unsigned>(opt.jobs));
    const std::set<std::string> our_figures = check_figure_files(plan, all_units, opt);
    make_output_folder(opt.out_dir);
    own_subfolder(fs::path(opt.out_dir) / "figures");
    own_subfolder(fs::path(opt.out_dir) / "sweeps");
    own_subfolder(fs::path(opt.out_dir) / "depth");
    std::vector<const BatchUnit*> units;
    ShardInfo shard;
    shard.settings = settings;
    shard.settings_detail = settings_detail;
    shard.shard = static_cast<std::uint64_t>(opt.shard_index);
    shard.shards = static_cast<std::uint64_t>(opt.shard_count);
    shard.units_total = all_units.size();
    json keys = json::array();
    for (const BatchUnit& u : all_units)
        keys.push_back(u.key);
    shard.plan = settings_hash(keys);   // shards of one job name the same units
    for (const BatchUnit& u : all_units)
        if (static_cast<int>(u.index % static_cast<std::size_t>(opt.shard_count)) == opt.shard_index) {
            units.push_back(&u);
            shard.units.push_back(u.index);
        }
    for (const Mechanism m : plan.mechanisms)
        shard.mechanisms.emplace_back(attention::to_string(m));
    write_shard_info(opt.out_dir, shard);

    ResultStore store(opt.out_dir, settings);
    BatchReport report;
    HashCache hashes;
    reconcile(store, plan, units, hashes, opt, report);
    remove_stale_figures(opt, our_figures, report);
    const auto recorded = [&](const BatchUnit& u) {
        for (Mechanism m : plan.mechanisms)
            if (!store.has(mechanism_key(u, m)))
                return false;
        return true;
    };
    report.units = units.size();
    std::vector<const BatchUnit*> todo;
    for (const BatchUnit* u : units) {
        if (recorded(*u))
            ++report.skipped;
        else
            todo.push_back(u);
    }
    run_units(todo, plan, opt, settings, store, hashes, report);
    if (!report.cancelled)
        run_sweeps(plan, sweep_plans, all_units.size(), settings, hashes, opt, report);
    if (!report.cancelled)
        run_depths(plan, all_units.size() + plan.sweeps.size(), settings, hashes, opt, report);
    if (!report.cancelled)
        run_unit_figures(units, opt, report);

    if (std::all_of(units.begin(), units.end(), [&](const BatchUnit* u) { return recorded(*u); }))
        store.write_final();   // every unit of this shard is recorded: final order and summary
    write_failures(opt.out_dir, report.failures);
    return report;
}

}  // namespace attnscope::analysis
