#pragma once
// Where a batch keeps its results (docs/batch.md). DIR/results.jsonl holds one JSON record per (unit,
// mechanism); each is appended, flushed and fsync'ed before the next one, so a killed batch loses at most
// the unit in flight, and a rerun skips every recorded key after cutting a torn last line. Once every unit
// is recorded, results.jsonl is rewritten in plan order and DIR/summary.csv written (both atomically), so a
// batch run once, resumed, or sharded and merged gives the same files up to the timing fields.
//
// Shard folders are untrusted input to `merge` (docs/security.md, "Batch and merge"): shard.json is checked
// against the records themselves, counts are parsed as 64-bit and bounded before anything is allocated from
// them, and no file of a shard is read through a symbolic link.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace attnscope::analysis {

// results.jsonl could not be appended to (a full disk, an I/O error): the batch stops, keeping the records
// before it, instead of computing units whose results cannot be saved.
struct AppendFailure : InputError {
    using InputError::InputError;
};

// The most shards a job may be cut into (`--shard I/N`, shard.json's "shards"): a merge lists the missing
// ones, so the count must be bounded before anything is allocated from it.
inline constexpr std::uint64_t kMaxShards = 1'000'000;

// results.jsonl is read whole and parsed into records, which take up to this many times its text in memory
// (measured: docs/security.md "Counts and sizes"): `aggregate` and `merge` read at most the memory budget
// (`--max-memory`) / k_results_memory_factor bytes of records, checked from the file sizes before reading.
inline constexpr std::uint64_t k_results_memory_factor = 16;
// A shard.json holds one shard's unit list (at most k_max_units numbers): at most this many bytes.
inline constexpr std::uint64_t k_max_shard_json_bytes = 64ull << 20;
// "more than aggregate reads within the memory budget (...)": the end of a message naming the file's size.
std::string results_size_limit_text(const std::string& command, std::uint64_t max_bytes);

class ResultStore {
public:
    // Reads DIR/results.jsonl (complete records by key; a torn last line is cut off) and opens it for
    // appending. Throws InputError when it holds records made with other `settings`, cannot be opened, or
    // is not a regular file (a symbolic link is never followed).
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

    // A copy of the records by key (not to be called while units run).
    std::map<std::string, nlohmann::ordered_json> records() const;
    // Replaces every record by `records`: results.jsonl is rewritten atomically (the old file stays whole
    // until the new one is complete) and reopened for appending. Throws InputError.
    void replace(std::map<std::string, nlohmann::ordered_json> records);

    // results.jsonl in plan order, summary.csv, aggregate.csv and aggregate.json, atomically (every unit of the
    // shard is recorded).
    void write_final() const;

private:
    void open_for_append();

    std::string m_dir, m_path;
    int m_fd = -1;
    mutable std::mutex m_mutex;
    std::map<std::string, nlohmann::ordered_json> m_records;
};

// DIR/failures.txt lists `failures`, or is removed when there are none. A failure to write it is added to
// `failures` (a stale list never stays).
void write_failures(const std::string& dir, std::vector<std::string>& failures);

// What a shard folder holds (DIR/shard.json, written before its first record): which job (settings hash and
// the settings themselves), which shard of how many, and its units, so that a merge can tell a complete set
// from a partial one.
struct ShardInfo {
    std::string settings;                   // the settings hash every record carries
    nlohmann::ordered_json settings_detail; // what was hashed (null in folders of older versions)
    std::string plan;                       // hash of the whole job's unit keys ("" in folders of older versions)
    std::uint64_t shard = 0, shards = 1;
    std::uint64_t units_total = 0;          // units of the whole job
    std::vector<std::uint64_t> units;       // this shard's units
    std::vector<std::string> mechanisms;    // records per unit, in the job's order
};
// Writes DIR/shard.json, or checks the one there: another shard index or count, or other settings, are
// refused (InputError naming the differing setting); the same shard of a changed plan is rewritten.
void write_shard_info(const std::string& dir, const ShardInfo& info);
// Parses shard.json's text (`where` names it in messages) and checks it for itself: counts are 64-bit
// non-negative integers, 1 <= shards <= kMaxShards, shard < shards, units are exactly the job's units with
// unit % shards == shard, mechanisms are known, distinct and at least one, the settings hash is the hash of
// the settings given. Throws InputError.
ShardInfo parse_shard_info(std::string_view text, const std::string& where);

// The settings hash every record and shard.json carry: the first 8 bytes of the SHA-256 of the settings'
// compact JSON, in hex.
std::string settings_hash(const nlohmann::ordered_json& settings);

// The first `bytes` bytes of SHA-256(text), in lowercase hex (2 * bytes characters; bytes <= 32).
std::string sha256_hex_prefix(std::string_view text, std::size_t bytes);

// The first setting in which two settings descriptions differ, as "name: A vs B" (empty when equal or
// unknown).
std::string settings_difference(const nlohmann::ordered_json& a, const nlohmann::ordered_json& b);

// One shard folder's contents, read (merge_batches) or made up (the fuzzer): no disk access below.
struct ShardText {
    std::string dir;              // for messages
    std::string shard_json;
    std::string results_jsonl;
};
struct MergedSet {
    nlohmann::ordered_json report;            // merge.json without the folder list
    bool complete = false;
    std::string results_jsonl, summary_csv;   // the merged files' contents
    std::string aggregate_csv, aggregate_json;
};
// Checks that the shards are one job's and that every shard.json agrees with its records (settings, shard
// index, units, mechanisms; records of other settings or of units of another shard are refused, naming the
// folder), then merges the records in plan order. Throws InputError for an inconsistent set, and for an
// incomplete one unless `partial`.
MergedSet merge_shard_texts(const std::vector<ShardText>& shards, bool partial);

// Combines the outputs of shards into out_dir: results.jsonl (deduplicated, in plan order), summary.csv,
// aggregate.csv and aggregate.json (computed from the merged records, so the same as one run's), sweeps, figures, and merge.json saying whether the set is complete. The shards must be one job's (same
// settings and shard count, each shard once); a set that lacks shards or records is refused unless
// `partial`, and then written as results.partial.jsonl, summary.partial.csv, aggregate.partial.csv and
// aggregate.partial.json. Nothing in a shard is read
// through a symbolic link; out_dir may not be a shard or hold one; the merge is built in a fresh folder and
// swapped into place, so no file of an earlier merge stays. Throws InputError.
// The shards' results.jsonl together may hold at most max_bytes / k_results_memory_factor bytes (0: the default
// memory budget), checked from their sizes before any is read.
void merge_batches(const std::vector<std::string>& dirs, const std::string& out_dir, bool partial = false,
                   std::uint64_t max_bytes = 0);

// Hex SHA-256 of a file (OpenSSL EVP).
std::string file_sha256(const std::string& path);

}  // namespace attnscope::analysis
