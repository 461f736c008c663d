#include "analysis/aggregate_request.h"

#include <algorithm>
#include <stdexcept>

#include "analysis/vocabulary.h"
#include "util/json_text.h"

namespace attnscope::analysis {

const std::vector<OptionDescriptor<AggregateRequest>>& aggregate_options()
{
    using R = AggregateRequest;
    static const std::vector<OptionDescriptor<R>> table = {
        OptionDescriptor<R>{"by", &R::by, "Group the units by these fields, comma separated: file, layer, head, or an index "
                                          "axis letter such as b (default: all units together)"}
            .as_list(),
        {"cluster", &R::cluster, "Two-stage bootstrap: resample the values of this field first (e.g. file "
                                 "= one trained model or seed), then units within each; sign tests over "
                                 "the clusters"},
        OptionDescriptor<R>{"metric", &R::metric, "Only these metrics, comma separated (a name before a dot takes all of "
                                                  "its parts: entropy = entropy.*)"}
            .as_list(),
        {"resamples", &R::resamples, "Bootstrap resamples of each interval, 1..1000000 (default 2000)"},
    };
    return table;
}

bool metric_wanted(const std::vector<std::string>& asked, const std::string& metric)
{
    if (asked.empty())
        return true;
    return std::any_of(asked.begin(), asked.end(),
                       [&](const std::string& a) { return metric == a || metric.rfind(a + ".", 0) == 0; });
}

std::string results_path(const std::string& dir, const std::string& which)
{
    std::string d = display_path(dir);
    while (d.size() > 1 && d.back() == '/')
        d.pop_back();
    return d + "/" + which;
}

AggregateRun run_aggregate(const std::string& dir, const AggregateRequest& r, std::uint64_t max_bytes, Spelling spelling)
{
    AggregateRun run;
    if (r.resamples < 1 || r.resamples > 1'000'000)
        throw std::invalid_argument(option_name("resamples", spelling) + " " + std::to_string(r.resamples) +
                                    " must lie in 1..1000000");
    run.options.resamples = static_cast<std::size_t>(r.resamples);
    run.options.max_bytes = max_bytes;
    const std::vector<nlohmann::ordered_json> records = read_batch_records(dir, &run.which, run.options.max_bytes);
    run.records = records.size();
    if (!r.by.empty())
        run.by = split_list(r.by);
    if (!r.metric.empty())
        run.metrics = split_list(r.metric);
    // Only the metrics asked are computed (each row's interval is drawn on its own, so the others are the same).
    run.groups = aggregate_by(records, run.by, option_name("by", spelling), run.options, r.cluster, run.metrics);
    return run;
}

nlohmann::ordered_json aggregate_run_document(const std::string& dir, const AggregateRun& run, const AggregateRequest& r)
{
    using ojson = nlohmann::ordered_json;
    ojson doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    doc["results"] = results_path(dir, run.which);
    doc["by"] = run.by;
    if (!r.cluster.empty())
        doc["cluster"] = r.cluster;
    doc["resamples"] = run.options.resamples;
    doc["seed"] = run.options.seed;
    doc["level"] = run.options.level;
    ojson list = ojson::array();
    for (const auto& g : run.groups) {
        ojson stats = aggregate_json(g.stats, run.options);
        ojson item;
        item["group"] = g.key;
        item["units"] = stats["units"];
        ojson rows = ojson::array(), pairs = ojson::array();
        for (const auto& row : stats["mechanisms"])
            if (metric_wanted(run.metrics, row["metric"].get<std::string>()))
                rows.push_back(row);
        for (const auto& p : stats["pairs"])
            if (metric_wanted(run.metrics, p["metric"].get<std::string>()))
                pairs.push_back(p);
        item["mechanisms"] = std::move(rows);
        item["pairs"] = std::move(pairs);
        if (stats.contains("note"))
            item["note"] = stats["note"];
        list.push_back(std::move(item));
    }
    doc["groups"] = std::move(list);
    return doc;
}

}  // namespace attnscope::analysis
