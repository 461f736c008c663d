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
#include "metrics/semiseparable.h"
#include "metrics/structured.h"

namespace attnscope::analysis {

// |S_t| for every row t: the keys the causal rule allows, and for a blocked mechanism only those with
// Mc[blk(t), blk(j)] != 0. In O(N M) from the block sizes, never N x N.
std::vector<Index> support_sizes(const attention::AttentionOperator& op);

// A0 of `op`: every phi(q_t) . phi(k_j) replaced by 1 (Q0 = K0 = ones(N, 1) under the identity feature map),
// on the same mask, blocks, Mc, decay, gates and normalisation (`options`: those `op` was built with). Softmax's
// A0 (every score replaced by one constant: 1 / n_t on the mask) is built as linear attention on those ones, so
// it has factors. Throws std::invalid_argument when the operator cannot be built.
// `built_with`, when given, receives the options A0 was built with.
std::unique_ptr<attention::AttentionOperator> make_baseline_operator(const attention::AttentionOperator& op,
                                                                     const attention::AttentionOptions& options,
                                                                     attention::AttentionOptions* built_with = nullptr);

// From this N on the baseline and the past block use the operator's structure where it has some (below, the
// dense SVDs cost well under a second and give the numbers they always gave): the causal averaging baseline
// (softmax, linear) by the bidiagonal inverse of metrics::causal_averaging_singular_values, the past block of
// every mechanism with factors (past_block_factors below) by metrics::block_factor_singular_values.
// Both agree with the dense SVD to ~1e-13 of s_1 (tests/core/analysis/test_baseline_cache.cpp).
inline constexpr Index k_structured_mask_measures_from = 1024;

// The past split h of an N-token analysis: `given`, or floor(N/2) when causal; none when neither. Throws
// std::invalid_argument when a given h lies outside 1..N-1.
std::optional<Index> past_split_of(bool causal, std::optional<Index> given, Index n);

// The past block of `op` into r.past_block (r.past_block_asked set), and its semiseparable profile into
// r.past_profile (below); both when past_measures_asked. The past block: from the operator's factors when it has
// them and N >= k_structured_mask_measures_from; else taken from `A` when the matrix is formed, else formed row
// by row from the operator when it fits request.memory_limit, else null with a warning.
void measure_past_block(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                        const MeasureRequest& request, StageProgress* progress);

// The baseline A0 of `op` measured as `request` asks of A (no row entropies, no past block) into r.baseline;
// null with a warning when A0 is not defined (a row normaliser <= 0 with a signed Mc) or not computable.
// Measured once per setting in the process (analysis/baseline_cache.h); the causal averaging baseline from
// N = k_structured_mask_measures_from on without the dense SVD.
void measure_baseline(MechanismResult& r, const attention::AttentionOperator& op,
                      const attention::AttentionOptions& options, const MeasureRequest& request,
                      StageProgress* progress);

// measure() of `op` on the dense path (no kept matrix) when every singular value is known from its structure
// (`values`, e.g. metrics::causal_averaging_singular_values): the matrix is never formed whole; its rows are
// formed 256 at a time for the entropy (the tiles, and so the numbers, of the formed matrix), and the spectrum's
// metrics come from `values`. Defined in measure.cpp, next to the tiled entropy it shares.
Measurement measure_with_known_values(const attention::AttentionOperator& op, const attention::AttentionOptions& options,
                                      const MeasureRequest& request, const std::vector<double>& values,
                                      StageProgress* progress);

// The past block A[h:N, 0:h] (1 <= h <= N-1, every entry there allowed by the causal rule) as factors
// (metrics::BlockFactorization), where the operator has them: every kernel operator (linear, MHLA, cosformer;
// causal or not: with the mask only Mc[a, b] with b <= a reaches the block, since j < h <= t), decay and gated
// (their weight splits at h: w(t, j) = w(t, h) w(h, j)), except non-causal decay on a grid. Else nothing
// (softmax). Throws std::invalid_argument for h outside 1..N-1.
std::optional<metrics::BlockFactorization> past_block_factors(const attention::AttentionOperator& op, Index h);

// The past blocks of `op` as metrics::SplitFactors (the profile's factors): every kernel operator, decay and
// gated with their per-token weights, except non-causal decay on a grid; else nothing (softmax).
std::optional<metrics::SplitFactors> split_factors(const attention::AttentionOperator& op);

// The relative cost of the past block's stage (measure_weight's units).
double past_block_weight(Index n);

}  // namespace attnscope::analysis
