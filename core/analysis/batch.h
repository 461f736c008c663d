#pragma once
// Unattended analysis of many files, layers and heads (`attnscope batch`), resumable, shardable and
// cancellable.
//
// A plan (from a TOML job, parsed by the app) expands into work units, one per (file, layer, head, and
// index of any axis given as `all`), in a fixed order: files sorted by path, then layers, then heads, then
// those axes (analysis/plan.h), each file with its own
// attributes applied as defaults (analysis/file_defaults.h). Each unit yields one record per mechanism:
// the analyze result plus provenance (tool version, the input file's SHA-256, every parameter, what came
// from the file), kept by a ResultStore (analysis/batch_store.h). Shards (--shard I/N) take the units with
// index % N == I; merge_batches() combines their folders.
//
// A rerun reconciles the folder with the job as it is now (docs/batch.md, "Interrupted? Run it again"):
// records whose input's SHA-256 changed, or of units no longer in this shard of the job, are dropped (with
// their figures) before anything runs; a sweep whose inputs or spec changed is run again.
#include <cstdint>
#include <functional>
#include <map>
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
#include "attention/mechanisms.h"
#include "io/selection.h"

namespace attnscope::analysis {

struct BatchSweep {
    std::string name;          // output DIR/sweeps/<name>.csv and .json
    SweepSpec spec;            // inputs are filled in from the batch's files
};

// [depth]: `attnscope depth` (analysis/depth.h) on every file of the job, written to DIR/depth/<name>.json and .csv.
struct BatchDepth {
    double alpha = 0.5;
    std::optional<Index> head;   // one head; nothing: the mean over every head
};

struct BatchPlan {
    std::string job_path;                      // the TOML file (for messages and relative globs)
    std::vector<std::string> files;            // expanded, sorted
    std::string q_name, k_name;                // tensor names inside every file
    io::AxisSelection selection;               // layout, fixed --at, prefix tokens
    AxisChoice heads = AxisChoice::parse("", "heads");
    AxisChoice layers = AxisChoice::parse("", "layers");
    std::vector<attention::Mechanism> mechanisms = attention::default_mechanisms();
    attention::AttentionOptions options;
    ExplicitChoices given;                     // keys the job sets: each file's attributes fill the rest
    MetricOptions metrics;
    std::uint64_t memory_limit = 0;
    std::vector<BatchSweep> sweeps;
    std::optional<BatchDepth> depth;
};

struct BatchProgress {
    std::size_t done = 0, total = 0;      // units of this shard (skipped ones count as done)
    double eta_seconds = -1;               // -1 when unknown
    std::string label;                     // what just finished
};

// One unit of work: (file, layer, head) in the job's order, with the file's defaults applied.
struct BatchUnit {
    std::size_t index = 0;
    std::string file;                          // the path as bytes (what is read)
    std::string display;                       // the path shown: lossy UTF-8 (util/json_text.h), unique in the job
    std::string name;                          // the file's name in figure names: unique in the job (input_names)
    std::optional<Eigen::Index> layer, head;
    std::map<char, Eigen::Index> at;           // the index of each other axis the job gives as `all` (b=all)
    std::string key;                           // file|l=..|h=.. (then |b=.. for each axis in `at`)
    TensorSource source;                       // the unit's selection
    attention::AttentionOptions options;       // the job's options with the file's defaults
    nlohmann::ordered_json defaults_from_file; // what came from the file's attributes
};

// The units of the whole job (every shard), in plan order. Reads headers only; throws InputError /
// std::invalid_argument for a file, layer or head that does not exist, or for two files whose paths show
// as the same text (they differ only in bytes that are not UTF-8).
std::vector<BatchUnit> plan_batch_units(const BatchPlan& plan);

// The name of each file (in `files`' order) in figure names: its stem when no other file of the job has the
// same stem; else its path from the folder the files of that stem share, '/' written '_' and without the
// extension (a/m.h5, b/m.h5 -> a_m, b_m), with the extension when that is still ambiguous (m.h5, m.npz ->
// m.h5, m.npz), and a short hash of the path when even that collides or is longer than 100 bytes. It
// depends only on the whole list, so every shard of a job names a file alike.
std::vector<std::string> input_names(const std::vector<std::string>& files);

// One figure file of a batch: its name in DIR/figures/ and what it draws (two different drawings may never
// share a name; the same drawing asked by several units, a file's overview, may).
struct FigureFile {
    std::string name;
    std::string what;
};

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
    // The figure files the hooks above draw for a unit / a sweep (Qt-free, so they are known before anything
    // runs). With them set, the whole job's names are checked to be unique before the folder is made, and a
    // rerun removes figures of dropped records and any figure in DIR/figures/ the job no longer draws.
    std::function<std::vector<FigureFile>(const BatchUnit&)> unit_figure_files;
    std::function<std::vector<FigureFile>(const BatchSweep&)> sweep_figure_files;
};

struct BatchReport {
    std::size_t units = 0, skipped = 0, analysed = 0, records = 0, sweeps = 0;
    std::size_t depths = 0;                // files whose depth documents this run wrote
    std::size_t dropped = 0;               // records dropped on a rerun (input changed, or not in the job any more)
    bool cancelled = false;
    std::vector<std::string> notes;        // what a rerun changed, one line each ("input changed: ...")
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
