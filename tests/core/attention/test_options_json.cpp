// AttentionOptions to JSON and back (attention/options_json.h): every option survives the round trip, missing keys
// keep their defaults, wrong types and unknown names are errors naming the key.
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "attention/mechanisms.h"
#include "attention/options_json.h"

namespace {

using namespace attnscope::attention;

TEST(OptionsJson, EveryOptionSurvivesTheRoundTrip)
{
    AttentionOptions o;
    o.scale = 0.3;
    o.causal = true;
    o.feature_map.kind = FeatureMapKind::favor;
    o.feature_map.favor_features = 17;
    o.feature_map.seed = 9;
    o.blocks.kind = BlockSpec::Kind::grid;
    o.blocks.grid = {8, 8};
    o.blocks.block_grid = {2, 4};
    o.blocks.order = TokenOrder::blocked;
    o.blocks.blocks = 3;
    o.blocks.chunk = 5;
    o.mixing.preset = "exp";
    o.mixing.sigma = 1.25;
    o.mixing.threshold = 2.5;
    o.normalize = Normalize::none;
    o.decay.gamma = 0.75;
    o.gates.source = "acts.h5:/g";
    o.gates.log = true;
    const auto j = options_to_json(o);
    const AttentionOptions back = options_from_json(nlohmann::json::parse(j.dump()));
    EXPECT_EQ(options_to_json(back), j);
    EXPECT_EQ(back.scale, o.scale);
    EXPECT_EQ(back.blocks.block_grid, o.blocks.block_grid);
    EXPECT_EQ(back.decay.gamma, o.decay.gamma);
    EXPECT_EQ(back.gates.source, o.gates.source);
    // Defaults: an empty object is the default options, and they round-trip too.
    EXPECT_EQ(options_to_json(options_from_json(nlohmann::json::object())), options_to_json(AttentionOptions{}));
    EXPECT_FALSE(options_from_json(options_to_json(AttentionOptions{})).decay.gamma.has_value());
}

TEST(OptionsJson, BadValuesNameTheirKey)
{
    const auto message = [](const nlohmann::json& j) {
        try {
            (void)options_from_json(j);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    EXPECT_NE(message({{"causal", "yes"}}).find("causal"), std::string::npos);
    EXPECT_NE(message({{"feature_map", "tanh"}}).find("tanh"), std::string::npos);
    EXPECT_NE(message({{"block_mode", "rings"}}).find("block_mode"), std::string::npos);
    EXPECT_NE(message({{"grid", "8x8"}}).find("grid"), std::string::npos);
    EXPECT_NE(message(nlohmann::json::array()).find("not a JSON object"), std::string::npos);
}

}  // namespace
