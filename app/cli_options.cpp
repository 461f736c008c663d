#include "cli_options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <stdexcept>

#include "analysis/inputs.h"
#include "analysis/vocabulary.h"
#include "attention/mixing.h"
#include "io/tensor_file.h"
#include "kernels/kernels.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/names.h"

namespace attnscope::app {

namespace {

bool all_digits(std::string_view s)
{
    if (!s.empty() && s.front() == '-')
        s.remove_prefix(1);
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

CLI::Validator strict_integer(bool non_negative)
{
    return CLI::Validator(
        [non_negative](std::string& text) -> std::string {
            const auto v = parse_decimal(text);
            if (!v && all_digits(text))
                return "'" + text + "' is out of range (integers lie in -9223372036854775808..9223372036854775807)";
            if (!v)
                return "'" + text + "' is not a decimal integer";
            if (non_negative && *v < 0)
                return "'" + text + "' must be non-negative";
            return {};
        },
        "");
}

CLI::Validator finite_number()
{
    return CLI::Validator(
        [](std::string& text) -> std::string {
            if (!parse_finite(text))
                return "'" + text + "' is not a finite decimal number";
            return {};
        },
        "");
}

}  // namespace

void make_numbers_strict(CLI::App& app)
{
    for (CLI::Option* opt : app.get_options()) {
        std::string type = opt->get_type_name();
        type = type.substr(0, type.find_first_of(": "));
        if (type == "INT" || type == "UINT")
            opt->check(strict_integer(type == "UINT"));
        else if (type == "FLOAT")
            opt->check(finite_number());
    }
    for (CLI::App* sub : app.get_subcommands({}))
        make_numbers_strict(*sub);
}

analysis::ExplicitChoices explicit_choices(const SelectionArgs& selection, const MechanismArgs& mechanism)
{
    analysis::ExplicitChoices given;
    given.prefix_tokens = selection.prefix_tokens.has_value();
    given.causal = mechanism.causal || mechanism.no_causal;
    given.scale = mechanism.scale.has_value();
    given.blocks = mechanism.blocks || mechanism.chunk || !mechanism.grid.empty() || !mechanism.block_grid.empty();
    given.mixing = !mechanism.mixing.empty();
    given.gates = !mechanism.gates.empty();
    return given;
}

analysis::AnalysisSetup resolve_setup(const std::string& q_ref, const SelectionArgs& selection,
                                      const MechanismArgs& mechanism, nlohmann::ordered_json* from_file)
{
    const analysis::FileDefaults defaults = analysis::read_file_defaults(q_ref);   // a missing file is the first error
    analysis::AnalysisSetup setup{selection.resolve(), mechanism.resolve(), explicit_choices(selection, mechanism)};
    nlohmann::ordered_json used = analysis::apply_file_defaults(defaults, q_ref, setup);
    if (from_file)
        *from_file = std::move(used);
    return setup;
}

void SelectionArgs::add_to(CLI::App& cmd)
{
    cmd.add_option("--layout", layout, "One letter per axis: n tokens, d features, others index axes (default by rank: nd, hnd, bhnd)")
        ->group("Selection");
    cmd.add_option("--at", at, "Index on each index axis, e.g. h=2,b=0 (default 0); AXIS=all: every index its own unit "
                              "(analyze, sweep)")->group("Selection");
    cmd.add_option("--head", head, "Shorthand for --at h=I")->group("Selection");
    cmd.add_option("--kv-head", kv_head,
                   "Key/value head (default: the query head h, or h // (H / Hk) when keys have Hk < H heads: "
                   "grouped-query attention)")
        ->group("Selection");
    cmd.add_option("--prefix-tokens", prefix_tokens, "Drop the first P tokens (CLS, registers)")->group("Selection");
    // Set while parsing: the first file is opened before the options are resolved (docs/security.md, "Data files").
    cmd.add_flag_callback("--allow-virtual", [] { io::set_allow_virtual_datasets(true); },
                          "Read HDF5 virtual datasets whose sources all lie in the file's own folder (default: refused)")
        ->group("Selection");
}

io::AxisSelection SelectionArgs::resolve() const
{
    io::AxisSelection sel;
    sel.layout = layout;
    if (!at.empty()) {
        try {
            io::parse_at_units(at, sel.at, sel.all);
        } catch (const std::invalid_argument& e) {   // the core names the concept, the command line its flag
            throw std::invalid_argument(std::string("--at: ").append(e.what()));
        }
    }
    if (head) {
        if (*head < 0)
            throw std::invalid_argument("--head " + std::to_string(*head) + " must be non-negative");
        if (sel.all.count('h'))
            throw std::invalid_argument("--head " + std::to_string(*head) + " contradicts --at h=all");
        const auto it = sel.at.find('h');
        if (it != sel.at.end() && it->second != *head)
            throw std::invalid_argument("--head " + std::to_string(*head) + " contradicts --at h=" + std::to_string(it->second));
        sel.at['h'] = *head;
    }
    if (prefix_tokens && *prefix_tokens < 0)
        throw std::invalid_argument("--prefix-tokens must be non-negative (got " + std::to_string(*prefix_tokens) + ")");
    sel.prefix_tokens = prefix_tokens.value_or(0);
    if (kv_head && *kv_head < 0)
        throw std::invalid_argument("--kv-head " + std::to_string(*kv_head) + " must be non-negative");
    sel.kv_head = kv_head;
    return sel;
}

void MechanismArgs::add_to(CLI::App& cmd)
{
    const char* g = "Mechanism";
    cmd.add_option("--scale", scale, "Softmax scale (default 1/sqrt(d))")->group(g);
    auto* c_on = cmd.add_flag("--causal", causal, "Causal masking")->group(g);
    auto* c_off = cmd.add_flag("--no-causal", no_causal, "Not causal, even when the file's attributes say causal")->group(g);
    c_on->excludes(c_off);
    cmd.add_option("--feature-map", feature_map,
                   joined(attention::feature_map_names(), " | ") + " (default relu)")->group(g);
    cmd.add_option("--favor-features", favor_features, "FAVOR+ random features m (default 256)")->group(g);
    cmd.add_option("--seed", seed, "Seed of the FAVOR+ projection (default 0)")->group(g);
    auto* b = cmd.add_option("--blocks", blocks, "MHLA: M contiguous blocks (numpy.array_split order; default min(16, N))")->group(g);
    auto* c = cmd.add_option("--chunk", chunk, "MHLA: blocks of C consecutive tokens")->group(g);
    auto* gr = cmd.add_option("--grid", grid, "MHLA: token grid G1,G2[,G3]")->group(g);
    cmd.add_option("--block-grid", block_grid, "MHLA: blocks per grid axis B1,B2[,B3]")->group(g);
    cmd.add_option("--token-order", token_order,
                   joined(attention::token_order_names(), " | ") + " (grid data; default raster)")->group(g);
    b->excludes(c)->excludes(gr);
    c->excludes(gr);
    cmd.add_option("--mixing", mixing,
                   joined(attention::mixing_presets(), " | ") + " | FILE[:DATASET] (default " +
                       attention::default_mixing_text() + ")")
        ->group(g);
    cmd.add_option("--mixing-sigma", mixing_sigma, "exp mixing: sigma (default 3)")->group(g);
    cmd.add_option("--mixing-threshold", mixing_threshold, "local mixing: threshold tau (default 1.5)")->group(g);
    cmd.add_option("--normalize", normalize,
                   "MHLA: " + joined(attention::normalize_names(), " | ") + " (default row); decay, gated, cosformer: row | none")
        ->group(g);
    cmd.add_option("--decay", decay, "decay: gamma in (0, 1] (default RetNet's 1 - 2^(-5 - h) for query head h)")->group(g);
    cmd.add_option("--gates", gates,
                   "gated: the gates, one per token and head: FILE[:NAME] laid out like --q without its feature axis")
        ->group(g);
    cmd.add_flag("--gates-log", gates_log, "gated: --gates holds ln g (Mamba-2's dt * A), not g")->group(g);
}

attention::AttentionOptions MechanismArgs::resolve() const
{
    attention::AttentionOptions o;
    if (scale) {
        if (!std::isfinite(*scale))
            throw std::invalid_argument("--scale must be a finite number");
        o.scale = *scale;
    }
    o.causal = causal;
    o.decay.gamma = decay;
    o.gates.source = gates;
    o.gates.log = gates_log;
    o.feature_map.kind = attention::parse_feature_map(feature_map);
    if (favor_features < 1 || favor_features > 1'000'000)
        throw std::invalid_argument("--favor-features must lie in 1..1000000 (got " + std::to_string(favor_features) + ")");
    o.feature_map.favor_features = favor_features;
    if (seed < 0)
        throw std::invalid_argument("--seed " + std::to_string(seed) + " must be non-negative");
    o.feature_map.seed = static_cast<std::uint64_t>(seed);

    using Kind = attention::BlockSpec::Kind;
    if (blocks) {
        if (*blocks < 1)
            throw std::invalid_argument("--blocks must be at least 1 (got " + std::to_string(*blocks) + ")");
        o.blocks.kind = Kind::count;
        o.blocks.blocks = *blocks;
    } else if (chunk) {
        if (*chunk < 1)
            throw std::invalid_argument("--chunk must be at least 1 (got " + std::to_string(*chunk) + ")");
        o.blocks.kind = Kind::chunk;
        o.blocks.chunk = *chunk;
    } else if (!grid.empty() || !block_grid.empty()) {
        if (grid.empty())
            throw std::invalid_argument("--block-grid needs --grid");
        // The token grid alone is what decay on a grid needs (docs/maths.md 1.8: Manhattan distances of the
        // grid positions in raster order); MHLA's blocks and the blocked order need --block-grid too, which
        // they say when it is missing.
        o.blocks.kind = Kind::grid;
        o.blocks.grid = analysis::parse_sizes(grid, "--grid");
        if (!block_grid.empty())
            o.blocks.block_grid = analysis::parse_sizes(block_grid, "--block-grid");
        if (o.blocks.grid.size() < 2 || o.blocks.grid.size() > 3)
            throw std::invalid_argument("--grid " + grid + ": give 2 or 3 sizes");
        if (!block_grid.empty() && o.blocks.block_grid.size() != o.blocks.grid.size())
            throw std::invalid_argument("--block-grid " + block_grid + " must have as many sizes as --grid " + grid);
        // The tokens are the grid's product: one that wraps around would pass for a small N (17 x
        // 4340410370284600384 wraps to 64, all tokens in one block).
        if (!checked_product(o.blocks.grid))
            throw std::invalid_argument("--grid " + grid + ": the product of the sizes overflows (it must equal the tokens N)");
        if (!checked_product(o.blocks.block_grid))
            throw std::invalid_argument("--block-grid " + block_grid + ": the product of the sizes overflows");
    }
    o.blocks.order = attention::parse_token_order(token_order);

    if (!(mixing_sigma > 0.0) || !std::isfinite(mixing_sigma))
        throw std::invalid_argument("--mixing-sigma must be a positive number");
    if (!(mixing_threshold >= 0.0) || !std::isfinite(mixing_threshold))
        throw std::invalid_argument("--mixing-threshold must be a non-negative number");
    o.mixing.sigma = mixing_sigma;
    o.mixing.threshold = mixing_threshold;
    if (!mixing.empty()) {
        o.mixing.preset = mixing;
        if (!attention::is_mixing_preset(mixing))
            analysis::load_mixing(o.mixing, mixing);
    }
    o.normalize = attention::parse_normalize(normalize);
    return o;
}

void MetricArgs::add_to(CLI::App& cmd)
{
    const char* g = "Metrics";
    cmd.add_option("--metrics", metrics, "What to compute: spectrum,entropy (default both)")->group(g);
    cmd.add_option("--method", method,
                   "Singular values: auto | dense | structured | streaming (structured: exact from the factors of non-causal linear / MHLA; streaming: never N x N, top-k matrix-free for softmax; "
                   "default auto: structured where cheaper)")->group(g);
    cmd.add_option("--rank-rtol", rank_rtol, "Rank tolerance relative to s_1 (default: NumPy's matrix_rank rule)")->group(g);
    cmd.add_option("--top-k", top_k, "Report only the k largest singular values")->group(g);
    cmd.add_flag("--row-entropy", row_entropy, "Include every row's entropy")->group(g);
    cmd.add_option("--past-split", past_split,
                   "Measure the past block A[h:N, 0:h] (default when causal: h = floor(N/2); h in 1..N-1)")->group(g);
    cmd.add_option("--past-splits", past_splits,
                   "Semiseparable profile: the past block's rank at K evenly spaced splits plus every block boundary, "
                   "or at every split with 'all' (default when causal: 16)")->group(g);
}

analysis::MetricOptions MetricArgs::resolve() const
{
    analysis::MetricOptions m;
    m.spectrum = false;
    m.entropy = false;
    for (const std::string& item : analysis::split_list(metrics)) {
        if (item == "spectrum")
            m.spectrum = true;
        else if (item == "entropy")
            m.entropy = true;
        else
            throw std::invalid_argument("--metrics: '" + item + "' is not one of spectrum, entropy");
    }
    if (rank_rtol) {
        if (!(*rank_rtol > 0.0 && *rank_rtol < 1.0))
            throw std::invalid_argument("--rank-rtol must lie in (0, 1)");
        m.rank_rtol = *rank_rtol;
    }
    if (top_k) {
        if (*top_k < 1)
            throw std::invalid_argument("--top-k must be at least 1 (got " + std::to_string(*top_k) + ")");
        m.top_k = *top_k;
    }
    m.method = analysis::parse_spectrum_method(method);
    m.row_entropy = row_entropy;
    if (past_split) {
        if (*past_split < 1)
            throw std::invalid_argument("--past-split must be at least 1 (got " + std::to_string(*past_split) + ")");
        m.past_split = static_cast<Eigen::Index>(*past_split);
    }
    if (past_splits)
        m.past_splits = analysis::parse_past_splits(*past_splits, "--past-splits");
    if (row_entropy && !m.entropy)
        throw std::invalid_argument("--row-entropy needs entropy in --metrics");
    return m;
}

void MemoryArgs::add_to(CLI::App& cmd)
{
    cmd.add_option("--max-memory", max_memory, "Refuse dense work above this size, e.g. 8G, 512M (default: half the RAM)");
    cmd.add_option("--threads", threads, "Threads for products, SVDs and attention tiles: AttnScope's kernels and OpenBLAS (default: all cores)");
}

namespace {

// --max-memory's text: a finite decimal and a unit, e.g. 8G, 512M, 1000000.
std::uint64_t parse_max_memory(const std::string& max_memory)
{
    if (max_memory.empty())
        return analysis::default_memory_limit();
    // The number (digits, a point, an exponent) and a unit; strict decimal, so "0x10G" and "nanG" are refused.
    std::size_t used = max_memory.find_first_not_of("0123456789.eE+-");
    if (used == std::string::npos)
        used = max_memory.size();
    const std::optional<double> number = parse_finite(std::string_view(max_memory).substr(0, used));
    const double v = number.value_or(0.0);
    if (!number)
        used = 0;
    double mult = 1.0;
    const std::string suffix = max_memory.substr(used);
    if (suffix == "" || suffix == "B")
        mult = 1.0;
    else if (suffix == "K" || suffix == "KiB" || suffix == "k")
        mult = 1024.0;
    else if (suffix == "M" || suffix == "MiB")
        mult = 1024.0 * 1024;
    else if (suffix == "G" || suffix == "GiB")
        mult = 1024.0 * 1024 * 1024;
    else if (suffix == "T" || suffix == "TiB")
        mult = 1024.0 * 1024 * 1024 * 1024;
    else
        used = 0;
    if (used == 0 || !(v > 0) || !std::isfinite(v * mult) || v * mult > 1.8e19)
        throw std::invalid_argument("--max-memory " + max_memory + ": expected a size such as 8G, 512M or 1000000");
    return static_cast<std::uint64_t>(v * mult);
}

}  // namespace

std::uint64_t MemoryArgs::resolve() const
{
    if (threads < 0 || threads > 1024)
        throw std::invalid_argument("--threads must lie in 0..1024 (0: all cores)");
    const std::uint64_t limit = parse_max_memory(max_memory);
    int wanted = 0;   // OpenBLAS's own count
    if (threads > 0) {
        // More threads than cores only queue, and each OpenBLAS thread maps its own buffer: --threads 32 under an
        // address-space limit (ulimit -v) made OpenBLAS retry a failing mmap forever.
        const int cores = kernels::usable_cores();
        if (threads > cores)
            std::cerr << "note: --threads " << threads << " is more than the " << cores << " core" << (cores == 1 ? "" : "s")
                      << " this process may run on: using " << cores << "\n";
        wanted = std::min(threads, cores);
    }
    const int asked = wanted > 0 ? wanted : kernels::threads();
    if (const int used = kernels::reserve_blas_buffers(wanted); used < asked)
        std::cerr << "note: using " << used << " thread" << (used == 1 ? "" : "s") << ": the address-space limit (ulimit -v) "
                  << "leaves room for " << used << " of OpenBLAS's per-thread buffers\n";
    return limit;
}

void MaxMemoryArg::add_to(CLI::App& cmd)
{
    cmd.add_option("--max-memory", max_memory, "The memory budget, e.g. 8G, 512M (default: half the RAM): records take up to 16 "
                                               "times their text, so results files above a sixteenth of it are refused");
}

std::uint64_t MaxMemoryArg::resolve() const { return parse_max_memory(max_memory); }

}  // namespace attnscope::app
