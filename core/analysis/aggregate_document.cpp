// Statistics over units as documents (analysis/aggregate.h): an analyze result's metrics read from its JSON
// (result_metrics), and an aggregate written as aggregate.json / aggregate.csv with its few-clusters note.
// aggregate.cpp computes; this file only reads and writes.
#include "analysis/aggregate.h"

#include <cmath>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "analysis/small_sample.h"
#include "util/csv.h"

namespace attnscope::analysis {

using json = nlohmann::ordered_json;

namespace {

// What is not a metric: lists and labels of a result (at every level), a batch record's provenance (at the top).
bool skipped_anywhere(const std::string& key)
{
    static const std::set<std::string> keys = {"singular_values", "row_entropy", "warnings", "mechanism", "params"};
    return keys.count(key) > 0;
}

bool provenance(const std::string& key)
{
    static const std::set<std::string> keys = {"key",   "unit",  "mechanism_index", "settings", "attnscope_version",
                                               "input", "layer", "head",            "unit_at",  "seconds"};
    return keys.count(key) > 0;
}

void flatten(const json& obj, const std::string& prefix, bool top, std::vector<std::pair<std::string, double>>& out)
{
    for (const auto& [key, v] : obj.items()) {
        if (skipped_anywhere(key) || (top && provenance(key)))
            continue;
        const std::string name = prefix + key;
        if (v.is_object())
            flatten(v, name + ".", false, out);
        else if (v.is_null())
            out.emplace_back(name, std::numeric_limits<double>::quiet_NaN());
        else if (v.is_number() && std::isfinite(v.get<double>()))
            out.emplace_back(name, v.get<double>());
    }
}

json number_or_null(std::optional<double> v) { return v ? json(*v) : json(); }
json finite_or_null(double v) { return std::isfinite(v) ? json(v) : json(); }

std::string csv_number(double v) { return fmt::format("{:.17g}", v); }

}  // namespace

std::vector<std::pair<std::string, double>> result_metrics(const json& result)
{
    std::vector<std::pair<std::string, double>> out;
    if (result.is_object())
        flatten(result, "", true, out);
    return out;
}

const char* to_string(CiMethod m)
{
    switch (m) {
    case CiMethod::bootstrap: return "bootstrap";
    case CiMethod::two_stage_bootstrap: return "two-stage bootstrap";
    case CiMethod::t: return "t";
    case CiMethod::none: break;
    }
    return "none";
}

std::string few_clusters_note(const Aggregate& a)
{
    const std::size_t g = a.fewest_clusters;
    if (g == 0 || g >= k_few_clusters)
        return {};
    const std::string what = a.clustered ? "cluster" : "unit";
    std::string note = fmt::format("with {} {}{} ", g, what, g == 1 ? "" : "s");
    if (g < k_sign_test_min_clusters)
        note += fmt::format("no two-sided sign test can reach p < 0.05 (the smallest possible p is {:.3g}); ",
                            sign_test_p(g, 0));
    if (g < 2)
        note += "no interval can be given";
    else
        note += fmt::format("intervals are t intervals over the {} ({} degrees of freedom)",
                            a.clustered ? "cluster means" : "units' values", g - 1);
    if (a.clustered)
        note += "; agree = how many cluster means share the sign of the mean";
    return note;
}

json aggregate_json(const Aggregate& a, const AggregateOptions& options)
{
    json doc;
    doc["units"] = a.units;
    doc["resamples"] = options.resamples;
    doc["seed"] = options.seed;
    doc["level"] = options.level;
    if (const std::string note = few_clusters_note(a); !note.empty())
        doc["note"] = note;
    json rows = json::array();
    for (const MechanismStats& s : a.mechanisms)
        rows.push_back({{"mechanism", s.mechanism},   {"metric", s.metric},        {"n", s.n},
                        {"mean", s.mean},             {"std", number_or_null(s.std)}, {"ci_low", finite_or_null(s.ci_low)},
                        {"ci_high", finite_or_null(s.ci_high)}, {"clusters", s.clusters},
                        {"ci_method", to_string(s.ci_method)},  {"agree", s.agree}});
    doc["mechanisms"] = std::move(rows);
    json pairs = json::array();
    for (const PairStats& s : a.pairs)
        pairs.push_back({{"mechanism_a", s.mechanism_a}, {"mechanism_b", s.mechanism_b}, {"metric", s.metric},
                         {"n", s.n},                     {"mean_diff", s.mean_diff},     {"ci_low", finite_or_null(s.ci_low)},
                         {"ci_high", finite_or_null(s.ci_high)}, {"p_sign", s.p_sign},   {"clusters", s.clusters},
                         {"ci_method", to_string(s.ci_method)},  {"agree", s.agree},     {"p_t", finite_or_null(s.p_t)},
                         {"p_holm", finite_or_null(s.p_holm)}});
    doc["pairs"] = std::move(pairs);
    return doc;
}

std::string aggregate_csv(const Aggregate& a)
{
    std::ostringstream out;
    const auto num = [](double v) { return std::isfinite(v) ? csv_number(v) : std::string(); };
    out << "kind,mechanism,mechanism_a,mechanism_b,metric,n,mean,std,mean_diff,ci_low,ci_high,p_sign,clusters,ci_method,"
           "agree,p_t,p_holm\n";
    for (const MechanismStats& s : a.mechanisms)
        out << "mechanism," << csv_field(s.mechanism) << ",,," << csv_field(s.metric) << ',' << s.n << ','
            << csv_number(s.mean) << ',' << (s.std ? csv_number(*s.std) : "") << ",," << num(s.ci_low) << ','
            << num(s.ci_high) << ",," << s.clusters << ',' << csv_field(to_string(s.ci_method)) << ',' << s.agree
            << ",,\n";
    for (const PairStats& s : a.pairs)
        out << "pair,," << csv_field(s.mechanism_a) << ',' << csv_field(s.mechanism_b) << ',' << csv_field(s.metric)
            << ',' << s.n << ",,," << csv_number(s.mean_diff) << ',' << num(s.ci_low) << ',' << num(s.ci_high) << ','
            << csv_number(s.p_sign) << ',' << s.clusters << ',' << csv_field(to_string(s.ci_method)) << ','
            << s.agree << ',' << num(s.p_t) << ',' << num(s.p_holm) << '\n';
    return out.str();
}

}  // namespace attnscope::analysis
