// `attnscope analyze` (docs/cli.md): rank, spectrum and entropy of softmax, linear and MHLA attention, as
// a summary table or the analyze JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <cmath>
#include <stdexcept>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "analysis/analyze_document.h"
#include "analysis/metric_table.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "cli_common.h"
#include "cli_options.h"
#include "io/tensor_file.h"
#include "util/atomic_file.h"
#include "util/json_text.h"
#include "util/names.h"
#include "util/output.h"

namespace attnscope::app {

namespace {

using ojson = nlohmann::ordered_json;

struct AnalyzeArgs {
    io::TensorRef q, k;   // parsed as the command line is read (add_tensor_option)
    std::optional<io::TensorRef> v;
    std::string mechanisms = attention::default_mechanism_text();
    std::optional<std::string> json_out;
    std::optional<std::string> metric;   // --metric NAME[,...]: only these metrics, table and JSON
    bool no_baseline = false;            // --no-baseline: no content-free baseline A0 (half the dense work)
    SelectionArgs selection;
    MechanismArgs mechanism;
    MetricArgs metrics;
    MemoryArgs memory;
};

std::string fmt_opt(double v, int precision)
{
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, precision) : std::string("-");
}

// A metric's cell in the summary table: "-" where it has no value; a rank that only the randomized range
// finder bracketed shows the bracket it proved ("12..14").
std::string summary_cell(const analysis::MetricEntry& e, const ojson& r)
{
    const ojson& v = analysis::metric_json(e, r);
    if (v.is_number())
        return e.kind == analysis::MetricKind::count ? std::to_string(v.get<long long>()) : fmt_opt(v.get<double>(), e.column_decimals);
    if (e.key == "rank" && r.contains("rank_bounds"))
        return std::to_string(r["rank_bounds"]["lower"].get<long long>()) + ".." +
               std::to_string(r["rank_bounds"]["upper"].get<long long>());
    return "-";
}

// A kept metric's cell (keep_metrics: the value under its key).
std::string summary_cell_kept(const analysis::MetricEntry& e, const ojson& r)
{
    const ojson& v = r[std::string(e.key)];
    if (!v.is_number())
        return "-";
    return e.kind == analysis::MetricKind::count ? std::to_string(v.get<long long>())
                                                 : fmt_opt(v.get<double>(), e.column_width > 0 ? e.column_decimals : 4);
}

void print_summary(const ojson& doc, const std::vector<const analysis::MetricEntry*>& chosen = {})
{
    const ojson& in = doc["input"];
    std::string at;
    for (const auto& [axis, index] : in["at"].items())
        at += (at.empty() ? "" : ",") + axis + "=" + std::to_string(index.get<long long>());
    std::cout << "q " << in["q"].get<std::string>() << "   k " << in["k"].get<std::string>() << "\n";
    if (in.contains("kv_head"))
        at += " kv=" + std::to_string(in["kv_head"].get<long long>());
    if (in.contains("grouped_query"))
        at += " (grouped-query attention: " + std::to_string(in["grouped_query"]["heads"].get<long long>()) +
              " query heads share " + std::to_string(in["grouped_query"]["kv_heads"].get<long long>()) +
              " key/value heads; this query head pairs with key/value head " +
              std::to_string(in["kv_head"].get<long long>()) + ")";
    std::cout << "layout " << in["layout"].get<std::string>() << (at.empty() ? "" : "  at " + at) << "   N=" << in["n"]
              << "  d=" << in["d"];
    if (in["prefix_tokens"].get<long long>() > 0)
        std::cout << "  (dropped " << in["prefix_tokens"] << " prefix tokens)";
    std::string not_applied;
    if (in.contains("defaults_from_file")) {
        std::string used;
        for (const auto& [key, value] : in["defaults_from_file"].items()) {
            if (key == "not_applied") {
                for (const auto& [what, why] : value.items())
                    not_applied += "\nwarning (file attribute " + what + "): " + why.get<std::string>();
                continue;
            }
            used += (used.empty() ? "" : " ") + key + "=" + json_text(value);
        }
        if (!used.empty())
            std::cout << "\nfrom the file's attributes: " << used << "  (override with the options)";
    }
    std::cout << not_applied << "\n\n";
    // One column per metric of the table that has one (analysis/metric_table.h).
    std::vector<const analysis::MetricEntry*> columns = chosen;
    if (columns.empty())
        for (const analysis::MetricEntry* e : analysis::metric_entries(analysis::use_analyze))
            if (e->column_width > 0)
                columns.push_back(e);
    // A chosen metric without a column of the default table is headed by its key.
    auto heading = [](const analysis::MetricEntry& e) { return e.column_width > 0 ? std::string(e.column) : std::string(e.key); };
    auto width = [&](const analysis::MetricEntry& e) { return std::max<int>(e.column_width, static_cast<int>(heading(e).size())); };
    std::string header = fmt::format("{:<9}", "mechanism");
    for (const analysis::MetricEntry* e : columns)
        header += fmt::format(" {:>{}}", heading(*e), width(*e));
    std::cout << header << fmt::format("   {}\n", "params");
    for (const auto& r : doc["results"]) {
        std::string line = fmt::format("{:<9}", r["mechanism"].get<std::string>());
        for (const analysis::MetricEntry* e : columns)
            line += fmt::format(" {:>{}}", chosen.empty() ? summary_cell(*e, r) : summary_cell_kept(*e, r), width(*e));
        std::string params;
        for (const auto& [key, value] : r["params"].items())
            params += (params.empty() ? "" : " ") + key + "=" + (value.is_string() ? value.get<std::string>() : json_text(value));
        std::cout << line << fmt::format("   {}\n", params);
    }
    std::cout << "\n";
    for (const auto& r : doc["results"])   // how each spectrum was computed, and why (--method)
        if (r.contains("method") && r["method"].contains("spectrum"))
            std::cout << fmt::format("spectrum ({}): {}{}\n", r["mechanism"].get<std::string>(),
                                     r["method"]["spectrum"].get<std::string>(),
                                     r["method"].contains("why") ? " -- " + r["method"]["why"].get<std::string>() : "");
    // docs/maths.md 2.2: the file's retrieval targets (docs/formats.md), when it has them.
    std::string retrieval;
    for (const auto& r : doc["results"])
        if (r.contains("retrieval_mass"))
            retrieval += fmt::format("{}{}: mass {} rank {}", retrieval.empty() ? "" : "; ", r["mechanism"].get<std::string>(),
                                     r["retrieval_mass"].is_number() ? fmt::format("{:.4f}", r["retrieval_mass"].get<double>()) : "-",
                                     r["retrieval_rank"].is_number() ? fmt::format("{:.2f}", r["retrieval_rank"].get<double>()) : "-");
    if (!retrieval.empty())
        std::cout << "\nretrieval (the file's retrieval_targets: weight A[t, j*] on each target, its rank in the row): "
                  << retrieval << "\n";
    bool any_warning = false;
    for (const auto& r : doc["results"])
        for (const auto& w : r["warnings"]) {
            if (!any_warning)
                std::cout << "\n";
            any_warning = true;
            std::cout << "warning (" << r["mechanism"].get<std::string>() << "): " << w.get<std::string>() << "\n";
        }
    if (!doc["results"].empty() && doc["results"][0].contains("rank_tol") && doc["results"][0]["rank_tol"].is_number()) {
        std::cout << "\nrank = #{singular values > tol}; tol per mechanism:";
        for (const auto& r : doc["results"])
            if (r.contains("rank_tol") && r["rank_tol"].is_number())
                std::cout << fmt::format(" {}={:.3g}", r["mechanism"].get<std::string>(), r["rank_tol"].get<double>());
        std::cout << "\n";
    }
}


// `--at b=all`: every index of the axes given as `all` is its own unit (analysis/plan.h), analysed in turn.
// The document holds one {unit, at, input, results} per unit and the statistics over them
// (analysis/aggregate.h); a selection without `all` keeps the single-unit document, byte for byte.
// Progress on standard error while it is a terminal (never into pipes, files or CI logs), cleared when the work
// ends or fails (an error line then starts clean): a long analysis said nothing for seconds (9 s at N = 3000).
struct TerminalProgress {
    analysis::JobContext ctx;
    bool tty = ::isatty(2) != 0 && !std::getenv("CI");
    TerminalProgress()
    {
        ctx.on_progress = [this](double f, const std::string& stage) {
            if (tty)
                std::fprintf(stderr, "\r[%3.0f%%] %-70.70s", 100.0 * f, stage.c_str());
        };
    }
    ~TerminalProgress()
    {
        if (tty)
            std::fprintf(stderr, "\r%-80s\r", "");
    }
    TerminalProgress(const TerminalProgress&) = delete;
    TerminalProgress& operator=(const TerminalProgress&) = delete;
};

int run_analyze_units(const analysis::AnalyzeRequest& request, const std::optional<std::string>& json_out,
                      bool json_to_stdout, std::optional<OutputFile>& json_file, const std::vector<const analysis::MetricEntry*>& chosen)
{
    analysis::UnitsDocument units = [&] {
        TerminalProgress progress;
        return analysis::analyze_units_document(request, &progress.ctx);
    }();
    for (auto& unit : units.doc["units"])
        analysis::keep_metrics(unit, chosen);
    return publish_json(units.doc, json_out, json_to_stdout, json_file, [&] {
        // A compact summary (issue 36: 5 inputs printed 253 lines): the statistics over the units of the chosen
        // metrics (--metric) or of the few that answer the question, each mechanism and each pair; every unit's
        // results and every statistic are in the JSON.
        // The aggregate names a metric by its place in the result ("entropy.normalized_mean", "past_block.rank").
        const auto aggregate_name = [](const analysis::MetricEntry& e) {
            const std::string_view object = analysis::json_object_of(e.group);
            return object.empty() ? std::string(e.field) : std::string(object) + "." + std::string(e.field);
        };
        std::vector<std::string> asked;
        std::vector<const analysis::MetricEntry*> shown = chosen;
        if (shown.empty())
            for (const char* key : {"rank", "effective_rank", "entropy_normalized_mean", "excess_effective_rank", "entropy_below_baseline",
                                    "past_block_rank"})
                if (const analysis::MetricEntry* e = analysis::find_metric(key))
                    shown.push_back(e);
        for (const analysis::MetricEntry* e : shown)
            asked.push_back(aggregate_name(*e));
        std::vector<std::string> present;
        for (const std::string& m : asked)
            if (std::any_of(units.stats.mechanisms.begin(), units.stats.mechanisms.end(), [&](const auto& r) { return r.metric == m; }))
                present.push_back(m);
        std::cout << "== over the " << units.units << " units (n = units measured; 95% percentile bootstrap intervals, "
                  << units.options.resamples << " resamples, seed " << units.options.seed << ")";
        if (chosen.empty())
            std::cout << "; metrics: " << joined(std::vector<std::string_view>(present.begin(), present.end()))
                      << " (choose with --metric)";
        std::cout << "\n";
        print_aggregate(units.stats, present);
        if (!json_out)
            std::cout << "every unit's results and every statistic: --json FILE\n";
    });
}

int run_analyze(const AnalyzeArgs& a)
{
    analysis::AnalyzeRequest request;
    request.mechanisms = analysis::parse_mechanisms(a.mechanisms);
    const std::vector<const analysis::MetricEntry*> chosen = analysis::chosen_metrics(a.metric, "--metric");
    // `--json /dev/stdout` is `--json -`: the document alone on standard output.
    const bool json_to_stdout = a.json_out && descriptor_path(*a.json_out) == 1;
    std::optional<OutputFile> json_file;
    if (a.json_out) {
        std::vector<NamedPath> inputs;
        add_input_refs(inputs, "--q", {a.q});
        add_input_refs(inputs, "--k", {a.k});
        if (a.v)
            add_input_refs(inputs, "--v", {*a.v});
        add_mixing_input(inputs, a.mechanism.mixing);
        std::vector<NamedPath> outputs{{"--json", *a.json_out}};
        if (!json_to_stdout)
            outputs.push_back({"standard output", "-"});   // the summary: `--json o.json > o.json` would lose one
        check_output_paths(outputs, inputs);
        if (!json_to_stdout)
            json_file.emplace(*a.json_out, SpecialFiles::write_in_place);   // an unwritable destination fails before the work
    }
    request.q = a.q;
    request.setup = resolve_setup(request.q, a.selection, a.mechanism, &request.from_file);
    request.metrics = a.metrics.resolve();
    if (a.no_baseline)
        request.metrics.baseline = false;
    request.memory_limit = a.memory.resolve();
    request.k = a.k;
    request.v = a.v;
    io::set_read_limit_bytes(request.memory_limit);
    if (!request.setup.selection.all.empty())
        return run_analyze_units(request, a.json_out, json_to_stdout, json_file, chosen);
    ojson doc = [&] {
        TerminalProgress progress;
        return analysis::analyze_document(request, &progress.ctx);
    }();
    analysis::keep_metrics(doc, chosen);
    return publish_json(doc, a.json_out, json_to_stdout, json_file, [&] { print_summary(doc, chosen); });
}

}  // namespace

Command add_analyze_command(CLI::App& app)
{
    auto a = std::make_shared<AnalyzeArgs>();
    auto* cmd = app.add_subcommand("analyze", "Rank, singular spectrum and entropy of softmax, linear and MHLA attention");
    add_tensor_option(*cmd, "--q", a->q, "Queries FILE[:NAME]")->required();
    add_tensor_option(*cmd, "--k", a->k, "Keys FILE[:NAME]")->required();
    add_tensor_option(*cmd, "--v", a->v, "Values FILE[:NAME] (optional; checked and recorded)");
    cmd->add_option("--mechanism", a->mechanisms, "Comma list of " + joined(attention::mechanism_names()) + " (default " + attention::default_mechanism_text() + ")");
    cmd->add_option("--json", a->json_out, "Write the JSON document to OUT, or - for standard output");
    cmd->add_option("--metric", a->metric, "Keep only these metrics, table and JSON: NAME[,...] of the metric table (rank, effective_rank, entropy_mean, ...)");
    cmd->add_flag("--no-baseline", a->no_baseline,
                  "Skip the content-free baseline A0 and what needs it (baseline, excess_effective_rank, entropy_below_baseline): half the dense work");
    a->selection.add_to(*cmd);
    a->mechanism.add_to(*cmd);
    a->metrics.add_to(*cmd);
    a->memory.add_to(*cmd);
    return {cmd, [a] { return run_analyze(*a); }};
}

}  // namespace attnscope::app
