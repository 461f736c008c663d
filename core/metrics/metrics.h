#pragma once
// Metrics of an N x N attention matrix (docs/maths.md section 2), all in double precision.
#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include <Eigen/Core>

namespace attnscope::metrics {

using Index = Eigen::Index;

// All singular values, descending, by LAPACK dgesdd (values only) on OpenBLAS, or for large matrices by
// a two-stage reduction with the same accuracy. `A` is consumed
// (overwritten). Throws std::runtime_error if LAPACK reports non-convergence or an illegal argument.
// From k_two_stage_min_size on, the two-stage reduction of metrics/svd_two_stage.h replaces dgesdd.
constexpr Index k_two_stage_min_size = 512;
std::vector<double> singular_values(Eigen::MatrixXd&& A);
// The end of every dense SVD entry point: throws when LAPACK complained (metrics/svd_input.h) or a value is not
// finite, and scales the values back by 2^scale (prepare_svd_input's exponent).
std::vector<double> unscale_singular_values(std::vector<double> s, int scale);

struct SpectrumMetrics {
    std::vector<double> singular_values;   // all of them, descending
    double tol = 0.0;                      // tolerance used for the numerical rank
    Index rank = 0;                        // #{ s_i > tol }
    double relative_rank = 0.0;            // rank / N
    double effective_rank = 0.0;           // Roy & Vetterli: exp(-sum p ln p), p = s / sum s
    double stable_rank = 0.0;              // sum s^2 / s_1^2
    // Tolerance-free ranks (docs/maths.md 2.2): the smallest k with s_1^2 + ... + s_k^2 >= 0.90 (0.99) of
    // sum s_i^2, and #{ s_i > rtol s_1 } at each rtol of k_rank_rtols.
    Index energy_rank_90 = 0;
    Index energy_rank_99 = 0;
    std::array<Index, 7> rank_at_rtol{};
};

// The relative tolerances of SpectrumMetrics::rank_at_rtol and their names (the analyze JSON's keys).
struct RankRtol {
    std::string_view name;
    double rtol;
};
inline constexpr std::array<RankRtol, 7> k_rank_rtols{{{"1e-2", 1e-2}, {"1e-3", 1e-3}, {"1e-4", 1e-4}, {"1e-6", 1e-6},
                                                       {"1e-8", 1e-8}, {"1e-10", 1e-10}, {"1e-12", 1e-12}}};

// The smallest k with s_1^2 + ... + s_k^2 >= fraction * sum s_i^2 (s descending; the partial sums in order,
// the total being the last of them, so some k <= s.size() qualifies); 0 for an all-zero spectrum.
Index energy_rank(const std::vector<double>& s, double fraction);

// From singular values of a rows x cols matrix. Default tol = s_1 * max(rows, cols) * 2^-52;
// with rtol, tol = rtol * s_1. An all-zero spectrum gives rank 0, effective and stable rank 0.
SpectrumMetrics spectrum_metrics(std::vector<double> s, Index rows, Index cols, std::optional<double> rtol);

// Whether row entropies exist: an entry < 0 (identity features) leaves them undefined, a non-finite entry
// or a zero row normaliser leaves nothing measurable.
enum class EntropyStatus { ok, negative, non_finite };

struct EntropyStats {
    double mean = 0, std = 0, min = 0, max = 0;   // over rows; std is the population std
    double normalized_mean = 0;                   // mean of H_t / ln(n_t); rows with n_t = 1 count as 0
    std::vector<double> rows;                     // H_t per row
};

// H_t = -sum_j A[t,j] ln A[t,j], natural log, 0 ln 0 = 0. `allowed[t]` = n_t.
EntropyStats row_entropy(const Eigen::Ref<const Eigen::MatrixXd>& A, const std::vector<Index>& allowed);

// The statistics of given row entropies H_t (kept as `rows`).
EntropyStats entropy_stats(std::vector<double> h, const std::vector<Index>& allowed);

// docs/maths.md 2.2: the mean over rows of H_t / ln|S_t|, |S_t| = `support[t]` the keys that can have a
// non-zero weight by construction; rows with |S_t| <= 1 count as 0.
double support_normalized_mean(const std::vector<double>& h, const std::vector<Index>& support);

}  // namespace attnscope::metrics
