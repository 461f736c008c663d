#pragma once
// Row entropy of any attention operator without forming N x N (AttentionOperator::row_entropies): softmax
// by a running log-sum-exp over key chunks, linear / MHLA from their factors, O(N d) memory, O(N^2 r) time
// (N^2 d for softmax), vectorised and on the --threads threads (core/kernels).
#include <optional>

#include "attention/operator.h"
#include "metrics/metrics.h"

namespace attnscope::metrics {

struct StreamedEntropy {
    std::optional<EntropyStats> stats;   // absent when an entry is negative or not finite
    bool negative = false;               // some entry < 0 (entropy undefined)
    bool non_finite = false;             // some entry is NaN or infinite
};

// With tile_rows > 0, rows are materialised that many at a time through dense_rows() instead (the generic
// path, O(tile_rows N) memory), which tests compare with the default.
StreamedEntropy streaming_row_entropy(const attention::AttentionOperator& op, Eigen::Index tile_rows = 0);

}  // namespace attnscope::metrics
