#pragma once
// The metric table: one entry per scalar metric of a measured attention matrix (docs/maths.md section 2),
// naming it (its key in the JSON and CSV files, its label in the app, its unit), saying how it is read from
// a MechanismResult and where it appears. Every writer iterates over it: the analyze JSON (result_json) and
// its summary table, the sweep's CSV and summary, the batch's summary.csv, the desktop app's Metrics view and
// its CSV, and the metric lists of the curves and the overview. A new scalar metric is one entry here plus
// the code that computes it (docs/architecture.md, "Add a metric").
//
// Metrics come in groups, one per part of the result that holds them (spectrum, entropy). In the analyze
// JSON a spectrum metric is a field of the result itself ("rank"), a metric of another group a field of the
// group's object ("entropy": {"mean"}); flat files (CSV) name it by its key, the two joined by '_'
// ("entropy_mean"). A reader returns nullopt where the result has no value (not requested, not computable,
// only bounded); a value that is not finite is returned as it is (JSON writes it as null, CSV as empty).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/measure.h"

namespace attnscope::analysis {

// The part of a result a metric is read from, and the request that computes it (MetricOptions::spectrum,
// MetricOptions::entropy, MetricOptions::baseline; the past block when causal or split): the spectrum, the
// entropy, the ranks at fixed relative tolerances, the content-free baseline A0, A against A0, the past block
// (docs/maths.md 2 and 2.2), the semiseparable profile's summary, the logit norm and locality (the last two: fields of the result itself), the output A V (--v).
enum class MetricGroup { spectrum, entropy, rank_at_rtol, baseline, versus_baseline, past_block, past_profile, rows, output, retrieval };
// The JSON object that holds a group's metrics ("" for spectrum and versus_baseline: fields of the result
// itself). A field with a '.' is a field of an object inside it ("entropy.mean" of the baseline).
std::string_view json_object_of(MetricGroup g);

// Where a metric appears (bit flags of MetricEntry::uses).
enum MetricUse : unsigned {
    use_analyze = 1u << 0,         // analyze JSON (result_json), in table order
    use_sweep_csv = 1u << 1,       // sweep CSV column
    use_sweep = 1u << 2,           // sweep metric: the sweep summary, the curves and the overview (sweep_metric_names)
    use_batch_csv = 1u << 3,       // batch summary.csv column
    use_metrics_view = 1u << 4,    // the app's Metrics view and its CSV (metrics_view_entries)
};

// count: a number of singular values, at most N (written as an integer; the Metrics view shows "r / N").
// real: any other value.
enum class MetricKind { count, real };

struct MetricEntry {
    std::string_view key;           // flat name (CSV columns, sweep metrics): "effective_rank", "entropy_mean"
    MetricGroup group = MetricGroup::spectrum;
    std::string_view field;         // name inside the group's JSON object ("mean"); the key for spectrum metrics
    std::string_view label;         // the Metrics view's row: "effective rank"
    std::string_view title;         // a plot axis or colour scale (curves, overview): "mean row entropy (nats)"
    std::string_view unit;          // "nats"; empty for counts and ratios
    MetricKind kind = MetricKind::real;
    std::optional<double> (*read)(const MechanismResult&) = nullptr;
    unsigned uses = 0;              // MetricUse flags
    // The analyze summary table (app/cmd_analyze.cpp): its column heading, width and decimals (width 0: no column).
    std::string_view column;
    int column_width = 0;
    int column_decimals = 0;
    // The Metrics view: rows in ascending view_row (spaced by 10, so that a new row goes between two; the
    // order is that of its first release, not the table's), significant digits shown, and its CSV's column
    // name when it differs from the key (empty: the key).
    int view_row = 0;
    int view_digits = 0;
    std::string_view view_csv_key;
    // What analyze's JSON writes right after this metric's field, if anything (rank_tol: the randomized
    // bracket "rank_bounds").
    void (*json_after)(const MechanismResult&, nlohmann::ordered_json&) = nullptr;
    // Puts a value read back from a session file into a result that holds the metric's group (a sweep
    // record: sweep_result_from_json). Every sweep metric newer than the session layout (rank, the relative,
    // effective and stable ranks, the entropy's mean and normalised mean) needs one; null for the others.
    void (*store)(MechanismResult&, double) = nullptr;

    bool used_in(MetricUse u) const { return (uses & u) != 0; }
    std::string_view metrics_csv_key() const { return view_csv_key.empty() ? key : view_csv_key; }
};

// Every metric, in the analyze JSON's order.
const std::vector<MetricEntry>& metric_table();
// The entries used in `u`, in table order (the Metrics view: metrics_view_entries).
std::vector<const MetricEntry*> metric_entries(MetricUse u);
// The Metrics view's entries in its row order.
std::vector<const MetricEntry*> metrics_view_entries();
// The entry with this key; null for an unknown key.
const MetricEntry* find_metric(std::string_view key);

// The metric's value in an analyze JSON result (result_json's document: the field, or the field of the
// group's object); null when absent or null.
const nlohmann::ordered_json& metric_json(const MetricEntry& e, const nlohmann::ordered_json& result);

// Writes the metrics of group `g` used in the analyze JSON into `out` (a value, or null where the reader
// has none), with what an entry writes after itself (json_after).
void write_metric_fields(const MechanismResult& r, MetricGroup g, nlohmann::ordered_json& out);
// Writes the object of group `g` (json_object_of) into `result`: its fields, or null when not `present`.
void write_metric_object(const MechanismResult& r, MetricGroup g, nlohmann::ordered_json& result, bool present);

// "5": a count as an integer, a real value with 17 significant digits (reads back as the same double);
// empty when absent or not finite. The flat files' number format (sweep and batch CSV).
std::string csv_number(const MetricEntry& e, std::optional<double> v);

}  // namespace attnscope::analysis
