#pragma once
// Mixing matrices Mc (M x M, non-negative) of attention.md 1.6.
#include <Eigen/Core>

#include "attention/blocks.h"
#include "attention/options.h"

namespace attnscope::attention {

// The preset's name after defaults ("cos", or "causal" when causal); "file" for a loaded matrix.
std::string resolved_mixing_name(const MixingSpec& spec, bool causal);

// Builds Mc for `layout`. A loaded matrix must be M x M, finite and non-negative (std::invalid_argument
// otherwise). With M = 1 every preset is [[1]].
Eigen::MatrixXd make_mixing(const MixingSpec& spec, const BlockLayout& layout, bool causal);

}  // namespace attnscope::attention
