#pragma once
// Mixing matrices Mc (M x M, non-negative) of docs/maths.md 1.6.
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "attention/blocks.h"
#include "attention/options.h"

namespace attnscope::attention {

// The preset names of --mixing, in the order the docs list them.
const std::vector<std::string_view>& mixing_presets();
// True when `text` names a preset rather than a file.
bool is_mixing_preset(std::string_view text);

// The preset's name after defaults ("cos", or "causal-local" when causal); "file" for a loaded matrix.
std::string resolved_mixing_name(const MixingSpec& spec, bool causal);

// Builds Mc for `layout`. A loaded matrix must be M x M, finite and non-negative (std::invalid_argument
// otherwise). With M = 1 every preset is [[1]].
Eigen::MatrixXd make_mixing(const MixingSpec& spec, const BlockLayout& layout, bool causal);

}  // namespace attnscope::attention
