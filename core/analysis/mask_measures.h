#pragma once
// The measures of docs/maths.md 2.2 that separate what the model learned from what the mask, the tolerance
// and the defaults impose: the support S_t of each row, the content-free baseline A0 (the same operator on
// inputs without content, measured by measure() like A, so it takes the same spectrum paths: structured for
// non-causal kernel mechanisms, streamed entropy without N x N) and the past block A[h:N, 0:h].
// measure() calls these; they write into its MechanismResult and add a warning for what they cannot give.
#include <memory>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "analysis/measure.h"

namespace attnscope::analysis {

// |S_t| for every row t: the keys the causal rule allows, and for a blocked mechanism only those with
// Mc[blk(t), blk(j)] != 0. In O(N M) from the block sizes, never N x N.
std::vector<Index> support_sizes(const attention::AttentionOperator& op);

// A0 of `op`: every phi(q_t) . phi(k_j) replaced by 1 (Q0 = K0 = ones(N, 1) under the identity feature map),
// on the same mask, blocks, Mc, decay, gates and normalisation (`options`: those `op` was built with). Softmax's
// A0 (every score replaced by one constant: 1 / n_t on the mask) is built as linear attention on those ones, so
// it has factors. Throws std::invalid_argument when the operator cannot be built.
std::unique_ptr<attention::AttentionOperator> make_baseline_operator(const attention::AttentionOperator& op,
                                                                     const attention::AttentionOptions& options);

// The past split h of an N-token analysis: `given`, or floor(N/2) when causal; none when neither. Throws
// std::invalid_argument when a given h lies outside 1..N-1.
std::optional<Index> past_split_of(bool causal, std::optional<Index> given, Index n);

// The past block of `op` into r.past_block (r.past_block_asked set): taken from `A` when the matrix is formed,
// else formed row by row from the operator when it fits request.memory_limit, else null with a warning.
void measure_past_block(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                        const MeasureRequest& request, StageProgress* progress);

// The baseline A0 of `op` measured as `request` asks of A (no row entropies, no past block) into r.baseline;
// null with a warning when A0 is not defined (a row normaliser <= 0 with a signed Mc) or not computable.
void measure_baseline(MechanismResult& r, const attention::AttentionOperator& op,
                      const attention::AttentionOptions& options, const MeasureRequest& request,
                      StageProgress* progress);

// The relative cost of the past block's stage (measure_weight's units).
double past_block_weight(Index n);

}  // namespace attnscope::analysis
