// `attnscope batch` (a TOML job over many files, layers and heads: docs/batch.md) and `attnscope merge`
// (the output folders of its shards: docs/cluster.md).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

#include <fmt/format.h>

#include "analysis/batch.h"
#include "batch_job.h"
#include "cli_common.h"
#include "cli_options.h"
#include "kernels/kernels.h"
#include "util/checked.h"

#ifdef ATTNSCOPE_WITH_GUI
#include "analysis/explore.h"
#include "figure.h"
#endif

namespace attnscope::app {

namespace {

namespace fs = std::filesystem;

struct BatchArgs {
    std::string job;
    std::string out;
    int jobs = 1;
    std::string shard = "0/1";
};

std::string duration_text(double seconds)
{
    if (seconds < 0)
        return "?";
    const long s = std::lround(seconds);
    if (s >= 3600)
        return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
    if (s >= 60)
        return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

// --shard I/N: plain decimal numbers only (std::stoi read "0x1" as 0 and ignored the rest), 0 <= I < N,
// N at most analysis::kMaxShards (docs/cli.md).
void parse_shard(const std::string& text, analysis::BatchRunOptions& opt)
{
    constexpr auto k_max_shards = static_cast<std::int64_t>(analysis::kMaxShards);
    const auto slash = text.find('/');
    const auto i = slash == std::string::npos ? std::nullopt : parse_decimal(std::string_view(text).substr(0, slash));
    const auto n = slash == std::string::npos ? std::nullopt : parse_decimal(std::string_view(text).substr(slash + 1));
    if (!i || !n || *n < 1 || *n > k_max_shards || *i < 0 || *i >= *n)
        throw std::invalid_argument("--shard " + text + ": expected I/N in decimal, e.g. 0/4, with 0 <= I < N <= " +
                                    std::to_string(k_max_shards));
    opt.shard_index = static_cast<int>(*i);
    opt.shard_count = static_cast<int>(*n);
}

// One line per finished unit: rewritten in place on a terminal, appended in a log.
void print_progress(const analysis::BatchProgress& p, bool tty)
{
    const double pct = p.total ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : 100.0;
    if (tty)
        std::fprintf(stderr, "\r[%zu/%zu] %3.0f%% ETA %-7s %-60.60s", p.done, p.total, pct, duration_text(p.eta_seconds).c_str(),
                     p.label.c_str());
    else
        std::fprintf(stderr, "progress %zu/%zu (%.0f%%) eta %s: %s\n", p.done, p.total, pct,
                     duration_text(p.eta_seconds).c_str(), p.label.c_str());
}

// Renders `render(path)` into DIR/figures/NAME unless the figure is there already (resume); each figure is
// written atomically by the export.
[[maybe_unused]]   // (only figures use it, and they need the GUI build)
void render_if_missing(const fs::path& figures, const std::string& name, const std::function<void(const std::string&)>& render)
{
    const fs::path path = figures / name;
    if (fs::exists(path))
        return;
    std::error_code ec;
    fs::create_directories(figures, ec);
    if (!fs::is_directory(figures))
        throw InputError(figures.string() + ": cannot create the folder (" + ec.message() + ")");
    render(path.string());
}

#ifdef ATTNSCOPE_WITH_GUI
// The [[figure]] tables of explore views and the overview, drawn for one unit by the desktop app's views.
void unit_figures(const BatchJob& job, const analysis::BatchUnit& u, const fs::path& figures)
{
    const analysis::BatchPlan& plan = job.plan;
    for (const BatchFigure& f : job.figures) {
        const std::optional<std::string> name = unit_figure_name(f, u);
        if (!name)
            continue;
        if (f.view == "overview") {
            // One overview per file (every unit of the file names the same figure: drawn once).
            render_if_missing(figures, *name, [&](const std::string& out) {
                const analysis::TensorSource src{io::tensor_in(u.file, plan.q_name), io::tensor_in(u.file, plan.k_name), std::nullopt,
                                                 plan.selection};
                auto sweep = std::make_shared<analysis::SweepResult>();
                sweep->spec = analysis::overview_spec(src, plan.options, plan.metrics);
                sweep->spec.given = plan.given;
                sweep->spec.mechanisms = plan.mechanisms;
                sweep->records = analysis::run_sweep(analysis::plan_sweep(sweep->spec), analysis::JobContext{});
                FigureTarget t = f.size;
                t.path = out;
                render_sweep_figure(sweep, "overview", f.look, t);
            });
            continue;
        }
        render_if_missing(figures, *name, [&](const std::string& out) {
            analysis::ExploreRequest req;
            req.source = u.source;
            req.mechanisms = plan.mechanisms;
            req.options = u.options;
            req.rank_rtol = plan.metrics.rank_rtol;
            req.past_split = plan.metrics.past_split;
            req.memory_limit = plan.memory_limit;
            FigureTarget t = f.size;
            t.path = out;
            render_explore_figure(req, f.view, f.look, t);
        });
    }
}

// The [[figure]] tables of view "curves" that draw sweep `sw`.
void sweep_figures(const BatchJob& job, const analysis::BatchSweep& sw, const analysis::SweepResult& result,
                   const fs::path& figures)
{
    auto shared = std::make_shared<const analysis::SweepResult>(result);
    for (const BatchFigure& f : job.figures) {
        const std::optional<std::string> name = sweep_figure_name(f, sw);
        if (!name)
            continue;
        render_if_missing(figures, *name, [&](const std::string& out) {
            FigureTarget t = f.size;
            t.path = out;
            render_sweep_figure(shared, "curves", f.look, t);
        });
    }
}
#endif

void set_figure_hooks(const BatchJob& job, const std::string& job_path, analysis::BatchRunOptions& opt)
{
    // The names are known without drawing (and without the GUI): set even when the job draws nothing, so
    // that a rerun removes the figures of tables the job no longer has.
    opt.unit_figure_files = [&job](const analysis::BatchUnit& u) { return unit_figure_files(job, u); };
    opt.sweep_figure_files = [&job](const analysis::BatchSweep& sw) { return sweep_figure_files(job, sw); };
    if (job.figures.empty())
        return;
#ifdef ATTNSCOPE_WITH_GUI
    const fs::path figures = fs::path(opt.out_dir) / "figures";
    opt.on_unit_figures = [&job, figures](const analysis::BatchUnit& u) { unit_figures(job, u, figures); };
    opt.on_sweep_figures = [&job, figures](const analysis::BatchSweep& sw, const analysis::SweepResult& r) {
        sweep_figures(job, sw, r, figures);
    };
#else
    // The numbers are the study; the figures can follow: a rerun of the same job by the desktop app's attnscope skips
    // every recorded unit and draws the figures missing from figures/ (a cluster runs headless, a workstation draws).
    std::cerr << "note: " << job_path << ": its " << job.figures.size() << " [[figure]] table(s) are not drawn: "
              << needs_desktop_app("[[figure]]")
              << ". Rerun the job with the desktop app's attnscope to draw them; it keeps every recorded unit\n";
#endif
}

int run_batch(const BatchArgs& a)
{
    analysis::BatchRunOptions opt;
    parse_shard(a.shard, opt);
    opt.jobs = a.jobs;
    const BatchJob job = parse_batch_job(a.job);
    (void)kernels::reserve_blas_buffers();   // under ulimit -v: an error line, never OpenBLAS waiting for its buffer
    opt.out_dir = a.out.empty() ? (fs::path(a.job).stem().string() + "_results") : a.out;
    const bool tty = ::isatty(2);
    opt.on_progress = [tty](const analysis::BatchProgress& p) { print_progress(p, tty); };
    set_figure_hooks(job, a.job, opt);
    const analysis::BatchReport report = analysis::run_batch(job.plan, opt);
    if (tty)
        std::fprintf(stderr, "\n");
    for (const std::string& note : report.notes)
        std::cerr << "note: " << note << "\n";
    std::cerr << fmt::format("batch {}: {} units ({} already recorded, {} analysed), {} new records, {} sweeps{} -> {}\n", a.job,
                             report.units, report.skipped, report.analysed, report.records, report.sweeps,
                             job.plan.depth ? fmt::format(", {} depth documents", report.depths) : std::string(),
                             opt.out_dir);
    if (report.failures.empty())
        return 0;
    for (const auto& f : report.failures)
        std::cerr << "failed: " << f << "\n";
    // The one error line says what went wrong first (a full disk, a bad file), not only how often.
    const bool listed = fs::exists(fs::path(opt.out_dir) / "failures.txt");
    print_error(std::to_string(report.failures.size()) + " failure(s), the first: " + report.failures.front() +
                " (all listed above" + (listed ? " and in " + opt.out_dir + "/failures.txt" : std::string()) +
                "); rerun to retry them");
    return 2;
}

}  // namespace

int run_batch_job(const std::string& job_path, const std::string& out_dir, int jobs)
{
    BatchArgs a;
    a.job = job_path;
    a.out = out_dir;
    a.jobs = jobs;
    return run_batch(a);
}

Command add_batch_command(CLI::App& app)
{
    auto a = std::make_shared<BatchArgs>();
    auto* cmd = app.add_subcommand("batch", "Run a TOML job over many files, layers and heads (resumable, shardable)");
    cmd->add_option("JOB", a->job, "The job file (docs/batch.md)")->required();
    cmd->add_option("--out", a->out, "Output folder (default: <job name>_results)");
    cmd->add_option("--jobs", a->jobs, "Units analysed in parallel (default 1)");
    cmd->add_option("--shard", a->shard, "I/N: run only units with index % N == I (Slurm arrays, GNU parallel)");
    return {cmd, [a] { return run_batch(*a); }};
}

Command add_merge_command(CLI::App& app)
{
    struct MergeArgs {
        std::vector<std::string> dirs;
        std::string out;
        bool partial = false;
        MaxMemoryArg memory;
    };
    auto a = std::make_shared<MergeArgs>();
    auto* cmd = app.add_subcommand("merge", "Combine the output folders of batch shards");
    cmd->add_option("DIR", a->dirs, "Shard output folders")->required();
    cmd->add_option("--out", a->out, "Merged output folder")->required();
    cmd->add_flag("--partial", a->partial,
                  "Merge an incomplete set of shards (its outputs are named results.partial.jsonl, summary.partial.csv)");
    a->memory.add_to(*cmd);
    return {cmd, [a] {
                analysis::merge_batches(a->dirs, a->out, a->partial, a->memory.resolve());
                std::cerr << "merged " << a->dirs.size() << " folders into " << a->out << "\n";
                return 0;
            }};
}

}  // namespace attnscope::app
