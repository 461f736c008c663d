#pragma once
// Mixing matrices Mc (M x M) of docs/maths.md 1.6: presets are non-negative, a learned Mc may be signed (1.4).
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

// The default preset (docs/maths.md 1.6): "causal-local" when causal; otherwise "cos" on a block grid (the
// authors' initialisation) and "exp" on 1-D blocks, where cos of a difference has rank 2 and would cap MHLA's
// rank at 2r whatever the data. The one place that knows it.
std::string_view default_mixing_name(bool causal, bool grid);
// The rule in words for help texts and tooltips: "exp on 1-D blocks, cos on a block grid, causal-local when causal".
std::string default_mixing_text();
// The preset's name after defaults (default_mixing_name); "file" for a loaded matrix. `grid`: the blocks are
// a block grid (BlockSpec::Kind::grid), not 1-D blocks.
std::string resolved_mixing_name(const MixingSpec& spec, bool causal, bool grid);

// True when a learned matrix has a negative entry (then A may have negative entries, and a row normaliser <= 0
// makes the matrix undefined: docs/maths.md 1.4).
bool signed_mixing(const Eigen::MatrixXd& mixing);

// Builds Mc for `layout`. A loaded matrix must be M x M and finite (std::invalid_argument otherwise); it may have
// negative entries (docs/maths.md 1.4: the authors' vision code puts no sign constraint on Mc). With M = 1 every
// preset is [[1]].
Eigen::MatrixXd make_mixing(const MixingSpec& spec, const BlockLayout& layout, bool causal);

}  // namespace attnscope::attention
