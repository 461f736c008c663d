#pragma once
// Expressivity against sequence length N or block count M (`attnscope sweep`): the curves of global
// context collapse. One record per (mechanism, N, M, layer, head, draw) point.
//
// Sources: loaded activations (one or several inputs; each token subset is analysed like `analyze`
// would analyse it), or synthetic activations (`synth` kinds, one draw per seed).
// Token subsets for --vary n:
//   first   the first N tokens;
//   random  `draws` subsets of N tokens, drawn without replacement and kept in token order
//           (partial Fisher-Yates with util/rng.h's SplitMix64(seed + draw));
//   crop    a centred sub-grid of grid data: crop sizes c_i = G_i * sqrt(N / prod G) must be whole
//           and hold whole blocks; the block grid scales with the crop (block size kept).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "analysis/job.h"
#include "analysis/measure.h"
#include "analysis/plan.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "attention/options.h"
#include "metrics/pooling.h"

namespace attnscope::analysis {

enum class Subsample { first, random, crop };
std::string_view to_string(Subsample s);
std::vector<std::string_view> subsample_names();
Subsample parse_subsample(std::string_view s);   // throws std::invalid_argument

struct SynthSource {
    std::string kind = "gaussian";
    Eigen::Index d = 64;
    Eigen::Index seeds = 1;          // draws 0..seeds-1 use seed + draw
    Eigen::Index n = 0;              // --vary m: tokens per draw
};

struct SweepSpec {
    std::vector<TensorSource> inputs;        // loaded activations (selection: layout, prefix tokens, fixed --at)
    std::vector<std::optional<Eigen::Index>> input_layers;   // per input, the layer it holds (per-layer datasets)
    std::optional<SynthSource> synth;        // or synthetic data
    char vary = 'n';                         // 'n' or 'm'
    std::vector<Eigen::Index> values;        // N values, or M values (block counts; block-grid sides for grid data)
    Subsample subsample = Subsample::first;
    Eigen::Index draws = 1;                  // random subsets per N
    std::uint64_t seed = 0;
    AxisChoice heads = AxisChoice::parse("", "--heads");     // the 'h' indices visited
    AxisChoice layers = AxisChoice::parse("", "--layers");   // the 'l' indices visited
    std::vector<attention::Mechanism> mechanisms = attention::default_mechanisms();
    attention::AttentionOptions options;     // grid options describe the full token grid of the inputs
    ExplicitChoices given;                   // options chosen explicitly: each input's attributes fill the rest
    MetricOptions metrics;                   // spectrum + entropy by default
    std::uint64_t memory_limit = 0;          // 0: default_memory_limit()
};

struct SweepRecord {
    std::string mechanism;
    Eigen::Index n = 0, m = 0;
    Eigen::Index d = 0;                      // features per token of the analysed Q, K
    std::optional<Eigen::Index> layer, head;
    std::map<char, Eigen::Index> at;         // the unit's index on each axis given as `all` (--at b=all)
    Eigen::Index draw = 0;
    std::string input;                       // reference of the queries, or "synth:KIND"
    // What analyze returned for the mechanism; its metrics are read through analysis/metric_table.h.
    MechanismResult result;
    double seconds = 0;
};

// A finished sweep, as the curves view and figures consume it.
struct SweepResult {
    SweepSpec spec;
    std::vector<SweepRecord> records;
};

// One analysed point: N tokens (a subset, or all), the options it is analysed with.
struct SweepPoint {
    Eigen::Index n = 0, draw = 0;
    std::vector<Eigen::Index> tokens;        // ascending token indices; empty: all of them
    attention::AttentionOptions options;
};

// The points of one unit (loaded inputs) or of one synthetic N (every draw).
struct SweepJob {
    std::optional<Unit> unit;                // loaded inputs: the file defaults already applied to its selection
    Eigen::Index synth_n = 0;                // synthetic data: tokens per draw
    std::vector<SweepPoint> points;
};

// Everything a sweep will do, checked: impossible points (N larger than the tokens available, crops that
// do not fit, M > N ...) are refused while planning, which reads headers only.
struct SweepPlan {
    SweepSpec spec;
    std::vector<SweepJob> jobs;
    nlohmann::ordered_json inputs = nlohmann::ordered_json::array();   // per input: q, k, defaults_from_file
    std::size_t analyses() const;            // points x draws x mechanisms
};

// The stated caps of a sweep (docs/cli.md, "Counts and caps"; docs/security.md, "Counts and sizes"): a few
// words of input must not ask for days of work or for memory the machine does not have, unseen. An
// analysis is one (unit, N or M, draw or seed, mechanism); a million of them is far beyond a real study
// (a 32-layer, 32-head model overview under three mechanisms is about 3,000) and still bounded.
constexpr std::uint64_t k_max_sweep_analyses = 1'000'000;

// How a front end names the counts of a sweep in its messages ("--draws"; "[[sweep]] curves: draws").
struct SweepCountNames {
    std::string draws = "--draws";
    std::string seeds = "--seeds";
    std::string values = "--vary";
    std::string n = "--n";
};

// Checks the counts `spec` holds itself before anything is read or allocated: draws, synthetic seeds, the
// number of N or M values, their product with the mechanisms (at most k_max_sweep_analyses, with
// overflow-safe arithmetic) and each synthetic N x d against the memory budget (spec.memory_limit, else
// default_memory_limit()). plan_sweep calls it, and again checks the units the inputs' headers give
// (layers x heads) and the plan's and the records' memory. Throws std::invalid_argument naming the count
// (through `names`) and the cap.
void validate_sweep_counts(const SweepSpec& spec, const SweepCountNames& names = {});

// The model overview: every (layer, head) of one input at its full N, per mechanism (a sweep that varies
// nothing: spec.vary = 'n', no values, all heads and layers). Records carry layer and head. Layers are
// the layout's `l` axis or, without one, sibling datasets that differ only in one numeric path
// component (/layers/0/q, /layers/1/q, ... as tools/python/attnscope_dump.py writes them).
SweepSpec overview_spec(const TensorSource& source, const attention::AttentionOptions& options,
                        const MetricOptions& metrics);

// The token indices of one subset (ascending). `grid` only for crop.
std::vector<Eigen::Index> subset_tokens(Subsample how, Eigen::Index available, Eigen::Index n, std::uint64_t seed,
                                        Eigen::Index draw, const std::vector<Eigen::Index>& grid = {});

// Plans `spec`: applies each input's file attributes (analysis/file_defaults.h; with first or random subsets
// of N tokens the blocks stay 1-D, since a subset of a grid is not a grid), expands inputs x layers x heads
// (analysis/plan.h) and every point. Throws std::invalid_argument / InputError for impossible specs.
SweepPlan plan_sweep(const SweepSpec& spec);

// What fits a sweep's data, for a front end that proposes values before running (the desktop app's sweep
// dialog). From the first unit of `spec` (its own values ignored; headers only, like plan_sweep):
//   vary n, crop:           every N whose centred crop of the grid holds whole blocks;
//   vary n, first / random: any N up to the tokens available (grid blocks: only all of them);
//   vary m:                 every block-grid side that divides the grid (grid blocks), else any M up to N.
// `proposed`: all valid values when there are at most five, else five of them spread by factors of about
// two: for N the largest included, for M from 1 and dividing N (equal blocks, as `official`
// normalisation needs). Synthetic data have no tokens to fit: N = 64..512 (square N for grid blocks).
// Throws like plan_sweep when the data themselves do not fit (no tokens, a selection out of range ...).
struct SweepValueChoice {
    Eigen::Index tokens = 0;                 // tokens of the first unit (synthetic: N for vary m, 0 for vary n)
    std::vector<Eigen::Index> grid;          // the token grid of grid blocks (empty for 1-D blocks)
    std::vector<Eigen::Index> valid;         // every valid value, ascending; empty: any of 1..tokens
    std::vector<Eigen::Index> proposed;      // ascending
};
SweepValueChoice sweep_value_choice(const SweepSpec& spec);

// Runs a plan (progress and cancellation through ctx): one record per point, mechanism and draw.
std::vector<SweepRecord> run_sweep(const SweepPlan& plan, const JobContext& ctx);

// The names of the metrics a sweep summarises (the curves' and the overview's y axes): the metric table's
// sweep metrics (analysis/metric_table.h, use_sweep) and "seconds", the time each analysis took.
const std::vector<std::string>& sweep_metric_names();
// The axis title of a sweep metric ("numerical rank", "mean row entropy (nats)"); empty for unknown names.
std::string sweep_metric_title(std::string_view name);
// A record's value of a sweep metric; NaN when the record has none (no spectrum, entropy undefined) or
// for an unknown name.
double sweep_metric_value(const SweepRecord& record, std::string_view name);

// One curve of a sweep metric: per x (N, or M) of one mechanism, the metric pooled over every record
// there. The mean and std pool the summary's points that share x (metrics::pooled: a sweep over M may
// hold several N per M); min, max and count are those of the records with a finite value, and ci_low, ci_high
// the 95% bootstrap interval of the mean over those records as units (analysis::bootstrap_interval, the
// procedure of aggregate.csv: docs/maths.md 5), what the Curves view draws as its "95% bootstrap" band.
struct SweepCurve {
    std::string mechanism;
    std::vector<std::pair<double, metrics::Spread>> points;   // (x, spread), ascending x
};
// The curves of `metric` of `sweep` against M (by_m) or N, from its records and its sweep_summary
// (`summary`), one per mechanism that has a value: the spec's mechanisms in order, then others as met.
std::vector<SweepCurve> sweep_curves(const SweepResult& sweep, const nlohmann::ordered_json& summary,
                                     std::string_view metric, bool by_m);

// A finished sweep as data, for the desktop app's sessions: what the curves and the overview draw, so that a
// reopened session shows them without recomputing. The spec's fields that describe its records (vary,
// values, subsample, draws, seed, mechanisms, the synthetic source or the inputs' queries and keys, the
// feature map, the mixing preset and the causal flag) and every record's fields except the singular values,
// the per-row entropies and the parameters, which no sweep view draws; sweep metrics newer than the first
// layout (spectrum, entropy) go by key into "metrics" (analysis/metric_table.h, MetricEntry::store). Values
// that are not finite are written as null.
nlohmann::ordered_json sweep_result_json(const SweepResult& result);
// Reads sweep_result_json's document back (missing fields keep their defaults, null numbers are NaN).
// Throws std::invalid_argument naming the field at fault for anything else.
SweepResult sweep_result_from_json(const nlohmann::json& doc);

// The long-format CSV (header + one line per record; empty fields for what does not apply).
std::string sweep_csv(const std::vector<SweepRecord>& records);
// Mean, population std, min, max and the 95% bootstrap interval of the mean (ci_low, ci_high: docs/maths.md 5,
// the records as units) of every metric per (mechanism, n, m) point, over layers, heads, draws and inputs.
// `inputs`: the plan's inputs with what each took from its file (listed when any did).
nlohmann::ordered_json sweep_summary(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                     const nlohmann::ordered_json& inputs = nlohmann::ordered_json::array());
// The summary's points as a long-format CSV, one line per (point, metric) with a value:
// mechanism,n,m,count,metric,mean,std,min,max,ci_low,ci_high (`sweep --summary-csv`).
std::string sweep_summary_csv(const nlohmann::ordered_json& summary);

}  // namespace attnscope::analysis
