#pragma once
// Row entropy of any attention operator without forming N x N: rows are materialised a tile at a time
// (AttentionOperator::dense_rows), O(tile N) memory, O(N^2 r) time (N^2 d for softmax).
#include <optional>

#include "attention/operator.h"
#include "metrics/metrics.h"

namespace attnscope::metrics {

struct StreamedEntropy {
    std::optional<EntropyStats> stats;   // absent when an entry is negative or not finite
    bool negative = false;               // some entry < 0 (entropy undefined)
    bool non_finite = false;             // some entry is NaN or infinite
};

// `tile_rows` rows at a time (default chosen so that a tile holds about 32 MiB).
StreamedEntropy streaming_row_entropy(const attention::AttentionOperator& op, Eigen::Index tile_rows = 0);

}  // namespace attnscope::metrics
