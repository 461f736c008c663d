#pragma once
// One way to measure an attention operator (docs/maths.md section 2): the singular spectrum with its
// ranks and the row entropies, with a warning for everything that cannot be computed. `analyze` (and so
// `sweep` and `batch`) and the desktop app's `explore` all call measure(); they differ only in what they
// ask of it: which spectrum path (choose_spectrum: dense, structured, matrix-free top-k or the
// randomized rank bracket), whether the N x N matrix is kept for display, and whether the job reports
// progress and can be cancelled.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/progress.h"
#include "analysis/row_measures.h"
#include "attention/operator.h"
#include "attention/options.h"
#include "metrics/metrics.h"
#include "metrics/randomized.h"
#include "metrics/semiseparable.h"
#include "metrics/streaming.h"
#include "metrics/topk.h"

namespace attnscope::analysis {

using Index = Eigen::Index;

// How the singular values are computed: `dense` (dgesdd on the N x N matrix), `structured` (exact, from
// the low-rank factors of non-causal linear / MHLA, metrics/structured.h), `streaming` (never form
// N x N: structured where exact, else only the --top-k largest, matrix-free, metrics/topk.h), `auto`
// (structured where it is cheaper; --top-k by block Lanczos where auto_prefers_top_k; dense when it fits the
// memory limit; else the streaming choice).
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
    // docs/maths.md 2.2: the content-free baseline A0 (measured like A: twice the work), and the past block
    // A[h:N, 0:h], h = past_split (default N/2), measured when causal or when past_split is given.
    bool baseline = true;
    std::optional<Index> past_split;
    // docs/maths.md 2.2's semiseparable profile, measured with the past block: K evenly spaced splits plus every
    // block boundary (K = past_splits, k_default_past_splits when not given) or every split (k_all_past_splits).
    // Given on its own (not causal, no past_split) it asks for the past block too.
    std::optional<Index> past_splits;
};
inline constexpr Index k_all_past_splits = 0;
inline constexpr Index k_default_past_splits = 16;
// "all" (k_all_past_splits) or a count K in 1..2^20; throws std::invalid_argument naming `what` otherwise.
Index parse_past_splits(const std::string& text, const std::string& what);
// Whether the past block and the profile are measured: causal, or a split or the splits given.
inline bool past_measures_asked(bool causal, const MetricOptions& m)
{
    return m.spectrum && (causal || m.past_split || m.past_splits);
}

// The content-free baseline A0 of docs/maths.md 2.2, measured as A is (its spectrum absent where its path
// gives not every singular value, its entropy absent where undefined or not asked for).
struct BaselineResult {
    std::optional<metrics::SpectrumMetrics> spectrum;
    std::optional<metrics::EntropyStats> entropy;
};

// The past block A[h:N, 0:h] of docs/maths.md 2.2 (`spectrum` absent when the block could not be formed).
struct PastBlockResult {
    Index split = 0, rows = 0, cols = 0;
    std::optional<metrics::SpectrumMetrics> spectrum;
};

// The semiseparable profile of docs/maths.md 2.2: the rank and energy rank 99% of A[h:N, 0:h] for each split h
// of H, and semiseparable_rank = the largest rank over H. `method`: "factors" (exact, from the operator's
// factors) or "matrix" (from the formed matrix); `all`: H is every split.
struct PastProfileResult {
    std::vector<metrics::SplitRank> splits;
    Index semiseparable_rank = 0;
    std::string method;
    bool all = false;
};

struct MechanismResult {
    attention::Mechanism mechanism{};
    nlohmann::ordered_json params;                      // every parameter that shaped the matrix, resolved
    std::optional<metrics::SpectrumMetrics> spectrum;   // absent when not requested or not computable
    std::optional<metrics::EntropyStats> entropy;       // absent when not requested or undefined
    std::vector<std::string> warnings;
    std::string spectrum_method;                        // "dense", "structured", "top-k", "randomized" (empty: none)
    bool partial_spectrum = false;                      // only the top-k singular values are known (no ranks)
    std::string entropy_method;                         // "dense" or "streaming" (empty: no entropy)
    std::optional<metrics::RandomizedRank> rank_bracket;   // SpectrumPath::randomized: what the range finder proved
    // Matrix-free top-k (metrics/topk.h): the solver's report, with a residual bound per value.
    std::optional<metrics::TopSingularValues> top_k;
    bool same_as_linear = false;                        // MHLA that is linear attention by construction (a warning says why)
    std::optional<Index> rank_cap;                      // rank <= this whatever the data: the mixing matrix caps it (a warning says so)
    std::string spectrum_why;                           // why this spectrum path (choose_spectrum); empty: not recorded
    // docs/maths.md 2.2 (each absent where not computable; a warning says why).
    std::optional<double> support_normalized_mean;      // mean of H_t / ln|S_t|
    std::optional<BaselineResult> baseline;             // A0
    bool past_block_asked = false;                      // causal, or a past split given: the JSON has "past_block"
    std::optional<PastBlockResult> past_block;
    std::optional<PastProfileResult> past_profile;      // with the past block (null with a warning when not computable)
    std::optional<double> logit_norm;                   // with the spectrum: s_1 of the scores (row_measures.h)
    bool locality_asked = false;                        // with the entropy: the JSON has mean_distance, mass_within
    std::optional<Locality> locality;
    bool output_asked = false;                          // values given (--v): the JSON has "output"
    std::optional<metrics::SpectrumMetrics> output;     // of A V (N x d_v)
    bool retrieval_asked = false;                       // the inputs have retrieval targets: the JSON has retrieval_*
    std::optional<double> retrieval_mass, retrieval_rank;   // analysis/retrieval.h
};

// Bytes a dense analysis of N tokens needs at its peak (the matrix, the SVD's copy and LAPACK's work).
std::uint64_t dense_memory_bytes(Index n);
// Bytes an analysis of N x d queries and keys holds at its peak when nothing N x N is formed, Q and K
// included (docs/performance.md, "Memory of the streamed analysis"). Per token, in doubles: Q and K (2d),
// the softmax pieces (3d + 16), each kernel mechanism's factors (4r + 16; r = d, or m for FAVOR+), the
// streamed kernel entropy's sorted copies and block sums (6r + 8M + 16, once: linear and MHLA share one
// pass or take turns); plus the M x M mixing matrices and 32 MiB of tiles. A spectrum that is asked for
// without the dense matrix (structured, top-k, randomized) keeps the allowance of N x (8d + 4096) doubles
// for its basis. An upper bound of the peak resident memory measured for N = 65536, not a wild one.
std::uint64_t streaming_memory_bytes(Index n, Index d, const std::vector<attention::Mechanism>& mechanisms,
                                     const attention::AttentionOptions& options, const MetricOptions& metrics);
// Half the machine's physical memory: the default --max-memory.
std::uint64_t default_memory_limit();
// "1.5 GiB": a byte count for messages.
std::string human_bytes(std::uint64_t bytes);

// The parameters recorded for `mechanism` (resolved defaults: scale, blocks M, mixing name ...).
// Throws std::invalid_argument for impossible options.
nlohmann::ordered_json mechanism_params(attention::Mechanism mechanism, const attention::AttentionOptions& options,
                                        Index n, Index d);

// The options a mechanism is computed with (docs/maths.md 1.3: linear attention is always row-normalised).
attention::AttentionOptions options_for(attention::Mechanism mechanism, const attention::AttentionOptions& options);

// The spectrum computation for `op` under `metric_options` when dense work may use `memory_limit`
// bytes, and why, in words naming the method asked for, the sizes and the memory limit that decided (the
// JSON's "method": {"why"} and the summary table). Throws std::invalid_argument when the method asked for
// cannot apply (structured without factors) and InputError when nothing fits, naming what would. Under
// --method streaming an operator without factors and with neither --top-k nor --rank-rtol gets `none` (its
// spectrum null, with a warning).
struct SpectrumChoice {
    SpectrumPath path = SpectrumPath::none;
    std::string why;
};
SpectrumChoice choose_spectrum(const attention::AttentionOperator& op, const MetricOptions& metric_options,
                               std::uint64_t memory_limit);

// The cost estimate by which `auto` chooses between the dense SVD and the matrix-free top-k when the dense
// work fits (docs/cli.md, --method auto), in floating-point operations, ignoring rates (both run at about
// the AVX-512 product rate, docs/performance.md):
//  - dense: (8/3) N^3, the reduction of N x N to bidiagonal form (the two-stage SVD's first stage, which
//    dominates it);
//  - top-k: k_auto_top_k_passes passes, each 2 N^2 (d + 2 b) (the scores Q K^T, A X and A^T (A X) for a
//    block of b = top_k_default_block(k) vectors; the N^2 exponentials are left out). Measured pass counts
//    are 48-58 for top-64 at N = 2048 to 16384 (docs/performance.md).
// `d` is the width the scores are formed from (softmax: the head dimension; a kernel mechanism: its feature
// width r, charged like softmax's tiles).
inline constexpr double k_auto_top_k_passes = 50.0;
struct SpectrumCostEstimate {
    double dense_flops = 0;
    double top_k_flops = 0;
};
SpectrumCostEstimate spectrum_cost_estimate(Index n, Index d, Index k);
// True when `auto` takes the matrix-free top-k although the dense work fits: --top-k k given, no
// --rank-rtol (the exact rank needs every singular value), the top-k solver would not itself fall back
// to the dense SVD (metrics::top_k_uses_dense), and the estimate above is cheaper for top-k.
bool auto_prefers_top_k(Index n, Index d, Index k);
// The width the scores of `op` are formed from (softmax: d; kernel mechanisms: r), for the estimate.
Index score_width(const attention::AttentionOperator& op);

// One mechanism ready to measure: its recorded parameters, the options it is computed with, its
// operator on Q, K (N by d, one token per row) and its spectrum path. Throws std::invalid_argument for
// impossible options, InputError when the spectrum does not fit `memory_limit`.
struct PreparedMechanism {
    MechanismResult result;   // mechanism and params
    attention::AttentionOptions options;
    std::unique_ptr<attention::AttentionOperator> op;
    SpectrumPath path = SpectrumPath::none;   // and result.spectrum_why says why
};
PreparedMechanism prepare_mechanism(attention::Mechanism mechanism, const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                    const Eigen::Ref<const Eigen::MatrixXd>& K, const attention::AttentionOptions& options,
                                    const MetricOptions& metric_options, std::uint64_t memory_limit);

// From this N on, a kept matrix's dense spectrum is the two-stage SVD's (MeasureRequest::keep_matrix).
inline constexpr Index k_kept_two_stage_min_size = 4096;

// What to measure of one operator.
struct MeasureRequest {
    SpectrumPath path = SpectrumPath::none;
    MetricOptions metrics;
    // Keep the N x N matrix (the app's maps). It is then formed in row tiles with progress from N = 2048 on,
    // and below k_kept_two_stage_min_size a dense spectrum comes from the interruptible dgesdd replica
    // (metrics/bidiag_svd.h) instead of the two-stage SVD (metrics/svd_two_stage.h): the two agree to ~1e-15 s_1,
    // and only the first reports often enough to cancel within a second. From that size on the two-stage SVD
    // (analyze's, the same values bit for bit), 2-4x faster, observed between its panels; Cancel then waits at
    // most for its band-to-bidiagonal stage (about 0.5 s at N = 4096, 2 s at N = 8192 on an idle machine).
    bool keep_matrix = false;
    // Row entropies computed ahead by a pass shared with another mechanism (analyze: linear and MHLA).
    const metrics::RowEntropies* shared_entropy = nullptr;
    // The memory limit of the past block formed from the operator and of the baseline's spectrum path.
    std::uint64_t memory_limit = UINT64_MAX;
    // This request measures a content-free baseline (its stages are named so; it has no baseline itself).
    bool is_baseline = false;
    // The token distances of the locality measures (the analysis's options, which name the grid for every
    // mechanism); when null, those of the options measure() is given.
    const TokenDistance* distance = nullptr;
};

struct Measurement {
    MechanismResult result;                          // mechanism, spectrum, entropy, methods, warnings (not params)
    std::shared_ptr<const Eigen::MatrixXd> matrix;   // keep_matrix: the N x N matrix (kept even when not finite)
    bool finite = true;                              // false: an entry is not finite, nothing was measured
};

// Relative cost of a stage, in units of one pass forming the N x N matrix (measured on 2 cores, docs/gui.md):
// what measure() reports under `progress` for its stages "<mechanism>: attention matrix" (1 when the
// matrix is formed), "<mechanism>: entropy" (1) and "<mechanism>: singular values" (this weight).
double spectrum_weight(SpectrumPath path, Index n);
double measure_weight(const MeasureRequest& request, Index n);

// Why the matrix of `op` has entries that are not finite (a row that cannot be normalised, scores that
// overflow), in words naming the mechanism: the warning of a mechanism reported null.
std::string non_finite_reason(const attention::AttentionOperator& op);

// Measures `op` (computed with `options`) as `request` asks: the matrix is formed when the path is dense or
// the matrix is kept, and then measured in row tiles; otherwise entropy streams (metrics/streaming.h) and
// the spectrum follows its path. Warnings say what could not be computed and why, in the same words on
// every path. With `progress`, stages are reported and cancellation (JobCancelled) is checked between tiles
// and inside the SVD: the interruptible one for a kept matrix, else between the panels of the two-stage
// reduction (from N = metrics::k_two_stage_min_size; the values are those singular_values() gives).
Measurement measure(const attention::AttentionOperator& op, const attention::AttentionOptions& options,
                    const MeasureRequest& request, StageProgress* progress = nullptr);

}  // namespace attnscope::analysis
