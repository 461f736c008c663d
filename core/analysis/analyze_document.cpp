#include "analysis/analyze_document.h"

#include "analysis/analyze.h"
#include "analysis/inputs.h"
#include "analysis/metric_table.h"
#include "analysis/vocabulary.h"
#include "util/names.h"
#include "analysis/plan.h"
#include "util/error.h"

#include <algorithm>
#include <stdexcept>

namespace attnscope::analysis {

using ojson = nlohmann::ordered_json;

// The queries' file's retrieval targets (analysis/retrieval.h) for the selection the queries were read with.
std::optional<RetrievalTargets> targets_of(const io::TensorRef& q_ref, const io::AxisSelection& selection,
                                           const LoadedInputs& in, bool causal)
{
    io::AxisSelection taken = selection;
    for (const auto& [axis, index] : in.q.at)
        taken.at[axis] = index;
    return load_retrieval_targets(q_ref, taken, in.q.values.rows(), causal);
}

ojson analyze_document(const AnalyzeRequest& r, const JobContext* ctx)
{
    const LoadedInputs in = load_inputs(r.q, r.k, r.v, r.setup.selection);
    const attention::AttentionOptions options = options_for_inputs(r.setup.options, in);
    const auto targets = targets_of(r.q, r.setup.selection, in, options.causal);
    const auto results = analyze(in.q.values, in.k.values, r.mechanisms, options, r.metrics, r.memory_limit, ctx,
                                 in.v ? &in.v->values : nullptr, targets ? &*targets : nullptr);
    ojson doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    doc["input"] = in.input_json;
    if (!r.from_file.empty())
        doc["input"]["defaults_from_file"] = r.from_file;
    ojson list = ojson::array();
    for (const auto& result : results)
        list.push_back(result_json(result, r.metrics));
    doc["results"] = std::move(list);
    doc["distance"] = distance_json(in.q.values, in.k.values, r.mechanisms, options, r.metrics, r.memory_limit, ctx);
    doc["kernels"] = kernels_json();
    return doc;
}

UnitsDocument analyze_units_document(const AnalyzeRequest& r, const JobContext* ctx)
{
    const TensorSource source{r.q, r.k, r.v, r.setup.selection};
    const std::vector<Unit> units = plan_units({source}, {}, {});
    ojson list = ojson::array();
    std::vector<UnitMetrics> records;
    for (const Unit& u : units) {
        if (ctx)
            ctx->check();
        const LoadedInputs in = load_inputs(r.q, r.k, r.v, u.source.selection);
        const attention::AttentionOptions options = options_for_inputs(r.setup.options, in);
        const auto targets = targets_of(r.q, u.source.selection, in, options.causal);
        const auto results = analyze(in.q.values, in.k.values, r.mechanisms, options, r.metrics, r.memory_limit, ctx,
                                     in.v ? &in.v->values : nullptr, targets ? &*targets : nullptr);
        ojson unit;
        unit["unit"] = u.index;
        ojson at = ojson::object();
        for (const auto& [axis, index] : u.source.selection.at)
            if (r.setup.selection.all.count(axis))
                at[std::string(1, axis)] = index;
        unit["at"] = at;
        unit["input"] = in.input_json;
        if (!r.from_file.empty())
            unit["input"]["defaults_from_file"] = r.from_file;
        ojson rs = ojson::array();
        for (const auto& result : results) {
            rs.push_back(result_json(result, r.metrics));
            records.push_back({std::to_string(u.index), rs.back()["mechanism"].get<std::string>(), result_metrics(rs.back())});
        }
        unit["results"] = std::move(rs);
        unit["distance"] = distance_json(in.q.values, in.k.values, r.mechanisms, options, r.metrics, r.memory_limit, ctx);
        list.push_back(std::move(unit));
    }
    UnitsDocument out;
    out.stats = aggregate(records, out.options);
    out.units = units.size();
    out.doc["attnscope_version"] = ATTNSCOPE_VERSION;
    out.doc["units"] = std::move(list);
    out.doc["aggregate"] = aggregate_json(out.stats, out.options);
    out.doc["kernels"] = kernels_json();
    return out;
}

DenseAttention dense_attention(const AnalyzeRequest& r, const std::string& mechanism_text)
{
    if (r.mechanisms.size() != 1)
        throw std::invalid_argument("matrix takes one --mechanism (got " + mechanism_text + ")");
    const LoadedInputs in = load_inputs(r.q, r.k, std::nullopt, r.setup.selection);
    const auto n = in.q.values.rows();
    const long double need = static_cast<long double>(n) * n * 8.0L * 1.1L;
    if (need > static_cast<long double>(r.memory_limit))
        throw InputError("N=" + std::to_string(n) + " tokens: the " + std::to_string(n) + " x " + std::to_string(n) +
                         " matrix needs " + std::to_string(static_cast<unsigned long long>(need / 1048576.0L)) +
                         " MiB, over the memory limit (--max-memory)");
    MetricOptions nothing;
    nothing.spectrum = nothing.entropy = false;
    const PreparedMechanism p = prepare_mechanism(r.mechanisms.front(), in.q.values, in.k.values,
                                                  options_for_inputs(r.setup.options, in), nothing, r.memory_limit);
    DenseAttention out{p.op->dense(), p.result.params, in.input_json};
    if (!out.matrix.allFinite())
        throw InputError(non_finite_reason(*p.op));
    if (!r.from_file.empty())
        out.input["defaults_from_file"] = r.from_file;
    return out;
}

std::vector<const MetricEntry*> chosen_metrics(const std::optional<std::string>& names, const std::string& option)
{
    std::vector<const MetricEntry*> out;
    if (!names)
        return out;
    std::vector<std::string_view> known;
    for (const MetricEntry* e : metric_entries(use_analyze))
        known.push_back(e->key);
    for (const std::string& name : split_exact(*names, ',')) {
        const MetricEntry* e = find_metric(name);
        if (!e || !e->used_in(use_analyze))
            throw std::invalid_argument(option + ": unknown metric '" + name + "' (one of " + joined(known) + ")");
        if (std::find(out.begin(), out.end(), e) != out.end())
            throw std::invalid_argument(option + ": '" + name + "' is named twice");
        out.push_back(e);
    }
    if (out.empty())
        throw std::invalid_argument(option + ": no metric named (one of " + joined(known) + ")");
    return out;
}

void keep_metrics(nlohmann::ordered_json& doc, const std::vector<const MetricEntry*>& chosen)
{
    if (chosen.empty() || !doc.contains("results"))
        return;
    for (nlohmann::ordered_json& r : doc["results"]) {
        nlohmann::ordered_json kept = nlohmann::ordered_json::object();
        for (const char* key : {"mechanism", "params", "method"})
            if (r.contains(key))
                kept[key] = r[key];
        for (const MetricEntry* e : chosen)
            kept[std::string(e->key)] = metric_json(*e, r);
        kept["warnings"] = r.contains("warnings") ? r["warnings"] : nlohmann::ordered_json::array();
        r = std::move(kept);
    }
}

}  // namespace attnscope::analysis
