#pragma once
// Token blocks of docs/maths.md 1.5: 1-D counts (numpy.array_split order), 1-D chunks, and 2-D / 3-D
// grids in raster or blocked token order.
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attention/options.h"

namespace attnscope::attention {

struct BlockLayout {
    Index num_tokens = 0;
    Index num_blocks = 0;                         // M
    std::vector<Index> block_of_token;            // N entries in 0..M-1
    std::vector<std::vector<Index>> tokens;       // per block, token indices ascending
    Eigen::MatrixXd centres;                      // M by (1, 2 or 3): block-grid coordinates + 0.5
    std::vector<Index> block_grid;                // blocks per axis ({M} for 1-D)
    bool equal_sizes() const;
};

// Throws std::invalid_argument naming the violated condition ("blocks M=300 exceeds tokens N=196",
// "grid 14x14 has 196 tokens but N=197", "grid axis 1: 14 % 3 != 0").
BlockLayout make_blocks(const BlockSpec& spec, Index n);

// One block holding all N tokens (linear attention and the families without blocks).
BlockLayout one_block(Index n);
// "8x8": a grid's sizes as messages write them.
std::string join_dims(const std::vector<Index>& v);

}  // namespace attnscope::attention
