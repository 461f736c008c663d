#pragma once
// All singular values of a dense matrix by a two-stage reduction, the algorithm of PLASMA / MAGMA /
// ELPA for the values-only SVD (Ltaief, Luszczek & Dongarra, "High-performance bidiagonal reduction
// using tile algorithms", ACM TOMS 39(3), 2013), built from LAPACK's own kernels:
//
//   stage 1  A -> upper band B of bandwidth b, by alternating blocked QR of a column panel and LQ of a
//            row panel (dgeqrf + dlarft + dlarfb): all level-3 BLAS, unlike dgebrd's one-stage
//            bidiagonalisation, whose half of the flops are memory-bound matrix-vector products;
//   stage 2  B -> bidiagonal by LAPACK dgbbrd (Givens bulge chasing, O(N^2 b), one thread);
//   stage 3  the bidiagonal's singular values by dbdsqr (values only: the dqds algorithm, high
//            relative accuracy), exactly as dgesdd's values-only path ends.
//
// Every step is an orthogonal transformation, so the result has dgesdd's backward error (singular
// values to O(eps) * s_1 absolute); tests compare the two on many matrices.
#include <functional>
#include <vector>

#include <Eigen/Core>

namespace attnscope::metrics {

// Called between panels of stage 1 (which maps to 0..0.9) and after stage 2 (0.99) with the fraction of
// the work done so far; returning false
// stops the computation, which then throws Cancelled.
using TwoStageProgress = std::function<bool(double fraction)>;

struct Cancelled : std::exception {
    const char* what() const noexcept override { return "cancelled"; }
};

// Default band width of stage 1 (the panel width). Stage 2's bulge chasing costs O(N^2 b) at scalar speed
// while stage 1's products gain little past b = 32 (their inner dimension; the trailing matrix streams from
// memory either way): measured at N = 4096 (bench_dense, AVX-512, 2 threads) b = 16 / 24 / 32 / 48 / 64 / 96
// took - / 2.57 / 2.42 / 2.48 / 2.78 / 3.19 s; at N = 1024 and 2048, 16 and 32 were within 8 %.
constexpr Eigen::Index two_stage_default_band = 32;

// Where the time went (bench/ reports stage 1's rate against the machine's GEMM rate).
struct TwoStageStats {
    double stage1_seconds = 0, stage1_flops = 0;   // dense -> band; flops of the products and panel QRs
    double stage2_seconds = 0;                     // band -> bidiagonal (dgbbrd)
    double stage3_seconds = 0;                     // bidiagonal values (dbdsqr)
};

// All singular values of A (consumed), descending. Any shape (a wide A is transposed first). Throws
// std::invalid_argument for non-finite entries, std::runtime_error if LAPACK fails, Cancelled when
// `progress` returns false.
std::vector<double> singular_values_two_stage(Eigen::MatrixXd&& A, Eigen::Index band = two_stage_default_band,
                                              const TwoStageProgress& progress = {}, TwoStageStats* stats = nullptr);

}  // namespace attnscope::metrics
