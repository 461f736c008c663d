#include "analysis/aggregate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "analysis/measure.h"
#include "analysis/small_sample.h"
#include "util/rng.h"

namespace attnscope::analysis {

using json = nlohmann::ordered_json;

namespace {

bool finite(double v) { return std::isfinite(v); }

// The resampled positions depend on n only (a fresh SplitMix64(seed) per row): drawn once per n and kept
// while they are small, drawn again per row when keeping them would cost more than 64 MB.
class Resampler {
public:
    explicit Resampler(const AggregateOptions& o) : m_opt(o) {}

    // (ci_low, ci_high) of the mean of x.
    std::pair<double, double> interval(const std::vector<double>& x)
    {
        const std::size_t n = x.size();
        std::vector<double> means(m_opt.resamples);
        const std::vector<std::uint32_t>* kept = indices(n);
        SplitMix64 rng(m_opt.seed);
        const double dn = static_cast<double>(n);
        for (std::size_t b = 0; b < m_opt.resamples; ++b) {
            double total = 0.0;
            for (std::size_t i = 0; i < n; ++i)
                total += x[kept ? (*kept)[b * n + i] : draw(rng, n, dn)];
            means[b] = total / dn;
        }
        const double tail = 50.0 * (1.0 - m_opt.level);
        std::sort(means.begin(), means.end());
        return {percentile_linear(means, tail), percentile_linear(means, 100.0 - tail)};
    }

    // idx = floor(u n), clamped: u n may round up to n for u just below 1.
    static std::size_t draw(SplitMix64& rng, std::size_t n, double dn)
    {
        return std::min(static_cast<std::size_t>(std::floor(rng.uniform() * dn)), n - 1);
    }

private:
    const std::vector<std::uint32_t>* indices(std::size_t n)
    {
        if (n > std::numeric_limits<std::uint32_t>::max() || n * m_opt.resamples > (std::size_t{16} << 20))
            return nullptr;
        auto [it, fresh] = m_kept.try_emplace(n);
        if (fresh) {
            SplitMix64 rng(m_opt.seed);
            it->second.resize(n * m_opt.resamples);
            for (auto& idx : it->second)
                idx = static_cast<std::uint32_t>(draw(rng, n, static_cast<double>(n)));
        }
        return &it->second;
    }

    AggregateOptions m_opt;
    std::map<std::size_t, std::vector<std::uint32_t>> m_kept;
};

// Records as a table: metric ids in order of first appearance, values per record (NaN = not measured).
struct Table {
    std::vector<std::string> mechanisms, metrics, units, clusters;
    std::vector<std::size_t> mechanism_of, unit_of;       // per record
    std::vector<std::size_t> cluster_of;                  // per unit (clustered records only)
    std::vector<std::vector<double>> values;              // per record, by metric id
    std::vector<std::vector<std::ptrdiff_t>> record_at;   // [mechanism][unit] -> record, -1 when absent
};

// Each unit's cluster id (clusters in order of first appearance); none when no record names one.
void assign_clusters(const std::vector<UnitMetrics>& records, Table& t)
{
    const bool clustered = !records.empty() && !records.front().cluster.empty();
    if (!clustered) {
        for (const UnitMetrics& r : records)
            if (!r.cluster.empty())
                throw std::invalid_argument("unit '" + r.unit + "' names a cluster but the first record does not");
        return;
    }
    constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
    t.cluster_of.assign(t.units.size(), none);
    std::unordered_map<std::string, std::size_t> ids;
    for (std::size_t i = 0; i < records.size(); ++i) {
        const std::string& name = records[i].cluster;
        if (name.empty())
            throw std::invalid_argument("unit '" + records[i].unit + "' names no cluster but the first record does");
        const auto [it, fresh] = ids.emplace(name, t.clusters.size());
        if (fresh)
            t.clusters.push_back(name);
        std::size_t& c = t.cluster_of[t.unit_of[i]];
        if (c != none && c != it->second)
            throw std::invalid_argument("unit '" + records[i].unit + "' is in two clusters ('" + t.clusters[c] +
                                        "' and '" + name + "')");
        c = it->second;
    }
}

// The values of one row grouped by their units' clusters (cluster_ids: per value), clusters in order of
// first appearance in the row, values in the row's order.
std::vector<std::vector<double>> group_by_cluster(const std::vector<double>& x, const std::vector<std::size_t>& cluster_ids)
{
    std::vector<std::vector<double>> groups;
    std::unordered_map<std::size_t, std::size_t> slot;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const auto [it, fresh] = slot.emplace(cluster_ids[i], groups.size());
        if (fresh)
            groups.emplace_back();
        groups[it->second].push_back(x[i]);
    }
    return groups;
}

// The distinct names of a set of records and what the tables and the bootstrap will cost, counted before
// anything of their size is allocated (aggregate.h, "What one aggregation may hold and do").
struct Counts {
    std::vector<std::size_t> per_mechanism;   // records of each mechanism, in order of first appearance
    std::size_t metrics = 0, units = 0, clusters = 0;
    double draws = 0;                         // bootstrap draws, at most
    double table_bytes = 0;                   // the value table and the pair index
};

Counts count_names(const std::vector<UnitMetrics>& records, const AggregateOptions& options)
{
    Counts c;
    std::unordered_map<std::string_view, std::size_t> mechanisms;
    std::unordered_set<std::string_view> metrics, units, clusters;
    for (const UnitMetrics& r : records) {
        const auto [it, fresh] = mechanisms.emplace(r.mechanism, c.per_mechanism.size());
        if (fresh)
            c.per_mechanism.push_back(0);
        ++c.per_mechanism[it->second];
        units.insert(r.unit);
        if (!r.cluster.empty())
            clusters.insert(r.cluster);
        for (const auto& [name, v] : r.metrics)
            metrics.insert(name);
    }
    c.metrics = metrics.size();
    c.units = units.size();
    c.clusters = clusters.size();
    // Each row (mechanism, metric) draws resamples x (its n values + its clusters); each pair's row at most
    // resamples x (min(n_a, n_b) + clusters). Pairs are only counted while the mechanisms are few (the cap
    // below is checked first).
    const double per_row_extra = static_cast<double>(c.clusters);
    double values = 0;
    const std::size_t m = c.per_mechanism.size();
    for (std::size_t a = 0; a < m; ++a)
        values += static_cast<double>(c.per_mechanism[a]) + per_row_extra;
    if (m <= k_max_aggregate_mechanisms)
        for (std::size_t a = 0; a < m; ++a)
            for (std::size_t b = a + 1; b < m; ++b)
                values += static_cast<double>(std::min(c.per_mechanism[a], c.per_mechanism[b])) + per_row_extra;
    c.draws = values * static_cast<double>(c.metrics) * static_cast<double>(options.resamples);
    c.table_bytes = 8.0 * (static_cast<double>(records.size()) * static_cast<double>(c.metrics) +
                           static_cast<double>(m) * static_cast<double>(c.units));
    return c;
}

void check_counts(const Counts& c, std::size_t records, const AggregateOptions& options)
{
    if (c.per_mechanism.size() > k_max_aggregate_mechanisms)
        throw std::invalid_argument(fmt::format("{} mechanism names in {} records, more than the {} one aggregation compares "
                                                "(its pairs grow as the square): aggregate records of fewer mechanisms",
                                                c.per_mechanism.size(), records, k_max_aggregate_mechanisms));
    if (c.metrics > k_max_aggregate_metrics)
        throw std::invalid_argument(fmt::format("{} metric names in {} records, more than the {} one aggregation takes (an "
                                                "analyze result has about 60): choose some with --metric NAME,...",
                                                c.metrics, records, k_max_aggregate_metrics));
    const double budget = static_cast<double>(options.max_bytes ? options.max_bytes : default_memory_limit());
    if (c.table_bytes > budget / 2)
        throw std::invalid_argument(fmt::format("the tables of {} records x {} metrics take {}, more than half the memory budget "
                                                "({}): choose fewer metrics with --metric, or give a larger --max-memory",
                                                records, c.metrics, human_bytes(static_cast<std::uint64_t>(c.table_bytes)),
                                                human_bytes(static_cast<std::uint64_t>(budget))));
    if (c.draws > k_max_bootstrap_draws)
        throw std::invalid_argument(fmt::format("the bootstrap would draw {:.3g} positions ({} resamples for each of {} metrics "
                                                "of {} mechanisms and their pairs, over {} units), more than the cap of {:.0e} "
                                                "(about a minute): choose fewer metrics with --metric, or aggregate fewer units",
                                                c.draws, options.resamples, c.metrics, c.per_mechanism.size(), c.units,
                                                k_max_bootstrap_draws));
}

Table tabulate(const std::vector<UnitMetrics>& records)
{
    Table t;
    std::unordered_map<std::string, std::size_t> mech_id, metric_id, unit_id;
    const auto id = [](std::unordered_map<std::string, std::size_t>& ids, std::vector<std::string>& names,
                       const std::string& name) {
        const auto [it, fresh] = ids.emplace(name, names.size());
        if (fresh)
            names.push_back(name);
        return it->second;
    };
    for (const UnitMetrics& r : records) {
        t.mechanism_of.push_back(id(mech_id, t.mechanisms, r.mechanism));
        t.unit_of.push_back(id(unit_id, t.units, r.unit));
        for (const auto& [name, v] : r.metrics)
            id(metric_id, t.metrics, name);
    }
    t.record_at.assign(t.mechanisms.size(), std::vector<std::ptrdiff_t>(t.units.size(), -1));
    t.values.reserve(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
        std::ptrdiff_t& slot = t.record_at[t.mechanism_of[i]][t.unit_of[i]];
        if (slot >= 0)
            throw std::invalid_argument("unit '" + records[i].unit + "' appears twice for mechanism '" +
                                        records[i].mechanism + "'");
        slot = static_cast<std::ptrdiff_t>(i);
        std::vector<double> row(t.metrics.size(), std::numeric_limits<double>::quiet_NaN());
        for (const auto& [name, v] : records[i].metrics)
            if (finite(v))
                row[metric_id.at(name)] = v;
        t.values.push_back(std::move(row));
    }
    assign_clusters(records, t);
    return t;
}

// tail = P(X <= k), X ~ Bin(m, 1/2), for k <= m / 2, in log space: the terms fall off below k by the ratio
// C(m, i-1) / C(m, i) = i / (m - i + 1), so the sum is log C(m, k) - m ln 2 + ln(1 + r_1 + r_1 r_2 + ...).
long double log_binomial_tail(std::uint64_t m, std::uint64_t k)
{
    const long double lm = static_cast<long double>(m), lk = static_cast<long double>(k);
    const long double log_term = std::lgamma(lm + 1) - std::lgamma(lk + 1) - std::lgamma(lm - lk + 1) - lm * std::log(2.0L);
    long double ratio = 1, sum = 1;
    for (std::uint64_t i = k; i >= 1; --i) {
        ratio *= static_cast<long double>(i) / static_cast<long double>(m - i + 1);
        sum += ratio;
        if (ratio < sum * 1e-24L)
            break;
    }
    return log_term + std::log(sum);
}

}  // namespace

double percentile_linear(std::vector<double>& values, double p)
{
    if (values.empty())
        throw std::invalid_argument("percentile of no values");
    std::sort(values.begin(), values.end());
    const double v = p / 100.0 * static_cast<double>(values.size() - 1);
    const double fi = std::floor(v);
    const double f = v - fi;
    const auto i = static_cast<std::size_t>(fi);
    if (i >= values.size() - 1)
        return values.back();
    const double a = values[i], b = values[i + 1];
    // numpy's lerp: from the nearer end, so that the result is monotone in f.
    return f >= 0.5 ? b - (b - a) * (1.0 - f) : a + (b - a) * f;
}

double sign_test_p(std::uint64_t positive, std::uint64_t negative)
{
    const std::uint64_t m = positive + negative;
    if (m == 0)
        return 1.0;
    const std::uint64_t k = std::min(positive, negative);
    if (m <= 62) {
        // Exact: 2 sum_{i<=k} C(m, i) < 2^63 for k <= m / 2, then one correct rounding and an exact scaling.
        unsigned __int128 c = 1, sum = 1;
        for (std::uint64_t i = 1; i <= k; ++i) {
            c = c * (m - i + 1) / i;
            sum += c;
        }
        const unsigned __int128 twice = 2 * sum;
        if (twice >= (static_cast<unsigned __int128>(1) << m))
            return 1.0;
        return std::ldexp(static_cast<double>(static_cast<std::uint64_t>(twice)), -static_cast<int>(m));
    }
    const long double log_p = std::log(2.0L) + log_binomial_tail(m, k);
    return log_p >= 0 ? 1.0 : static_cast<double>(std::exp(log_p));
}

namespace {

// One row's interval (attention.md 2.2): G cluster means (unclustered: the G = n values); from
// k_few_clusters on, the one- or two-stage percentile bootstrap as before, below it the t interval over the
// cluster means, for one cluster none. Sets the row's clusters, ci_method and agree (the cluster means with the
// sign of `overall`, the row's mean) and returns the cluster means.
template <class Row>
std::vector<double> row_interval(const std::vector<double>& x, const std::vector<std::size_t>& cluster_ids, bool clustered,
                                 Resampler& resampler, const AggregateOptions& options, double overall, Row& row)
{
    std::vector<std::vector<double>> groups;
    std::vector<double> means;
    if (clustered) {
        groups = group_by_cluster(x, cluster_ids);
        for (const std::vector<double>& g : groups)
            means.push_back(mean_of(g));
    } else {
        means = x;
    }
    row.clusters = means.size();
    row.agree = agree_count(means, overall);
    if (means.size() < 2) {
        row.ci_method = CiMethod::none;
        row.ci_low = row.ci_high = std::numeric_limits<double>::quiet_NaN();
    } else if (means.size() < k_few_clusters) {
        row.ci_method = CiMethod::t;
        std::tie(row.ci_low, row.ci_high) = t_interval(means, options.level);
    } else if (clustered) {
        row.ci_method = CiMethod::two_stage_bootstrap;
        std::tie(row.ci_low, row.ci_high) = cluster_bootstrap_interval(groups, options);
    } else {
        row.ci_method = CiMethod::bootstrap;
        std::tie(row.ci_low, row.ci_high) = resampler.interval(x);
    }
    return means;
}

// The sign test of a pair: over the units, or over the clusters' mean differences.
double pair_sign_p(const std::vector<double>& d, const std::vector<std::size_t>& cluster_ids, bool clustered)
{
    std::uint64_t positive = 0, negative = 0;
    if (clustered)
        for (const std::vector<double>& g : group_by_cluster(d, cluster_ids)) {
            const double m = mean_of(g);
            positive += m > 0;
            negative += m < 0;
        }
    else
        for (const double v : d) {
            positive += v > 0;
            negative += v < 0;
        }
    return sign_test_p(positive, negative);
}

}  // namespace

Aggregate aggregate(const std::vector<UnitMetrics>& records, const AggregateOptions& options)
{
    if (records.size() > k_max_aggregate_records)
        throw std::invalid_argument(fmt::format("{} records to aggregate, over the cap of {}", records.size(),
                                                k_max_aggregate_records));
    if (options.resamples == 0 || options.resamples > 1'000'000)
        throw std::invalid_argument(fmt::format("bootstrap resamples {} outside 1..1000000", options.resamples));
    check_counts(count_names(records, options), records.size(), options);
    const Table t = tabulate(records);
    Resampler resampler(options);
    Aggregate out;
    out.units = t.units.size();
    out.clustered = !t.cluster_of.empty();
    const auto cluster_of_unit = [&t](std::size_t unit) { return t.cluster_of.empty() ? 0 : t.cluster_of[unit]; };
    for (std::size_t mech = 0; mech < t.mechanisms.size(); ++mech)
        for (std::size_t metric = 0; metric < t.metrics.size(); ++metric) {
            std::vector<double> x;
            std::vector<std::size_t> cl;
            for (std::size_t r = 0; r < t.values.size(); ++r)
                if (t.mechanism_of[r] == mech && finite(t.values[r][metric])) {
                    x.push_back(t.values[r][metric]);
                    cl.push_back(cluster_of_unit(t.unit_of[r]));
                }
            if (x.empty())
                continue;
            MechanismStats s{t.mechanisms[mech], t.metrics[metric], x.size(), mean_of(x), sample_std(x)};
            (void)row_interval(x, cl, out.clustered, resampler, options, s.mean, s);
            out.mechanisms.push_back(std::move(s));
        }
    for (std::size_t a = 0; a < t.mechanisms.size(); ++a)
        for (std::size_t b = a + 1; b < t.mechanisms.size(); ++b)
            for (std::size_t metric = 0; metric < t.metrics.size(); ++metric) {
                std::vector<double> d;
                std::vector<std::size_t> cl;
                for (std::size_t u = 0; u < t.units.size(); ++u) {
                    const std::ptrdiff_t ra = t.record_at[a][u], rb = t.record_at[b][u];
                    if (ra < 0 || rb < 0)
                        continue;
                    const double va = t.values[static_cast<std::size_t>(ra)][metric];
                    const double vb = t.values[static_cast<std::size_t>(rb)][metric];
                    if (!finite(va) || !finite(vb))
                        continue;
                    d.push_back(va - vb);
                    cl.push_back(cluster_of_unit(u));
                }
                if (d.empty())
                    continue;
                PairStats s{t.mechanisms[a], t.mechanisms[b], t.metrics[metric], d.size(), mean_of(d)};
                s.p_sign = pair_sign_p(d, cl, out.clustered);
                s.p_t = t_test_p(row_interval(d, cl, out.clustered, resampler, options, s.mean_diff, s));
                out.pairs.push_back(std::move(s));
            }
    std::vector<double> p_t;
    for (const PairStats& s : out.pairs)
        p_t.push_back(s.p_t);
    const std::vector<double> holm = holm_adjust(p_t);
    for (std::size_t i = 0; i < out.pairs.size(); ++i)
        out.pairs[i].p_holm = holm[i];
    for (const MechanismStats& s : out.mechanisms)
        out.fewest_clusters = out.fewest_clusters ? std::min(out.fewest_clusters, s.clusters) : s.clusters;
    for (const PairStats& s : out.pairs)
        out.fewest_clusters = out.fewest_clusters ? std::min(out.fewest_clusters, s.clusters) : s.clusters;
    return out;
}

void check_aggregate_size(const std::vector<UnitMetrics>& records, const AggregateOptions& options)
{
    check_counts(count_names(records, options), records.size(), options);
}

double aggregate_draws(const std::vector<UnitMetrics>& records, const AggregateOptions& options)
{
    return count_names(records, options).draws;
}

std::pair<double, double> bootstrap_interval(const std::vector<double>& x, const AggregateOptions& options)
{
    if (x.empty())
        throw std::invalid_argument("bootstrap interval of no values");
    return Resampler(options).interval(x);
}

MeanInterval mean_interval(const std::vector<double>& x, const AggregateOptions& options)
{
    if (x.size() < 2)
        return {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN(), CiMethod::none};
    if (x.size() < k_few_clusters) {
        const auto [lo, hi] = t_interval(x, options.level);
        return {lo, hi, CiMethod::t};
    }
    const auto [lo, hi] = bootstrap_interval(x, options);
    return {lo, hi, CiMethod::bootstrap};
}

std::pair<double, double> cluster_bootstrap_interval(const std::vector<std::vector<double>>& clusters,
                                                     const AggregateOptions& options)
{
    if (clusters.empty())
        throw std::invalid_argument("two-stage bootstrap of no clusters");
    for (const auto& c : clusters)
        if (c.empty())
            throw std::invalid_argument("two-stage bootstrap with an empty cluster");
    const std::size_t g = clusters.size();
    std::vector<double> means(options.resamples);
    SplitMix64 rng(options.seed);
    for (std::size_t b = 0; b < options.resamples; ++b) {
        double total = 0.0, count = 0.0;
        for (std::size_t j = 0; j < g; ++j) {
            const std::vector<double>& c = clusters[Resampler::draw(rng, g, static_cast<double>(g))];
            const std::size_t n = c.size();
            for (std::size_t i = 0; i < n; ++i)
                total += c[Resampler::draw(rng, n, static_cast<double>(n))];
            count += static_cast<double>(n);
        }
        means[b] = total / count;
    }
    const double tail = 50.0 * (1.0 - options.level);
    std::sort(means.begin(), means.end());
    return {percentile_linear(means, tail), percentile_linear(means, 100.0 - tail)};
}

}  // namespace attnscope::analysis
