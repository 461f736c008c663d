#pragma once
// Test-side helper: AttentionOptions from the option dicts written by make_cases.py (names as docs/cli.md,
// '-' written '_'), and the shared comparison of two matrices.
#include <string>

#include <nlohmann/json.hpp>

#include "attention/options.h"
#include "support/test_support.h"

namespace attnscope::test {

inline attention::AttentionOptions options_from_json(const nlohmann::json& o, const std::string& dir)
{
    using namespace attention;
    AttentionOptions opt;
    if (!o.at("scale").is_null())
        opt.scale = o.at("scale").get<double>();
    opt.causal = o.at("causal").get<bool>();
    opt.feature_map.kind = parse_feature_map(o.at("feature_map").get<std::string>());
    opt.feature_map.favor_features = o.at("favor_features").get<Index>();
    opt.feature_map.seed = o.at("seed").get<std::uint64_t>();
    if (!o.at("grid").is_null()) {
        opt.blocks.kind = BlockSpec::Kind::grid;
        opt.blocks.grid = o.at("grid").get<std::vector<Index>>();
        opt.blocks.block_grid = o.at("block_grid").get<std::vector<Index>>();
    } else if (!o.at("chunk").is_null()) {
        opt.blocks.kind = BlockSpec::Kind::chunk;
        opt.blocks.chunk = o.at("chunk").get<Index>();
    } else {
        opt.blocks.kind = BlockSpec::Kind::count;
        opt.blocks.blocks = o.at("blocks").is_null() ? 0 : o.at("blocks").get<Index>();
    }
    opt.blocks.order = parse_token_order(o.at("token_order").get<std::string>());
    if (!o.at("mixing").is_null())
        opt.mixing.preset = o.at("mixing").get<std::string>();
    opt.mixing.sigma = o.at("mixing_sigma").get<double>();
    opt.mixing.threshold = o.at("mixing_threshold").get<double>();
    if (!o.at("mixing_matrix").is_null())
        opt.mixing.matrix = read_npy_simple(dir + "/" + o.at("mixing_matrix").get<std::string>());
    opt.normalize = parse_normalize(o.at("normalize").get<std::string>());
    return opt;
}

}  // namespace attnscope::test
