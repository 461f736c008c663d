// The subcommands that draw curves and figures (docs/cli.md): `sweep` (rank and entropy against N or M,
// CSV + JSON, optionally the curves figure) and `figure` (any view of the desktop app, headless).
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/inputs.h"
#include "analysis/sweep.h"
#include "analysis/vocabulary.h"
#include "cli_common.h"
#include "cli_options.h"
#include "io/tensor_file.h"
#include "sweep_options.h"
#include "util/atomic_file.h"
#include "util/checked.h"
#include "util/json_text.h"
#include "util/output.h"

#ifdef ATTNSCOPE_WITH_GUI
#include "analysis/explore.h"
#include "figure.h"
#endif

namespace attnscope::app {

namespace {

struct SweepArgs {
    SweepOptions sweep;
    std::optional<std::string> csv_out;   // not given: a short summary on standard output (--csv - for the CSV there)
    std::optional<std::string> json_out;
    std::optional<std::string> summary_csv_out;
    std::optional<std::string> plot_out;
    std::optional<std::string> metric;
};

// Every output names its own file, and none is an input (two options on one path would keep one and
// lose the other; an input would be replaced).
void check_outputs(const SweepArgs& a)
{
    std::vector<NamedPath> outs;
    if (a.csv_out)
        outs.push_back({"--csv", *a.csv_out});
    if (a.json_out)
        outs.push_back({"--json", *a.json_out});
    if (a.summary_csv_out)
        outs.push_back({"--summary-csv", *a.summary_csv_out});
    if (a.plot_out)
        outs.push_back({"--plot", *a.plot_out});
    std::vector<NamedPath> inputs;
    add_input_refs(inputs, "--q", a.sweep.q);
    add_input_refs(inputs, "--k", a.sweep.k);
    add_mixing_input(inputs, a.sweep.mechanism.mixing);
    check_output_paths(outs, inputs);
}

// What a person reads without --csv: per mechanism and value of N (or M), the records' count and the means of
// the measures that show collapse (rank, effective rank, normalised entropy; the past-block rank on causal
// data), with where the rest is.
std::string short_sweep_summary(const analysis::SweepSpec& spec, const nlohmann::ordered_json& doc, std::size_t records,
                                const SweepArgs& a)
{
    const std::string axis(1, spec.vary == 'm' ? 'm' : 'n');
    const auto mean = [](const nlohmann::ordered_json& p, const char* key, int decimals) {
        if (!p.contains(key) || !p[key].contains("mean") || !p[key]["mean"].is_number())
            return std::string("-");
        return fmt::format("{:.{}f}", p[key]["mean"].get<double>(), decimals);
    };
    bool past = false;
    for (const auto& p : doc["points"])
        past = past || (p.contains("past_block_rank") && p["past_block_rank"].contains("mean") && p["past_block_rank"]["mean"].is_number());
    std::string out = fmt::format("{} records; means over each point's units (heads, layers, inputs, seeds, draws)\n", records);
    out += fmt::format("{:<9} {:>6} {:>6} {:>9} {:>9} {:>8}{}\n", "mechanism", axis, "units", "rank", "eff.rank", "H/ln n", past ? "  past rank" : "");
    for (const auto& p : doc["points"]) {
        out += fmt::format("{:<9} {:>6} {:>6} {:>9} {:>9} {:>8}", p["mechanism"].get<std::string>(), p[axis].dump(), p["count"].dump(),
                           mean(p, "rank", 1), mean(p, "effective_rank", 2), mean(p, "entropy_normalized_mean", 4));
        if (past)
            out += fmt::format("  {:>9}", mean(p, "past_block_rank", 1));
        out += "\n";
    }
    if (!a.json_out)
        out += "every record: --csv FILE (--csv - for standard output); means with 95% intervals: --json FILE\n";
    return out;
}

int run_sweep(const SweepArgs& a)
{
    check_outputs(a);
    const analysis::SweepPlan plan = analysis::plan_sweep(a.sweep.resolve());
    const analysis::SweepSpec& spec = plan.spec;

    // Refuse unwritable destinations (and a bad figure name) before the work.
    std::optional<OutputFile> csv_out, json_out, summary_csv_out, plot_out;
    if (a.csv_out && *a.csv_out != "-")
        csv_out.emplace(*a.csv_out, SpecialFiles::write_in_place);
    if (a.json_out && *a.json_out != "-")
        json_out.emplace(*a.json_out, SpecialFiles::write_in_place);
    if (a.summary_csv_out && *a.summary_csv_out != "-")
        summary_csv_out.emplace(*a.summary_csv_out, SpecialFiles::write_in_place);
#ifdef ATTNSCOPE_WITH_GUI
    FigureTarget target;
    FigureLook look;
    if (a.plot_out) {
        target.path = *a.plot_out;
        check_figure_target("curves", target);
        check_figure_metric(a.metric);
        look.metric = a.metric;
        plot_out.emplace(*a.plot_out, SpecialFiles::refuse);
    }
#else
    if (a.plot_out)
        throw std::invalid_argument(needs_desktop_app("--plot"));
#endif
    if (a.metric && !a.plot_out)
        throw std::invalid_argument("--metric chooses what --plot shows; give --plot OUT.png too");

    auto records = run_sweep_with_progress(plan);
    // The figure first (it is the step most likely to fail), then the text outputs, then standard output;
    // every file is published only when all of them are written and standard output was flushed.
    const std::string csv = analysis::sweep_csv(records);
    // Without --csv (and no other output on standard output) a person reads a short summary there.
    const auto on_stdout = [](const std::optional<std::string>& o) { return o && descriptor_path(*o) == 1; };
    const bool short_summary = !a.csv_out && !on_stdout(a.json_out) && !on_stdout(a.summary_csv_out);
    const nlohmann::ordered_json summary_doc = a.json_out || a.summary_csv_out || short_summary
                                                   ? analysis::sweep_summary(spec, records, plan.inputs)
                                                   : nlohmann::ordered_json();
    const std::string summary = a.json_out ? json_text(summary_doc, 2) + "\n" : std::string();
#ifdef ATTNSCOPE_WITH_GUI
    if (plot_out) {
        auto sweep = std::make_shared<const analysis::SweepResult>(analysis::SweepResult{spec, std::move(records)});
        plot_out->write([&](const std::string& temp) { render_sweep_figure_to(sweep, "curves", look, target, temp); });
        records = sweep->records;
    }
#endif
    if (csv_out)
        csv_out->write_text(csv);
    if (json_out)
        json_out->write_text(summary);
    if (summary_csv_out)
        summary_csv_out->write_text(analysis::sweep_summary_csv(summary_doc));
    if (a.csv_out && *a.csv_out == "-")
        write_text_output("-", csv);
    if (short_summary)
        write_text_output("-", short_sweep_summary(spec, summary_doc, records.size(), a));
    if (a.json_out && *a.json_out == "-")
        write_text_output("-", summary);
    if (a.summary_csv_out && *a.summary_csv_out == "-")
        write_text_output("-", analysis::sweep_summary_csv(summary_doc));
    flush_standard_output();
    if (csv_out)
        csv_out->commit();
    if (json_out)
        json_out->commit();
    if (summary_csv_out)
        summary_csv_out->commit();
    if (plot_out)
        plot_out->commit();
    if (a.csv_out && *a.csv_out != "-")
        std::cerr << "wrote " << *a.csv_out << " (" << records.size() << " records)\n";
    if (a.plot_out)
        std::cerr << "wrote " << *a.plot_out << "\n";
    return 0;
}

#ifdef ATTNSCOPE_WITH_GUI
struct FigureArgs {
    std::string view;
    std::optional<std::string> session;
    SweepOptions sweep;   // inputs, selection, mechanism options (every view); sweep options (curves)
    std::optional<io::TensorRef> v;   // parsed as the command line is read (add_tensor_option)
    std::string token_grid;
    FigureTarget target;
    std::optional<std::string> colormap, metric, view_state;
    std::optional<int> query;
    bool log = false;
};

int run_figure(FigureArgs a)
{
    std::vector<NamedPath> inputs;
    add_input_refs(inputs, "--q", a.sweep.q);
    add_input_refs(inputs, "--k", a.sweep.k);
    if (a.v)
        add_input_refs(inputs, "--v", {*a.v});
    add_mixing_input(inputs, a.sweep.mechanism.mixing);
    if (a.session)   // the session and every file it names
        for (NamedPath& in : session_inputs(*a.session))
            inputs.push_back(std::move(in));
    check_output_paths({{"--out", a.target.path}}, inputs);
    check_figure_target(a.view, a.target);
    FigureLook look;
    look.colormap = a.colormap;
    look.log = a.log;
    look.query = a.query;
    look.metric = a.metric;
    if (a.view_state) {
        try {
            look.state = nlohmann::json::parse(*a.view_state);
        } catch (const std::exception&) {
            throw std::invalid_argument("--view-state " + *a.view_state + ": not valid JSON");
        }
        if (!look.state.is_object())
            throw std::invalid_argument("--view-state must be a JSON object, e.g. {\"cumulative\": true}");
    }
    if (a.metric && !is_sweep_view(a.view))
        throw std::invalid_argument("--metric applies to --view curves and overview (not " + a.view + ")");
    check_figure_metric(a.metric);
    if (!a.session)
        check_figure_look(a.view, look);

    if (a.session) {
        if (a.colormap || a.log || a.query || a.metric || a.view_state || !a.sweep.q.empty() || !a.sweep.synth.empty() ||
            !a.sweep.vary.empty())
            throw std::invalid_argument("--session renders the session's own data and view state: give only --view, --out "
                                        "and the size options with it");
        render_session_figure(*a.session, a.view, a.target);
        std::cerr << "wrote " << a.target.path << " (" << a.view << " of " << *a.session << ")\n";
        return 0;
    }

    if (a.view == "curves") {
        if (a.sweep.vary.empty())
            throw std::invalid_argument("--view curves needs --vary n=LIST or m=LIST (and --q/--k or --synth KIND)");
        const analysis::SweepPlan plan = analysis::plan_sweep(a.sweep.resolve());
        auto records = run_sweep_with_progress(plan);
        render_sweep_figure(std::make_shared<const analysis::SweepResult>(analysis::SweepResult{plan.spec, std::move(records)}),
                            a.view, look, a.target);
    } else {
        if (!a.sweep.vary.empty() || !a.sweep.synth.empty())
            throw std::invalid_argument("--vary and --synth make curves: use --view curves (not " + a.view + ")");
        if (a.sweep.q.size() != 1 || a.sweep.k.size() != 1)
            throw std::invalid_argument("--view " + a.view + " needs one --q and one --k (got " + std::to_string(a.sweep.q.size()) +
                                        " and " + std::to_string(a.sweep.k.size()) + "), or --session S.attnscope");
        const io::TensorRef& q = a.sweep.q[0];
        const analysis::AnalysisSetup setup = resolve_setup(q, a.sweep.selection, a.sweep.mechanism);   // as analyze does
        const analysis::TensorSource source{q, a.sweep.k[0], a.v, setup.selection};
        const std::uint64_t memory_limit = a.sweep.memory.resolve();
        io::set_read_limit_bytes(memory_limit);
        if (a.view == "overview") {
            if (a.v || a.query || !a.token_grid.empty())
                throw std::invalid_argument("--view overview takes no --v, --query or --token-grid");
            analysis::SweepSpec spec = analysis::overview_spec(source, setup.options, a.sweep.metrics.resolve());
            spec.given = setup.given;
            spec.mechanisms = analysis::parse_mechanisms(a.sweep.mechanisms);
            spec.memory_limit = memory_limit;
            const analysis::SweepPlan plan = analysis::plan_sweep(spec);
            auto records = run_sweep_with_progress(plan);
            render_sweep_figure(std::make_shared<const analysis::SweepResult>(analysis::SweepResult{spec, std::move(records)}),
                                a.view, look, a.target);
        } else {
            analysis::ExploreRequest request;
            request.source = source;
            request.mechanisms = analysis::parse_mechanisms(a.sweep.mechanisms);
            request.options = setup.options;
            request.rank_rtol = a.sweep.metrics.resolve().rank_rtol;
            request.past_split = a.sweep.metrics.resolve().past_split;
            request.past_splits = a.sweep.metrics.resolve().past_splits;
            request.memory_limit = memory_limit;
            if (!a.token_grid.empty()) {
                // A grid the tokens do not fill would be dropped by the views without a word: refuse it here.
                request.token_grid = analysis::parse_sizes(a.token_grid, "--token-grid");
                const std::optional<Eigen::Index> cells = checked_product(request.token_grid);   // never wrapped
                const Eigen::Index n = analysis::selected_tokens(source);
                if (cells != n)
                    throw std::invalid_argument("--token-grid " + a.token_grid + " has " +
                                                (cells ? std::to_string(*cells) : std::string("more than 2^63")) +
                                                " cells, but the selection has N=" + std::to_string(n) + " tokens");
            }
            render_explore_figure(request, a.view, look, a.target, &setup.given);
        }
    }
    std::cerr << "wrote " << a.target.path << " (" << a.view << ")\n";
    return 0;
}
#endif

}  // namespace

Command add_sweep_command(CLI::App& app)
{
    auto a = std::make_shared<SweepArgs>();
    auto* cmd = app.add_subcommand("sweep", "Rank and entropy against sequence length N or block count M (CSV + JSON summary)");
    a->sweep.add_to(*cmd, true);
    cmd->add_option("--csv", a->csv_out, "Long-format CSV of every record (- : standard output; not given: a short summary there)");
    cmd->add_option("--json", a->json_out, "JSON summary: mean, std, min, max and 95% bootstrap interval per point");
    cmd->add_option("--summary-csv", a->summary_csv_out,
                    "The summary as CSV: one line per point and metric with its mean, std, min, max, ci_low, ci_high");
    cmd->add_option("--plot", a->plot_out, "Also render the curves figure: OUT.png, OUT.pdf or OUT.svg");
    cmd->add_option("--metric", a->metric, "Metric the --plot figure shows (default rank)");
    return {cmd, [a] { return run_sweep(*a); }};
}

#ifdef ATTNSCOPE_WITH_GUI
Command add_figure_command(CLI::App& app)
{
    auto a = std::make_shared<FigureArgs>();
    auto* cmd = app.add_subcommand("figure", "Render a view of the desktop app headless to PNG, PDF or SVG");
    cmd->add_option("--view", a->view, figure_view_names())->required();
    cmd->add_option("--out", a->target.path, "FIG.png, FIG.pdf or FIG.svg")->required();
    cmd->add_option("--session", a->session, "Render the view of an .attnscope session (its data and view state)");
    add_tensor_option(*cmd, "--v", a->v, "Values FILE[:NAME] (optional; checked)");
    cmd->add_option("--token-grid", a->token_grid, "Token grid H,W for display (default: the MHLA --grid, if any)");
    cmd->add_option("--query", a->query, "Selected query token (maps, query, entropy)");
    cmd->add_option("--colormap", a->colormap, "viridis | magma | cividis (maps, overview)");
    cmd->add_flag("--log", a->log, "Log scale (maps: colours; query, curves: y axis; spectrum: x axis)");
    cmd->add_option("--metric", a->metric, "curves/overview: " + figure_metric_names());
    cmd->add_option("--view-state", a->view_state, "More view-state keys as a JSON object (as sessions store them)");
    const std::string size = "Figure size";
    auto* width = cmd->add_option("--width", a->target.width, "Width in logical pixels, 96 per inch (default: the view's preferred size)")
                      ->check(CLI::Range(16, 20000))
                      ->group(size);
    auto* height = cmd->add_option("--height", a->target.height, "Height in logical pixels")->check(CLI::Range(16, 20000))->group(size);
    cmd->add_option("--dpi", a->target.dpi, "PNG pixels = size * dpi / 96 (default 300)")->check(CLI::Range(24.0, 2400.0))->group(size);
    auto* scale = cmd->add_option("--font-scale", a->target.font_scale, "Multiplies every font (default 1)")->group(size);
    auto* preset = cmd->add_option("--preset", a->target.preset,
                                   "Printed size: column (3.5 in, 8 pt), double (7 in, 8 pt), slide (10 in, 16:9, 14 pt)")
                       ->check(CLI::IsMember({"column", "double", "slide"}))
                       ->group(size);
    auto* width_mm = cmd->add_option("--width-mm", a->target.width_mm, "Printed width in millimetres (fonts by --font-size)")
                         ->check(CLI::Range(20.0, 2000.0))
                         ->group(size);
    cmd->add_option("--height-mm", a->target.height_mm, "Printed height in millimetres (default: the view's aspect)")
        ->check(CLI::Range(10.0, 2000.0))
        ->group(size);
    cmd->add_option("--font-size", a->target.font_pt, "Tick labels in points at the printed size (default: the preset's, else 8)")
        ->check(CLI::Range(4.0, 72.0))
        ->group(size);
    for (CLI::Option* printed : {preset, width_mm})
        printed->excludes(width)->excludes(height)->excludes(scale);
    preset->excludes(width_mm);
    a->sweep.add_to(*cmd, false);
    return {cmd, [a] { return run_figure(*a); }};
}
#endif

}  // namespace attnscope::app
