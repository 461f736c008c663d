#include "metrics/svd_two_stage.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include <lapacke.h>

#include "metrics/metrics.h"
#include "metrics/svd_input.h"
#include "kernels/kernels.h"
#include "util/flush_subnormals.h"

namespace attnscope::metrics {

namespace {

using Index = Eigen::Index;

void check(lapack_int info, const char* what)
{
    if (info < 0)
        throw std::runtime_error(std::string(what) + ": illegal argument " + std::to_string(-info));
    if (info > 0)
        throw std::runtime_error(std::string(what) + " did not converge (info=" + std::to_string(info) + ")");
}

// V = the unit lower trapezoidal reflector matrix stored below the diagonal of `a` (rows x cols, ld),
// made explicit (ones on the diagonal, zeros above) for plain matrix products.
void unit_lower(const double* a, lapack_int ld, lapack_int rows, lapack_int cols, std::vector<double>& V)
{
    V.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
    for (lapack_int j = 0; j < cols; ++j) {
        double* v = V.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(rows);
        const double* src = a + static_cast<std::size_t>(j) * static_cast<std::size_t>(ld);
        for (lapack_int i = 0; i < rows; ++i)
            v[i] = i < j ? 0.0 : (i == j ? 1.0 : src[i]);
    }
}

// Stage 1 on a tall (m >= n) column-major matrix: afterwards A's top n x n part is upper triangular with
// upper bandwidth b (A(i, j) = 0 unless i <= j <= i + b) and its rows below n are zero (not written).
void reduce_to_band(Eigen::MatrixXd& A, lapack_int b, const TwoStageProgress& progress, kernels::GemmPath path)
{
    const auto m = static_cast<lapack_int>(A.rows());
    const auto n = static_cast<lapack_int>(A.cols());
    const lapack_int lda = m;
    double* a = A.data();
    auto at = [&](lapack_int i, lapack_int j) { return a + i + static_cast<std::size_t>(j) * static_cast<std::size_t>(lda); };

    std::vector<double> tau(static_cast<std::size_t>(b));
    std::vector<double> T(static_cast<std::size_t>(b) * static_cast<std::size_t>(b), 0.0);   // dlarft fills the upper triangle
    std::vector<double> panel, V, W, W2;
    // dgeqrf's workspace for the widest panel (a query gives its blocked size).
    double query = 0.0;
    check(LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, std::max(m, n), b, nullptr, std::max(m, n), nullptr, &query, -1), "dgeqrf");
    std::vector<double> qr_work(static_cast<std::size_t>(std::max(query, 1.0)) + static_cast<std::size_t>(b));
    const auto qr_lwork = static_cast<lapack_int>(qr_work.size());

    // Work of the panel at column k ~ (m - k)(n - k) b: progress as the share of sum over panels.
    const double total = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / 3.0 +
                         static_cast<double>(m - n) * static_cast<double>(n) * static_cast<double>(n) / 2.0;
    auto done_after = [&](lapack_int k) {
        const double r = static_cast<double>(n - k);
        const double left = r * r * r / 3.0 + static_cast<double>(m - n) * r * r / 2.0;
        return total > 0.0 ? std::clamp(1.0 - left / total, 0.0, 1.0) : 1.0;
    };

    for (lapack_int k = 0; k < n; k += b) {
        if (progress && !progress(0.9 * done_after(k)))   // stage 1 is about 90 % of the time
            throw Cancelled();
        const lapack_int w = std::min(b, n - k);
        const lapack_int mk = m - k;
        const lapack_int nc = n - k - w;   // columns right of the panel

        // Column panel A[k:m, k:k+w] = Q R; A[k:m, k+w:n] <- Q^T A[k:m, k+w:n].
        check(LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, mk, w, at(k, k), lda, tau.data(), qr_work.data(), qr_lwork), "dgeqrf");
        if (nc > 0) {
            check(LAPACKE_dlarft_work(LAPACK_COL_MAJOR, 'F', 'C', mk, w, at(k, k), lda, tau.data(), T.data(), b), "dlarft");
            unit_lower(at(k, k), lda, mk, w, V);
            // A[k:m, k+w:n] <- (I - V T V^T)^T A[k:m, k+w:n] = C - V (T^T (V^T C)): three products.
            W.resize(static_cast<std::size_t>(w) * static_cast<std::size_t>(nc));
            W2.resize(W.size());
            kernels::gemm_on(path, 'T', 'N', w, nc, mk, 1.0, V.data(), mk, at(k, k + w), lda, 0.0, W.data(), w);
            kernels::gemm_on(path, 'T', 'N', w, nc, w, 1.0, T.data(), b, W.data(), w, 0.0, W2.data(), w);
            kernels::gemm_on(path, 'N', 'N', mk, nc, w, -1.0, V.data(), mk, W2.data(), w, 1.0, at(k, k + w), lda);
        }
        for (lapack_int j = 0; j < w; ++j)   // the reflectors below R are not part of the band
            std::fill(at(k + j + 1, k + j), at(k + j + 1, k + j) + (mk - j - 1), 0.0);
        if (nc == 0)
            break;

        // Row panel P = A[k:k+w, k+w:n] = L Q^T, done as the QR of P^T (contiguous); then
        // A[k+w:m, k+w:n] <- A[k+w:m, k+w:n] Q and P <- P Q = R^T (lower trapezoidal).
        panel.resize(static_cast<std::size_t>(nc) * static_cast<std::size_t>(w));
        for (lapack_int i = 0; i < w; ++i)
            for (lapack_int j = 0; j < nc; ++j)
                panel[static_cast<std::size_t>(j) + static_cast<std::size_t>(i) * static_cast<std::size_t>(nc)] = *at(k + i, k + w + j);
        check(LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, nc, w, panel.data(), nc, tau.data(), qr_work.data(), qr_lwork), "dgeqrf");
        const lapack_int kr = std::min(w, nc);
        const lapack_int mr = m - k - w;
        if (mr > 0) {
            check(LAPACKE_dlarft_work(LAPACK_COL_MAJOR, 'F', 'C', nc, kr, panel.data(), nc, tau.data(), T.data(), b), "dlarft");
            unit_lower(panel.data(), nc, nc, kr, V);
            // A[k+w:m, k+w:n] <- C (I - V T V^T) = C - ((C V) T) V^T.
            W.resize(static_cast<std::size_t>(mr) * static_cast<std::size_t>(kr));
            W2.resize(W.size());
            kernels::gemm_on(path, 'N', 'N', mr, kr, nc, 1.0, at(k + w, k + w), lda, V.data(), nc, 0.0, W.data(), mr);
            kernels::gemm_on(path, 'N', 'N', mr, kr, kr, 1.0, W.data(), mr, T.data(), b, 0.0, W2.data(), mr);
            kernels::gemm_on(path, 'N', 'T', mr, nc, kr, -1.0, W2.data(), mr, V.data(), nc, 1.0, at(k + w, k + w), lda);
        }
        for (lapack_int j = 0; j < nc; ++j)
            for (lapack_int i = 0; i < w; ++i)
                *at(k + i, k + w + j) =
                    (j < kr && j <= i) ? panel[static_cast<std::size_t>(j) + static_cast<std::size_t>(i) * static_cast<std::size_t>(nc)] : 0.0;
    }
}

// Which library runs stage 1's products on this machine: measured as a whole (kernels::measured_path) on a
// 2048 x 2048 matrix, past the caches like the large ones, ~1 s once per machine. Below that size the
// products are too small for the choice to matter and each follows its class.
kernels::GemmPath stage1_path(lapack_int n, lapack_int b)
{
    if (n < 1024)
        return kernels::GemmPath::automatic;
    return kernels::measured_path("svd-stage1-b" + std::to_string(b), [b](kernels::GemmPath path) {
        constexpr Index size = 2048;
        Eigen::MatrixXd M(size, size);
        std::uint64_t x = 0x9E3779B97F4A7C15ull;
        for (Index i = 0; i < M.size(); ++i) {   // any well-scaled values (splitmix-like)
            x += 0x9E3779B97F4A7C15ull;
            std::uint64_t z = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            M.data()[i] = static_cast<double>(z >> 11) * 0x1.0p-53 - 0.5;
        }
        const auto t0 = std::chrono::steady_clock::now();
        reduce_to_band(M, b, {}, path);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
}

}  // namespace

std::vector<double> singular_values_two_stage(Eigen::MatrixXd&& A, Index band, const TwoStageProgress& progress,
                                              TwoStageStats* stats)
{
    const util::FlushSubnormals flush;   // low-rank inputs decay into subnormals (util/flush_subnormals.h)
    if (A.rows() == 0 || A.cols() == 0)
        return {};
    if (!A.allFinite())
        throw std::invalid_argument("singular_values: the matrix has non-finite entries");
    constexpr Index max_int = std::numeric_limits<lapack_int>::max();
    if (A.rows() > max_int || A.cols() > max_int)
        throw std::invalid_argument("singular_values: matrix too large for LAPACK");
    if (band < 1)
        throw std::invalid_argument("singular_values_two_stage: band must be at least 1");
    const int scale = prepare_svd_input(A);   // subnormals to zero, extreme magnitudes scaled (metrics/svd_input.h)
    lapack_complaint();                       // a stale report of an earlier call is not this one's
    if (A.rows() < A.cols())
        A = Eigen::MatrixXd(A.transpose());   // same singular values; stage 1 wants m >= n

    const kernels::SerialBlas serial;   // the products below bring their own threads
    const auto n = static_cast<lapack_int>(A.cols());
    const auto b = static_cast<lapack_int>(std::min<Index>(band, std::max<Index>(n - 1, 1)));
    using Clock = std::chrono::steady_clock;
    const auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    const kernels::GemmPath path = stage1_path(n, b);
    auto t0 = Clock::now();
    reduce_to_band(A, b, progress, path);
    if (stats) {
        // Householder bidiagonalisation's 4 m n^2 - 4 n^3 / 3 (Golub & Van Loan 5.4.8), which the banded form
        // matches to O(n^2 b).
        const double m = static_cast<double>(A.rows()), nn = static_cast<double>(n);
        stats->stage1_seconds = since(t0);
        stats->stage1_flops = 4.0 * m * nn * nn - 4.0 * nn * nn * nn / 3.0;
    }

    // Stage 2: the n x n upper band (kl = 0, ku = b) in LAPACK band storage AB(ku + i - j, j) = A(i, j).
    const lapack_int ldab = b + 1;
    std::vector<double> ab(static_cast<std::size_t>(ldab) * static_cast<std::size_t>(n), 0.0);
    for (lapack_int j = 0; j < n; ++j)
        for (lapack_int i = std::max<lapack_int>(0, j - b); i <= j; ++i)
            ab[static_cast<std::size_t>(b + i - j) + static_cast<std::size_t>(j) * static_cast<std::size_t>(ldab)] = A(i, j);
    A.resize(0, 0);   // the band copy is all that is needed now

    std::vector<double> d(static_cast<std::size_t>(n)), e(static_cast<std::size_t>(std::max<lapack_int>(n - 1, 1)));
    std::vector<double> work(static_cast<std::size_t>(4) * static_cast<std::size_t>(n) + 4);
    double dummy = 0.0;
    t0 = Clock::now();
    check(LAPACKE_dgbbrd_work(LAPACK_COL_MAJOR, 'N', n, n, 0, 0, b, ab.data(), ldab, d.data(), e.data(), &dummy, 1, &dummy,
                              1, &dummy, 1, work.data()),
          "dgbbrd");
    if (stats)
        stats->stage2_seconds = since(t0);
    t0 = Clock::now();
    if (progress && !progress(0.99))
        throw Cancelled();
    // Stage 3: values only (ncvt = nru = ncc = 0) runs dqds, as dgesdd's values-only path does.
    check(LAPACKE_dbdsqr_work(LAPACK_COL_MAJOR, 'U', n, 0, 0, 0, d.data(), e.data(), &dummy, 1, &dummy, 1, &dummy, 1,
                              work.data()),
          "dbdsqr");
    if (stats)
        stats->stage3_seconds = since(t0);
    for (double& v : d)
        v = std::abs(v);
    std::sort(d.begin(), d.end(), std::greater<>());
    return unscale_singular_values(std::move(d), scale);
}

}  // namespace attnscope::metrics
