#pragma once
// Random matrices from AttnScope's own SplitMix64 generator (core/util/rng.h, reproducible in NumPy by
// tests/reference/attnref.py). Header-only and free of GoogleTest, so that bench/ can use it as well.
#include <cstdint>

#include <Eigen/Core>

#include "util/rng.h"

namespace attnscope::test {

// rows x cols of standard normal draws SplitMix64(seed).normal(), filled row by row or column by
// column: the same seed gives different matrices.
inline Eigen::MatrixXd splitmix_normal(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, bool row_by_row)
{
    SplitMix64 rng(seed);
    Eigen::MatrixXd m(rows, cols);
    const Eigen::Index outer = row_by_row ? rows : cols, inner = row_by_row ? cols : rows;
    for (Eigen::Index a = 0; a < outer; ++a)
        for (Eigen::Index b = 0; b < inner; ++b)
            (row_by_row ? m(a, b) : m(b, a)) = rng.normal();
    return m;
}

inline Eigen::MatrixXd splitmix_rowwise(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed)
{
    return splitmix_normal(rows, cols, seed, true);
}

inline Eigen::MatrixXd splitmix_colwise(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed)
{
    return splitmix_normal(rows, cols, seed, false);
}

}  // namespace attnscope::test
