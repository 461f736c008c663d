#include "analysis/batch_outputs.h"

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/batch_store.h"
#include "analysis/depth.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/json_text.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

void remove_file(const fs::path& path)
{
    std::error_code ec;
    fs::remove(path, ec);   // a link is removed, never followed
}

namespace {


// What a sweep's results depend on: the job's settings, the sweep's spec, and every input (path and
// SHA-256). Written into sweeps/NAME.json; a rerun whose fingerprint differs runs the sweep again.
std::string sweep_fingerprint(const BatchPlan& plan, const BatchSweep& sw, const SweepPlan& sp, const std::string& settings,
                              HashCache& hashes)
{
    json j;
    j["settings"] = settings;
    j["spec"] = sweep_result_json(SweepResult{sp.spec, {}})["spec"];
    const auto axis = [](const AxisChoice& a) { return json{static_cast<int>(a.kind), a.indices}; };
    j["heads"] = axis(sw.spec.heads);
    j["layers"] = axis(sw.spec.layers);
    json files = json::array();
    for (const std::string& f : plan.files)
        files.push_back({display_path(f), hashes.get(f)});
    j["files"] = files;
    return settings_hash(j);
}

// The fingerprint recorded in a finished sweep's JSON ("" when there is none or it cannot be read).
std::string recorded_fingerprint(const fs::path& js)
{
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(js, ec)))
        return "";
    std::ifstream in(js, std::ios::binary);
    const json doc = json::parse(in, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("batch") || !doc["batch"].is_object())
        return "";
    const json& fp = doc["batch"].contains("fingerprint") ? doc["batch"]["fingerprint"] : json();
    return fp.is_string() ? fp.get<std::string>() : "";
}

// The state of an output pair (CSV and JSON with its fingerprint). Anything but `done` leaves neither file: a stale
// or half-written pair is removed, the JSON first, so that a kill never leaves a stale output looking done.
enum class OutputState { done, stale, partial, absent };

OutputState output_state(const fs::path& csv, const fs::path& js, const std::string& fingerprint)
{
    std::error_code ec;
    const bool had_csv = fs::exists(fs::symlink_status(csv, ec)), had_json = fs::exists(fs::symlink_status(js, ec));
    if (had_csv && had_json && recorded_fingerprint(js) == fingerprint)
        return OutputState::done;
    if (!had_csv && !had_json)
        return OutputState::absent;
    remove_file(js);
    remove_file(csv);
    return had_csv && had_json ? OutputState::stale : OutputState::partial;
}

// Whether a sweep's [[figure]] files are to be drawn and one is not there: a headless attnscope (no figure hook)
// recorded the sweep, or a figure was removed. The sweep then runs again so that its figures are drawn.
bool figures_missing(const BatchSweep& sw, const BatchRunOptions& opt)
{
    if (!opt.on_sweep_figures || !opt.sweep_figure_files)
        return false;
    std::error_code ec;
    for (const FigureFile& f : opt.sweep_figure_files(sw))
        if (!fs::exists(fs::symlink_status(fs::path(opt.out_dir) / "figures" / f.name, ec)))
            return true;
    return false;
}

}  // namespace

// The sweeps of this shard (after the units: they are the long-running part). A sweep whose files exist
// and whose fingerprint matches is done (unless figures of it are missing: it runs again to draw them); a stale one (an input or the spec changed) loses its files and
// figures first and runs again. Figures come first, so a figure that failed (e.g. on a full disk) is drawn
// by the rerun.
void run_sweeps(const BatchPlan& plan, const std::vector<SweepPlan>& plans, std::size_t units, const std::string& settings,
                HashCache& hashes, const BatchRunOptions& opt, BatchReport& report)
{
    const fs::path dir = fs::path(opt.out_dir) / "sweeps";
    JobContext ctx;
    ctx.token = opt.cancel;
    for (std::size_t j = 0; j < plan.sweeps.size(); ++j) {
        if (static_cast<int>((units + j) % static_cast<std::size_t>(opt.shard_count)) != opt.shard_index)
            continue;
        const BatchSweep& sw = plan.sweeps[j];
        const fs::path csv = dir / (sw.name + ".csv"), js = dir / (sw.name + ".json");
        try {
            const std::string fingerprint = sweep_fingerprint(plan, sw, plans[j], settings, hashes);
            const OutputState state = output_state(csv, js, fingerprint);
            if (state == OutputState::done && !figures_missing(sw, opt))
                continue;
            if (state == OutputState::done)
                report.notes.push_back("sweep " + sw.name + ": figures of it are missing (drawn by a headless run, or "
                                       "removed): run again to draw them");
            if (state != OutputState::absent && opt.sweep_figure_files)
                for (const FigureFile& f : opt.sweep_figure_files(sw))
                    remove_file(fs::path(opt.out_dir) / "figures" / f.name);
            if (state == OutputState::stale)
                report.notes.push_back("sweep " + sw.name + ": its inputs or spec changed since it ran: run again");
            std::error_code ec;
            fs::create_directories(dir, ec);
            if (!fs::is_directory(dir))
                throw InputError(dir.string() + ": cannot create the folder (" + ec.message() + ")");
            auto recs = run_sweep(plans[j], ctx);
            if (opt.on_sweep_figures)
                opt.on_sweep_figures(sw, SweepResult{plans[j].spec, recs});
            json summary = sweep_summary(plans[j].spec, recs, plans[j].inputs);
            summary["batch"] = {{"fingerprint", fingerprint}};
            write_file_atomically(csv.string(), sweep_csv(recs));
            write_file_atomically(js.string(), json_text(summary, 2) + "\n");   // last: the sweep is done
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

namespace {

// The depth request of one file of the job ([depth]): the job's layers (every layer unless it lists some), the
// head mean or one head.
DepthRequest depth_request(const BatchPlan& plan, const std::string& file)
{
    DepthRequest req;
    req.plan = plan;
    req.plan.files = {file};
    req.plan.sweeps.clear();
    req.plan.depth.reset();
    if (req.plan.layers.kind == AxisChoice::Kind::selection)
        req.plan.layers = AxisChoice::all("layers");
    req.head_mean = !plan.depth->head;
    req.plan.heads = plan.depth->head ? AxisChoice::list({*plan.depth->head}, "[depth] head") : AxisChoice::all("heads");
    req.alpha = plan.depth->alpha;
    return req;
}

// depth/<name>.csv: one row per depth and mechanism.
std::string depth_csv(const json& doc)
{
    std::string out = "depth,layer,mechanism,rank,effective_rank,stable_rank,entropy_mean,entropy_normalized_mean,"
                      "semiseparable_rank,residual_to_uniform\n";
    const auto cell = [](const json& v) -> std::string {
        if (v.is_number_integer())
            return std::to_string(v.get<long long>());
        if (v.is_number())
            return fmt::format("{:.17g}", v.get<double>());
        return "";
    };
    for (const json& step : doc.at("depth"))
        for (const json& r : step.at("results")) {
            const json none;
            const json& e = r.contains("entropy") && r["entropy"].is_object() ? r["entropy"] : none;
            const json& pp = r.contains("semiseparable_rank") ? r["semiseparable_rank"] : none;
            out += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", cell(step["depth"]), cell(step["layer"]),
                               r["mechanism"].get<std::string>(), cell(r.value("rank", json())),
                               cell(r.value("effective_rank", json())), cell(r.value("stable_rank", json())),
                               cell(e.is_object() ? e.value("mean", json()) : json()),
                               cell(e.is_object() ? e.value("normalized_mean", json()) : json()), cell(pp),
                               cell(r["residual_to_uniform"]));
        }
    return out;
}

}  // namespace

// [depth] of this shard, after the sweeps: for each file, depth/<name>.json (the document of `attnscope depth
// --json`, with the fingerprint of the job's settings, [depth] and the file's SHA-256) and depth/<name>.csv. A
// file whose documents exist with the same fingerprint is done; a stale one loses them first and runs again.
void run_depths(const BatchPlan& plan, std::size_t offset, const std::string& settings, HashCache& hashes,
                const BatchRunOptions& opt, BatchReport& report)
{
    if (!plan.depth)
        return;
    const fs::path dir = fs::path(opt.out_dir) / "depth";
    const std::vector<std::string> names = input_names(plan.files);
    JobContext ctx;
    ctx.token = opt.cancel;
    for (std::size_t i = 0; i < plan.files.size(); ++i) {
        if (static_cast<int>((offset + i) % static_cast<std::size_t>(opt.shard_count)) != opt.shard_index)
            continue;
        if (opt.cancel.cancelled()) {
            report.cancelled = true;
            return;
        }
        const std::string& file = plan.files[i];
        const fs::path csv = dir / (names[i] + ".csv"), js = dir / (names[i] + ".json");
        try {
            json fp;
            fp["settings"] = settings;
            fp["alpha"] = plan.depth->alpha;
            fp["head"] = plan.depth->head ? json(*plan.depth->head) : json("mean");
            fp["file"] = {display_path(file), hashes.get(file)};
            const std::string fingerprint = settings_hash(fp);
            const OutputState state = output_state(csv, js, fingerprint);
            if (state == OutputState::done)
                continue;
            if (state == OutputState::stale)
                report.notes.push_back("depth of " + display_path(file) + ": its input or settings changed: run again");
            json doc = depth_document(depth_request(plan, file), &ctx);
            doc["batch"] = {{"fingerprint", fingerprint}};
            std::error_code ec;
            fs::create_directories(dir, ec);
            if (!fs::is_directory(dir))
                throw InputError(dir.string() + ": cannot create the folder (" + ec.message() + ")");
            write_file_atomically(csv.string(), depth_csv(doc));
            write_file_atomically(js.string(), json_text(doc, 2) + "\n");   // last: this file's depth is done
            ++report.depths;
        } catch (const JobCancelled&) {
            report.cancelled = true;
            return;
        } catch (const InputError& e) {
            report.failures.push_back("depth of " + display_path(file) + ": " + e.what());
        } catch (const std::invalid_argument& e) {
            report.failures.push_back("depth of " + display_path(file) + ": " + e.what());
        }
    }
}

}  // namespace attnscope::analysis
