#pragma once
// The typed request of `attnscope aggregate` (docs/cli.md) and its JSON document, shared by the command line
// (app/cmd_aggregate.cpp) and attnscope.aggregate (python/): the grouping, the cluster field and the metrics,
// one descriptor per option (analysis/requests.h).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "analysis/requests.h"

namespace attnscope::analysis {

struct AggregateRequest {
    std::string by;        // comma list of unit fields (file, layer, head, an index axis letter); empty: all units
    std::string cluster;   // two-stage bootstrap over this field's values; empty: none
    std::string metric;    // comma list of metrics (a name before a dot takes all its parts); empty: all
    std::int64_t resamples = 2000;   // bootstrap resamples of each interval, 1..1000000
};

const std::vector<OptionDescriptor<AggregateRequest>>& aggregate_options();

// The statistics of a batch folder's records by group, as the request asks (throws like aggregate_by, naming
// options in `spelling`). `max_bytes`: the memory budget (0: the default).
struct AggregateRun {
    std::string which;                       // results.jsonl, or results.partial.jsonl
    std::size_t records = 0;
    std::vector<std::string> by, metrics;
    AggregateOptions options;
    std::vector<AggregateGroup> groups;
};
AggregateRun run_aggregate(const std::string& dir, const AggregateRequest& r, std::uint64_t max_bytes, Spelling spelling);

// The `aggregate --json` document of a run over the folder `dir`.
nlohmann::ordered_json aggregate_run_document(const std::string& dir, const AggregateRun& run, const AggregateRequest& r);

// The metrics asked: exact names, or a prefix before a dot ("entropy" = entropy.*). Empty = all.
bool metric_wanted(const std::vector<std::string>& asked, const std::string& metric);

// DIR/results.jsonl as the user named DIR ("results/" gives "results/results.jsonl", not "results//...").
std::string results_path(const std::string& dir, const std::string& which);

}  // namespace attnscope::analysis
