// `attnscope aggregate RESULTS_DIR [--by FIELD,...] [--cluster FIELD] [--metric NAME,...] [--json]` (docs/cli.md): the
// statistics over units of a batch folder (analysis/aggregate.h) for any grouping of its units, as tables a
// researcher reads in a terminal (one metric per block, mechanisms under it; then the paired differences)
// or as JSON.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "analysis/aggregate_request.h"
#include "analysis/small_sample.h"
#include "analysis/vocabulary.h"
#include "cli_common.h"
#include "cli_options.h"
#include "util/json_text.h"

namespace attnscope::app {

namespace {

using ojson = nlohmann::ordered_json;

struct AggregateArgs : analysis::AggregateRequest {
    std::string dir;
    bool json = false;
    MaxMemoryArg memory;
};

std::string num(double v) { return fmt::format("{:.6g}", v); }

std::string group_title(const ojson& key)
{
    std::string t;
    for (const auto& [field, value] : key.items())
        t += (t.empty() ? "" : "  ") + field + "=" + (value.is_string() ? value.get<std::string>() : json_text(value));
    return t;
}

// Rows by metric (in the order metrics first appear), keeping the mechanisms' order within each metric.
template <class Row>
std::vector<const Row*> by_metric(const std::vector<Row>& rows, const std::vector<std::string>& asked)
{
    std::map<std::string, std::size_t> order;
    for (const Row& r : rows)
        order.emplace(r.metric, order.size());
    std::vector<const Row*> out;
    for (const Row& r : rows)
        if (analysis::metric_wanted(asked, r.metric))
            out.push_back(&r);
    std::stable_sort(out.begin(), out.end(), [&](const Row* a, const Row* b) { return order[a->metric] < order[b->metric]; });
    return out;
}

}  // namespace

void print_aggregate(const analysis::Aggregate& stats, const std::vector<std::string>& asked)
{
    const auto rows = by_metric(stats.mechanisms, asked);
    const auto pairs = by_metric(stats.pairs, asked);
    std::size_t mw = 6, nw = 9;   // "metric", widths of the metric and mechanism columns
    for (const auto* r : rows)
        mw = std::max(mw, r->metric.size()), nw = std::max(nw, r->mechanism.size());
    std::size_t pw = 5;
    for (const auto* p : pairs)
        pw = std::max(pw, p->mechanism_a.size() + 3 + p->mechanism_b.size());
    const auto interval = [](double lo, double hi) { return std::isfinite(lo) ? "[" + num(lo) + ", " + num(hi) + "]" : std::string("-"); };
    const auto pvalue = [](double p) { return std::isfinite(p) ? fmt::format("{:.3g}", p) : std::string("-"); };
    // G: clusters (or units, unclustered); agree: how many of the G means have the sign of the mean.
    const std::string g = stats.clustered ? "clusters" : "G";
    std::cout << fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:>12}  {:<28}  {:>8}  {:>5}  {}\n", "metric", mw, "mechanism", nw,
                             "n", "mean", "std", "95% interval of the mean", g, "agree", "method");
    std::string last;
    for (const auto* r : rows) {
        std::cout << fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:>12}  {:<28}  {:>8}  {:>5}  {}\n",
                                 r->metric == last ? "" : r->metric, mw, r->mechanism, nw, r->n, num(r->mean),
                                 r->std ? num(*r->std) : "-", interval(r->ci_low, r->ci_high), r->clusters,
                                 r->agree, analysis::to_string(r->ci_method));
        last = r->metric;
    }
    if (!pairs.empty()) {
        std::cout << "\n"
                  << fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:<28}  {:>8}  {:>5}  {:>8}  {:>8}  {:>8}  {}\n", "metric", mw,
                                 "a - b", pw, "n", "mean diff", "95% interval", g, "agree", "p_t", "p_holm", "p_sign",
                                 "method");
        last.clear();
        for (const auto* p : pairs) {
            std::cout << fmt::format("{:<{}}  {:<{}}  {:>5}  {:>12}  {:<28}  {:>8}  {:>5}  {:>8}  {:>8}  {:>8}  {}\n",
                                     p->metric == last ? "" : p->metric, mw, p->mechanism_a + " - " + p->mechanism_b, pw,
                                     p->n, num(p->mean_diff), interval(p->ci_low, p->ci_high), p->clusters, p->agree,
                                     pvalue(p->p_t), pvalue(p->p_holm), pvalue(p->p_sign), analysis::to_string(p->ci_method));
            last = p->metric;
        }
    }
    if (const std::string note = analysis::few_clusters_note(stats); !note.empty())
        std::cout << "note: " << note << "\n";
}

namespace {

int run_aggregate(const AggregateArgs& a)
{
    const analysis::AggregateRun run = analysis::run_aggregate(a.dir, a, a.memory.resolve(), analysis::Spelling::flag);
    if (a.json) {
        std::cout << json_text(analysis::aggregate_run_document(a.dir, run, a), 2) << "\n";
        return 0;
    }
    const auto& [which, records, by, asked, options, groups] = run;
    std::cout << analysis::results_path(a.dir, which) << ": " << records << " records; n = units measured; "
              << "differences paired on the same units; 95% intervals: from " << analysis::k_few_clusters << " "
              << (a.cluster.empty() ? "units" : "clusters") << " on a percentile bootstrap (" << options.resamples
              << " resamples, seed " << options.seed << "), below that a t interval over the "
              << (a.cluster.empty() ? "units" : "cluster means") << " (docs/maths.md 5); p_t: t test, p_holm: Holm "
              << "over each table's differences, p_sign: sign test\n";
    if (!a.cluster.empty())
        std::cout << "clusters: the units' " << a.cluster << " values (two-stage bootstrap: clusters resampled first, "
                  << "then units within each); t intervals, t and sign tests over the clusters' means\n";
    for (const auto& g : groups) {
        std::cout << "\n";
        if (!by.empty())
            std::cout << "== " << group_title(g.key) << "  (" << g.stats.units << (g.stats.units == 1 ? " unit" : " units")
                      << ")\n";
        else
            std::cout << "all " << g.stats.units << (g.stats.units == 1 ? " unit" : " units") << "\n";
        print_aggregate(g.stats, asked);
    }
    return 0;
}

}  // namespace

Command add_aggregate_command(CLI::App& app)
{
    auto a = std::make_shared<AggregateArgs>();
    auto* cmd = app.add_subcommand("aggregate", "Statistics over the units of a batch folder: means, 95% bootstrap "
                                                "intervals, paired differences and sign tests");
    cmd->add_option("RESULTS_DIR", a->dir, "A batch or merge output folder (holding results.jsonl)")->required();
    add_request_options<analysis::AggregateRequest>(*cmd, *a, analysis::aggregate_options(), "");
    cmd->add_flag("--json", a->json, "Print the statistics as JSON instead of tables");
    a->memory.add_to(*cmd);
    return {cmd, [a] { return run_aggregate(*a); }};
}

}  // namespace attnscope::app
