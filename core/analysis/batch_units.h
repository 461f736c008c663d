#pragma once
// A batch's units run on the job's threads (internal to core/analysis, used by run_batch in batch.cpp):
// each unit's inputs loaded, every mechanism not yet recorded analysed and appended to the store, progress
// and failures reported; an error that stops the batch (results that cannot be saved) ends the run.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "analysis/batch.h"
#include "analysis/batch_store.h"

namespace attnscope::analysis {

// A unit's record key for one mechanism: "FILE|l=L|h=H|mechanism".
inline std::string mechanism_key(const BatchUnit& u, attention::Mechanism m)
{
    return u.key + "|" + std::string(attention::to_string(m));
}

// Every input hashed once per run, shared by the rerun's check and the units (thread-safe).
class HashCache {
public:
    std::string get(const std::string& file);   // its SHA-256, hex

private:
    std::mutex m_mutex;
    std::map<std::string, std::string> m_sha;
};

// Runs `todo` (the units of one shard not yet recorded) on opt.jobs threads into `store`; records, failures,
// progress and cancellation go to `report`. Throws InputError (std::runtime_error for a defect) when the
// batch had to stop, after the records before the stop are saved.
void run_units(const std::vector<const BatchUnit*>& todo, const BatchPlan& plan, const BatchRunOptions& opt,
               const std::string& settings, ResultStore& store, HashCache& hashes, BatchReport& report);

}  // namespace attnscope::analysis
