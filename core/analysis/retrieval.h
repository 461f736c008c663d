#pragma once
// Retrieval mass (docs/maths.md 2.2; inputs with labels, e.g. associative recall): for each labelled query row t
// with target key position j*(t), retrieval_mass = mean_t A[t, j*(t)] and retrieval_rank = mean rank of A[t, j*(t)]
// among the row's allowed entries (1 = the largest; ties with the target count in its favour). The targets are the
// dataset `retrieval_targets` of the queries' file (docs/formats.md): (t, j*) pairs, [P, 2], or [B, P, 2] with the
// batch axis of the queries (the selection's b, default 0); positions count the file's tokens, so prefix tokens
// are taken off.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attention/operator.h"
#include "io/selection.h"

namespace attnscope::analysis {

struct RetrievalTargets {
    std::vector<std::pair<Eigen::Index, Eigen::Index>> pairs;   // (t, j*) in the analysed tokens
    Eigen::Index dropped = 0;    // pairs outside the analysed tokens (prefix tokens, a shorter N)
    std::string source;          // FILE:/retrieval_targets
};

struct Retrieval {
    double mass = 0, rank = 0;
    Eigen::Index count = 0;      // pairs measured
};

inline constexpr Eigen::Index k_max_retrieval_targets = Eigen::Index{1} << 20;

// The targets of the queries' file when it holds a dataset `retrieval_targets` (nothing otherwise), for n analysed
// tokens. Throws InputError for a dataset of the wrong shape, non-integer or negative positions, more than
// k_max_retrieval_targets pairs, a batch index it does not hold, or a target j* that a causal row t cannot see
// (j* > t when `causal`).
std::optional<RetrievalTargets> load_retrieval_targets(const io::TensorRef& q_ref, const io::AxisSelection& selection,
                                                       Eigen::Index n, bool causal);

// The measure on `op`: each distinct row t of the targets formed once (never N x N).
Retrieval measure_retrieval(const attention::AttentionOperator& op, const RetrievalTargets& targets);

}  // namespace attnscope::analysis
