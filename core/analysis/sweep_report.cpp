// The sweep's outputs: the long-format CSV and the JSON summary per point (docs/cli.md "sweep").
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "analysis/sweep.h"

namespace attnscope::analysis {

using Eigen::Index;

const std::vector<std::string>& sweep_metric_names()
{
    static const std::vector<std::string> names = {"rank",         "relative_rank", "effective_rank", "stable_rank",
                                                   "entropy_mean", "entropy_normalized_mean", "seconds"};
    return names;
}

namespace {

std::string num(double v)
{
    if (!std::isfinite(v))
        return "";
    return fmt::format("{:.17g}", v);
}

}  // namespace

std::string sweep_csv(const std::vector<SweepRecord>& records)
{
    std::ostringstream out;
    out << "mechanism,n,m,layer,head,draw,rank,rank_tol,relative_rank,effective_rank,stable_rank,entropy_mean,"
           "entropy_normalized_mean,seconds\n";
    for (const auto& r : records) {
        out << r.mechanism << ',' << r.n << ',' << r.m << ',' << (r.layer ? std::to_string(*r.layer) : "") << ','
            << (r.head ? std::to_string(*r.head) : "") << ',' << r.draw << ',';
        if (r.spectrum)
            out << r.spectrum->rank << ',' << num(r.spectrum->tol) << ',' << num(r.spectrum->relative_rank) << ','
                << num(r.spectrum->effective_rank) << ',' << num(r.spectrum->stable_rank) << ',';
        else
            out << ",,,,,";
        if (r.entropy)
            out << num(r.entropy->mean) << ',' << num(r.entropy->normalized_mean) << ',';
        else
            out << ",,";
        out << fmt::format("{:.6f}", r.seconds) << '\n';
    }
    return out.str();
}

nlohmann::ordered_json sweep_summary(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                     const nlohmann::ordered_json& inputs)
{
    struct Acc {
        std::map<std::string, std::vector<double>> values;
        Index count = 0;
    };
    // Points in first-seen order.
    std::vector<std::tuple<std::string, Index, Index>> order;
    std::map<std::tuple<std::string, Index, Index>, Acc> acc;
    for (const auto& r : records) {
        const auto key = std::make_tuple(r.mechanism, r.n, r.m);
        if (!acc.count(key))
            order.push_back(key);
        Acc& a = acc[key];
        ++a.count;
        if (r.spectrum) {
            a.values["rank"].push_back(static_cast<double>(r.spectrum->rank));
            a.values["relative_rank"].push_back(r.spectrum->relative_rank);
            a.values["effective_rank"].push_back(r.spectrum->effective_rank);
            a.values["stable_rank"].push_back(r.spectrum->stable_rank);
        }
        if (r.entropy) {
            a.values["entropy_mean"].push_back(r.entropy->mean);
            a.values["entropy_normalized_mean"].push_back(r.entropy->normalized_mean);
        }
        a.values["seconds"].push_back(r.seconds);
    }
    nlohmann::ordered_json doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    doc["vary"] = std::string(1, spec.vary);
    doc["subsample"] = std::string(to_string(spec.subsample));
    bool from_files = false;
    for (const auto& input : inputs)
        from_files = from_files || input.contains("defaults_from_file");
    if (from_files)
        doc["inputs"] = inputs;
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const auto& key : order) {
        const Acc& a = acc[key];
        nlohmann::ordered_json p;
        p["mechanism"] = std::get<0>(key);
        p["n"] = std::get<1>(key);
        p["m"] = std::get<2>(key);
        p["count"] = a.count;
        for (const std::string& metric : sweep_metric_names()) {
            const auto it = a.values.find(metric);
            if (it == a.values.end() || it->second.empty()) {
                p[metric] = nullptr;
                continue;
            }
            const auto& v = it->second;
            const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
            double var = 0;
            for (double x : v)
                var += (x - mean) * (x - mean);
            p[metric] = {{"mean", mean},
                         {"std", std::sqrt(var / static_cast<double>(v.size()))},
                         {"min", *std::min_element(v.begin(), v.end())},
                         {"max", *std::max_element(v.begin(), v.end())}};
        }
        points.push_back(std::move(p));
    }
    doc["points"] = std::move(points);
    return doc;
}

}  // namespace attnscope::analysis
