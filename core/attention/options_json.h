#pragma once
// AttentionOptions as JSON, both ways: the one serialisation of the mechanism options (docs/cli.md names), used
// where a run's options are stored and read back (a sweep's spec). A loaded mixing matrix and gate values are data,
// not options: their sources (mixing preset or FILE[:DATASET], gates FILE[:NAME]) are written, not the numbers.
#include <nlohmann/json.hpp>

#include "attention/options.h"

namespace attnscope::attention {

nlohmann::ordered_json options_to_json(const AttentionOptions& options);
// Missing keys keep their defaults; a key of the wrong type or an unknown name throws std::invalid_argument
// naming the key.
AttentionOptions options_from_json(const nlohmann::json& j);

}  // namespace attnscope::attention
