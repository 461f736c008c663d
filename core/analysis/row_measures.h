#pragma once
// Measures of docs/maths.md 2.2 read from the scores or the rows of an attention operator, never from N x N at
// once: the logit norm (Zhai et al. 2023) from the d x d factors, locality (the ViT paper's mean attention
// distance and the mass within a radius) and the distance between two mechanisms' rows on the same q, k, both
// from rows formed a tile at a time (O(N^2 r) time, O(tile N) memory).
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attention/operator.h"
#include "attention/options.h"

namespace attnscope::analysis {

using Index = Eigen::Index;

// The largest singular value of the scores before the mask and the normalisation: scale Q K^T (softmax) or
// Phi_Q Phi_K^T (every kernel mechanism: its feature rows; cosformer's carry its cos/sin weights, MHLA's no
// mixing, decay's and gated's no weights), from thin QRs of both sides and the SVD of a d x d (r x r) core.
// Null when the operator has neither (never for the built-in mechanisms).
std::optional<double> logit_norm(const attention::AttentionOperator& op);

// Token distances (docs/maths.md 2.2): |t - j| in 1-D; with a token grid (options.blocks of kind grid) the
// Euclidean distance of the two tokens' grid positions, in tokens (attention::grid_positions).
class TokenDistance {
public:
    TokenDistance(const attention::AttentionOptions& options, Index n);
    // The squared distance, an integer.
    Index squared(Index t, Index j) const;
    bool on_grid() const { return !m_positions.empty(); }

private:
    std::vector<std::vector<Index>> m_positions;   // per axis, N coordinates (empty: 1-D)
};

// mean_distance = mean over rows of sum_j A[t,j] dist(t,j); mass_within = (r, mean over rows of the mass at
// dist <= r) for r = 1, 2, 4, ... < N. Null with `why` when a row has a negative entry.
struct Locality {
    double mean_distance = 0;
    std::vector<std::pair<Index, double>> mass_within;
};
// `keep_going` is asked between row tiles (false: stop; the result is then null with an empty `why`).
// `formed`, when given, is the N x N matrix of `op` (its rows are read instead of formed again).
std::optional<Locality> locality(const attention::AttentionOperator& op, const TokenDistance& distance, std::string& why,
                                 const Eigen::MatrixXd* formed = nullptr, const std::function<bool()>& keep_going = {});

// The distance between two mechanisms' matrices on the same q, k (docs/maths.md 2.2): tv = mean over rows of
// 0.5 sum_j |A_a - A_b|, js = mean over rows of the Jensen-Shannon divergence (nats), both only when every row
// of both is a probability distribution (entries >= 0, sum 1 within 1e-9; else null and `why` says which row),
// and rel_frobenius = ||A_a - A_b||_F / ||A_b||_F (null when A_b = 0).
struct MechanismDistance {
    std::optional<double> tv, js, rel_frobenius;
    std::optional<double> rel_frobenius_reverse;   // ||A_a - A_b||_F / ||A_a||_F: distance[b][a]'s
    std::string why;
};
MechanismDistance mechanism_distance(const attention::AttentionOperator& a, const attention::AttentionOperator& b,
                                     const std::function<bool()>& keep_going = {});

// Rows per tile of an N-column operator: at most 256, and at most 2^22 entries.
Index row_tile(Index n);

}  // namespace attnscope::analysis
