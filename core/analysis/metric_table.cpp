#include "analysis/metric_table.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace attnscope::analysis {

using json = nlohmann::ordered_json;

namespace {

// The spectrum's metrics exist only when every singular value is known: not for the top-k values alone
// (partial_spectrum), and of a randomized bracket only what it proves (rank, rank_tol).
const metrics::SpectrumMetrics* full_spectrum(const MechanismResult& r)
{
    return r.spectrum && !r.partial_spectrum ? &*r.spectrum : nullptr;
}

std::optional<double> rank_of(const MechanismResult& r)
{
    if (r.spectrum && r.rank_bracket) {   // exact when the bounds meet
        const metrics::RandomizedRank& b = *r.rank_bracket;
        return b.lower == b.upper ? std::optional<double>(static_cast<double>(b.lower)) : std::nullopt;
    }
    if (const auto* s = full_spectrum(r))
        return static_cast<double>(s->rank);
    return std::nullopt;
}

std::optional<double> rank_tol_of(const MechanismResult& r)
{
    if (r.spectrum && r.rank_bracket)
        return r.rank_bracket->tol;
    if (const auto* s = full_spectrum(r))
        return s->tol;
    return std::nullopt;
}

// The randomized range finder's proof (metrics/randomized.h), right after rank_tol.
void rank_bounds_json(const MechanismResult& r, json& out)
{
    if (!r.spectrum || !r.rank_bracket)
        return;
    const metrics::RandomizedRank& b = *r.rank_bracket;
    out["rank_bounds"] = json{{"lower", b.lower},
                              {"upper", b.upper},
                              {"lower_proof", "deterministic: singular values of Q^T A interlace those of A"},
                              {"upper_failure_probability", b.failure_probability},
                              {"residual_bound", b.residual_bound},
                              {"s1", b.s1},
                              {"s1_upper", b.s1_upper},
                              {"basis_size", b.basis_size},
                              {"products", b.products},
                              {"converged", b.converged}};
}

// A field of the full spectrum.
template <double metrics::SpectrumMetrics::*F>
std::optional<double> spectrum_field(const MechanismResult& r)
{
    if (const auto* s = full_spectrum(r))
        return s->*F;
    return std::nullopt;
}

// s_1, known also from the top-k values alone.
std::optional<double> s1_of(const MechanismResult& r)
{
    if (!r.spectrum || r.spectrum->singular_values.empty())
        return std::nullopt;
    return r.spectrum->singular_values.front();
}

template <double metrics::EntropyStats::*F>
std::optional<double> entropy_field(const MechanismResult& r)
{
    if (!r.entropy)
        return std::nullopt;
    return (*r.entropy).*F;
}

// Stores for metrics that are fields of the spectrum or of the entropy statistics (MetricEntry::store).
template <double metrics::SpectrumMetrics::*F>
void store_spectrum_field(MechanismResult& r, double v)
{
    if (r.spectrum)
        (*r.spectrum).*F = v;
}

template <double metrics::EntropyStats::*F>
void store_entropy_field(MechanismResult& r, double v)
{
    if (r.entropy)
        (*r.entropy).*F = v;
}

constexpr unsigned k_everywhere = use_analyze | use_sweep_csv | use_sweep | use_batch_csv | use_metrics_view;

std::vector<MetricEntry> make_table()
{
    using metrics::EntropyStats;
    using metrics::SpectrumMetrics;
    const MetricGroup sp = MetricGroup::spectrum, en = MetricGroup::entropy;
    std::vector<MetricEntry> t;
    // key, group, field, label, title, unit, kind, read, uses, column, width, decimals, view row, digits, view CSV key
    t.push_back({"rank", sp, "rank", "rank", "numerical rank", "", MetricKind::count, rank_of, k_everywhere,
                 "rank", 6, 0, 0, 0, ""});
    t.push_back({"rank_tol", sp, "rank_tol", "tolerance", "rank tolerance", "", MetricKind::real, rank_tol_of,
                 use_analyze | use_sweep_csv | use_batch_csv | use_metrics_view, "", 0, 0, 20, 3, "tol", rank_bounds_json});
    t.push_back({"relative_rank", sp, "relative_rank", "relative rank", "relative rank (rank / N)", "", MetricKind::real,
                 spectrum_field<&SpectrumMetrics::relative_rank>, k_everywhere, "rel.rank", 9, 4, 10, 4, ""});
    t.push_back({"effective_rank", sp, "effective_rank", "effective rank", "effective rank", "", MetricKind::real,
                 spectrum_field<&SpectrumMetrics::effective_rank>, k_everywhere, "eff.rank", 10, 2, 40, 5, ""});
    t.push_back({"stable_rank", sp, "stable_rank", "stable rank", "stable rank", "", MetricKind::real,
                 spectrum_field<&SpectrumMetrics::stable_rank>, k_everywhere, "stable", 8, 3, 50, 5, ""});
    // Not in the analyze JSON, which lists every singular value.
    t.push_back({"s1", sp, "s1", "s_1", "largest singular value", "", MetricKind::real, s1_of, use_metrics_view, "", 0, 0,
                 30, 5, ""});
    t.push_back({"entropy_mean", en, "mean", "entropy mean", "mean row entropy (nats)", "nats", MetricKind::real,
                 entropy_field<&EntropyStats::mean>, k_everywhere, "H mean", 9, 4, 60, 5, ""});
    t.push_back({"entropy_std", en, "std", "entropy std", "row entropy std (nats)", "nats", MetricKind::real,
                 entropy_field<&EntropyStats::std>, use_analyze | use_batch_csv | use_metrics_view, "H std", 9, 4, 70, 4, ""});
    t.push_back({"entropy_min", en, "min", "entropy min", "least row entropy (nats)", "nats", MetricKind::real,
                 entropy_field<&EntropyStats::min>, use_analyze | use_metrics_view, "", 0, 0, 80, 5, ""});
    t.push_back({"entropy_max", en, "max", "entropy max", "largest row entropy (nats)", "nats", MetricKind::real,
                 entropy_field<&EntropyStats::max>, use_analyze | use_metrics_view, "", 0, 0, 90, 5, ""});
    t.push_back({"entropy_normalized_mean", en, "normalized_mean", "normalised entropy mean", "normalised row entropy", "",
                 MetricKind::real, entropy_field<&EntropyStats::normalized_mean>, k_everywhere, "H/ln n", 9, 4, 100, 4, ""});
    return t;
}

}  // namespace

std::string_view json_object_of(MetricGroup g)
{
    return g == MetricGroup::entropy ? "entropy" : "";
}

const std::vector<MetricEntry>& metric_table()
{
    static const std::vector<MetricEntry> table = make_table();
    return table;
}

std::vector<const MetricEntry*> metric_entries(MetricUse u)
{
    std::vector<const MetricEntry*> out;
    for (const MetricEntry& e : metric_table())
        if (e.used_in(u))
            out.push_back(&e);
    return out;
}

std::vector<const MetricEntry*> metrics_view_entries()
{
    std::vector<const MetricEntry*> out = metric_entries(use_metrics_view);
    std::stable_sort(out.begin(), out.end(), [](const MetricEntry* a, const MetricEntry* b) { return a->view_row < b->view_row; });
    return out;
}

const MetricEntry* find_metric(std::string_view key)
{
    for (const MetricEntry& e : metric_table())
        if (e.key == key)
            return &e;
    return nullptr;
}

const json& metric_json(const MetricEntry& e, const json& result)
{
    static const json null_value;
    const std::string_view object = json_object_of(e.group);
    const json* holder = &result;
    if (!object.empty()) {
        if (!result.is_object())
            return null_value;
        const auto it = result.find(object);
        if (it == result.end())
            return null_value;
        holder = &*it;
    }
    if (!holder->is_object())
        return null_value;
    const auto it = holder->find(e.field);
    return it == holder->end() ? null_value : *it;
}

void write_metric_fields(const MechanismResult& r, MetricGroup g, json& out)
{
    for (const MetricEntry& e : metric_table()) {
        if (e.group != g || !e.used_in(use_analyze))
            continue;
        const std::string field(e.field);
        const std::optional<double> v = e.read(r);
        if (!v)
            out[field] = nullptr;
        else if (e.kind == MetricKind::count)
            out[field] = static_cast<Eigen::Index>(*v);
        else
            out[field] = *v;
        if (e.json_after)
            e.json_after(r, out);
    }
}

std::string csv_number(const MetricEntry& e, std::optional<double> v)
{
    if (!v || !std::isfinite(*v))
        return "";
    if (e.kind == MetricKind::count)
        return std::to_string(static_cast<long long>(*v));
    return fmt::format("{:.17g}", *v);
}

}  // namespace attnscope::analysis
