#pragma once
// All singular values of a dense matrix with progress and cancellation: the computation LAPACK's
// dgesdd(jobz = 'N') does for a square or moderately tall matrix, taken apart so that the caller is
// called back between steps.
//
// dgesdd with values only reduces A to upper bidiagonal form B = Q^T A P (dgebrd: panels of nb columns by
// dlabrd, each followed by two dgemm updates of the trailing matrix; dgebd2 for the last columns) and then
// computes B's singular values (dbdsdc 'N' -> dlasdq -> dbdsqr -> dlasq1, the dqds algorithm). Here the
// panel loop and dlabrd's column loop are ours and call the same BLAS/LAPACK routines with the same
// arguments and the same workspace layout, so for N <= 4096 and M < 11 N / 6 (dgesdd's path without a
// first QR) the values are bit-identical to dgesdd's (OpenBLAS's summation order depends on the
// workspace's alignment, which the allocator decides). Beyond N = 4096 the trailing updates are sliced,
// and for taller matrices dgesdd first computes A = QR: the values then agree to rounding (~1e-14 s_1).
// The callback runs twice per column (around its first product with the trailing matrix) and after every
// slice of a trailing update (docs/gui.md has the intervals measured at N = 8192).
#include <functional>
#include <vector>

#include <Eigen/Core>

namespace attnscope::metrics {

// Receives the fraction of the work done (flops, in [0, 1], non-decreasing). It may throw to stop the
// computation (the exception propagates; the matrix is then left in an unspecified state).
using SvdProgress = std::function<void(double fraction)>;

// All min(rows, cols) singular values, descending, as singular_values() (metrics.h) computes them.
// `A` is consumed (overwritten). A wide matrix is transposed first (same values, agreement to rounding
// with dgesdd's lower-bidiagonal path). Throws std::invalid_argument for non-finite entries or a matrix
// too large for LAPACK's 32-bit indices, std::runtime_error when the bidiagonal SVD does not converge.
std::vector<double> singular_values_with_progress(Eigen::MatrixXd&& A, const SvdProgress& progress);

}  // namespace attnscope::metrics
