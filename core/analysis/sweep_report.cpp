// The sweep's outputs: the long-format CSV and the JSON summary per point (docs/cli.md "sweep"), and a
// finished sweep as a JSON document (the desktop app's sessions store it).
#include <algorithm>
#include <cmath>
#include <map>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "analysis/aggregate.h"
#include "analysis/metric_table.h"
#include "analysis/sweep.h"
#include "attention/options_json.h"
#include "metrics/structured.h"
#include "util/csv.h"

namespace attnscope::analysis {

using Eigen::Index;

const std::vector<std::string>& sweep_metric_names()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        for (const MetricEntry* e : metric_entries(use_sweep))
            out.emplace_back(e->key);
        out.emplace_back("seconds");
        return out;
    }();
    return names;
}

std::string sweep_metric_title(std::string_view name)
{
    if (name == "seconds")
        return "seconds";
    const MetricEntry* e = find_metric(name);
    return e && e->used_in(use_sweep) ? std::string(e->title) : std::string();
}

double sweep_metric_value(const SweepRecord& record, std::string_view name)
{
    if (name == "seconds")
        return record.seconds;
    const MetricEntry* e = find_metric(name);
    const std::optional<double> v = e && e->used_in(use_sweep) ? e->read(record.result) : std::nullopt;
    return v.value_or(std::numeric_limits<double>::quiet_NaN());
}

std::string sweep_csv(const std::vector<SweepRecord>& records)
{
    const std::vector<const MetricEntry*> columns = metric_entries(use_sweep_csv);
    std::ostringstream out;
    out << "mechanism,n,m,layer,head,at,draw,";
    for (const MetricEntry* e : columns)
        out << e->key << ',';
    out << "seconds\n";
    for (const auto& r : records) {
        out << r.mechanism << ',' << r.n << ',' << r.m << ',' << (r.layer ? std::to_string(*r.layer) : "") << ','
            << (r.head ? std::to_string(*r.head) : "") << ',' << unit_at_field({r.at.begin(), r.at.end()}) << ',' << r.draw << ',';
        for (const MetricEntry* e : columns)
            out << csv_number(*e, e->read(r.result)) << ',';
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
        std::string rank_cap;   // the mixing matrix caps the rank (docs/maths.md 1.6): its sentence
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
        for (const MetricEntry* e : metric_entries(use_sweep))
            if (const std::optional<double> v = e->read(r.result))
                a.values[std::string(e->key)].push_back(*v);
        a.values["seconds"].push_back(r.seconds);
        for (const std::string& w : r.result.warnings)
            if (a.rank_cap.empty() && metrics::is_rank_cap_sentence(w))
                a.rank_cap = w;
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
        if (!a.rank_cap.empty())
            p["rank_cap"] = a.rank_cap;
        for (const std::string& metric : sweep_metric_names()) {
            const auto it = a.values.find(metric);
            if (it == a.values.end() || it->second.empty()) {
                p[metric] = nullptr;
                continue;
            }
            const metrics::Spread s = metrics::spread_of(it->second);
            const MeanInterval ci = mean_interval(it->second);   // over the point's units (docs/maths.md 5)
            p[metric] = {{"mean", s.mean}, {"std", s.std},        {"min", s.min},
                         {"max", s.max},   {"ci_low", ci.low},    {"ci_high", ci.high},
                         {"ci_method", to_string(ci.method)}};
        }
        points.push_back(std::move(p));
    }
    doc["points"] = std::move(points);
    return doc;
}

std::string sweep_summary_csv(const nlohmann::ordered_json& summary)
{
    std::ostringstream out;
    out << "mechanism,n,m,count,metric,mean,std,min,max,ci_low,ci_high\n";
    if (!summary.contains("points"))
        return out.str();
    for (const auto& p : summary["points"])
        for (const std::string& metric : sweep_metric_names()) {
            const auto it = p.find(metric);
            if (it == p.end() || !it->is_object())
                continue;
            out << p["mechanism"].get<std::string>() << ',' << p["n"].get<Index>() << ',' << p["m"].get<Index>() << ','
                << p["count"].get<Index>() << ',' << metric;
            for (const char* field : {"mean", "std", "min", "max", "ci_low", "ci_high"}) {
                const auto& v = (*it)[field];   // null (a session's NaN) or NaN: no interval for one unit
                out << ',' << (v.is_number() && std::isfinite(v.get<double>()) ? fmt::format("{:.17g}", v.get<double>()) : "");
            }
            out << '\n';
        }
    return out.str();
}

std::vector<SweepCurve> sweep_curves(const SweepResult& sweep, const nlohmann::ordered_json& summary,
                                     std::string_view metric, bool by_m)
{
    std::vector<SweepCurve> out;
    if (!summary.contains("points"))
        return out;
    const std::string key(metric);
    std::vector<std::string> order;
    auto index_of = [&order](const std::string& name) {
        const auto it = std::find(order.begin(), order.end(), name);
        if (it != order.end())
            return static_cast<std::size_t>(it - order.begin());
        order.push_back(name);
        return order.size() - 1;
    };
    for (const attention::Mechanism m : sweep.spec.mechanisms)
        index_of(std::string(attention::to_string(m)));
    // Per (mechanism, x): min and max of the records' finite values, and the summary points to pool. A summary
    // point counts the records with a value of the metric.
    struct At {
        metrics::Spread records;
        std::vector<double> values;   // the records' finite values, in record order (the bootstrap's units)
        std::vector<metrics::Spread> points;
    };
    std::map<std::pair<std::size_t, double>, At> at;
    std::map<std::tuple<std::string, Index, Index>, double> with_value;
    for (const SweepRecord& r : sweep.records) {
        const double v = sweep_metric_value(r, metric);
        if (!std::isfinite(v))
            continue;
        with_value[{r.mechanism, r.n, r.m}] += 1;
        At& a = at[{index_of(r.mechanism), static_cast<double>(by_m ? r.m : r.n)}];
        a.records.min = std::min(a.records.min, v);
        a.records.max = std::max(a.records.max, v);
        a.values.push_back(v);
    }
    for (const auto& p : summary["points"]) {
        if (!p.contains(key) || !p[key].is_object())
            continue;
        const std::string mechanism = p["mechanism"].get<std::string>();
        const Index n = p["n"].get<Index>(), m = p["m"].get<Index>();
        const auto it = with_value.find({mechanism, n, m});
        if (it == with_value.end())
            continue;
        metrics::Spread s;
        s.count = it->second;
        s.mean = p[key]["mean"].get<double>();
        s.std = p[key]["std"].get<double>();
        at[{index_of(mechanism), static_cast<double>(by_m ? m : n)}].points.push_back(s);
    }
    for (std::size_t i = 0; i < order.size(); ++i) {
        SweepCurve c{order[i], {}};
        for (const auto& [where, a] : at) {
            if (where.first != i)
                continue;
            metrics::Spread s = metrics::pooled(a.points);
            if (s.count <= 0)
                continue;
            s.min = a.records.min;
            s.max = a.records.max;
            const MeanInterval ci = mean_interval(a.values);
            s.ci_low = ci.low;
            s.ci_high = ci.high;
            c.points.emplace_back(where.second, s);
        }
        if (!c.points.empty())
            out.push_back(std::move(c));
    }
    return out;
}

namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

ojson number(double v)
{
    return std::isfinite(v) ? ojson(v) : ojson(nullptr);
}

// The field `key` of `j` as T; absent: `fallback`. A number that is null reads as NaN.
template <class T>
T field(const json& j, const char* key, T fallback)
{
    const auto it = j.find(key);
    if (it == j.end())
        return fallback;
    try {
        if constexpr (std::is_floating_point_v<T>) {
            if (it->is_null())
                return std::numeric_limits<T>::quiet_NaN();
        }
        return it->get<T>();
    } catch (const json::exception&) {
        throw std::invalid_argument(std::string("sweep result: \"") + key + "\" has the wrong type");
    }
}

std::optional<Index> optional_index(const json& j, const char* key)
{
    const auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return std::nullopt;
    return field<Index>(j, key, 0);
}

const json& object_at(const json& j, const char* key)
{
    static const json empty = json::object();
    const auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return empty;
    if (!it->is_object())
        throw std::invalid_argument(std::string("sweep result: \"") + key + "\" is not an object");
    return *it;
}

ojson record_json(const SweepRecord& r)
{
    ojson j;
    j["mechanism"] = r.mechanism;
    j["n"] = r.n;
    j["m"] = r.m;
    j["d"] = r.d;
    j["layer"] = r.layer ? ojson(*r.layer) : ojson(nullptr);
    j["head"] = r.head ? ojson(*r.head) : ojson(nullptr);
    if (!r.at.empty()) {   // only for units of an axis given as `all`: other sweeps' JSON is unchanged
        ojson at = ojson::object();
        for (const auto& [axis, index] : r.at)
            at[std::string(1, axis)] = index;
        j["at"] = std::move(at);
    }
    j["draw"] = r.draw;
    j["input"] = r.input;
    const MechanismResult& m = r.result;
    if (m.spectrum)
        j["spectrum"] = ojson{{"tol", number(m.spectrum->tol)},
                              {"rank", m.spectrum->rank},
                              {"relative_rank", number(m.spectrum->relative_rank)},
                              {"effective_rank", number(m.spectrum->effective_rank)},
                              {"stable_rank", number(m.spectrum->stable_rank)}};
    else
        j["spectrum"] = nullptr;
    if (m.entropy)
        j["entropy"] = ojson{{"mean", number(m.entropy->mean)},
                             {"std", number(m.entropy->std)},
                             {"min", number(m.entropy->min)},
                             {"max", number(m.entropy->max)},
                             {"normalized_mean", number(m.entropy->normalized_mean)}};
    else
        j["entropy"] = nullptr;
    // Sweep metrics newer than the layout above, by key (the metric table's entries with a store).
    ojson more = ojson::object();
    for (const MetricEntry* e : metric_entries(use_sweep))
        if (e->store) {
            const std::optional<double> v = e->read(m);
            more[std::string(e->key)] = v ? number(*v) : ojson(nullptr);
        }
    if (!more.empty())
        j["metrics"] = std::move(more);
    j["seconds"] = number(r.seconds);
    j["warnings"] = m.warnings;
    return j;
}

SweepRecord record_from_json(const json& j)
{
    if (!j.is_object())
        throw std::invalid_argument("sweep result: a record is not an object");
    SweepRecord r;
    r.mechanism = field<std::string>(j, "mechanism", "");
    try {
        r.result.mechanism = attention::parse_mechanism(r.mechanism);
    } catch (const std::invalid_argument&) {
        // a name this build does not know: the record keeps it, the views skip it
    }
    r.n = field<Index>(j, "n", 0);
    r.m = field<Index>(j, "m", 0);
    r.d = field<Index>(j, "d", 0);
    r.layer = optional_index(j, "layer");
    r.head = optional_index(j, "head");
    if (const json& at = object_at(j, "at"); !at.empty())
        for (const auto& [axis, index] : at.items())
            if (axis.size() == 1 && index.is_number_integer())
                r.at[axis[0]] = index.get<Index>();
    r.draw = field<Index>(j, "draw", 0);
    r.input = field<std::string>(j, "input", "");
    if (const json& s = object_at(j, "spectrum"); !s.empty()) {
        metrics::SpectrumMetrics m;
        m.tol = field<double>(s, "tol", 0.0);
        m.rank = field<Index>(s, "rank", 0);
        m.relative_rank = field<double>(s, "relative_rank", 0.0);
        m.effective_rank = field<double>(s, "effective_rank", 0.0);
        m.stable_rank = field<double>(s, "stable_rank", 0.0);
        r.result.spectrum = std::move(m);
    }
    if (const json& e = object_at(j, "entropy"); !e.empty()) {
        using E = metrics::EntropyStats;
        static constexpr std::pair<const char*, double E::*> fields[] = {
            {"mean", &E::mean}, {"std", &E::std}, {"min", &E::min}, {"max", &E::max}, {"normalized_mean", &E::normalized_mean}};
        E m;
        for (const auto& [key, member] : fields)
            m.*member = field<double>(e, key, 0.0);
        r.result.entropy = std::move(m);
    }
    const json& more = object_at(j, "metrics");
    for (const auto& item : more.items())
        if (const MetricEntry* e = find_metric(item.key()); e && e->store && !item.value().is_null())
            e->store(r.result, field<double>(more, item.key().c_str(), 0.0));   // else unknown here, or not measured
    r.seconds = field<double>(j, "seconds", 0.0);
    r.result.warnings = field<std::vector<std::string>>(j, "warnings", {});
    return r;
}

}  // namespace

nlohmann::ordered_json sweep_result_json(const SweepResult& result)
{
    const SweepSpec& spec = result.spec;
    ojson s;
    s["vary"] = std::string(1, spec.vary);
    s["values"] = spec.values;
    s["subsample"] = std::string(to_string(spec.subsample));
    s["draws"] = spec.draws;
    s["seed"] = spec.seed;
    std::vector<std::string> mechanisms;
    for (const attention::Mechanism m : spec.mechanisms)
        mechanisms.emplace_back(attention::to_string(m));
    s["mechanisms"] = mechanisms;
    if (spec.synth)
        s["synth"] = ojson{{"kind", spec.synth->kind}, {"d", spec.synth->d}, {"seeds", spec.synth->seeds}, {"n", spec.synth->n}};
    ojson inputs = ojson::array();
    for (const TensorSource& in : spec.inputs)
        inputs.push_back(ojson{{"q", in.q_ref.text}, {"k", in.k_ref.text}});
    s["inputs"] = std::move(inputs);
    s["feature_map"] = std::string(attention::to_string(spec.options.feature_map.kind));
    s["favor_features"] = spec.options.feature_map.favor_features;
    s["mixing"] = spec.options.mixing.preset;
    s["causal"] = spec.options.causal;
    // Every mechanism option (the four keys above stay for older readers): a sweep read back from a session or
    // a batch folder is rerun with the options it ran with.
    s["attention"] = attention::options_to_json(spec.options);
    ojson records = ojson::array();
    for (const SweepRecord& r : result.records)
        records.push_back(record_json(r));
    return ojson{{"spec", std::move(s)}, {"records", std::move(records)}};
}

SweepResult sweep_result_from_json(const nlohmann::json& doc)
{
    if (!doc.is_object())
        throw std::invalid_argument("sweep result: not a JSON object");
    SweepResult out;
    SweepSpec& spec = out.spec;
    const json& s = object_at(doc, "spec");
    const std::string vary = field<std::string>(s, "vary", "n");
    if (vary != "n" && vary != "m")
        throw std::invalid_argument("sweep result: \"vary\" is neither n nor m");
    spec.vary = vary.front();
    spec.values = field<std::vector<Index>>(s, "values", {});
    try {
        spec.subsample = parse_subsample(field<std::string>(s, "subsample", "first"));
        spec.mechanisms.clear();
        for (const std::string& m : field<std::vector<std::string>>(s, "mechanisms", attention::mechanism_name_list(attention::default_mechanisms())))
            spec.mechanisms.push_back(attention::parse_mechanism(m));
        spec.options.feature_map.kind = attention::parse_feature_map(field<std::string>(s, "feature_map", "relu"));
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("sweep result: ") + e.what());
    }
    spec.draws = field<Index>(s, "draws", 1);
    spec.seed = field<std::uint64_t>(s, "seed", 0);
    if (const json& synth = object_at(s, "synth"); !synth.empty())
        spec.synth = SynthSource{field<std::string>(synth, "kind", "gaussian"), field<Index>(synth, "d", 64),
                                 field<Index>(synth, "seeds", 1), field<Index>(synth, "n", 0)};
    if (const auto it = s.find("inputs"); it != s.end() && it->is_array())
        for (const json& in : *it) {
            TensorSource src;
            // A sweep file's references: text the user cannot vouch for, parsed (and checked) as any reference.
            src.q_ref = io::parse_tensor_ref(field<std::string>(in, "q", ""));
            src.k_ref = io::parse_tensor_ref(field<std::string>(in, "k", ""));
            spec.inputs.push_back(std::move(src));
        }
    if (const auto it = s.find("attention"); it != s.end()) {
        try {
            spec.options = attention::options_from_json(*it);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string("sweep result: ") + e.what());
        }
    } else {   // written before the options were stored whole
        spec.options.feature_map.favor_features = field<Index>(s, "favor_features", spec.options.feature_map.favor_features);
        spec.options.mixing.preset = field<std::string>(s, "mixing", "");
        spec.options.causal = field<bool>(s, "causal", false);
    }
    const auto records = doc.find("records");
    if (records == doc.end() || !records->is_array())
        throw std::invalid_argument("sweep result: \"records\" is missing or not a list");
    for (const json& r : *records)
        out.records.push_back(record_from_json(r));
    return out;
}

}  // namespace attnscope::analysis
