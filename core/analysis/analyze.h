#pragma once
// The analyze pipeline: Q, K -> one attention operator per mechanism -> metrics -> result.
// Pure core (no Qt, no I/O); the command line and the GUI both call it and serialise its result
// with result_json() into the schema of ../shared/spec/cli.md ("analyze JSON").
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "attention/operator.h"
#include "attention/options.h"
#include "metrics/metrics.h"
#include "metrics/randomized.h"

namespace attnscope::analysis {

using Index = Eigen::Index;

// How the singular values are computed: `dense` (dgesdd on the N x N matrix), `structured` (exact, from
// the low-rank factors of non-causal linear / MHLA, metrics/structured.h), `streaming` (never form
// N x N: structured where exact, else only the --top-k largest, matrix-free, metrics/topk.h), `auto`
// (structured where it is cheaper; dense when it fits the memory limit; else the streaming choice).
enum class SpectrumMethod { automatic, dense, structured, streaming };

// The computation chosen for one operator's spectrum.
// `randomized`: no N x N and no factors, but --rank-rtol given: the rank bracketed by the adaptive
// randomized range finder (metrics/randomized.h), plus the --top-k largest values when asked for.
enum class SpectrumPath { none, dense, structured, top_k, randomized };
std::string_view to_string(SpectrumMethod m);
SpectrumMethod parse_spectrum_method(std::string_view s);   // throws std::invalid_argument

struct MetricOptions {
    SpectrumMethod method = SpectrumMethod::automatic;
    bool spectrum = true;               // singular values and the ranks
    bool entropy = true;                // row-entropy statistics
    std::optional<double> rank_rtol;    // tol = rtol * s_1 instead of the NumPy rule
    std::optional<Index> top_k;         // report only the k largest singular values
    bool row_entropy = false;           // include every row's entropy
};

struct MechanismResult {
    attention::Mechanism mechanism = attention::Mechanism::softmax;
    nlohmann::ordered_json params;                      // every parameter that shaped the matrix, resolved
    std::optional<metrics::SpectrumMetrics> spectrum;   // absent when not requested or not computable
    std::optional<metrics::EntropyStats> entropy;       // absent when not requested or undefined
    std::vector<std::string> warnings;
    std::string spectrum_method;                        // "dense", "structured" or "top-k" (empty: no spectrum)
    bool partial_spectrum = false;                      // only the top-k singular values are known (no ranks)
    std::string entropy_method;                         // "dense" or "streaming" (empty: no entropy)
    std::optional<metrics::RandomizedRank> rank_bracket;   // SpectrumPath::randomized: what the range finder proved
};

// Bytes a dense analysis of N tokens needs at its peak (the matrix, the SVD's copy and LAPACK's work).
std::uint64_t dense_memory_bytes(Index n);
// Half the machine's physical memory: the default --max-memory.
std::uint64_t default_memory_limit();

// The parameters recorded for `mechanism` (resolved defaults: scale, blocks M, mixing name ...).
// Throws std::invalid_argument for impossible options.
nlohmann::ordered_json mechanism_params(attention::Mechanism mechanism, const attention::AttentionOptions& options,
                                        Index n, Index d);

// Q, K  N by d, one token per row. Throws std::invalid_argument for impossible options and InputError
// when the dense work would exceed `memory_limit` bytes.
std::vector<MechanismResult> analyze(const Eigen::Ref<const Eigen::MatrixXd>& Q, const Eigen::Ref<const Eigen::MatrixXd>& K,
                                     const std::vector<attention::Mechanism>& mechanisms,
                                     const attention::AttentionOptions& options, const MetricOptions& metric_options,
                                     std::uint64_t memory_limit);

// Measures the attention matrix A of `op` into r (entropy unless undefined, then the spectrum by the
// method chosen), adding warnings for what cannot be computed. A dense SVD destroys A when `consume` is
// true, else works on a copy. Throws std::invalid_argument when --method structured meets an operator
// without factors (softmax, causal).
// With A null, entropy streams (metrics/streaming.h) and a dense spectrum is impossible.
// Row entropies computed ahead (status as AttentionOperator::row_entropies: 0 ok, 1 negative, 2 not finite).
struct PrecomputedEntropy {
    int status = 0;
    std::vector<double> rows;
};
// `pre`, when given, replaces the streamed entropy (analyze() shares one pass between linear and MHLA).
void measure(MechanismResult& r, const attention::AttentionOperator& op, Eigen::MatrixXd* A, bool consume,
             SpectrumPath path, const attention::AttentionOptions& options, const MetricOptions& metric_options,
             const PrecomputedEntropy* pre = nullptr);

// The spectrum computation for `op` under `metric_options` when dense work may use `memory_limit`
// bytes. Throws std::invalid_argument when the method asked for cannot apply (structured without
// factors) and InputError when nothing fits, naming what would. Under --method streaming an operator without
// factors and with neither --top-k nor --rank-rtol gets `none` (its spectrum null, with a warning).
SpectrumPath choose_spectrum_path(const attention::AttentionOperator& op, const MetricOptions& metric_options,
                                  std::uint64_t memory_limit);

// The options a mechanism is computed with (attention.md 1.3: linear attention is always row-normalised).
attention::AttentionOptions options_for(attention::Mechanism mechanism, const attention::AttentionOptions& options);

// One element of "results" in the analyze JSON.
nlohmann::ordered_json result_json(const MechanismResult& result, const MetricOptions& metric_options);

}  // namespace attnscope::analysis
