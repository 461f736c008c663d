#pragma once
// Unattended analysis of many files, layers and heads (`attnscope batch`), resumable and shardable.
//
// A plan (from a TOML job, parsed by the app) expands into work units, one per (file, layer, head), in
// a fixed order: files sorted by path, then layers, then heads. Each unit yields one record per
// mechanism: the analyze result plus provenance (tool version, the input file's SHA-256, every
// parameter). Records are appended to DIR/results.jsonl, each line flushed and fsync'ed before the next
// unit starts, so a killed batch loses at most the unit in flight; a rerun skips every recorded key and
// truncates a torn last line. When all units are done, results.jsonl is rewritten in plan order and
// DIR/summary.csv written (both atomically), so a batch run once, resumed, or sharded (--shard I/N,
// units with index % N == I) and merged (merge_batches) gives the same files up to the timing fields.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/analyze.h"
#include "analysis/sweep.h"
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
    std::optional<std::vector<Eigen::Index>> heads;
    bool all_heads = false;
    std::optional<std::vector<Eigen::Index>> layers;
    bool all_layers = false;
    std::vector<attention::Mechanism> mechanisms = {attention::Mechanism::softmax, attention::Mechanism::linear,
                                                    attention::Mechanism::mhla};
    attention::AttentionOptions options;
    MetricOptions metrics;
    std::uint64_t memory_limit = 0;
    std::vector<BatchSweep> sweeps;
};

struct BatchProgress {
    std::size_t done = 0, total = 0;      // units of this shard (skipped ones count as done)
    double eta_seconds = -1;               // -1 when unknown
    std::string label;                     // what just finished
};

// One unit of work: (file, layer, head) in the job's order.
struct BatchUnit {
    std::size_t index = 0;
    std::string file;
    std::optional<Eigen::Index> layer, head;
};

struct BatchRunOptions {
    std::string out_dir;
    int jobs = 1;                          // units analysed in parallel
    int shard_index = 0, shard_count = 1;
    std::function<void(const BatchProgress&)> on_progress;
    // Figure hooks (the app renders figures; the core has no Qt). Called on the calling thread after
    // the units, for every unit of this shard, and for every sweep of this shard when its records are
    // known (freshly run). A hook may throw InputError / std::invalid_argument: the failure is reported
    // like a failed unit and the batch goes on.
    std::function<void(const BatchUnit&)> on_unit_figures;
    std::function<void(const BatchSweep&, const SweepResult&)> on_sweep_figures;
};

struct BatchReport {
    std::size_t units = 0, skipped = 0, analysed = 0, records = 0, sweeps = 0;
    std::vector<std::string> failures;     // "file l=.. h=..: message" (bad units are recorded as failures, others go on)
};

// Expands globs (relative to the job file's folder), sorted; throws InputError when a pattern matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns, const std::string& base_dir);

// Runs the plan's units of this shard into out_dir (created if missing). Throws InputError when out_dir
// cannot be written or the plan is impossible; a unit whose input is bad becomes a failure line in the
// report and in DIR/failures.txt, the others go on.
BatchReport run_batch(const BatchPlan& plan, const BatchRunOptions& options);

// Combines the outputs of shards into out_dir: results.jsonl (deduplicated, in plan order), summary.csv,
// sweeps. Throws InputError naming a folder without results or records that disagree.
void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir);

// Hex SHA-256 of a file (OpenSSL EVP).
std::string file_sha256(const std::string& path);

}  // namespace attnscope::analysis
