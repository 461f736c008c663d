// A batch folder's statistics over units (analysis/aggregate.h): aggregate.csv / aggregate.json beside
// summary.csv (analysis/batch_store_detail.h), the records read back for `attnscope aggregate`, grouped by
// any field of the unit.
#include "analysis/aggregate.h"
#include "analysis/batch_store_detail.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "analysis/measure.h"
#include "attention/mechanisms.h"
#include "attention/options.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/names.h"

namespace attnscope::analysis {

using json = nlohmann::ordered_json;
using namespace store_detail;

AggregateTexts store_detail::aggregate_texts(const std::vector<json>& records)
{
    const AggregateOptions options;
    const Aggregate a = aggregate(batch_unit_metrics(records), options);
    json doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    json stats = aggregate_json(a, options);
    for (auto& [key, value] : stats.items())
        doc[key] = std::move(value);
    return {aggregate_csv(a), json_text(doc, 2) + "\n"};
}

std::vector<json> read_batch_records(const std::string& dir, std::string* which, std::uint64_t max_bytes)
{
    const std::uint64_t budget = max_bytes ? max_bytes : default_memory_limit();
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd.fd < 0) {
        const int error = errno;
        const std::string message = display_path(dir) + ": not a batch results folder (not a folder: " + why(error) + ")";
        if (error == ENOENT)
            throw MissingFileError(message);   // FileNotFoundError in Python; exit 2 on the command line as before
        throw InputError(message);
    }
    for (const char* name : {"results.jsonl", "results.partial.jsonl"}) {
        const std::string shown = display_path(dir) + "/" + name;
        Fd f(open_regular_at(dfd.fd, name, shown));
        if (f.fd < 0)
            continue;
        RecordLines lines = parse_record_lines(
            read_all(f.fd, shown, budget / k_results_memory_factor, results_size_limit_text("aggregate", budget)), shown,
            LastLine::keep_or_refuse);
        std::vector<json> out;
        out.reserve(lines.records.size());
        for (auto& [line_no, rec] : lines.records) {
            const std::string at = shown + ":" + std::to_string(line_no);
            if (!count_of(field(rec, "unit")) || !field(rec, "mechanism").is_string())
                throw InputError(at + ": not a batch record (no unit or mechanism)");
            // A batch records only the mechanisms of the table: any other name is not a batch's record (and
            // every name is a row of the statistics, and every two a pair).
            try {
                (void)attention::parse_mechanism(rec["mechanism"].get<std::string>());
            } catch (const std::invalid_argument&) {
                throw InputError(at + ": mechanism '" + shortened(display_path(rec["mechanism"].get<std::string>()), 40) +
                                 "' is not a mechanism (" + joined(attention::mechanism_names()) + ")");
            }
            out.push_back(std::move(rec));
        }
        if (which)
            *which = name;
        return out;
    }
    throw InputError(display_path(dir) + ": not a batch results folder (no results.jsonl; `attnscope batch` and "
                                         "`attnscope merge` write one)");
}

namespace {

// Index axes of the records' selections other than the head (h is "head").
std::vector<std::string> axis_fields(const std::vector<json>& records)
{
    std::vector<std::string> out;
    for (const json& r : records) {
        const json& at = field(field(r, "input"), "at");
        if (!at.is_object())
            continue;
        for (const auto& [axis, v] : at.items())
            if (axis != "h" && axis != "l" && std::find(out.begin(), out.end(), axis) == out.end())
                out.push_back(axis);
    }
    std::sort(out.begin(), out.end());
    return out;
}

json field_value(const json& rec, const std::string& name)
{
    if (name == "file")
        return field(field(rec, "input"), "file");
    if (name == "layer" || name == "head")
        return field(rec, name.c_str());
    return field(field(field(rec, "input"), "at"), name.c_str());
}

}  // namespace

namespace {

UnitMetrics unit_metrics(const json& r, const std::string& cluster)
{
    {
        UnitMetrics u;
        const std::optional<std::uint64_t> unit = count_of(field(r, "unit"));   // 64 bits: 2^64 - 1 is a unit index
        const json& mech = field(r, "mechanism");
        if (!unit || !mech.is_string())
            throw std::invalid_argument("a batch record without a unit index or a mechanism name");
        u.unit = std::to_string(*unit);
        u.mechanism = mech.get<std::string>();
        u.metrics = result_metrics(r);
        if (!cluster.empty()) {
            // The value's compact JSON text: "null" for a record without the field is a cluster of its own.
            const json v = field_value(r, cluster);
            u.cluster = v.is_string() ? v.get<std::string>() : v.dump();
        }
        return u;
    }
}

}  // namespace

std::vector<UnitMetrics> batch_unit_metrics(const std::vector<json>& records, const std::string& cluster)
{
    std::vector<UnitMetrics> out;
    out.reserve(records.size());
    for (const json& r : records)
        out.push_back(unit_metrics(r, cluster));
    return out;
}

std::vector<std::string> group_fields(const std::vector<json>& records)
{
    std::vector<std::string> out = {"file", "layer", "head"};
    for (std::string& a : axis_fields(records))
        out.push_back(std::move(a));
    return out;
}

std::vector<AggregateGroup> aggregate_by(const std::vector<json>& records, const std::vector<std::string>& by,
                                         const std::string& what, const AggregateOptions& options,
                                         const std::string& cluster, const std::vector<std::string>& metrics)
{
    const auto wanted = [&metrics](const std::string& metric) {
        return metrics.empty() || std::any_of(metrics.begin(), metrics.end(), [&](const std::string& a) {
                   return metric == a || metric.rfind(a + ".", 0) == 0;
               });
    };
    // The other options named as the caller names the grouping one: --cluster/--metric, or cluster/metric.
    const bool flags = what.rfind("--", 0) == 0;
    const std::string cluster_name = flags ? "--cluster" : "cluster", metric_name = flags ? "--metric" : "metric";
    std::vector<bool> found(metrics.size(), false);
    const std::vector<std::string> fields = group_fields(records);
    const auto check_field = [&fields](const std::string& option, const std::string& name) {
        if (std::find(fields.begin(), fields.end(), name) != fields.end())
            return;
        std::string known;
        for (const std::string& f : fields)
            known += (known.empty() ? "" : ", ") + f;
        throw std::invalid_argument(option + ": '" + name + "' is not a field of the units (these records have: " +
                                    known + ")");
    };
    if (!cluster.empty()) {
        check_field(cluster_name, cluster);
        if (std::find(by.begin(), by.end(), cluster) != by.end())
            throw std::invalid_argument(cluster_name + " " + cluster + " is also a " + what + " field: each group would be "
                                        "one cluster");
    }
    for (std::size_t i = 0; i < by.size(); ++i) {
        check_field(what, by[i]);
        if (std::find(by.begin(), by.begin() + static_cast<std::ptrdiff_t>(i), by[i]) != by.begin() + static_cast<std::ptrdiff_t>(i))
            throw std::invalid_argument(what + ": '" + by[i] + "' is given twice");
    }
    std::vector<json> keys;
    std::map<std::string, std::size_t> index_of;   // the key's compact text -> group
    std::vector<std::vector<UnitMetrics>> members;
    for (const json& r : records) {
        json key = json::object();
        for (const std::string& f : by)
            key[f] = field_value(r, f);
        const auto [it, fresh] = index_of.emplace(key.dump(), keys.size());
        if (fresh) {
            keys.push_back(key);
            members.emplace_back();
        }
        UnitMetrics u = unit_metrics(r, cluster);
        if (!metrics.empty()) {
            for (const auto& [name, v] : u.metrics)
                for (std::size_t i = 0; i < metrics.size(); ++i)
                    found[i] = found[i] || name == metrics[i] || name.rfind(metrics[i] + ".", 0) == 0;
            std::erase_if(u.metrics, [&](const auto& m) { return !wanted(m.first); });
        }
        members[it->second].push_back(std::move(u));
    }
    // Every metric asked must be one the records hold (a typo would print an empty table).
    for (std::size_t i = 0; i < metrics.size(); ++i)
        if (!found[i])
            throw std::invalid_argument(metric_name + ": '" + metrics[i] + "' is not a metric of these records (without " +
                                        metric_name + " all are shown)");
    // The bootstrap's work of every group together (each group is checked by aggregate() too): groups split
    // the same draws, they do not make them fewer.
    double draws = 0;
    for (const auto& m : members) {
        check_aggregate_size(m, options);   // names and tables first: they say more than the draws
        draws += aggregate_draws(m, options);
    }
    if (draws > k_max_bootstrap_draws)
        throw std::invalid_argument(fmt::format("the bootstrap would draw {:.3g} positions over {} groups, more than the cap of "
                                                "{:.0e} (about a minute): choose fewer metrics with {}, or aggregate "
                                                "fewer units", draws, keys.size(), k_max_bootstrap_draws, metric_name));
    std::vector<AggregateGroup> out;
    for (std::size_t g = 0; g < keys.size(); ++g)
        out.push_back({keys[g], aggregate(members[g], options)});
    return out;
}

}  // namespace attnscope::analysis
