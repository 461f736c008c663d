#pragma once
// Pieces shared by the batch result store (batch_store.cpp) and merge (batch_merge.cpp), internal to
// core/analysis: reading files of an untrusted folder safely, the fields of a record, results.jsonl and
// summary.csv texts, shard.json as JSON.
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "analysis/batch_store.h"

namespace attnscope::analysis::store_detail {

using json = nlohmann::ordered_json;

// An open file descriptor, closed on scope exit.
struct Fd {
    int fd = -1;
    explicit Fd(int f = -1) : fd(f) {}
    ~Fd()
    {
        if (fd >= 0)
            ::close(fd);
    }
    Fd(Fd&& o) noexcept : fd(o.release()) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd& operator=(Fd&&) = delete;
    int release()
    {
        const int f = fd;
        fd = -1;
        return f;
    }
};

std::string why(int err);
// Opens `name` inside the folder `dirfd` for reading without following a symbolic link and without blocking
// on a FIFO; it must be a regular file. -1 when it does not exist; throws InputError naming `shown` otherwise.
int open_regular_at(int dirfd, const std::string& name, const std::string& shown);
// The whole content of `fd` (a regular file); throws InputError naming `shown`, also when it holds more than
// `limit` bytes (its size is checked before reading, and again while reading a file that grows): "`shown`:
// 8.0 GiB is more than `over`".
std::string read_all(int fd, const std::string& shown, std::uint64_t limit = UINT64_MAX, const std::string& over = {});
// obj[key], or null when obj is not an object or lacks it.
const json& field(const json& obj, const char* key);
std::string string_field(const json& obj, const char* key);
// A non-negative integer held by `v`, else nullopt.
std::optional<std::uint64_t> count_of(const json& v);

// The complete lines of a results.jsonl text: each must be a JSON object with a string "key". A last line
// without its newline is what a kill mid-append leaves (the writer appends whole lines), or a whole record
// whose newline an editor dropped: `tail` says what to do with it. `good` ends before it either way.
enum class LastLine {
    drop,              // the batch's own store: cut it and compute that unit again
    keep_whole,        // merge: a line that parses as a record counts, a torn one is left out (its unit is missing)
    keep_or_refuse,    // aggregate: a line that parses as a record counts, a torn one is refused (InputError)
};
struct RecordLines {
    std::vector<std::pair<std::size_t, json>> records;   // (line number, record)
    std::size_t good = 0;                                 // bytes of complete lines
};
RecordLines parse_record_lines(std::string_view text, const std::string& where, LastLine tail = LastLine::drop);

// Records and shard descriptions nest a few levels; copying, comparing and writing a JSON value recurse once per
// level, so a hostile line nested a million deep would overflow the stack. Counted before parsing.
inline constexpr int kMaxJsonDepth = 64;
bool nested_too_deeply(std::string_view text);
std::string num(const json& v);
std::string summary_csv(const std::vector<json>& records);
// aggregate.csv and aggregate.json of records in plan order (analysis/aggregate.h).
struct AggregateTexts {
    std::string csv, json;
};
AggregateTexts aggregate_texts(const std::vector<json>& records);
std::vector<json> ordered(const std::map<std::string, json>& records);
std::string results_text(const std::vector<json>& list);
// results.jsonl, summary.csv, aggregate.csv and aggregate.json of `records` in their final order, into `dir`.
void write_final(const std::string& dir, const std::map<std::string, json>& records);
std::string shortened(const std::string& s, std::size_t max = 60);
json shard_json(const ShardInfo& info);

}  // namespace attnscope::analysis::store_detail
