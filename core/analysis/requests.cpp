#include "analysis/requests.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "analysis/inputs.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "attention/mixing.h"
#include "io/tensor_file.h"
#include "kernels/kernels.h"
#include "util/checked.h"
#include "util/names.h"

namespace attnscope::analysis {

std::string option_name(std::string_view name, Spelling spelling)
{
    std::string out(name);
    if (spelling == Spelling::flag)
        return "--" + out;
    std::replace(out.begin(), out.end(), '-', '_');
    return out;
}

const std::vector<OptionDescriptor<SelectionRequest>>& selection_options()
{
    using R = SelectionRequest;
    static const std::vector<OptionDescriptor<R>> table = {
        {"layout", &R::layout, "One letter per axis: n tokens, d features, others index axes (default by rank: nd, hnd, bhnd)"},
        {"at", &R::at, "Index on each index axis, e.g. h=2,b=0 (default 0); AXIS=all: every index its own unit (analyze, sweep)"},
        {"head", &R::head, "Shorthand for --at h=I"},
        {"kv-head", &R::kv_head,
         "Key/value head (default: the query head h, or h // (H / Hk) when keys have Hk < H heads: grouped-query attention)"},
        {"prefix-tokens", &R::prefix_tokens, "Drop the first P tokens (CLS, registers)"},
    };
    return table;
}

const std::vector<OptionDescriptor<MechanismRequest>>& mechanism_options()
{
    using R = MechanismRequest;
    static const std::vector<OptionDescriptor<R>> table = {
        {"scale", &R::scale, "Softmax scale (default 1/sqrt(d))"},
        {"causal", &R::causal, "Causal masking", {}, "Not causal, even when the file's attributes say causal"},
        {"feature-map", &R::feature_map, joined(attention::feature_map_names(), " | ") + " (default relu)"},
        {"favor-features", &R::favor_features, "FAVOR+ random features m (default 256)"},
        {"seed", &R::seed, "Seed of the FAVOR+ projection (default 0)"},
        {"blocks", &R::blocks, "MHLA: M contiguous blocks (numpy.array_split order; default min(16, N))", {"chunk", "grid"}},
        {"chunk", &R::chunk, "MHLA: blocks of C consecutive tokens", {"grid"}},
        OptionDescriptor<R>{"grid", &R::grid, "MHLA: token grid G1,G2[,G3]"}.as_list(),
        OptionDescriptor<R>{"block-grid", &R::block_grid, "MHLA: blocks per grid axis B1,B2[,B3]"}.as_list(),
        {"token-order", &R::token_order, joined(attention::token_order_names(), " | ") + " (grid data; default raster)"},
        {"mixing", &R::mixing,
         joined(attention::mixing_presets(), " | ") + " | FILE[:DATASET] (default " + attention::default_mixing_text() + ")"},
        {"mixing-sigma", &R::mixing_sigma, "exp mixing: sigma (default 3)"},
        {"mixing-threshold", &R::mixing_threshold, "local mixing: threshold tau (default 1.5)"},
        {"normalize", &R::normalize,
         "MHLA: " + joined(attention::normalize_names(), " | ") + " (default row); decay, gated, cosformer: row | none"},
        {"decay", &R::decay, "decay: gamma in (0, 1] (default RetNet's 1 - 2^(-5 - h) for query head h)"},
        {"gates", &R::gates, "gated: the gates, one per token and head: FILE[:NAME] laid out like --q without its feature axis"},
        {"gates-log", &R::gates_log, "gated: --gates holds ln g (Mamba-2's dt * A), not g"},
    };
    return table;
}

const std::vector<OptionDescriptor<MetricRequest>>& metric_options()
{
    using R = MetricRequest;
    static const std::vector<OptionDescriptor<R>> table = {
        OptionDescriptor<R>{"metrics", &R::metrics, "What to compute: spectrum,entropy (default both)"}.as_list(),
        {"method", &R::method,
         "Singular values: auto | dense | structured | streaming (structured: exact from the factors of non-causal linear / "
         "MHLA; streaming: never N x N, top-k matrix-free for softmax; default auto: structured where cheaper)"},
        {"rank-rtol", &R::rank_rtol, "Rank tolerance relative to s_1 (default: NumPy's matrix_rank rule)"},
        {"top-k", &R::top_k, "Report only the k largest singular values"},
        {"row-entropy", &R::row_entropy, "Include every row's entropy"},
        {"past-split", &R::past_split, "Measure the past block A[h:N, 0:h] (default when causal: h = floor(N/2); h in 1..N-1)"},
        OptionDescriptor<R>{"past-splits", &R::past_splits,
                            "Semiseparable profile: the past block's rank at K evenly spaced splits plus every block "
                            "boundary, or at every split with 'all' (default when causal: 16)"}
            .as_list(),
    };
    return table;
}

const std::vector<OptionDescriptor<MemoryRequest>>& memory_options()
{
    using R = MemoryRequest;
    static const std::vector<OptionDescriptor<R>> table = {
        {"max-memory", &R::max_memory, "Refuse dense work above this size, e.g. 8G, 512M (default: half the RAM)"},
        {"threads", &R::threads,
         "Threads for products, SVDs and attention tiles: AttnScope's kernels and OpenBLAS (default: all cores)"},
    };
    return table;
}

std::uint64_t parse_memory_size(const std::string& text, const std::string& what)
{
    if (text.empty())
        return default_memory_limit();
    // The number (digits, a point, an exponent) and a unit; strict decimal, so "0x10G" and "nanG" are refused.
    std::size_t used = text.find_first_not_of("0123456789.eE+-");
    if (used == std::string::npos)
        used = text.size();
    const std::optional<double> number = parse_finite(std::string_view(text).substr(0, used));
    const double v = number.value_or(0.0);
    if (!number)
        used = 0;
    double mult = 1.0;
    const std::string suffix = text.substr(used);
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
        throw std::invalid_argument(what + " " + text + ": expected a size such as 8G, 512M or 1000000");
    return static_cast<std::uint64_t>(v * mult);
}

std::uint64_t memory_limit(const MemoryRequest& r, Spelling spelling)
{
    if (r.threads < 0 || r.threads > 1024)
        throw std::invalid_argument(option_name("threads", spelling) + " must lie in 0..1024 (0: all cores)");
    return parse_memory_size(r.max_memory, option_name("max-memory", spelling));
}

void apply_threads(const MemoryRequest& r, Spelling spelling, std::vector<std::string>& notes)
{
    int wanted = 0;   // OpenBLAS's own count
    if (r.threads > 0) {
        // More threads than cores only queue, and each OpenBLAS thread maps its own buffer: 32 threads under an
        // address-space limit (ulimit -v) made OpenBLAS retry a failing mmap forever.
        const int cores = kernels::usable_cores();
        if (r.threads > cores)
            notes.push_back(option_name("threads", spelling) + " " + std::to_string(r.threads) + " is more than the " +
                            std::to_string(cores) + " core" + (cores == 1 ? "" : "s") +
                            " this process may run on: using " + std::to_string(cores));
        wanted = static_cast<int>(std::min<std::int64_t>(r.threads, cores));
    }
    const int asked = wanted > 0 ? wanted : kernels::threads();
    if (const int used = kernels::reserve_blas_buffers(wanted); used < asked)
        notes.push_back("using " + std::to_string(used) + " thread" + (used == 1 ? "" : "s") +
                        ": the address-space limit (ulimit -v) leaves room for " + std::to_string(used) +
                        " of OpenBLAS's per-thread buffers");
}

io::AxisSelection resolve(const SelectionRequest& r, Spelling spelling)
{
    const auto name = [spelling](std::string_view n) { return option_name(n, spelling); };
    io::AxisSelection sel;
    sel.layout = r.layout;
    if (!r.at.empty()) {
        try {
            io::parse_at_units(r.at, sel.at, sel.all);
        } catch (const std::invalid_argument& e) {   // the selection names the concept, the caller its option
            throw std::invalid_argument(name("at").append(": ").append(e.what()));
        }
    }
    if (r.head) {
        const std::string head = name("head") + " " + std::to_string(*r.head);
        if (*r.head < 0)
            throw std::invalid_argument(head + " must be non-negative");
        if (sel.all.count('h'))
            throw std::invalid_argument(head + " contradicts " + name("at") + " h=all");
        const auto it = sel.at.find('h');
        if (it != sel.at.end() && it->second != *r.head)
            throw std::invalid_argument(head + " contradicts " + name("at") + " h=" + std::to_string(it->second));
        sel.at['h'] = *r.head;
    }
    if (r.prefix_tokens && *r.prefix_tokens < 0)
        throw std::invalid_argument(name("prefix-tokens") + " must be non-negative (got " + std::to_string(*r.prefix_tokens) + ")");
    sel.prefix_tokens = r.prefix_tokens.value_or(0);
    if (r.kv_head && *r.kv_head < 0)
        throw std::invalid_argument(name("kv-head") + " " + std::to_string(*r.kv_head) + " must be non-negative");
    sel.kv_head = r.kv_head;
    return sel;
}

attention::AttentionOptions resolve(const MechanismRequest& r, Spelling spelling)
{
    const auto name = [spelling](std::string_view n) { return option_name(n, spelling); };
    attention::AttentionOptions o;
    if (r.scale) {
        if (!std::isfinite(*r.scale))
            throw std::invalid_argument(name("scale") + " must be a finite number");
        o.scale = *r.scale;
    }
    o.causal = r.causal.value_or(false);
    o.decay.gamma = r.decay;
    o.gates.source = r.gates;
    o.gates.tensor = r.gates_tensor;
    o.gates.log = r.gates_log;
    o.feature_map.kind = attention::parse_feature_map(r.feature_map);
    if (r.favor_features < 1 || r.favor_features > 1'000'000)
        throw std::invalid_argument(name("favor-features") + " must lie in 1..1000000 (got " + std::to_string(r.favor_features) + ")");
    o.feature_map.favor_features = r.favor_features;
    if (r.seed < 0)
        throw std::invalid_argument(name("seed") + " " + std::to_string(r.seed) + " must be non-negative");
    o.feature_map.seed = static_cast<std::uint64_t>(r.seed);

    using Kind = attention::BlockSpec::Kind;
    if (r.blocks) {
        if (*r.blocks < 1)
            throw std::invalid_argument(name("blocks") + " must be at least 1 (got " + std::to_string(*r.blocks) + ")");
        o.blocks.kind = Kind::count;
        o.blocks.blocks = *r.blocks;
    } else if (r.chunk) {
        if (*r.chunk < 1)
            throw std::invalid_argument(name("chunk") + " must be at least 1 (got " + std::to_string(*r.chunk) + ")");
        o.blocks.kind = Kind::chunk;
        o.blocks.chunk = *r.chunk;
    } else if (!r.grid.empty() || !r.block_grid.empty()) {
        const std::string grid = name("grid"), block_grid = name("block-grid");
        if (r.grid.empty())
            throw std::invalid_argument(block_grid + " needs " + grid);
        // The token grid alone is what decay on a grid needs (docs/maths.md 1.8: Manhattan distances of the grid
        // positions in raster order); MHLA's blocks and the blocked order need the block grid too, which they say
        // when it is missing.
        o.blocks.kind = Kind::grid;
        o.blocks.grid = parse_sizes(r.grid, grid);
        if (!r.block_grid.empty())
            o.blocks.block_grid = parse_sizes(r.block_grid, block_grid);
        if (o.blocks.grid.size() < 2 || o.blocks.grid.size() > 3)
            throw std::invalid_argument(grid + " " + r.grid + ": give 2 or 3 sizes");
        if (!r.block_grid.empty() && o.blocks.block_grid.size() != o.blocks.grid.size())
            throw std::invalid_argument(block_grid + " " + r.block_grid + " must have as many sizes as " + grid + " " + r.grid);
        // The tokens are the grid's product: one that wraps around would pass for a small N (17 x
        // 4340410370284600384 wraps to 64, all tokens in one block).
        if (!checked_product(o.blocks.grid))
            throw std::invalid_argument(grid + " " + r.grid + ": the product of the sizes overflows (it must equal the tokens N)");
        if (!checked_product(o.blocks.block_grid))
            throw std::invalid_argument(block_grid + " " + r.block_grid + ": the product of the sizes overflows");
    }
    o.blocks.order = attention::parse_token_order(r.token_order);

    if (!(r.mixing_sigma > 0.0) || !std::isfinite(r.mixing_sigma))
        throw std::invalid_argument(name("mixing-sigma") + " must be a positive number");
    if (!(r.mixing_threshold >= 0.0) || !std::isfinite(r.mixing_threshold))
        throw std::invalid_argument(name("mixing-threshold") + " must be a non-negative number");
    o.mixing.sigma = r.mixing_sigma;
    o.mixing.threshold = r.mixing_threshold;
    if (!r.mixing.empty()) {
        o.mixing.preset = r.mixing;
        if (r.mixing_tensor && !attention::is_mixing_preset(r.mixing))
            load_mixing(o.mixing, *r.mixing_tensor, name("mixing"));
        else if (const auto ref = mixing_reference(r.mixing))
            load_mixing(o.mixing, *ref, name("mixing"));
    }
    o.normalize = attention::parse_normalize(r.normalize);
    return o;
}

std::optional<io::TensorRef> mixing_reference(std::string_view mixing)
{
    if (mixing.empty() || attention::is_mixing_preset(mixing))
        return std::nullopt;
    return io::parse_tensor_ref(mixing);
}

MetricOptions resolve(const MetricRequest& r, Spelling spelling)
{
    const auto name = [spelling](std::string_view n) { return option_name(n, spelling); };
    MetricOptions m;
    m.spectrum = false;
    m.entropy = false;
    for (const std::string& item : split_list(r.metrics)) {
        if (item == "spectrum")
            m.spectrum = true;
        else if (item == "entropy")
            m.entropy = true;
        else
            throw std::invalid_argument(name("metrics") + ": '" + item + "' is not one of spectrum, entropy");
    }
    if (r.rank_rtol) {
        if (!(*r.rank_rtol > 0.0 && *r.rank_rtol < 1.0))
            throw std::invalid_argument(name("rank-rtol") + " must lie in (0, 1)");
        m.rank_rtol = *r.rank_rtol;
    }
    if (r.top_k) {
        if (*r.top_k < 1)
            throw std::invalid_argument(name("top-k") + " must be at least 1 (got " + std::to_string(*r.top_k) + ")");
        m.top_k = *r.top_k;
    }
    m.method = parse_spectrum_method(r.method);
    m.row_entropy = r.row_entropy;
    if (r.past_split) {
        if (*r.past_split < 1)
            throw std::invalid_argument(name("past-split") + " must be at least 1 (got " + std::to_string(*r.past_split) + ")");
        m.past_split = static_cast<Index>(*r.past_split);
    }
    if (r.past_splits)
        m.past_splits = parse_past_splits(*r.past_splits, name("past-splits"));
    if (r.row_entropy && !m.entropy)
        throw std::invalid_argument(name("row-entropy") + " needs entropy in " + name("metrics"));
    return m;
}

ExplicitChoices explicit_choices(const SelectionRequest& selection, const MechanismRequest& mechanism)
{
    ExplicitChoices given;
    given.prefix_tokens = selection.prefix_tokens.has_value();
    given.causal = mechanism.causal.has_value();
    given.scale = mechanism.scale.has_value();
    given.blocks = mechanism.blocks || mechanism.chunk || !mechanism.grid.empty() || !mechanism.block_grid.empty();
    given.mixing = !mechanism.mixing.empty();
    given.gates = !mechanism.gates.empty();
    return given;
}

AnalysisSetup resolve_setup(const io::TensorRef& q_ref, const SelectionRequest& selection, const MechanismRequest& mechanism,
                            Spelling spelling, nlohmann::ordered_json* from_file)
{
    const FileDefaults defaults = read_file_defaults(q_ref);   // a missing file is the first error
    AnalysisSetup setup{resolve(selection, spelling), resolve(mechanism, spelling), explicit_choices(selection, mechanism)};
    nlohmann::ordered_json used = apply_file_defaults(defaults, q_ref, setup);
    if (from_file)
        *from_file = std::move(used);
    return setup;
}

ResolvedAnalysis resolve_analysis(const std::string& mechanisms, const AnalysisRequests& r, Spelling spelling)
{
    ResolvedAnalysis out;
    out.mechanisms = parse_mechanisms(mechanisms.empty() ? attention::default_mechanism_text() : mechanisms,
                                      option_name("mechanism", spelling));
    out.options = resolve(r.mechanism, spelling);
    out.given = explicit_choices(r.selection, r.mechanism);
    out.metrics = resolve(r.metrics, spelling);
    out.memory_limit = memory_limit(r.memory, spelling);
    io::set_read_limit_bytes(out.memory_limit);
    return out;
}

}  // namespace attnscope::analysis
