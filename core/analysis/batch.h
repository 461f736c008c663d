#pragma once
// Unattended analysis of many files, layers and heads (`attnscope batch`), resumable, shardable and
// cancellable.
//
// A plan (from a TOML job, parsed by the app) expands into work units, one per (file, layer, head), in a
// fixed order: files sorted by path, then layers, then heads (analysis/plan.h), each file with its own
// attributes applied as defaults (analysis/file_defaults.h). Each unit yields one record per mechanism:
// the analyze result plus provenance (tool version, the input file's SHA-256, every parameter, what came
// from the file), kept by a ResultStore (analysis/batch_store.h). Shards (--shard I/N) take the units with
// index % N == I; merge_batches() combines their folders.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analyze.h"
#include "analysis/batch_store.h"
#include "analysis/file_defaults.h"
#include "analysis/job.h"
#include "analysis/plan.h"
#include "analysis/sweep.h"
#include "analysis/vocabulary.h"
#include "io/selection.h"

namespace attnscope::analysis {

struct BatchSweep {
    std::string name;          // output DIR/sweeps/<name>.csv and .json
    SweepSpec spec;            // inputs are filled in from the batch's files
};

struct BatchPlan {
    std::string job_path;                      // the TOML file (for messages and relative globs)
    std::vector<std::string> files;            // expanded, sorted
    std::string q_name, k_name;                // tensor names inside every file
    io::AxisSelection selection;               // layout, fixed --at, prefix tokens
    AxisChoice heads = AxisChoice::parse("", "heads");
    AxisChoice layers = AxisChoice::parse("", "layers");
    std::vector<attention::Mechanism> mechanisms = {attention::Mechanism::softmax, attention::Mechanism::linear,
                                                    attention::Mechanism::mhla};
    attention::AttentionOptions options;
    ExplicitChoices given;                     // keys the job sets: each file's attributes fill the rest
    MetricOptions metrics;
    std::uint64_t memory_limit = 0;
    std::vector<BatchSweep> sweeps;
};

struct BatchProgress {
    std::size_t done = 0, total = 0;      // units of this shard (skipped ones count as done)
    double eta_seconds = -1;               // -1 when unknown
    std::string label;                     // what just finished
};

// One unit of work: (file, layer, head) in the job's order, with the file's defaults applied.
struct BatchUnit {
    std::size_t index = 0;
    std::string file;
    std::optional<Eigen::Index> layer, head;
    std::string key;                           // file|l=..|h=..
    TensorSource source;                       // the unit's selection
    attention::AttentionOptions options;       // the job's options with the file's defaults
    nlohmann::ordered_json defaults_from_file; // what came from the file's attributes
};

// The units of the whole job (every shard), in plan order. Reads headers only; throws InputError /
// std::invalid_argument for a file, layer or head that does not exist.
std::vector<BatchUnit> plan_batch_units(const BatchPlan& plan);

struct BatchRunOptions {
    std::string out_dir;
    int jobs = 1;                          // units analysed in parallel
    int shard_index = 0, shard_count = 1;
    std::function<void(const BatchProgress&)> on_progress;
    CancelToken cancel;                    // cancelled: no unit starts any more (records so far are kept)
    // Figure hooks (the app renders figures; the core has no Qt). Called on the calling thread after
    // the units, for every unit of this shard, and for every sweep of this shard when its records are
    // known (freshly run). A hook may throw InputError / std::invalid_argument: the failure is reported
    // like a failed unit and the batch goes on.
    std::function<void(const BatchUnit&)> on_unit_figures;
    std::function<void(const BatchSweep&, const SweepResult&)> on_sweep_figures;
};

struct BatchReport {
    std::size_t units = 0, skipped = 0, analysed = 0, records = 0, sweeps = 0;
    bool cancelled = false;
    std::vector<std::string> failures;     // "file l=.. h=..: message" (bad units are recorded as failures, others go on)
};

// Expands globs (relative to the job file's folder), sorted; throws InputError when a pattern matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns, const std::string& base_dir);

// Runs the plan's units of this shard into out_dir (created if missing) on options.jobs threads, then its
// sweeps and figures. Throws InputError when out_dir cannot be written or the plan is impossible (before
// the folder is made); a unit whose input is bad becomes a failure line in the report and in
// DIR/failures.txt, the others go on. A cancelled batch stops starting units and reports `cancelled`.
BatchReport run_batch(const BatchPlan& plan, const BatchRunOptions& options);

}  // namespace attnscope::analysis
