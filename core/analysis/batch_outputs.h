#pragma once
// A batch's outputs beyond the unit records (internal to core/analysis, used by run_batch in batch.cpp): the
// [[sweep]] tables (sweeps/NAME.csv, .json) and [depth] (depth/<file>.csv, .json). Each is a pair of files whose
// JSON records a fingerprint of what it depends on (the job's settings, its spec, every input's SHA-256): a
// rerun keeps a pair whose fingerprint matches and redoes a stale one. Both run after the units, shared out
// over the shards after them (the sweeps first, then one depth per file).
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/batch.h"
#include "analysis/batch_units.h"
#include "analysis/sweep.h"

namespace attnscope::analysis {

// Removes a file or a link (never followed); nothing when it does not exist.
void remove_file(const std::filesystem::path& path);

void run_sweeps(const BatchPlan& plan, const std::vector<SweepPlan>& plans, std::size_t units, const std::string& settings,
                HashCache& hashes, const BatchRunOptions& opt, BatchReport& report);

// `offset`: the units and sweeps of the whole job (the depth of file i belongs to shard (offset + i) % shards).
void run_depths(const BatchPlan& plan, std::size_t offset, const std::string& settings, HashCache& hashes,
                const BatchRunOptions& opt, BatchReport& report);

}  // namespace attnscope::analysis
