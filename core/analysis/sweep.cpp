#include "analysis/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "analysis/analyze.h"
#include "analysis/inputs.h"
#include "analysis/plan.h"
#include "analysis/synth.h"
#include "attention/blocks.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/names.h"
#include "util/rng.h"

namespace attnscope::analysis {

using attention::Mechanism;
using Eigen::Index;
using Eigen::MatrixXd;

namespace {

constexpr NameTable<Subsample, 3> k_subsamples{{{Subsample::first, "first"}, {Subsample::random, "random"}, {Subsample::crop, "crop"}}};

}  // namespace

std::string_view to_string(Subsample s) { return name_of(k_subsamples, s); }
std::vector<std::string_view> subsample_names() { return names_of(k_subsamples); }
Subsample parse_subsample(std::string_view s) { return value_named(k_subsamples, s, "--subsample"); }

namespace {

// Crop sizes c_i = G_i * (N / prod G)^(1/k), whole and multiplying to N; else invalid_argument.
std::vector<Index> crop_sizes(const std::vector<Index>& grid, Index n)
{
    if (grid.size() < 2)
        throw std::invalid_argument("--subsample crop needs grid data (--grid G1,G2[,G3])");
    double total = 1.0;   // in double: an Index product could overflow (the same value for any real grid)
    for (const Index g : grid)
        total *= static_cast<double>(g);
    const double f = std::pow(static_cast<double>(n) / total, 1.0 / static_cast<double>(grid.size()));
    std::vector<Index> c;
    for (Index g : grid)
        c.push_back(static_cast<Index>(std::llround(static_cast<double>(g) * f)));
    const std::optional<Index> prod = checked_product(c);   // a product that wraps could pass for N
    if (!prod || *prod != n || std::any_of(c.begin(), c.end(), [](Index v) { return v < 1; }))
        throw std::invalid_argument("--subsample crop: N=" + std::to_string(n) + " is not a centred crop of the " +
                                    sizes_text(grid, "x") + " grid with its aspect ratio");
    return c;
}

// The options for a crop: grid = crop sizes, block grid scaled so that the block size stays.
attention::AttentionOptions crop_options(const attention::AttentionOptions& o, const std::vector<Index>& crop)
{
    attention::AttentionOptions c = o;
    if (o.blocks.kind != attention::BlockSpec::Kind::grid)
        return c;
    if (o.blocks.order != attention::TokenOrder::raster)
        throw std::invalid_argument("--subsample crop needs --token-order raster");
    c.blocks.grid = crop;
    for (std::size_t a = 0; a < crop.size(); ++a) {
        const Index size = o.blocks.grid[a] / o.blocks.block_grid[a];
        if (crop[a] % size != 0)
            throw std::invalid_argument("--subsample crop: the " + sizes_text(crop, "x") + " crop does not hold whole blocks of " +
                                        std::to_string(size) + " tokens along axis " + std::to_string(a));
        c.blocks.block_grid[a] = crop[a] / size;
    }
    return c;
}

// Options for block count M (--vary m): 1-D counts, or a B x B (x B) block grid for grid data.
attention::AttentionOptions options_for_m(const attention::AttentionOptions& o, Index m)
{
    attention::AttentionOptions c = o;
    if (o.blocks.kind == attention::BlockSpec::Kind::grid) {
        c.blocks.block_grid.assign(o.blocks.grid.size(), m);
    } else {
        c.blocks.kind = attention::BlockSpec::Kind::count;
        c.blocks.blocks = m;
    }
    return c;
}

// The points of one source with `available` tokens and `options` (its own, file defaults applied).
std::vector<SweepPoint> plan_points(const SweepSpec& spec, const attention::AttentionOptions& options, Index available)
{
    std::vector<SweepPoint> points;
    if (spec.vary == 'm') {
        if (spec.values.empty())
            throw std::invalid_argument("--vary m needs a list of block counts, e.g. --vary m=1,2,4,8,16");
        for (Index m : spec.values) {
            SweepPoint p;
            p.n = available;
            p.options = options_for_m(options, m);
            attention::make_blocks(p.options.blocks, available);   // validate now (M <= N, divisibility)
            points.push_back(std::move(p));
        }
        return points;
    }
    const bool grid = options.blocks.kind == attention::BlockSpec::Kind::grid;
    const std::vector<Index> ns = spec.values.empty() ? std::vector<Index>{available} : spec.values;
    for (Index n : ns) {
        if (n < 1 || n > available)
            throw std::invalid_argument("--vary n=" + std::to_string(n) + ": the input has " + std::to_string(available) +
                                        " tokens");
        const Index draws = spec.subsample == Subsample::random ? spec.draws : 1;
        for (Index draw = 0; draw < draws; ++draw) {
            SweepPoint p;
            p.n = n;
            p.draw = draw;
            p.options = options;
            if (spec.subsample == Subsample::crop) {
                const auto crop = crop_sizes(options.blocks.grid, n);
                p.options = crop_options(options, crop);
                p.tokens = subset_tokens(Subsample::crop, available, n, spec.seed, draw, options.blocks.grid);
            } else {
                if (grid && n != available)
                    throw std::invalid_argument("--vary n=" + std::to_string(n) + " with grid blocks: a subset of a " +
                                                sizes_text(options.blocks.grid, "x") +
                                                " grid is not a grid; use --subsample crop");
                if (n != available || spec.subsample == Subsample::random)
                    p.tokens = subset_tokens(spec.subsample, available, n, spec.seed, draw);
            }
            points.push_back(std::move(p));
        }
    }
    return points;
}

std::uint64_t budget_of(const SweepSpec& spec) { return spec.memory_limit ? spec.memory_limit : default_memory_limit(); }

std::string count_cap_text()
{
    return "the cap of " + std::to_string(k_max_sweep_analyses) + " analyses per sweep (docs/cli.md, \"Counts and caps\")";
}

// Bytes one copy of `o` holds (every point keeps its own: a learned mixing matrix is copied with it).
long double options_bytes(const attention::AttentionOptions& o)
{
    long double bytes = sizeof(attention::AttentionOptions) +
                        8.0L * static_cast<long double>(o.blocks.grid.size() + o.blocks.block_grid.size());
    if (o.mixing.matrix)
        bytes += 8.0L * static_cast<long double>(o.mixing.matrix->size());
    for (const MatrixXd& m : o.mixing.head_matrices)
        bytes += 8.0L * static_cast<long double>(m.size()) + sizeof(MatrixXd);
    return bytes;
}

// Bytes one record of N tokens keeps: the record, its singular values and its row entropies (N each at most).
long double record_bytes(Index n) { return sizeof(SweepRecord) + 256.0L + 16.0L * static_cast<long double>(n); }

// The analyses and the memory of a plan, before its points are made: per source i (`available[i]` tokens,
// options[i]) repeated `units[i]` times (its layers x heads, or a synthetic N's seeds), its points (N or M
// values x draws), their token subsets and every record they will make. Overflow-safe: counts in checked
// integers, bytes in long double.
void check_plan_size(const SweepSpec& spec, const std::vector<attention::AttentionOptions>& options,
                     const std::vector<Index>& available, const std::vector<std::uint64_t>& units)
{
    const std::uint64_t draws = spec.subsample == Subsample::random ? static_cast<std::uint64_t>(spec.draws) : 1;
    const auto mechanisms = static_cast<std::uint64_t>(spec.mechanisms.size());
    std::uint64_t analyses = 0;
    long double bytes = 0;
    bool overflow = false;
    for (std::size_t i = 0; i < available.size(); ++i) {
        // (N, subset size) of every point: --vary m analyses all tokens at each M; --vary n each N, `draws` times.
        std::vector<std::pair<Index, Index>> points;
        if (spec.vary == 'm')
            points.assign(spec.values.size(), {available[i], 0});
        else
            for (const Index n : spec.values.empty() ? std::vector<Index>{available[i]} : spec.values)
                points.emplace_back(std::min(n, available[i]), std::min(n, available[i]));   // larger N: refused by plan_points
        const auto count = checked_mul(static_cast<std::uint64_t>(points.size()), spec.vary == 'm' ? 1 : draws);
        const auto per_unit = count ? checked_mul(*count, mechanisms) : std::nullopt;
        const auto all = per_unit ? checked_mul(*per_unit, units[i]) : std::nullopt;
        const auto sum = all ? checked_add(analyses, *all) : std::nullopt;
        if (!sum) {
            overflow = true;
            break;
        }
        analyses = *sum;
        // Each unit keeps its own copy of the points (options and token subsets) and a record per point and
        // mechanism.
        long double unit_bytes = 0;
        const long double copies = spec.vary == 'm' ? 1.0L : static_cast<long double>(draws);
        for (const auto& [n, subset] : points)
            unit_bytes += copies * (sizeof(SweepPoint) + options_bytes(options[i]) + 8.0L * static_cast<long double>(subset) +
                                    static_cast<long double>(mechanisms) * record_bytes(n));
        bytes += static_cast<long double>(units[i]) * unit_bytes;
    }
    if (overflow || analyses > k_max_sweep_analyses)
        throw std::invalid_argument("the sweep asks for " + (overflow ? std::string("more than 2^64") : std::to_string(analyses)) +
                                    " analyses (units x N or M values x draws x seeds x mechanisms), over " + count_cap_text() +
                                    ": sweep fewer heads, layers, values or draws");
    const std::uint64_t budget = budget_of(spec);
    if (bytes > static_cast<long double>(budget))
        throw MemoryLimitError("the sweep's plan and records need about " +
                               human_bytes(bytes > 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(bytes)) +
                               ", over the memory limit of " + human_bytes(budget) +
                               ": sweep fewer heads, layers, values or draws");
}

void check_spec(const SweepSpec& spec)
{
    if (spec.vary != 'n' && spec.vary != 'm')
        throw std::invalid_argument("--vary takes n=LIST or m=LIST");
    if (spec.inputs.empty() == !spec.synth.has_value())
        throw std::invalid_argument("a sweep needs either inputs (--q/--k) or --synth KIND");
    validate_sweep_counts(spec);
    if (spec.draws > 1 && spec.subsample != Subsample::random)
        throw std::invalid_argument("--draws needs --subsample random");
    if (spec.mechanisms.empty())
        throw std::invalid_argument("--mechanism lists no mechanism");
}

// Synthetic data: one job per N (every draw analyses the same points).
void plan_synthetic(SweepPlan& plan)
{
    const SweepSpec& spec = plan.spec;
    const SynthSource& s = *spec.synth;
    if (s.seeds < 1 || s.d < 1)
        throw std::invalid_argument("--d and --seeds must be at least 1");
    if (spec.vary == 'm' && s.n < 1)
        throw std::invalid_argument("--vary m with --synth needs --n");
    const std::vector<Index> ns = spec.vary == 'n' ? spec.values : std::vector<Index>{s.n};
    if (ns.empty())
        throw std::invalid_argument("--vary n with --synth needs a list of sizes, e.g. --vary n=256,1024,4096");
    // Each N is one source of one point per M (or one point), analysed once per seed.
    SweepSpec per_n = spec;
    per_n.subsample = Subsample::first;
    if (spec.vary == 'n')
        per_n.values.clear();
    check_plan_size(per_n, std::vector<attention::AttentionOptions>(ns.size(), spec.options), ns,
                    std::vector<std::uint64_t>(ns.size(), static_cast<std::uint64_t>(s.seeds)));
    for (Index n : ns) {
        SweepSpec one = spec;
        one.values = spec.vary == 'n' ? std::vector<Index>{n} : spec.values;
        one.subsample = Subsample::first;
        attention::AttentionOptions options = spec.options;
        if (options.blocks.kind == attention::BlockSpec::Kind::grid) {
            const auto side = static_cast<Index>(std::llround(std::sqrt(static_cast<double>(n))));
            if (side * side != n)
                throw std::invalid_argument("--synth with grid blocks needs square N (N=" + std::to_string(n) + ")");
            options.blocks.grid = {side, side};
        }
        SweepJob job;
        job.synth_n = n;
        job.points = plan_points(one, options, n);
        plan.jobs.push_back(std::move(job));
    }
}

// Loaded inputs: each input's file defaults, then its units and points.
void plan_loaded(SweepPlan& plan)
{
    // Per-layer datasets (/layers/<i>/q) under `layers = all | LIST`: one input per layer, as batch takes them.
    SweepSpec& expanded = plan.spec;
    if (expanded.layers.kind != AxisChoice::Kind::selection && expanded.input_layers.empty() &&
        expand_layer_datasets(expanded.inputs, expanded.input_layers, expanded.layers))
        expanded.layers = AxisChoice{};
    const SweepSpec& spec = plan.spec;
    std::vector<TensorSource> inputs;
    std::vector<attention::AttentionOptions> options;
    for (const TensorSource& src : spec.inputs) {
        AnalysisSetup setup{src.selection, spec.options, spec.given};
        // A subset of N tokens of a grid is not a grid: such sweeps keep their blocks 1-D.
        if (spec.vary == 'n' && spec.subsample != Subsample::crop && !spec.values.empty())
            setup.given.blocks = true;
        const nlohmann::ordered_json from_file = resolve_file_defaults(src.q_ref, setup);
        nlohmann::ordered_json entry{{"q", src.q_ref.text}, {"k", src.k_ref.text}};
        if (!from_file.empty())
            entry["defaults_from_file"] = from_file;
        plan.inputs.push_back(std::move(entry));
        inputs.push_back({src.q_ref, src.k_ref, src.v_ref, setup.selection});
        options.push_back(setup.options);
    }
    const std::vector<Unit> units = plan_units(inputs, spec.layers, spec.heads, spec.input_layers);
    std::vector<Index> available(inputs.size());
    std::vector<std::uint64_t> units_of(inputs.size(), 0);
    for (std::size_t i = 0; i < inputs.size(); ++i)
        available[i] = selected_tokens(inputs[i]);
    for (const Unit& u : units)
        ++units_of[u.input];
    check_plan_size(spec, options, available, units_of);
    std::vector<std::vector<SweepPoint>> points(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i)
        points[i] = plan_points(spec, options[i], available[i]);
    for (const Unit& u : units)
        plan.jobs.push_back(SweepJob{u, 0, points[u.input]});
}

}  // namespace

void validate_sweep_counts(const SweepSpec& spec, const SweepCountNames& names)
{
    const std::uint64_t cap = k_max_sweep_analyses;
    if (spec.draws < 1)
        throw std::invalid_argument(names.draws + " must be at least 1 (got " + std::to_string(spec.draws) + ")");
    if (static_cast<std::uint64_t>(spec.draws) > cap)
        throw std::invalid_argument(names.draws + " " + std::to_string(spec.draws) + " is over " + count_cap_text());
    if (spec.values.size() > cap)
        throw std::invalid_argument(names.values + " lists " + std::to_string(spec.values.size()) + " values, over " +
                                    count_cap_text());
    std::uint64_t seeds = 1;
    if (spec.synth) {
        if (spec.synth->seeds < 1)
            throw std::invalid_argument(names.seeds + " must be at least 1 (got " + std::to_string(spec.synth->seeds) + ")");
        seeds = static_cast<std::uint64_t>(spec.synth->seeds);
        if (seeds > cap)
            throw std::invalid_argument(names.seeds + " " + std::to_string(seeds) + " is over " + count_cap_text());
    }
    // Values, draws, seeds and mechanisms are each at most the cap: their product fits in 128 bits.
    const unsigned __int128 analyses = static_cast<unsigned __int128>(std::max<std::size_t>(spec.values.size(), 1)) *
                                       static_cast<std::uint64_t>(spec.subsample == Subsample::random ? spec.draws : 1) * seeds *
                                       std::max<std::size_t>(spec.mechanisms.size(), 1);
    if (analyses > cap)
        throw std::invalid_argument("the sweep asks for more than " + std::to_string(cap) + " analyses (" + names.values +
                                    " values x " + names.draws + " x " + names.seeds + " x mechanisms), over " +
                                    count_cap_text());
    if (!spec.synth)
        return;
    // Synthetic activations: N x d queries, keys and values per draw, as synthesize() makes them.
    const std::uint64_t budget = budget_of(spec);
    const bool vary_n = spec.vary == 'n';
    for (const Index n : vary_n ? spec.values : std::vector<Index>{spec.synth->n}) {
        const long double bytes = static_cast<long double>(n) * static_cast<long double>(spec.synth->d) * 3.0L * 12.0L;
        if (bytes > static_cast<long double>(budget))
            throw MemoryLimitError((vary_n ? names.values + " n=" : names.n + " ") + std::to_string(n) + " with --d " +
                                   std::to_string(spec.synth->d) + ": the synthetic activations need about " +
                                   human_bytes(bytes > 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(bytes)) +
                                   ", over the memory limit of " + human_bytes(budget));
    }
}

std::vector<Index> subset_tokens(Subsample how, Index available, Index n, std::uint64_t seed, Index draw,
                                 const std::vector<Index>& grid)
{
    if (n < 1 || n > available)
        throw std::invalid_argument("subset of " + std::to_string(n) + " tokens out of " + std::to_string(available));
    std::vector<Index> idx;
    if (how == Subsample::first) {
        idx.resize(static_cast<std::size_t>(n));
        std::iota(idx.begin(), idx.end(), Index{0});
    } else if (how == Subsample::random) {
        // Partial Fisher-Yates over 0..available-1, the array kept sparse (only the positions swapped), so a
        // draw costs O(n), not O(available): many draws of a few tokens of a long input stay cheap.
        std::unordered_map<Index, Index> moved;
        auto at = [&](Index p) {
            const auto it = moved.find(p);
            return it == moved.end() ? p : it->second;
        };
        SplitMix64 rng(seed + static_cast<std::uint64_t>(draw));
        idx.resize(static_cast<std::size_t>(n));
        for (Index i = 0; i < n; ++i) {
            const auto left = static_cast<double>(available - i);
            const Index j = i + std::min(static_cast<Index>(rng.uniform() * left), available - i - 1);
            const Index vi = at(i), vj = at(j);
            idx[static_cast<std::size_t>(i)] = vj;
            moved[j] = vi;   // position i is final: only j's value is needed later
        }
        std::sort(idx.begin(), idx.end());
    } else {
        const std::optional<Index> total = checked_product(grid);
        if (grid.empty() || !total || *total != available)
            throw std::invalid_argument("--subsample crop: the grid " + sizes_text(grid, "x") + " does not hold the " +
                                        std::to_string(available) + " tokens");
        const auto crop = crop_sizes(grid, n);
        const std::size_t k = grid.size();
        std::vector<Index> start(k);
        for (std::size_t a = 0; a < k; ++a)
            start[a] = (grid[a] - crop[a]) / 2;
        // Raster order over the crop box is ascending token order in the full grid.
        std::vector<Index> c(k, 0);
        for (Index count = 0; count < n; ++count) {
            Index t = 0;
            for (std::size_t a = 0; a < k; ++a)
                t = t * grid[a] + start[a] + c[a];
            idx.push_back(t);
            for (std::size_t a = k; a-- > 0;) {
                if (++c[a] < crop[a])
                    break;
                c[a] = 0;
            }
        }
    }
    return idx;
}

std::size_t SweepPlan::analyses() const
{
    std::size_t points = 0;
    for (const SweepJob& job : jobs)
        points += job.points.size();
    const std::size_t draws = spec.synth ? static_cast<std::size_t>(spec.synth->seeds) : 1;
    return points * draws * spec.mechanisms.size();
}

SweepPlan plan_sweep(const SweepSpec& spec)
{
    check_spec(spec);
    SweepPlan plan;
    plan.spec = spec;
    if (spec.synth)
        plan_synthetic(plan);
    else
        plan_loaded(plan);
    return plan;
}

namespace {

// Up to five of `valid` (ascending): all of them when they are few, else a chain by factors of about two,
// from the largest down (`from_top`) or from the smallest up.
std::vector<Index> spread(const std::vector<Index>& valid, bool from_top)
{
    constexpr std::size_t k_max = 5;
    if (valid.size() <= k_max)
        return valid;
    std::vector<Index> out;
    if (from_top) {
        out.push_back(valid.back());
        for (auto it = valid.rbegin(); it != valid.rend() && out.size() < k_max; ++it)
            if (2 * *it <= out.back())
                out.push_back(*it);
        std::reverse(out.begin(), out.end());
    } else {
        out.push_back(valid.front());
        for (auto it = valid.begin(); it != valid.end() && out.size() < k_max; ++it)
            if (*it >= 2 * out.back())
                out.push_back(*it);
    }
    return out;
}

}  // namespace

SweepValueChoice sweep_value_choice(const SweepSpec& spec)
{
    SweepValueChoice choice;
    const bool grid_blocks = spec.options.blocks.kind == attention::BlockSpec::Kind::grid;
    attention::AttentionOptions options = spec.options;
    if (spec.synth) {
        if (spec.vary == 'n') {
            choice.proposed = grid_blocks ? std::vector<Index>{64, 256, 1024} : std::vector<Index>{64, 128, 256, 512};
            return choice;
        }
        choice.tokens = spec.synth->n;
    } else {
        // A sweep of nothing but the first unit's full N: its tokens and options, file attributes applied.
        SweepSpec probe = spec;
        probe.vary = 'n';
        probe.values.clear();
        probe.subsample = Subsample::first;
        probe.draws = 1;
        const SweepPlan plan = plan_sweep(probe);
        if (plan.jobs.empty() || plan.jobs.front().points.empty())
            return choice;
        choice.tokens = plan.jobs.front().points.front().n;
        options = plan.jobs.front().points.front().options;
    }
    const Index n = choice.tokens;
    if (n < 1)
        return choice;
    const bool grid = options.blocks.kind == attention::BlockSpec::Kind::grid;
    if (grid)
        choice.grid = options.blocks.grid;
    if (spec.vary == 'm') {
        if (grid) {
            const Index side = *std::min_element(options.blocks.grid.begin(), options.blocks.grid.end());
            for (Index b = 1; b <= side; ++b) {
                try {
                    attention::make_blocks(options_for_m(options, b).blocks, n);
                    choice.valid.push_back(b);
                } catch (const std::invalid_argument&) {
                }
            }
            choice.proposed = spread(choice.valid, false);
        } else {
            // The divisors up to N / 2, in pairs (m, N / m) up to sqrt(N): a header may claim billions of tokens.
            std::vector<Index> divisors;
            for (Index m = 1; m <= n / m; ++m)
                if (n % m == 0)
                    for (const Index v : {m, n / m})
                        if (v <= n / 2 && (divisors.empty() || divisors.back() != v))
                            divisors.push_back(v);
            std::sort(divisors.begin(), divisors.end());
            divisors.erase(std::unique(divisors.begin(), divisors.end()), divisors.end());
            choice.proposed = spread(divisors.empty() ? std::vector<Index>{1} : divisors, false);
        }
        return choice;
    }
    if (spec.subsample == Subsample::crop) {
        if (!grid)
            return choice;   // crops need grid data: nothing to propose (plan_sweep says why)
        const Index g0 = options.blocks.grid.front();
        for (Index c0 = 1; c0 <= g0; ++c0) {
            const double f = static_cast<double>(c0) / static_cast<double>(g0);
            Index count = 1;
            for (Index g : options.blocks.grid)
                count *= static_cast<Index>(std::llround(static_cast<double>(g) * f));
            try {
                crop_options(options, crop_sizes(options.blocks.grid, count));
                if (choice.valid.empty() || choice.valid.back() != count)
                    choice.valid.push_back(count);
            } catch (const std::invalid_argument&) {
            }
        }
        choice.proposed = spread(choice.valid, true);
        return choice;
    }
    if (grid) {
        choice.valid = {n};   // a subset of a grid is not a grid
        choice.proposed = {n};
        return choice;
    }
    for (Index v = n; v >= 2 && choice.proposed.size() < 5; v /= 2)
        choice.proposed.push_back(v);
    std::reverse(choice.proposed.begin(), choice.proposed.end());
    return choice;
}

SweepSpec overview_spec(const TensorSource& source, const attention::AttentionOptions& options,
                        const MetricOptions& metrics)
{
    SweepSpec spec;
    spec.inputs = {source};
    spec.vary = 'n';
    spec.options = options;
    spec.metrics = metrics;
    // Every head and layer the queries' layout has (an axis it lacks is simply not iterated).
    const io::TensorRef& ref = source.q_ref;
    const auto file = io::open_tensor(ref);
    const std::string layout = io::resolve_layout(file->find(ref.name), source.selection, "--q " + ref.text);
    if (layout.find('h') != std::string::npos)
        spec.heads = AxisChoice::all("heads");
    if (layout.find('l') != std::string::npos) {
        spec.layers = AxisChoice::all("layers");
        return spec;
    }
    // Per-layer datasets: the same name with another number in the same place, for queries and keys.
    const std::vector<LayerTensors> layers = layer_tensors(source.q_ref, source.k_ref, std::nullopt);
    if (layers.size() < 2)
        return spec;
    spec.inputs.clear();
    for (const LayerTensors& l : layers) {
        spec.inputs.push_back({l.q_ref, l.k_ref, std::nullopt, source.selection});
        spec.input_layers.push_back(l.layer);
    }
    return spec;
}

}  // namespace attnscope::analysis
