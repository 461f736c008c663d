#include "analysis/metric_table.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace attnscope::analysis {

using table_json = nlohmann::ordered_json;

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
void rank_bounds_json(const MechanismResult& r, table_json& out)
{
    if (!r.spectrum || !r.rank_bracket)
        return;
    const metrics::RandomizedRank& b = *r.rank_bracket;
    out["rank_bounds"] = table_json{{"lower", b.lower},
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

// docs/maths.md 2.2. A count of the full spectrum (energy ranks) and the rank at the I-th relative tolerance.
template <Index metrics::SpectrumMetrics::*F>
std::optional<double> spectrum_count(const MechanismResult& r)
{
    if (const auto* s = full_spectrum(r))
        return static_cast<double>(s->*F);
    return std::nullopt;
}

template <Index metrics::SpectrumMetrics::*F>
void store_spectrum_count(MechanismResult& r, double v)
{
    if (r.spectrum)
        (*r.spectrum).*F = static_cast<Index>(v);
}

template <std::size_t I>
std::optional<double> rank_at_rtol_of(const MechanismResult& r)
{
    if (const auto* s = full_spectrum(r))
        return static_cast<double>(s->rank_at_rtol[I]);
    return std::nullopt;
}

template <std::size_t I>
void store_rank_at_rtol(MechanismResult& r, double v)
{
    if (r.spectrum)
        r.spectrum->rank_at_rtol[I] = static_cast<Index>(v);
}

std::optional<double> support_normalized_mean_of(const MechanismResult& r) { return r.support_normalized_mean; }
void store_support_normalized_mean(MechanismResult& r, double v) { r.support_normalized_mean = v; }

// The baseline's and the past block's spectra; a store makes the part it fills (a sweep record read back).
const metrics::SpectrumMetrics* baseline_spectrum(const MechanismResult& r)
{
    return r.baseline && r.baseline->spectrum ? &*r.baseline->spectrum : nullptr;
}

metrics::SpectrumMetrics& baseline_spectrum_for_store(MechanismResult& r)
{
    if (!r.baseline)
        r.baseline.emplace();
    if (!r.baseline->spectrum)
        r.baseline->spectrum.emplace();
    return *r.baseline->spectrum;
}

template <class T, T metrics::SpectrumMetrics::*F>
std::optional<double> baseline_field(const MechanismResult& r)
{
    if (const auto* s = baseline_spectrum(r))
        return static_cast<double>(s->*F);
    return std::nullopt;
}

template <class T, T metrics::SpectrumMetrics::*F>
void store_baseline_field(MechanismResult& r, double v)
{
    baseline_spectrum_for_store(r).*F = static_cast<T>(v);
}

template <double metrics::EntropyStats::*F>
std::optional<double> baseline_entropy_field(const MechanismResult& r)
{
    if (r.baseline && r.baseline->entropy)
        return (*r.baseline->entropy).*F;
    return std::nullopt;
}

template <double metrics::EntropyStats::*F>
void store_baseline_entropy_field(MechanismResult& r, double v)
{
    if (!r.baseline)
        r.baseline.emplace();
    if (!r.baseline->entropy)
        r.baseline->entropy.emplace();
    (*r.baseline->entropy).*F = v;
}

// effective_rank(A) - effective_rank(A0), and entropy_mean(A0) - entropy_mean(A) (nats): read from the parts,
// so a sweep record read back gets them from its stored baseline.
std::optional<double> excess_effective_rank_of(const MechanismResult& r)
{
    const auto* s = full_spectrum(r);
    const auto* b = baseline_spectrum(r);
    if (!s || !b)
        return std::nullopt;
    return s->effective_rank - b->effective_rank;
}

// Their stores: nothing to put back, the parts they are read from are stored themselves.
void store_derived(MechanismResult&, double) {}

std::optional<double> entropy_below_baseline_of(const MechanismResult& r)
{
    if (!r.entropy || !r.baseline || !r.baseline->entropy)
        return std::nullopt;
    return r.baseline->entropy->mean - r.entropy->mean;
}

const metrics::SpectrumMetrics* past_spectrum(const MechanismResult& r)
{
    return r.past_block && r.past_block->spectrum ? &*r.past_block->spectrum : nullptr;
}

template <Index PastBlockResult::*F>
std::optional<double> past_size(const MechanismResult& r)
{
    if (r.past_block)
        return static_cast<double>((*r.past_block).*F);
    return std::nullopt;
}

template <class T, T metrics::SpectrumMetrics::*F>
std::optional<double> past_field(const MechanismResult& r)
{
    if (const auto* s = past_spectrum(r))
        return static_cast<double>(s->*F);
    return std::nullopt;
}

template <class T, T metrics::SpectrumMetrics::*F>
void store_past_field(MechanismResult& r, double v)
{
    if (!r.past_block)
        r.past_block.emplace();
    if (!r.past_block->spectrum)
        r.past_block->spectrum.emplace();
    (*r.past_block->spectrum).*F = static_cast<T>(v);
}

std::optional<double> semiseparable_rank_of(const MechanismResult& r)
{
    if (r.past_profile)
        return static_cast<double>(r.past_profile->semiseparable_rank);
    return std::nullopt;
}

void store_semiseparable_rank(MechanismResult& r, double v)
{
    if (!r.past_profile)
        r.past_profile.emplace();
    r.past_profile->semiseparable_rank = static_cast<Index>(v);
}

std::optional<double> logit_norm_of(const MechanismResult& r) { return r.logit_norm; }
std::optional<double> retrieval_mass_of(const MechanismResult& r) { return r.retrieval_mass; }
void store_retrieval_mass(MechanismResult& r, double v) { r.retrieval_mass = v; }
std::optional<double> retrieval_rank_of(const MechanismResult& r) { return r.retrieval_rank; }
void store_retrieval_rank(MechanismResult& r, double v) { r.retrieval_rank = v; }
void store_logit_norm(MechanismResult& r, double v) { r.logit_norm = v; }

std::optional<double> mean_distance_of(const MechanismResult& r)
{
    if (r.locality)
        return r.locality->mean_distance;
    return std::nullopt;
}

void store_mean_distance(MechanismResult& r, double v)
{
    if (!r.locality)
        r.locality.emplace();
    r.locality->mean_distance = v;
}

template <Index R>
std::optional<double> mass_within_of(const MechanismResult& r)
{
    if (r.locality)
        for (const auto& [radius, mass] : r.locality->mass_within)
            if (radius == R)
                return mass;
    return std::nullopt;
}

template <Index R>
void store_mass_within(MechanismResult& r, double v)
{
    if (!r.locality)
        r.locality.emplace();
    auto& m = r.locality->mass_within;
    const auto at = std::find_if(m.begin(), m.end(), [](const auto& p) { return p.first >= R; });
    if (at != m.end() && at->first == R)
        at->second = v;
    else
        m.insert(at, {R, v});
}

template <class T, T metrics::SpectrumMetrics::*F>
std::optional<double> output_field(const MechanismResult& r)
{
    if (r.output)
        return static_cast<double>((*r.output).*F);
    return std::nullopt;
}

template <class T, T metrics::SpectrumMetrics::*F>
void store_output_field(MechanismResult& r, double v)
{
    if (!r.output)
        r.output.emplace();
    (*r.output).*F = static_cast<T>(v);
}

// The entries of docs/maths.md 2.2 (after those of section 2 in make_table).
void add_beyond_mask_entries(std::vector<MetricEntry>& t);

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
    add_beyond_mask_entries(t);
    return t;
}

void add_beyond_mask_entries(std::vector<MetricEntry>& t)
{
    using metrics::EntropyStats;
    using metrics::SpectrumMetrics;
    using G = MetricGroup;
    constexpr MetricKind count = MetricKind::count, real = MetricKind::real;
    constexpr unsigned flat = use_analyze | use_sweep_csv | use_sweep | use_batch_csv;
    // key, group, field, label, title, unit, kind, read, uses, column, width, decimals, view row, digits, view CSV key,
    // json_after, store
    t.push_back({"energy_rank_90", G::spectrum, "energy_rank_90", "energy rank 90%", "energy rank (90% of sum s^2)", "",
                 count, spectrum_count<&SpectrumMetrics::energy_rank_90>, k_everywhere, "", 0, 0, 52, 0, "", nullptr,
                 store_spectrum_count<&SpectrumMetrics::energy_rank_90>});
    t.push_back({"energy_rank_99", G::spectrum, "energy_rank_99", "energy rank 99%", "energy rank (99% of sum s^2)", "",
                 count, spectrum_count<&SpectrumMetrics::energy_rank_99>, k_everywhere, "", 0, 0, 54, 0, "", nullptr,
                 store_spectrum_count<&SpectrumMetrics::energy_rank_99>});
    static constexpr std::array<std::string_view, 7> rtol_keys{"rank_at_rtol_1e-2", "rank_at_rtol_1e-3", "rank_at_rtol_1e-4",
                                                               "rank_at_rtol_1e-6", "rank_at_rtol_1e-8", "rank_at_rtol_1e-10",
                                                               "rank_at_rtol_1e-12"};
    static constexpr std::array<std::string_view, 7> rtol_labels{"rank at rtol 1e-2", "rank at rtol 1e-3", "rank at rtol 1e-4",
                                                                 "rank at rtol 1e-6", "rank at rtol 1e-8", "rank at rtol 1e-10",
                                                                 "rank at rtol 1e-12"};
    using Read = std::optional<double> (*)(const MechanismResult&);
    using Store = void (*)(MechanismResult&, double);
    static constexpr std::array<Read, 7> rtol_read{rank_at_rtol_of<0>, rank_at_rtol_of<1>, rank_at_rtol_of<2>, rank_at_rtol_of<3>,
                                                   rank_at_rtol_of<4>, rank_at_rtol_of<5>, rank_at_rtol_of<6>};
    static constexpr std::array<Store, 7> rtol_store{store_rank_at_rtol<0>, store_rank_at_rtol<1>, store_rank_at_rtol<2>,
                                                     store_rank_at_rtol<3>, store_rank_at_rtol<4>, store_rank_at_rtol<5>,
                                                     store_rank_at_rtol<6>};
    for (std::size_t i = 0; i < metrics::k_rank_rtols.size(); ++i)
        t.push_back({rtol_keys[i], G::rank_at_rtol, metrics::k_rank_rtols[i].name, rtol_labels[i], rtol_labels[i], "", count,
                     rtol_read[i], k_everywhere, "", 0, 0, 130 + static_cast<int>(i), 0, "", nullptr, rtol_store[i]});
    t.push_back({"entropy_support_normalized_mean", G::entropy, "support_normalized_mean", "entropy / ln |support|",
                 "row entropy normalised by its support", "", real, support_normalized_mean_of, k_everywhere, "", 0, 0,
                 105, 4, "", nullptr, store_support_normalized_mean});
    t.push_back({"baseline_rank", G::baseline, "rank", "baseline rank", "content-free baseline: rank", "", count,
                 baseline_field<Index, &SpectrumMetrics::rank>, flat | use_metrics_view, "", 0, 0, 110, 0, "", nullptr,
                 store_baseline_field<Index, &SpectrumMetrics::rank>});
    t.push_back({"baseline_effective_rank", G::baseline, "effective_rank", "baseline effective rank",
                 "content-free baseline: effective rank", "", real, baseline_field<double, &SpectrumMetrics::effective_rank>,
                 flat | use_metrics_view, "", 0, 0, 112, 5, "", nullptr,
                 store_baseline_field<double, &SpectrumMetrics::effective_rank>});
    t.push_back({"baseline_stable_rank", G::baseline, "stable_rank", "baseline stable rank", "content-free baseline: stable rank",
                 "", real, baseline_field<double, &SpectrumMetrics::stable_rank>, flat, "", 0, 0, 0, 0, "", nullptr,
                 store_baseline_field<double, &SpectrumMetrics::stable_rank>});
    t.push_back({"baseline_energy_rank_90", G::baseline, "energy_rank_90", "baseline energy rank 90%",
                 "content-free baseline: energy rank 90%", "", count, baseline_field<Index, &SpectrumMetrics::energy_rank_90>,
                 flat, "", 0, 0, 0, 0, "", nullptr, store_baseline_field<Index, &SpectrumMetrics::energy_rank_90>});
    t.push_back({"baseline_energy_rank_99", G::baseline, "energy_rank_99", "baseline energy rank 99%",
                 "content-free baseline: energy rank 99%", "", count, baseline_field<Index, &SpectrumMetrics::energy_rank_99>,
                 flat, "", 0, 0, 0, 0, "", nullptr, store_baseline_field<Index, &SpectrumMetrics::energy_rank_99>});
    t.push_back({"baseline_entropy_mean", G::baseline, "entropy.mean", "baseline entropy mean",
                 "content-free baseline: mean row entropy (nats)", "nats", real, baseline_entropy_field<&EntropyStats::mean>,
                 flat | use_metrics_view, "", 0, 0, 114, 5, "", nullptr, store_baseline_entropy_field<&EntropyStats::mean>});
    t.push_back({"baseline_entropy_normalized_mean", G::baseline, "entropy.normalized_mean", "baseline normalised entropy",
                 "content-free baseline: normalised row entropy", "", real,
                 baseline_entropy_field<&EntropyStats::normalized_mean>, flat, "", 0, 0, 0, 0, "", nullptr,
                 store_baseline_entropy_field<&EntropyStats::normalized_mean>});
    t.push_back({"excess_effective_rank", G::versus_baseline, "excess_effective_rank", "excess effective rank",
                 "effective rank above the content-free baseline", "", real, excess_effective_rank_of, k_everywhere, "excess",
                 9, 2, 116, 5, "", nullptr, store_derived});
    t.push_back({"entropy_below_baseline", G::versus_baseline, "entropy_below_baseline", "entropy below baseline",
                 "mean row entropy below the content-free baseline (nats)", "nats", real, entropy_below_baseline_of,
                 k_everywhere, "", 0, 0, 118, 5, "", nullptr, store_derived});
    t.push_back({"past_block_rows", G::past_block, "rows", "past block rows", "past block rows", "", count,
                 past_size<&PastBlockResult::rows>, use_analyze, "", 0, 0, 0, 0, ""});
    t.push_back({"past_block_cols", G::past_block, "cols", "past block columns", "past block columns", "", count,
                 past_size<&PastBlockResult::cols>, use_analyze, "", 0, 0, 0, 0, ""});
    t.push_back({"past_block_rank", G::past_block, "rank", "past block rank", "past block A[h:N, :h]: rank", "", count,
                 past_field<Index, &SpectrumMetrics::rank>, k_everywhere, "past rank", 10, 0, 120, 0, "", nullptr,
                 store_past_field<Index, &SpectrumMetrics::rank>});
    t.push_back({"past_block_effective_rank", G::past_block, "effective_rank", "past block effective rank",
                 "past block A[h:N, :h]: effective rank", "", real, past_field<double, &SpectrumMetrics::effective_rank>,
                 k_everywhere, "", 0, 0, 122, 5, "", nullptr, store_past_field<double, &SpectrumMetrics::effective_rank>});
    t.push_back({"past_block_energy_rank_90", G::past_block, "energy_rank_90", "past block energy rank 90%",
                 "past block A[h:N, :h]: energy rank 90%", "", count, past_field<Index, &SpectrumMetrics::energy_rank_90>,
                 flat, "", 0, 0, 0, 0, "", nullptr, store_past_field<Index, &SpectrumMetrics::energy_rank_90>});
    t.push_back({"past_block_energy_rank_99", G::past_block, "energy_rank_99", "past block energy rank 99%",
                 "past block A[h:N, :h]: energy rank 99%", "", count, past_field<Index, &SpectrumMetrics::energy_rank_99>,
                 flat, "", 0, 0, 0, 0, "", nullptr, store_past_field<Index, &SpectrumMetrics::energy_rank_99>});
    t.push_back({"semiseparable_rank", G::past_profile, "semiseparable_rank", "semiseparable rank",
                 "semiseparable rank (largest past-block rank over the splits)", "", count, semiseparable_rank_of,
                 k_everywhere, "ss.rank", 8, 0, 124, 0, "", nullptr, store_semiseparable_rank});
    t.push_back({"logit_norm", G::rows, "logit_norm", "logit norm", "logit norm (largest singular value of the scores)", "",
                 real, logit_norm_of, k_everywhere, "", 0, 0, 125, 5, "", nullptr, store_logit_norm});
    t.push_back({"mean_distance", G::rows, "mean_distance", "mean attention distance",
                 "mean attention distance (tokens)", "tokens", real, mean_distance_of, k_everywhere, "mean dist", 10, 2, 126,
                 5, "", nullptr, store_mean_distance});
    // mass_within is an object in the analyze JSON (every radius 1, 2, 4, ... below N: result_json writes it); the
    // flat files and the app take three radii.
    constexpr unsigned flat_rows = use_sweep_csv | use_sweep | use_batch_csv | use_metrics_view;
    t.push_back({"mass_within_1", G::rows, "mass_within.1", "mass within 1 token", "attention mass within 1 token", "",
                 real, mass_within_of<1>, flat_rows, "", 0, 0, 127, 5, "", nullptr, store_mass_within<1>});
    t.push_back({"mass_within_4", G::rows, "mass_within.4", "mass within 4 tokens", "attention mass within 4 tokens", "",
                 real, mass_within_of<4>, flat_rows, "", 0, 0, 128, 5, "", nullptr, store_mass_within<4>});
    t.push_back({"mass_within_16", G::rows, "mass_within.16", "mass within 16 tokens", "attention mass within 16 tokens",
                 "", real, mass_within_of<16>, flat_rows, "", 0, 0, 129, 5, "", nullptr, store_mass_within<16>});
    // docs/maths.md 2.2: retrieval mass and rank, with the inputs' retrieval targets (analysis/retrieval.h).
    t.push_back({"retrieval_mass", G::retrieval, "retrieval_mass", "retrieval mass", "retrieval mass (weight on the target key)",
                 "", real, retrieval_mass_of, k_everywhere, "", 0, 0, 150, 5, "", nullptr, store_retrieval_mass});
    t.push_back({"retrieval_rank", G::retrieval, "retrieval_rank", "retrieval rank",
                 "retrieval rank (of the target key in its row; 1 = largest)", "", real, retrieval_rank_of, k_everywhere,
                 "", 0, 0, 151, 3, "", nullptr, store_retrieval_rank});
    t.push_back({"output_rank", G::output, "rank", "output rank", "output A V: rank", "", count,
                 output_field<Index, &SpectrumMetrics::rank>, k_everywhere, "", 0, 0, 140, 0, "", nullptr,
                 store_output_field<Index, &SpectrumMetrics::rank>});
    t.push_back({"output_effective_rank", G::output, "effective_rank", "output effective rank",
                 "output A V: effective rank", "", real, output_field<double, &SpectrumMetrics::effective_rank>,
                 k_everywhere, "", 0, 0, 142, 5, "", nullptr, store_output_field<double, &SpectrumMetrics::effective_rank>});
    t.push_back({"output_energy_rank_99", G::output, "energy_rank_99", "output energy rank 99%",
                 "output A V: energy rank 99%", "", count, output_field<Index, &SpectrumMetrics::energy_rank_99>,
                 k_everywhere, "", 0, 0, 144, 0, "", nullptr, store_output_field<Index, &SpectrumMetrics::energy_rank_99>});
}

}  // namespace

std::string_view json_object_of(MetricGroup g)
{
    switch (g) {
    case MetricGroup::entropy:
        return "entropy";
    case MetricGroup::rank_at_rtol:
        return "rank_at_rtol";
    case MetricGroup::baseline:
        return "baseline";
    case MetricGroup::past_block:
        return "past_block";
    case MetricGroup::output:
        return "output";
    case MetricGroup::spectrum:
    case MetricGroup::versus_baseline:
    case MetricGroup::past_profile:
    case MetricGroup::rows:
    case MetricGroup::retrieval:
        break;
    }
    return "";
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

const table_json& metric_json(const MetricEntry& e, const table_json& result)
{
    static const table_json null_value;
    const std::string_view object = json_object_of(e.group);
    const table_json* holder = &result;
    if (!object.empty()) {
        if (!result.is_object())
            return null_value;
        const auto it = result.find(object);
        if (it == result.end())
            return null_value;
        holder = &*it;
    }
    std::string_view field = e.field;
    for (std::size_t dot = field.find('.'); dot != std::string_view::npos; dot = field.find('.')) {   // nested objects
        if (!holder->is_object())
            return null_value;
        const auto it = holder->find(field.substr(0, dot));
        if (it == holder->end())
            return null_value;
        holder = &*it;
        field.remove_prefix(dot + 1);
    }
    if (!holder->is_object())
        return null_value;
    const auto it = holder->find(field);
    return it == holder->end() ? null_value : *it;
}

void write_metric_fields(const MechanismResult& r, MetricGroup g, table_json& out)
{
    for (const MetricEntry& e : metric_table()) {
        if (e.group != g || !e.used_in(use_analyze))
            continue;
        table_json* holder = &out;
        std::string_view field = e.field;
        for (std::size_t dot = field.find('.'); dot != std::string_view::npos; dot = field.find('.')) {   // nested
            holder = &(*holder)[std::string(field.substr(0, dot))];
            field.remove_prefix(dot + 1);
        }
        const std::string name(field);
        const std::optional<double> v = e.read(r);
        if (!v)
            (*holder)[name] = nullptr;
        else if (e.kind == MetricKind::count)
            (*holder)[name] = static_cast<Eigen::Index>(*v);
        else
            (*holder)[name] = *v;
        if (e.json_after)
            e.json_after(r, out);
    }
}

void write_metric_object(const MechanismResult& r, MetricGroup g, table_json& result, bool present)
{
    const std::string name(json_object_of(g));
    if (!present) {
        result[name] = nullptr;
        return;
    }
    table_json o = table_json::object();
    write_metric_fields(r, g, o);
    result[name] = std::move(o);
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
