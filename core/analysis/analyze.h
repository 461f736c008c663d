#pragma once
// The analyze pipeline: Q, K -> one attention operator per mechanism -> measure() -> result.
// Pure core (no Qt, no I/O); the command line, sweeps and batches call it and serialise its result with
// result_json() into the schema of docs/cli.md ("analyze JSON").
#include <cstdint>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/job.h"
#include "analysis/measure.h"
#include "analysis/retrieval.h"
#include "attention/options.h"

namespace attnscope::analysis {

// Q, K  N by d, one token per row. Throws std::invalid_argument for impossible options and InputError
// when the dense work would exceed `memory_limit` bytes. Linear and MHLA share one pass over their raw
// scores for the entropy when both stream it (non-causal).
// With `ctx` (sweeps in the desktop app), measure()'s stages report progress through it and cancellation
// (JobCancelled) is checked between mechanisms, between row tiles and between the SVD's panels; the
// numbers are the same as without it (the same computations, only observed). With `values` (N x d_v), each
// result also has its output (measure_output); with `targets`, its retrieval mass and rank (analysis/retrieval.h).
std::vector<MechanismResult> analyze(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K,
                                     const std::vector<attention::Mechanism>& mechanisms,
                                     const attention::AttentionOptions& options, const MetricOptions& metric_options,
                                     std::uint64_t memory_limit, const JobContext* ctx = nullptr,
                                     const Eigen::MatrixXd* values = nullptr, const RetrievalTargets* targets = nullptr);

// docs/maths.md 2.2's output: rank, effective rank and energy rank 99% of A V (N x d_v, from the operator's
// products, never A) into r.output (r.output_asked set); a warning when A V is not finite.
void measure_output(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd& values,
                    std::optional<double> rank_rtol);

// The document's "distance" (docs/maths.md 2.2): for every ordered pair of distinct mechanisms a, b (request order)
// distance[a][b] = {tv, js, rel_frobenius} of their matrices on the same Q, K, each pair's rows formed a tile at
// a time, with "why" where a field is null. Empty with fewer than two mechanisms or without the entropy in
// `metric_options` (the row measures go with it). Throws like analyze().
nlohmann::ordered_json distance_json(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K,
                                     const std::vector<attention::Mechanism>& mechanisms,
                                     const attention::AttentionOptions& options, const MetricOptions& metric_options,
                                     std::uint64_t memory_limit, const JobContext* ctx = nullptr);

// One element of "results" in the analyze JSON.
nlohmann::ordered_json result_json(const MechanismResult& result, const MetricOptions& metric_options);
// The result's "past_profile": {h, rows, cols, rank, energy_rank_99} per split, or null.
nlohmann::ordered_json past_profile_json(const MechanismResult& result);
// The kernels this run used (docs/cli.md, "AttnScope's additions"): instruction set, threads, OpenBLAS's
// core, and which library ran each class of matrix product when a large one ran.
nlohmann::ordered_json kernels_json();

}  // namespace attnscope::analysis
