#pragma once
// A block of independent standard normal draws, column by column from one stream: the start blocks of the
// randomized rank bracket (randomized.cpp) and the block Lanczos solver (topk.cpp).
#include <Eigen/Core>

#include "util/rng.h"

namespace attnscope::metrics {

inline Eigen::MatrixXd gaussian_block(SplitMix64& rng, Eigen::Index rows, Eigen::Index cols)
{
    Eigen::MatrixXd m(rows, cols);
    for (Eigen::Index j = 0; j < cols; ++j)
        for (Eigen::Index i = 0; i < rows; ++i)
            m(i, j) = rng.normal();
    return m;
}

}  // namespace attnscope::metrics
