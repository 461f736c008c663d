#pragma once
// Where a batch keeps its results (docs/batch.md). DIR/results.jsonl holds one JSON record per (unit,
// mechanism); each is appended, flushed and fsync'ed before the next one, so a killed batch loses at most
// the unit in flight, and a rerun skips every recorded key after cutting a torn last line. Once every unit
// is recorded, results.jsonl is rewritten in plan order and DIR/summary.csv written (both atomically), so a
// batch run once, resumed, or sharded and merged gives the same files up to the timing fields.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace attnscope::analysis {

// results.jsonl could not be appended to (a full disk, an I/O error): the batch stops, keeping the records
// before it, instead of computing units whose results cannot be saved.
struct AppendFailure : InputError {
    using InputError::InputError;
};

class ResultStore {
public:
    // Reads DIR/results.jsonl (complete records by key; a torn last line is cut off) and opens it for
    // appending. Throws InputError when it holds records made with other `settings` or cannot be opened.
    ResultStore(const std::string& dir, const std::string& settings);
    ~ResultStore();
    ResultStore(const ResultStore&) = delete;
    ResultStore& operator=(const ResultStore&) = delete;

    // Thread-safe.
    bool has(const std::string& key) const;
    // Appends `record` (its "key" names it) durably; on failure the file is cut back to where it ended and
    // AppendFailure is thrown.
    void append(const nlohmann::ordered_json& record);
    std::size_t size() const;

    // results.jsonl in plan order and summary.csv, atomically (every unit of the shard is recorded).
    void write_final() const;

private:
    std::string m_dir, m_path;
    int m_fd = -1;
    mutable std::mutex m_mutex;
    std::map<std::string, nlohmann::ordered_json> m_records;
};

// DIR/failures.txt lists `failures`, or is removed when there are none. A failure to write it is added to
// `failures` (a stale list never stays).
void write_failures(const std::string& dir, std::vector<std::string>& failures);

// What a shard folder holds (DIR/shard.json, written before its first record): which job (settings hash),
// which shard of how many, and its units, so that a merge can tell a complete set from a partial one.
struct ShardInfo {
    std::string settings;
    int shard = 0, shards = 1;
    std::size_t units_total = 0;            // units of the whole job
    std::vector<std::size_t> units;         // this shard's units
    std::vector<std::string> mechanisms;    // records per unit
};
// Writes DIR/shard.json, or checks that the one there describes the same shard (InputError otherwise).
void write_shard_info(const std::string& dir, const ShardInfo& info);
ShardInfo read_shard_info(const std::string& dir);

// Combines the outputs of shards into out_dir: results.jsonl (deduplicated, in plan order), summary.csv,
// sweeps, figures, and merge.json saying whether the set is complete. The shards must be one job's (same
// settings and shard count, each shard once); a set that lacks shards or records is refused unless
// `partial`, and then written as results.partial.jsonl and summary.partial.csv. Throws InputError.
void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir, bool partial = false);

// Hex SHA-256 of a file (OpenSSL EVP).
std::string file_sha256(const std::string& path);

}  // namespace attnscope::analysis
