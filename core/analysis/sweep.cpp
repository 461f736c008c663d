#include "analysis/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "analysis/inputs.h"
#include "analysis/synth.h"
#include "attention/blocks.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "util/error.h"
#include "util/rng.h"

namespace attnscope::analysis {

using attention::Mechanism;
using Eigen::Index;
using Eigen::MatrixXd;

std::string_view to_string(Subsample s)
{
    switch (s) {
    case Subsample::first: return "first";
    case Subsample::random: return "random";
    case Subsample::crop: return "crop";
    }
    return "first";
}

Subsample parse_subsample(std::string_view s)
{
    if (s == "first")
        return Subsample::first;
    if (s == "random")
        return Subsample::random;
    if (s == "crop")
        return Subsample::crop;
    throw std::invalid_argument("--subsample " + std::string(s) + " is not one of first, random, crop");
}

namespace {

std::string sizes_text(const std::vector<Index>& v, char sep = 'x')
{
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i)
        s += (i ? std::string(1, sep) : "") + std::to_string(v[i]);
    return s;
}

// Crop sizes c_i = G_i * (N / prod G)^(1/k), whole and multiplying to N; else invalid_argument.
std::vector<Index> crop_sizes(const std::vector<Index>& grid, Index n)
{
    if (grid.size() < 2)
        throw std::invalid_argument("--subsample crop needs grid data (--grid G1,G2[,G3])");
    const double total = static_cast<double>(std::accumulate(grid.begin(), grid.end(), Index{1}, std::multiplies<>()));
    const double f = std::pow(static_cast<double>(n) / total, 1.0 / static_cast<double>(grid.size()));
    std::vector<Index> c;
    Index prod = 1;
    for (Index g : grid) {
        c.push_back(static_cast<Index>(std::llround(static_cast<double>(g) * f)));
        prod *= c.back();
    }
    if (prod != n || std::any_of(c.begin(), c.end(), [](Index v) { return v < 1; }))
        throw std::invalid_argument("--subsample crop: N=" + std::to_string(n) + " is not a centred crop of the " +
                                    sizes_text(grid) + " grid with its aspect ratio");
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
            throw std::invalid_argument("--subsample crop: the " + sizes_text(crop) + " crop does not hold whole blocks of " +
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

MatrixXd take_rows(const MatrixXd& x, const std::vector<Index>& rows)
{
    MatrixXd out(static_cast<Index>(rows.size()), x.cols());
    for (std::size_t i = 0; i < rows.size(); ++i)
        out.row(static_cast<Index>(i)) = x.row(rows[i]);
    return out;
}

struct Point {
    Index n = 0, draw = 0;
    std::vector<Index> tokens;                 // empty: all
    attention::AttentionOptions options;
};

// Analyses one Q, K pair under every mechanism, one timed analyze() each.
void analyse_point(const SweepSpec& spec, const MatrixXd& q, const MatrixXd& k, const Point& p, const std::string& input,
                   std::optional<Index> layer, std::optional<Index> head, std::uint64_t limit,
                   std::vector<SweepRecord>& out)
{
    Index m = 0;
    try {
        m = attention::make_blocks(p.options.blocks, q.rows()).num_blocks;
    } catch (const std::invalid_argument&) {
        m = 0;   // no valid MHLA layout for this N (only matters if MHLA is swept)
    }
    for (const Mechanism mech : spec.mechanisms) {
        const auto start = std::chrono::steady_clock::now();
        auto results = analyze(q, k, {mech}, p.options, spec.metrics, limit);
        SweepRecord r;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        r.mechanism = std::string(attention::to_string(mech));
        r.n = q.rows();
        r.m = m;
        r.d = q.cols();
        r.layer = layer;
        r.head = head;
        r.draw = p.draw;
        r.input = input;
        r.spectrum = std::move(results.front().spectrum);
        r.entropy = std::move(results.front().entropy);
        r.warnings = std::move(results.front().warnings);
        out.push_back(std::move(r));
    }
}

// The points of one source with `available` tokens.
std::vector<Point> plan_points(const SweepSpec& spec, Index available)
{
    std::vector<Point> points;
    if (spec.vary == 'n') {
        std::vector<Index> ns = spec.values.empty() ? std::vector<Index>{available} : spec.values;
        for (Index n : ns) {
            if (n < 1 || n > available)
                throw std::invalid_argument("--vary n=" + std::to_string(n) + ": the input has " + std::to_string(available) +
                                            " tokens");
            const Index draws = spec.subsample == Subsample::random ? spec.draws : 1;
            for (Index draw = 0; draw < draws; ++draw) {
                Point p;
                p.n = n;
                p.draw = draw;
                p.options = spec.options;
                const bool grid = spec.options.blocks.kind == attention::BlockSpec::Kind::grid;
                if (spec.subsample == Subsample::crop) {
                    const auto crop = crop_sizes(spec.options.blocks.grid.empty() ? std::vector<Index>{} : spec.options.blocks.grid, n);
                    p.options = crop_options(spec.options, crop);
                    p.tokens = subset_tokens(Subsample::crop, available, n, spec.seed, draw, spec.options.blocks.grid);
                } else {
                    if (grid && n != available)
                        throw std::invalid_argument("--vary n=" + std::to_string(n) + " with grid blocks: a subset of a " +
                                                    sizes_text(spec.options.blocks.grid) +
                                                    " grid is not a grid; use --subsample crop");
                    if (n != available || spec.subsample == Subsample::random)
                        p.tokens = subset_tokens(spec.subsample, available, n, spec.seed, draw);
                }
                points.push_back(std::move(p));
            }
        }
    } else {
        if (spec.values.empty())
            throw std::invalid_argument("--vary m needs a list of block counts, e.g. --vary m=1,2,4,8,16");
        for (Index m : spec.values) {
            Point p;
            p.n = available;
            p.options = options_for_m(spec.options, m);
            attention::make_blocks(p.options.blocks, available);   // validate now (M <= N, divisibility)
            points.push_back(std::move(p));
        }
    }
    return points;
}


}  // namespace

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
        std::vector<Index> all(static_cast<std::size_t>(available));
        std::iota(all.begin(), all.end(), Index{0});
        SplitMix64 rng(seed + static_cast<std::uint64_t>(draw));
        for (Index i = 0; i < n; ++i) {
            const auto left = static_cast<double>(available - i);
            const Index j = i + std::min(static_cast<Index>(rng.uniform() * left), available - i - 1);
            std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(j)]);
        }
        idx.assign(all.begin(), all.begin() + n);
        std::sort(idx.begin(), idx.end());
    } else {
        const Index total = std::accumulate(grid.begin(), grid.end(), Index{1}, std::multiplies<>());
        if (grid.empty() || total != available)
            throw std::invalid_argument("--subsample crop: the grid " + sizes_text(grid) + " does not hold the " +
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

std::vector<SweepRecord> run_sweep(const SweepSpec& spec, const JobContext& ctx)
{
    if (spec.vary != 'n' && spec.vary != 'm')
        throw std::invalid_argument("--vary takes n=LIST or m=LIST");
    if (spec.inputs.empty() == !spec.synth.has_value())
        throw std::invalid_argument("a sweep needs either inputs (--q/--k) or --synth KIND");
    if (spec.draws < 1)
        throw std::invalid_argument("--draws must be at least 1");
    if (spec.mechanisms.empty())
        throw std::invalid_argument("--mechanism lists no mechanism");
    const std::uint64_t limit = spec.memory_limit ? spec.memory_limit : default_memory_limit();
    std::vector<SweepRecord> records;

    if (spec.synth) {
        const SynthSource& s = *spec.synth;
        if (s.seeds < 1)
            throw std::invalid_argument("--seeds must be at least 1");
        if (spec.vary == 'm' && s.n < 1)
            throw std::invalid_argument("--vary m with --synth needs --n");
        std::vector<Index> ns = spec.vary == 'n' ? spec.values : std::vector<Index>{s.n};
        if (ns.empty())
            throw std::invalid_argument("--vary n with --synth needs a list of sizes, e.g. --vary n=256,1024,4096");
        // Validate every point before any work.
        std::vector<std::pair<Index, std::vector<Point>>> plan;
        for (Index n : ns) {
            SweepSpec one = spec;
            one.vary = spec.vary;
            one.values = spec.vary == 'n' ? std::vector<Index>{n} : spec.values;
            one.subsample = Subsample::first;
            if (spec.options.blocks.kind == attention::BlockSpec::Kind::grid) {
                const auto side = static_cast<Index>(std::llround(std::sqrt(static_cast<double>(n))));
                if (side * side != n)
                    throw std::invalid_argument("--synth with grid blocks needs square N (N=" + std::to_string(n) + ")");
                one.options.blocks.grid = {side, side};
            }
            plan.emplace_back(n, plan_points(one, n));
        }
        const double total = static_cast<double>(s.seeds * static_cast<Index>(plan.size()));
        double done = 0;
        for (Index draw = 0; draw < s.seeds; ++draw)
            for (auto& [n, points] : plan) {
                ctx.progress(done++ / total, fmt::format("synth {} N={} seed {}", s.kind, n, spec.seed + draw));
                SynthOptions so;
                so.n = n;
                so.d = s.d;
                so.kind = s.kind;
                so.seed = spec.seed + static_cast<std::uint64_t>(draw);
                const SynthData data = synthesize(so, limit);
                const MatrixXd q = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(data.q.data(), n, s.d);
                const MatrixXd k = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(data.k.data(), n, s.d);
                for (Point p : points) {
                    p.draw = draw;
                    analyse_point(spec, q, k, p, "synth:" + s.kind, std::nullopt, std::nullopt, limit, records);
                }
            }
        ctx.progress(1.0, "done");
        return records;
    }

    // Loaded inputs: plan everything (and fail on impossible points) before reading any data.
    struct Job {
        TensorSource source;
        std::optional<Index> layer, head;
        std::vector<Point> points;
    };
    std::vector<Job> jobs;
    for (std::size_t input = 0; input < spec.inputs.size(); ++input) {
        const TensorSource& src = spec.inputs[input];
        const std::optional<Index> input_layer =
            input < spec.input_layers.size() ? spec.input_layers[input] : std::optional<Index>{};
        const io::TensorRef ref = io::parse_tensor_ref(src.q_ref);
        const auto file = io::open_tensor_file(ref.file);
        const io::TensorInfo& info = file->find(ref.name);
        const std::string layout = io::resolve_layout(info, src.selection, "--q " + src.q_ref);
        const auto layers = axis_values(info, layout, 'l', spec.layers, spec.all_layers, src.selection, "--layers");
        const auto heads = axis_values(info, layout, 'h', spec.heads, spec.all_heads, src.selection, "--heads");
        const Index available = selected_tokens(src);
        const std::vector<Point> points = plan_points(spec, available);
        for (std::size_t li = 0; li < std::max<std::size_t>(layers.size(), 1); ++li)
            for (std::size_t hi = 0; hi < std::max<std::size_t>(heads.size(), 1); ++hi) {
                Job job{src, input_layer, std::nullopt, points};
                if (!layers.empty()) {
                    job.layer = layers[li];
                    job.source.selection.at['l'] = layers[li];
                }
                if (!heads.empty()) {
                    job.head = heads[hi];
                    job.source.selection.at['h'] = heads[hi];
                }
                jobs.push_back(std::move(job));
            }
    }
    double total = 0, done = 0;
    for (const Job& job : jobs)
        total += static_cast<double>(job.points.size());
    for (const Job& job : jobs) {
        const LoadedInputs in = load_inputs(job.source.q_ref, job.source.k_ref, std::nullopt, job.source.selection);
        for (const Point& p : job.points) {
            ctx.progress(done++ / total, fmt::format("{} N={} draw {}", job.source.q_ref, p.n, p.draw));
            if (p.tokens.empty())
                analyse_point(spec, in.q.values, in.k.values, p, job.source.q_ref, job.layer, job.head, limit, records);
            else
                analyse_point(spec, take_rows(in.q.values, p.tokens), take_rows(in.k.values, p.tokens), p, job.source.q_ref,
                              job.layer, job.head, limit, records);
        }
    }
    ctx.progress(1.0, "done");
    return records;
}

namespace {

// "/layers/3/q" -> ("/layers/", "/q", 3): the last path component made of digits only.
bool split_numeric_component(const std::string& name, std::string& before, std::string& after, Index& value)
{
    std::size_t end = name.size();
    while (end > 0) {
        const std::size_t slash = name.rfind('/', end - 1);
        const std::size_t begin = slash == std::string::npos ? 0 : slash + 1;
        const std::string part = name.substr(begin, end - begin);
        if (!part.empty() && part.size() < 10 && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            before = name.substr(0, begin);
            after = name.substr(end);
            value = std::stol(part);
            return true;
        }
        if (slash == std::string::npos || slash == 0)
            return false;
        end = slash;
    }
    return false;
}

}  // namespace

SweepSpec overview_spec(const TensorSource& source, const attention::AttentionOptions& options,
                        const MetricOptions& metrics)
{
    SweepSpec spec;
    spec.inputs = {source};
    spec.vary = 'n';
    spec.options = options;
    spec.metrics = metrics;
    // Every head and layer the queries' layout has (an axis it lacks is simply not iterated).
    const io::TensorRef ref = io::parse_tensor_ref(source.q_ref);
    const auto file = io::open_tensor_file(ref.file);
    const std::string layout = io::resolve_layout(file->find(ref.name), source.selection, "--q " + source.q_ref);
    spec.all_heads = layout.find('h') != std::string::npos;
    spec.all_layers = layout.find('l') != std::string::npos;
    if (spec.all_layers)
        return spec;
    // Per-layer datasets: the same name with another number in the same place, for queries and keys.
    const io::TensorRef kref = io::parse_tensor_ref(source.k_ref);
    std::string qb, qa, kb, ka;
    Index qv = 0, kv = 0;
    const std::string qname = file->find(ref.name).name;
    if (kref.file != ref.file || !split_numeric_component(qname, qb, qa, qv))
        return spec;
    const std::string kname = file->find(kref.name).name;
    if (!split_numeric_component(kname, kb, ka, kv) || kb != qb || kv != qv)
        return spec;
    std::map<Index, std::pair<std::string, std::string>> layers;
    for (const auto& t : file->tensors()) {
        std::string b, a;
        Index v = 0;
        if (!split_numeric_component(t.name, b, a, v) || b != qb || a != qa)
            continue;
        const std::string k = kb + std::to_string(v) + ka;
        bool has_k = false;
        for (const auto& u : file->tensors())
            has_k = has_k || u.name == k;
        if (has_k)
            layers[v] = {t.name, k};
    }
    if (layers.size() < 2)
        return spec;
    spec.inputs.clear();
    for (const auto& [layer, names] : layers) {
        spec.inputs.push_back({ref.file + ":" + names.first, ref.file + ":" + names.second, std::nullopt, source.selection});
        spec.input_layers.push_back(layer);
    }
    return spec;
}

void validate_sweep(const SweepSpec& spec)
{
    // run_sweep plans (and validates) every point before its first progress report; a cancelled
    // context stops it right there.
    JobContext ctx;
    ctx.token.cancel();
    try {
        run_sweep(spec, ctx);
    } catch (const JobCancelled&) {
    }
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

nlohmann::ordered_json sweep_summary(const SweepSpec& spec, const std::vector<SweepRecord>& records)
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
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const auto& key : order) {
        const Acc& a = acc[key];
        nlohmann::ordered_json p;
        p["mechanism"] = std::get<0>(key);
        p["n"] = std::get<1>(key);
        p["m"] = std::get<2>(key);
        p["count"] = a.count;
        for (const char* metric : {"rank", "relative_rank", "effective_rank", "stable_rank", "entropy_mean",
                                   "entropy_normalized_mean", "seconds"}) {
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
