#pragma once
// Statistics over units (docs/maths.md, "Statistics over units"; docs/batch.md, aggregate.csv): a batch
// measures every mechanism on many units (inputs, heads, layers, seeds); this turns its records into, per
// (mechanism, metric), n, mean, sample std and a 95% percentile bootstrap interval of the mean, and per pair
// of mechanisms measured on the same units, the paired difference with its interval and an exact two-sided
// sign-test p-value.
//
// The procedure is fixed so that an independent NumPy implementation (tests/reference/attnref.py,
// aggregate()) gives the same numbers: values in record order, plain left-to-right sums, std with n - 1, a
// fresh SplitMix64(seed) per row drawing idx = min(floor(u n), n - 1) n times per resample (so rows with the
// same n resample the same unit positions: a joint bootstrap over units), numpy.percentile's linear rule;
// the sign test drops ties. Metrics are every finite number of a record's analyze result, with dotted names
// for nested ones ("entropy.mean", "rank_at_rtol.1e-3", "past_block.rank"): a measure added to the result
// appears here by itself.
//
// Clustered units (docs/maths.md 5, "Two-stage bootstrap"): when every record names a cluster (a seed, a
// file), the intervals come from a two-stage bootstrap (resample the clusters, then units within each drawn
// cluster) and a pair's sign test is over the clusters' mean differences: units of one trained model are not
// independent draws, and pooling them as such overstates the certainty of a comparison between models.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnscope::analysis {

// One (unit, mechanism): its metrics in the result's order; NaN = not measured on this unit (a JSON null:
// the name still takes its place in the order of metrics, the value is left out).
struct UnitMetrics {
    std::string unit;                                    // what pairs records of different mechanisms
    std::string mechanism;
    std::vector<std::pair<std::string, double>> metrics;
    std::string cluster = {};                            // the unit's top group (two-stage bootstrap); "" = none
};

// How a row's interval was made (attention.md 2.2): G >= k_few_clusters clusters (or values, unclustered) the
// percentile bootstrap, one- or two-stage; fewer, the t interval over the G cluster means; one, none (NaN).
enum class CiMethod { bootstrap, two_stage_bootstrap, t, none };
const char* to_string(CiMethod m);   // "bootstrap", "two-stage bootstrap", "t", "none"

struct MechanismStats {
    std::string mechanism, metric;
    std::size_t n = 0;
    double mean = 0;
    std::optional<double> std;                           // sample std (n - 1); none when n < 2
    double ci_low = 0, ci_high = 0;                      // NaN when ci_method is none
    std::size_t clusters = 0;                            // G: the clusters holding the n values (unclustered: n)
    CiMethod ci_method = CiMethod::bootstrap;
    std::size_t agree = 0;                               // cluster means (unclustered: values) with the mean's sign
};

struct PairStats {
    std::string mechanism_a, mechanism_b, metric;        // the difference is a - b
    std::size_t n = 0;                                   // units where both are measured (ties included)
    double mean_diff = 0, ci_low = 0, ci_high = 0;
    double p_sign = 1;                                   // two-sided exact sign test, ties dropped
    std::size_t clusters = 0;                            // G; clustered: p_sign is over these clusters' mean differences
    CiMethod ci_method = CiMethod::bootstrap;
    std::size_t agree = 0;                               // cluster mean differences with the sign of mean_diff
    double p_t = 0;                                      // two-sided t test over the G cluster means; NaN when G < 2
    double p_holm = 0;                                   // p_t adjusted by Holm over the aggregate's pairs
};

struct AggregateOptions {
    std::size_t resamples = 2000;
    std::uint64_t seed = 0;
    double level = 0.95;
    std::uint64_t max_bytes = 0;   // the memory budget of the tables (0: analysis::default_memory_limit())
};

struct Aggregate {
    std::size_t units = 0;                               // distinct units seen
    bool clustered = false;                              // the records named clusters: two-stage intervals
    std::size_t fewest_clusters = 0;                     // the smallest G of any row (0: no rows)
    std::vector<MechanismStats> mechanisms;              // mechanisms in order of first appearance, then metrics
    std::vector<PairStats> pairs;                        // (a, b) with a first seen before b, then metrics
};

// At most this many (unit, mechanism) records in one aggregation (docs/security.md, "Counts and sizes"): a
// results file of any length may be read, but the bootstrap allocates per unit.
inline constexpr std::size_t k_max_aggregate_records = 10'000'000;

// What one aggregation may hold and do (docs/security.md, "Counts and sizes"), checked from the counts of
// names before any table is allocated: the table of values is records x metrics and the table of pairs
// mechanisms x units, so a small results file naming 60,000 mechanisms or 30,000 metrics asked for gigabytes,
// and every row and pair draws resamples x n positions, so 3,000 mechanisms (4.5 million pairs) ran for
// minutes. A real analyze result has about 60 metrics and a batch at most the mechanisms of the table
// (attention/mechanisms.h); the bootstrap's draws are capped at what takes about a minute on one core.
inline constexpr std::size_t k_max_aggregate_mechanisms = 64;
inline constexpr std::size_t k_max_aggregate_metrics = 1024;
inline constexpr double k_max_bootstrap_draws = 2e10;

// The statistics of `records` (rows with no finite value are left out). Throws std::invalid_argument when a
// unit appears twice for one mechanism, when some records name a cluster and others do not, when one unit is
// in two clusters, when there are more than k_max_aggregate_records records, more than
// k_max_aggregate_mechanisms mechanisms or k_max_aggregate_metrics metrics, when the tables would take more
// than half of options.max_bytes, when the bootstrap would draw more than k_max_bootstrap_draws positions
// (aggregate_draws), or when resamples is 0 or over 1e6. Each message says what to narrow.
Aggregate aggregate(const std::vector<UnitMetrics>& records, const AggregateOptions& options = {});

// The checks aggregate() makes before any table is allocated (the caps above, the tables' memory, the draws).
void check_aggregate_size(const std::vector<UnitMetrics>& records, const AggregateOptions& options = {});

// The bootstrap draws aggregate() makes for `records`, at most (every row and pair over every metric, each
// resamples x (its values + its clusters)), from the counts alone.
double aggregate_draws(const std::vector<UnitMetrics>& records, const AggregateOptions& options = {});

// The metrics of an analyze result (one element of analyze's "results", or a batch record: its provenance
// fields, unit, key, input, layer, head, seconds..., are not metrics), flattened with dotted names. Lists
// and strings are left out; a null keeps its place (NaN).
std::vector<std::pair<std::string, double>> result_metrics(const nlohmann::ordered_json& result);

// The percentile bootstrap interval (ci_low, ci_high) of the mean of `x` (docs/maths.md 5): options.resamples
// resamples of n positions from a fresh SplitMix64(options.seed), the (1 - level)/2 and (1 + level)/2
// percentiles of their means. The one-stage bootstrap of every aggregate row; a sweep's points use it too
// (analysis/sweep.h, sweep_curves and sweep_summary). Throws std::invalid_argument for no values.
std::pair<double, double> bootstrap_interval(const std::vector<double>& x, const AggregateOptions& options = {});

// The 95% interval (options.level) of the mean of `x`, its values taken as independent units, by the rule of
// aggregate rows (attention.md 2.2): from k_few_clusters values the percentile bootstrap (bootstrap_interval),
// from two the t interval, one value none (NaN, NaN). A sweep's points and the Curves view's band use it.
struct MeanInterval {
    double low, high;
    CiMethod method;
};
MeanInterval mean_interval(const std::vector<double>& x, const AggregateOptions& options = {});

// The two-stage (cluster) bootstrap interval of the mean of every value of `clusters` (docs/maths.md 5): per
// resample, G clusters drawn with replacement, then as many positions within each drawn cluster as it holds,
// all from one fresh SplitMix64(options.seed); the statistic is the mean of every value drawn. Throws
// std::invalid_argument when there is no cluster or a cluster is empty.
std::pair<double, double> cluster_bootstrap_interval(const std::vector<std::vector<double>>& clusters,
                                                     const AggregateOptions& options = {});

// The percentile p (0..100) of `values` by numpy.percentile's default (linear) rule. values is sorted in place.
double percentile_linear(std::vector<double>& values, double p);
// The two-sided exact sign test: k of m non-zero differences are positive; p = min(1, 2 P(X <= min(k, m-k))),
// X ~ Bin(m, 1/2). Exact integer arithmetic for m <= 62, log-space (long double) above; 1 when m = 0.
double sign_test_p(std::uint64_t positive, std::uint64_t negative);

// The statistics as JSON ({"units", "resamples", "seed", "level", "mechanisms": [...], "pairs": [...]}; std null
// when n < 2; ci_low, ci_high, p_t, p_holm null when not defined; "note": few_clusters_note() when it says
// something) and as CSV: one header, "kind" = mechanism | pair, each row filling its own columns
// (mechanism,mechanism_a,mechanism_b,metric,n,mean,std,mean_diff,ci_low,ci_high,p_sign,clusters,ci_method,agree,
// p_t,p_holm). Every row has "clusters", "ci_method" and "agree"; pairs "p_t" and "p_holm".
nlohmann::ordered_json aggregate_json(const Aggregate& a, const AggregateOptions& options = {});
std::string aggregate_csv(const Aggregate& a);
// The sentence a table with few clusters carries (attention.md 2.2), empty when every row has enough: "with 3
// clusters no two-sided sign test can reach p < 0.05 (the smallest possible p is 0.25); intervals are t
// intervals over the cluster means (2 degrees of freedom); ...".
std::string few_clusters_note(const Aggregate& a);

// The records of a batch (results.jsonl objects) as units: unit = the record's "unit" index; cluster = the
// record's value of the group field `cluster` (aggregate_by's fields; "" = no clusters).
std::vector<UnitMetrics> batch_unit_metrics(const std::vector<nlohmann::ordered_json>& records,
                                            const std::string& cluster = "");

}  // namespace attnscope::analysis

namespace attnscope::analysis {

// ------------------------------------------------------------------ a batch folder's statistics by group

// A batch output folder's records (DIR/results.jsonl, or results.partial.jsonl of a partial merge), read
// without following a symbolic link (docs/security.md, "Batch and merge"); `which` gets the file's name.
// Throws InputError when DIR is not a folder or holds neither.
// Checked before and while reading (docs/security.md "Counts and sizes"): the file holds at most max_bytes /
// k_results_memory_factor bytes (0: the default memory budget), every record names a mechanism of the table
// (attention/mechanisms.h), and a last line without its newline counts when it is a whole record and is
// refused when it is torn.
std::vector<nlohmann::ordered_json> read_batch_records(const std::string& dir, std::string* which = nullptr,
                                                       std::uint64_t max_bytes = 0);

// The unit fields records can be grouped by, in this order: file, layer, head, then each index axis letter
// of the records' input.at that is not h (e.g. b when a job ran `at = { b = "all" }`).
std::vector<std::string> group_fields(const std::vector<nlohmann::ordered_json>& records);

struct AggregateGroup {
    nlohmann::ordered_json key;   // {"head": 2, ...}: the group's value of each field; empty object = all units
    Aggregate stats;
};
// The statistics of each group of records with the same values of `by` (groups in order of first
// appearance; no fields: one group of every record), with two-stage intervals over the values of the field
// `cluster` when it is not empty (`attnscope aggregate --cluster file`). Throws std::invalid_argument naming a
// field that is not one of group_fields() ("--by" is the caller's word: `what`), or a cluster field that is
// also a --by field (each group would be one cluster).
// `metrics` (when not empty) keeps only those metrics, before any statistic is computed: exact names, or a
// name before a dot for all of its parts ("entropy" = entropy.*); a name that matches no metric of the
// records is refused (std::invalid_argument naming --metric). `what` names the grouping option as the caller
// spells it (--by, or by for a Python keyword); the other options are named in the same spelling.
std::vector<AggregateGroup> aggregate_by(const std::vector<nlohmann::ordered_json>& records,
                                         const std::vector<std::string>& by, const std::string& what = "--by",
                                         const AggregateOptions& options = {}, const std::string& cluster = "",
                                         const std::vector<std::string>& metrics = {});

}  // namespace attnscope::analysis
