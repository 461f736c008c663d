// The batch's records as text (analysis/batch_store_detail.h): reading results.jsonl lines, and the summary and
// final files written from the records. The result store (batch_store.cpp) and merge (batch_merge.cpp) share them.
#include "analysis/batch_store_detail.h"

#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "analysis/measure.h"
#include "analysis/metric_table.h"
#include "attention/options.h"
#include "util/atomic_file.h"
#include "util/csv.h"
#include "util/json_text.h"

namespace attnscope::analysis::store_detail {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// ------------------------------------------------------------------------------------------ records

const json& field(const json& obj, const char* key)
{
    static const json null;
    if (!obj.is_object())
        return null;
    const auto it = obj.find(key);
    return it == obj.end() ? null : *it;
}

std::string string_field(const json& obj, const char* key)
{
    const json& v = field(obj, key);
    return v.is_string() ? v.get<std::string>() : std::string();
}

// A non-negative integer (parsed as 64 bits: 4294967297 stays 4294967297), or nullopt.
std::optional<std::uint64_t> count_of(const json& v)
{
    if (v.is_number_unsigned())
        return v.get<std::uint64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
        return static_cast<std::uint64_t>(v.get<std::int64_t>());
    return std::nullopt;
}

constexpr std::uint64_t kNoUnit = std::numeric_limits<std::uint64_t>::max();


bool nested_too_deeply(std::string_view text)
{
    int depth = 0;
    bool in_string = false, escaped = false;
    for (const char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                return true;
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return false;
}

RecordLines parse_record_lines(std::string_view text, const std::string& where, LastLine tail)
{
    RecordLines out;
    std::size_t pos = 0, line_no = 0;
    while (pos < text.size()) {
        std::size_t nl = text.find('\n', pos);
        if (nl == std::string_view::npos) {
            if (tail == LastLine::drop)
                break;   // torn tail
            // A whole record counts; a torn one (a JSON object cut short never parses) is dropped or refused.
            const std::string_view line = text.substr(pos);
            json rec = nested_too_deeply(line) ? json(json::value_t::discarded) : json::parse(line.begin(), line.end(), nullptr, false);
            if (rec.is_discarded() || !field(rec, "key").is_string()) {
                if (tail == LastLine::keep_whole)
                    break;
                throw InputError(where + ": line " + std::to_string(line_no + 1) + " (the last) has no newline and is not a " +
                                 "whole record: a write cut short (a batch killed while appending); run the batch again to " +
                                 "finish it");
            }
            out.records.emplace_back(line_no + 1, std::move(rec));
            break;
        }
        ++line_no;
        const std::string_view line = text.substr(pos, nl - pos);
        if (nested_too_deeply(line))
            throw InputError(where + ": line " + std::to_string(line_no) + " is nested more than " +
                             std::to_string(kMaxJsonDepth) + " levels deep (not a batch record)");
        json rec = json::parse(line.begin(), line.end(), nullptr, false);
        if (rec.is_discarded())
            throw InputError(where + ": line " + std::to_string(line_no) + " is not a JSON record");
        if (!field(rec, "key").is_string())
            throw InputError(where + ": line " + std::to_string(line_no) + " is not a batch record (no \"key\")");
        out.records.emplace_back(line_no, std::move(rec));
        pos = nl + 1;
        out.good = pos;
    }
    return out;
}

std::string num(const json& v)
{
    if (!v.is_number())
        return "";
    if (v.is_number_unsigned())
        return std::to_string(v.get<std::uint64_t>());
    if (v.is_number_integer())
        return std::to_string(v.get<long long>());
    return fmt::format("{:.17g}", v.get<double>());
}

// The record's unit index axes (`--at b=all` and friends), as the CSV's `at` column (util/csv.h).
static std::string unit_at_text(const json& record)
{
    const json& at = field(record, "unit_at");
    std::map<char, std::int64_t> axes;
    if (at.is_object())
        for (const auto& [axis, index] : at.items())
            if (axis.size() == 1 && index.is_number_integer())
                axes[axis[0]] = index.get<std::int64_t>();
    return unit_at_field(axes);
}

std::string summary_csv(const std::vector<json>& records)
{
    // The metrics are read from each record's analyze JSON (analysis/metric_table.h).
    const std::vector<const MetricEntry*> columns = metric_entries(use_batch_csv);
    std::ostringstream out;
    out << "unit,file,layer,head,at,mechanism,n,d,";
    for (const MetricEntry* e : columns)
        out << e->key << ',';
    out << "seconds\n";
    for (const json& r : records) {
        const json& input = field(r, "input");
        const json& seconds = field(r, "seconds");
        out << num(field(r, "unit")) << ',' << csv_field(string_field(input, "file")) << ',' << num(field(r, "layer")) << ','
            << num(field(r, "head")) << ',' << csv_field(unit_at_text(r)) << ',' << csv_field(string_field(r, "mechanism")) << ',' << num(field(input, "n")) << ','
            << num(field(input, "d")) << ',';
        for (const MetricEntry* e : columns)
            out << num(metric_json(*e, r)) << ',';
        out << fmt::format("{:.6f}", seconds.is_number() ? seconds.get<double>() : 0.0) << '\n';
    }
    return out.str();
}

// Records sorted by (unit, mechanism order), then key.
std::vector<json> ordered(const std::map<std::string, json>& records)
{
    std::vector<std::pair<std::tuple<std::uint64_t, std::uint64_t, std::string>, const json*>> list;
    for (const auto& [key, r] : records)
        list.push_back({{count_of(field(r, "unit")).value_or(kNoUnit), count_of(field(r, "mechanism_index")).value_or(kNoUnit), key},
                        &r});
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<json> out;
    out.reserve(list.size());
    for (const auto& [k, r] : list)
        out.push_back(*r);
    return out;
}

std::string results_text(const std::vector<json>& list)
{
    std::string lines;
    for (const json& r : list)
        lines += json_text(r) + "\n";
    return lines;
}

// results.jsonl, summary.csv and the statistics over units, aggregate.csv and aggregate.json (a partial
// merge writes them under *.partial.* names, so that nothing reading the usual names takes an incomplete set
// for a complete one).
void write_final(const std::string& dir, const std::map<std::string, json>& records)
{
    const auto list = ordered(records);
    const AggregateTexts stats = aggregate_texts(list);
    // summary.csv last: its presence says the folder is complete (docs/batch.md), so a failure before it
    // leaves a folder that a rerun finishes.
    write_file_atomically((fs::path(dir) / "aggregate.csv").string(), stats.csv);
    write_file_atomically((fs::path(dir) / "aggregate.json").string(), stats.json);
    write_file_atomically((fs::path(dir) / "results.jsonl").string(), results_text(list));
    write_file_atomically((fs::path(dir) / "summary.csv").string(), summary_csv(list));
}

}  // namespace attnscope::analysis::store_detail
