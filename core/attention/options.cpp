#include "attention/options.h"

#include <stdexcept>

#include "util/names.h"

namespace attnscope::attention {

namespace {

// One table per enum (the mechanisms' names live in their table, attention/mechanisms.cpp): the names are the
// command line's (docs/cli.md), in declaration order.
constexpr std::array<std::pair<FeatureMapKind, std::string_view>, 4> k_feature_maps{
    {{FeatureMapKind::relu, "relu"},
     {FeatureMapKind::elu1, "elu1"},
     {FeatureMapKind::identity, "identity"},
     {FeatureMapKind::favor, "favor"}}};
constexpr std::array<std::pair<Normalize, std::string_view>, 3> k_normalize{
    {{Normalize::row, "row"}, {Normalize::none, "none"}, {Normalize::official, "official"}}};
constexpr std::array<std::pair<TokenOrder, std::string_view>, 2> k_token_orders{
    {{TokenOrder::raster, "raster"}, {TokenOrder::blocked, "blocked"}}};

template <typename E, std::size_t N>
E parse_from(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view s, std::string_view what)
{
    for (const auto& [v, name] : table)
        if (name == s)
            return v;
    throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(s) + "' (valid: " +
                                joined(names_of(table)) + ")");
}

}  // namespace

std::vector<std::string_view> feature_map_names() { return names_of(k_feature_maps); }
std::vector<std::string_view> normalize_names() { return names_of(k_normalize); }
std::vector<std::string_view> token_order_names() { return names_of(k_token_orders); }

std::string_view to_string(FeatureMapKind f) { return name_of(k_feature_maps, f); }
std::string_view to_string(Normalize n) { return name_of(k_normalize, n); }
std::string_view to_string(TokenOrder o) { return name_of(k_token_orders, o); }

FeatureMapKind parse_feature_map(std::string_view s) { return parse_from(k_feature_maps, s, "feature map"); }
Normalize parse_normalize(std::string_view s) { return parse_from(k_normalize, s, "normalization"); }
TokenOrder parse_token_order(std::string_view s) { return parse_from(k_token_orders, s, "token order"); }

}  // namespace attnscope::attention
