#pragma once
// Row entropies of any attention operator without forming N x N: softmax by a running log-sum-exp over key
// chunks (SoftmaxPieces), linear / MHLA from their kernel pieces (one pass over the raw scores gives the
// per-(row, key block) sums every mixing and normalisation follows from), anything else through
// dense_rows() in tiles. O(N d) memory, O(N^2 r) time (N^2 d for softmax), vectorised and on the
// --threads threads (core/kernels).
#include <optional>
#include <vector>

#include "attention/operator.h"
#include "metrics/metrics.h"

namespace attnscope::metrics {

// H_t of every row, or why they do not exist.
struct RowEntropies {
    EntropyStatus status = EntropyStatus::ok;
    std::vector<double> rows;   // N entries when status is ok
};

// Every row entropy of `op` (0 ln 0 = 0). With tile_rows > 0, rows are materialised that many at a time
// through dense_rows() instead (the generic path, O(tile_rows N) memory), which tests compare with the
// default; tile_rows = 0 picks the operator's own fast path.
RowEntropies streamed_row_entropies(const attention::AttentionOperator& op, Eigen::Index tile_rows = 0);

// For token t and key block b of `pieces`, P(t, b) = sum_j g_tj and R(t, b) = sum_j g_tj ln g_tj over the
// keys j of block b allowed to t, with g_tj = phi_q(t) . phi_k(j) the raw scores (no mixing, no
// normalisation): N x M each. Status negative when a score is < 0, non_finite when one is not finite.
struct KernelBlockSums {
    EntropyStatus status = EntropyStatus::ok;
    Eigen::MatrixXd P, R;
};
KernelBlockSums kernel_block_sums(const attention::KernelFactors& pieces);

// The row entropies of the operator with these kernel pieces from block sums over its own blocks, or, for
// one-block (linear, non-causal) pieces, from the finer sums of another operator over the same tokens and
// feature map (linear and MHLA share one pass: a non-causal linear row has H = ln z - (1/z) sum_b R,
// z = sum_b P). Throws std::invalid_argument when the sums do not fit the pieces.
RowEntropies row_entropies_from_block_sums(const attention::KernelFactors& pieces, const KernelBlockSums& sums);

struct StreamedEntropy {
    EntropyStatus status = EntropyStatus::ok;
    std::optional<EntropyStats> stats;   // present when status is ok
};

// The statistics of row entropies computed ahead (-0 becomes 0), with n_t = `allowed`.
StreamedEntropy entropy_statistics(RowEntropies h, const std::vector<Eigen::Index>& allowed);

// streamed_row_entropies() and their statistics.
StreamedEntropy streaming_row_entropy(const attention::AttentionOperator& op, Eigen::Index tile_rows = 0);

}  // namespace attnscope::metrics
