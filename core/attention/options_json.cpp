#include "attention/options_json.h"

#include <stdexcept>
#include <string>

#include "util/names.h"

namespace attnscope::attention {

namespace {

using json = nlohmann::json;

constexpr NameTable<BlockSpec::Kind, 3> k_block_kinds{
    {{BlockSpec::Kind::count, "count"}, {BlockSpec::Kind::chunk, "chunk"}, {BlockSpec::Kind::grid, "grid"}}};

template <class T>
T get(const json& j, const char* key, T fallback)
{
    const auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return fallback;
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        throw std::invalid_argument(std::string("attention options: \"") + key + "\" has the wrong type");
    }
}

template <class T>
std::optional<T> get_optional(const json& j, const char* key)
{
    const auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return std::nullopt;
    return get<T>(j, key, T{});
}

}  // namespace

nlohmann::ordered_json options_to_json(const AttentionOptions& o)
{
    nlohmann::ordered_json j;
    j["scale"] = o.scale ? nlohmann::ordered_json(*o.scale) : nlohmann::ordered_json(nullptr);
    j["causal"] = o.causal;
    j["feature_map"] = std::string(to_string(o.feature_map.kind));
    j["favor_features"] = o.feature_map.favor_features;
    j["seed"] = o.feature_map.seed;
    j["block_mode"] = std::string(name_of(k_block_kinds, o.blocks.kind));
    j["blocks"] = o.blocks.blocks;
    j["chunk"] = o.blocks.chunk;
    j["grid"] = o.blocks.grid;
    j["block_grid"] = o.blocks.block_grid;
    j["token_order"] = std::string(to_string(o.blocks.order));
    j["mixing"] = o.mixing.preset;
    j["mixing_sigma"] = o.mixing.sigma;
    j["mixing_threshold"] = o.mixing.threshold;
    j["normalize"] = std::string(to_string(o.normalize));
    j["decay"] = o.decay.gamma ? nlohmann::ordered_json(*o.decay.gamma) : nlohmann::ordered_json(nullptr);
    j["gates"] = o.gates.source;
    j["gates_log"] = o.gates.log;
    return j;
}

AttentionOptions options_from_json(const nlohmann::json& j)
{
    if (!j.is_object())
        throw std::invalid_argument("attention options: not a JSON object");
    AttentionOptions o;
    o.scale = get_optional<double>(j, "scale");
    o.causal = get<bool>(j, "causal", false);
    o.feature_map.kind = parse_feature_map(get<std::string>(j, "feature_map", "relu"));
    o.feature_map.favor_features = get<Index>(j, "favor_features", o.feature_map.favor_features);
    o.feature_map.seed = get<std::uint64_t>(j, "seed", 0);
    o.blocks.kind = value_named(k_block_kinds, get<std::string>(j, "block_mode", "count"), "attention options: block_mode");
    o.blocks.blocks = get<Index>(j, "blocks", 0);
    o.blocks.chunk = get<Index>(j, "chunk", 0);
    o.blocks.grid = get<std::vector<Index>>(j, "grid", {});
    o.blocks.block_grid = get<std::vector<Index>>(j, "block_grid", {});
    o.blocks.order = parse_token_order(get<std::string>(j, "token_order", "raster"));
    o.mixing.preset = get<std::string>(j, "mixing", "");
    o.mixing.sigma = get<double>(j, "mixing_sigma", o.mixing.sigma);
    o.mixing.threshold = get<double>(j, "mixing_threshold", o.mixing.threshold);
    o.normalize = parse_normalize(get<std::string>(j, "normalize", "row"));
    o.decay.gamma = get_optional<double>(j, "decay");
    o.gates.source = get<std::string>(j, "gates", "");
    o.gates.log = get<bool>(j, "gates_log", false);
    return o;
}

}  // namespace attnscope::attention
