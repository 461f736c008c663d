#include "metrics/bidiag_svd.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "metrics/metrics.h"
#include "metrics/svd_input.h"
#include "util/flush_subnormals.h"

// The BLAS routines (dgemv_, dgemm_, dscal_) are declared by Eigen's misc/blas.h, which <Eigen/Core>
// includes under EIGEN_USE_BLAS (a public definition of attnscope::core). Redeclaring them here would
// conflict; the LAPACK ones below are not in Eigen. Trailing size_t: gfortran's hidden string lengths.
#ifndef EIGEN_USE_BLAS
#error "bidiag_svd.cpp relies on Eigen's BLAS declarations (EIGEN_USE_BLAS)"
#endif

extern "C" {
void dlarfg_(const int* n, double* alpha, double* x, const int* incx, double* tau);
void dgebd2_(const int* m, const int* n, double* a, const int* lda, double* d, double* e, double* tauq, double* taup,
             double* work, int* info);
void dbdsdc_(const char* uplo, const char* compq, const int* n, double* d, double* e, double* u, const int* ldu,
             double* vt, const int* ldvt, double* q, int* iq, double* work, int* iwork, int* info, std::size_t,
             std::size_t);
int ilaenv_(const int* ispec, const char* name, const char* opts, const int* n1, const int* n2, const int* n3,
            const int* n4, std::size_t, std::size_t);
double dlange_(const char* norm, const int* m, const int* n, const double* a, const int* lda, double* work, std::size_t);
void dlascl_(const char* type, const int* kl, const int* ku, const double* cfrom, const double* cto, const int* m,
             const int* n, double* a, const int* lda, int* info, std::size_t);
double dlamch_(const char* cmach, std::size_t);
}

namespace attnscope::metrics {
namespace {

constexpr double kOne = 1.0, kMinusOne = -1.0, kZero = 0.0;
// Trailing updates wider than kSliceAbove columns run in slices of kSliceColumns (a full update at N = 8192 is
// ~0.9 s on 2 cores). Slicing changes which OpenBLAS kernel computes the edge columns, so values then agree
// with dgesdd's to rounding instead of bit for bit; below the threshold the calls are dgebrd's own.
constexpr int kSliceAbove = 4096, kSliceColumns = 2048;

// y := alpha op(A) x + beta y (BLAS dgemv; A column-major with leading dimension lda).
void gemv(char trans, int m, int n, double alpha, const double* a, int lda, const double* x, int incx, double beta,
          double* y, int incy)
{
    dgemv_(&trans, &m, &n, &alpha, a, &lda, x, &incx, &beta, y, &incy);
}

void scal(int n, double alpha, double* x)
{
    int inc = 1;
    dscal_(&n, &alpha, x, &inc);
}

void larfg(int n, double* alpha, double* x, int incx, double* tau) { dlarfg_(&n, alpha, x, &incx, tau); }

int ilaenv(int ispec, int m, int n)
{
    const int minus1 = -1;
    return ilaenv_(&ispec, "DGEBRD", " ", &m, &n, &minus1, &minus1, 6, 1);
}

// Column-major views with 0-based indices.
struct Mat {
    double* p;
    int ld;
    double* operator()(int r, int c) const { return p + r + static_cast<std::ptrdiff_t>(c) * ld; }
};

// LAPACK dlabrd for m >= n (upper bidiagonal): reduces the first nb rows and columns of the m x n matrix
// `a` and returns X (m x nb) and Y (n x nb) for the trailing update. The same BLAS calls in the same
// order as the reference routine; `progress(k)` runs when k columns are done (k = i + 0.5 halfway through
// column i, between its two products with the trailing matrix, which dominate its cost).
template <class F>
void labrd_upper(int m, int n, int nb, Mat a, double* d, double* e, double* tauq, double* taup, Mat x, Mat y,
                 F&& progress)
{
    for (int i = 0; i < nb; ++i) {
        // Update A(i:m, i).
        gemv('N', m - i, i, kMinusOne, a(i, 0), a.ld, y(i, 0), y.ld, kOne, a(i, i), 1);
        gemv('N', m - i, i, kMinusOne, x(i, 0), x.ld, a(0, i), 1, kOne, a(i, i), 1);
        // Reflection Q(i) annihilating A(i+1:m, i).
        larfg(m - i, a(i, i), a(std::min(i + 1, m - 1), i), 1, &tauq[i]);
        d[i] = *a(i, i);
        if (i < n - 1) {
            *a(i, i) = 1.0;
            // Y(i+1:n, i).
            gemv('T', m - i, n - i - 1, kOne, a(i, i + 1), a.ld, a(i, i), 1, kZero, y(i + 1, i), 1);
            progress(i + 0.5);
            gemv('T', m - i, i, kOne, a(i, 0), a.ld, a(i, i), 1, kZero, y(0, i), 1);
            gemv('N', n - i - 1, i, kMinusOne, y(i + 1, 0), y.ld, y(0, i), 1, kOne, y(i + 1, i), 1);
            gemv('T', m - i, i, kOne, x(i, 0), x.ld, a(i, i), 1, kZero, y(0, i), 1);
            gemv('T', i, n - i - 1, kMinusOne, a(0, i + 1), a.ld, y(0, i), 1, kOne, y(i + 1, i), 1);
            scal(n - i - 1, tauq[i], y(i + 1, i));
            // Update A(i, i+1:n).
            gemv('N', n - i - 1, i + 1, kMinusOne, y(i + 1, 0), y.ld, a(i, 0), a.ld, kOne, a(i, i + 1), a.ld);
            gemv('T', i, n - i - 1, kMinusOne, a(0, i + 1), a.ld, x(i, 0), x.ld, kOne, a(i, i + 1), a.ld);
            // Reflection P(i) annihilating A(i, i+2:n).
            larfg(n - i - 1, a(i, i + 1), a(i, std::min(i + 2, n - 1)), a.ld, &taup[i]);
            e[i] = *a(i, i + 1);
            *a(i, i + 1) = 1.0;
            // X(i+1:m, i).
            gemv('N', m - i - 1, n - i - 1, kOne, a(i + 1, i + 1), a.ld, a(i, i + 1), a.ld, kZero, x(i + 1, i), 1);
            gemv('T', n - i - 1, i + 1, kOne, y(i + 1, 0), y.ld, a(i, i + 1), a.ld, kZero, x(0, i), 1);
            gemv('N', m - i - 1, i + 1, kMinusOne, a(i + 1, 0), a.ld, x(0, i), 1, kOne, x(i + 1, i), 1);
            gemv('N', i, n - i - 1, kOne, a(0, i + 1), a.ld, a(i, i + 1), a.ld, kZero, x(0, i), 1);
            gemv('N', m - i - 1, i, kMinusOne, x(i + 1, 0), x.ld, x(0, i), 1, kOne, x(i + 1, i), 1);
            scal(m - i - 1, taup[i], x(i + 1, i));
        }
        progress(i + 1.0);
    }
}

// Work measure: column j of the reduction costs ~ (m - j)(n - j) (two matrix-vector products with the
// trailing matrix, and its share of the panel's two rank-nb updates); the bidiagonal SVD is O(n^2).
struct WorkMeasure {
    double m, n;
    // Sum over columns < j of (m - c)(n - c), continuous approximation.
    double before(double j) const
    {
        auto f = [&](double c) { return m * n * c - (m + n) * c * c / 2.0 + c * c * c / 3.0; };
        return f(j) - f(0.0);
    }
};

// dgesdd's scaling of matrices with tiny or huge entries: A (m x n, column-major) is scaled in place when
// its largest entry lies outside [smlnum, bignum], and the singular values are scaled back by unscale().
class DgesddScaling {
public:
    DgesddScaling(int m, int n, double* a)
    {
        const double eps = dlamch_("P", 1);
        m_smlnum = std::sqrt(dlamch_("S", 1)) / eps;
        m_bignum = 1.0 / m_smlnum;
        m_anrm = dlange_("M", &m, &n, a, &m, nullptr, 1);
        int info = 0;
        const int zero_i = 0;
        if (m_anrm > 0.0 && m_anrm < m_smlnum) {
            m_scaled = true;
            dlascl_("G", &zero_i, &zero_i, &m_anrm, &m_smlnum, &m, &n, a, &m, &info, 1);
        } else if (m_anrm > m_bignum) {
            m_scaled = true;
            dlascl_("G", &zero_i, &zero_i, &m_anrm, &m_bignum, &m, &n, a, &m, &info, 1);
        }
    }

    void unscale(int n, double* d) const
    {
        if (!m_scaled)
            return;
        int info = 0;
        const int zero_i = 0, one_i = 1;
        if (m_anrm > m_bignum)
            dlascl_("G", &zero_i, &zero_i, &m_bignum, &m_anrm, &n, &one_i, d, &n, &info, 1);
        if (m_anrm < m_smlnum)
            dlascl_("G", &zero_i, &zero_i, &m_smlnum, &m_anrm, &n, &one_i, d, &n, &info, 1);
    }

private:
    double m_anrm = 0, m_smlnum = 0, m_bignum = 0;
    bool m_scaled = false;
};

// dgebrd: blocked bidiagonalisation of A (m x n, m >= n) into d (n) and e, tauq, taup (n each), with
// `work` of (m + n) nb doubles for the panels' X and Y. Panels of nb columns while more than nx remain,
// then the unblocked dgebd2 on the rest. report(done) is called in the units of `cost`.
void reduce_to_bidiagonal(int m, int n, Mat a, int nb, int nx, double* d, double* e, double* tauq, double* taup,
                          double* work, const WorkMeasure& cost, const std::function<void(double)>& report)
{
    const int ldx = m, ldy = n;
    int i = 0;
    for (; i < n - nx; i += nb) {
        const Mat x{work, ldx}, y{work + static_cast<std::ptrdiff_t>(ldx) * nb, ldy};
        // Half of a panel's flops are dlabrd's matrix-vector products, half the two rank-nb updates.
        const double base = cost.before(i), panel = cost.before(i + nb) - base;
        const Mat trailing{a(i, i), m};
        labrd_upper(m - i, n - i, nb, trailing, d + i, e + i, tauq + i, taup + i, x, y,
                    [&](double k) { report(base + 0.5 * panel * k / nb); });
        // A(i+nb:m, i+nb:n) -= V Y^T + X U^T; for large matrices in slices of columns (each slice gets both
        // updates, as each entry does in dgebrd's two calls) so that progress and cancellation come often.
        const int mr = m - i - nb, nr = n - i - nb;
        const int slice = nr > kSliceAbove ? kSliceColumns : std::max(nr, 1);
        const double* yt = work + static_cast<std::ptrdiff_t>(ldx) * nb + nb;
        for (int c0 = 0; c0 < nr; c0 += slice) {
            const int nc = std::min(slice, nr - c0);
            dgemm_("N", "T", &mr, &nc, &nb, &kMinusOne, a(i + nb, i), &m, yt + c0, &ldy, &kOne, a(i + nb, i + nb + c0), &m);
            dgemm_("N", "N", &mr, &nc, &nb, &kMinusOne, work + nb, &ldx, a(i, i + nb + c0), &m, &kOne,
                   a(i + nb, i + nb + c0), &m);
            report(base + 0.5 * panel * (1.0 + static_cast<double>(c0 + nc) / nr));
        }
        for (int j = i; j < i + nb; ++j) {
            *a(j, j) = d[j];
            *a(j, j + 1) = e[j];
        }
    }
    const int mr = m - i, nr = n - i;
    int info = 0;
    dgebd2_(&mr, &nr, a(i, i), &m, d + i, e + i, tauq + i, taup + i, work, &info);
}

// dbdsdc('U', 'N'): singular values of the upper bidiagonal (d, e) of order n, in place in d, descending;
// `work` holds at least 4n doubles.
void bidiagonal_singular_values(int n, double* d, double* e, double* work)
{
    std::vector<int> iwork(static_cast<std::size_t>(8) * static_cast<std::size_t>(n));
    double dum = 0.0;
    int idum = 0, info = 0;
    const int one_i = 1;
    dbdsdc_("U", "N", &n, d, e, &dum, &one_i, &dum, &one_i, &dum, &idum, work, iwork.data(), &info, 1, 1);
    if (info < 0)
        throw std::runtime_error("dbdsdc: illegal argument " + std::to_string(-info));
    if (info > 0)
        throw std::runtime_error("the bidiagonal SVD (dbdsdc) did not converge (info=" + std::to_string(info) + ")");
}

}  // namespace

std::vector<double> singular_values_with_progress(Eigen::MatrixXd&& A, const SvdProgress& progress)
{
    const util::FlushSubnormals flush;   // low-rank inputs decay into subnormals (util/flush_subnormals.h)
    if (A.rows() == 0 || A.cols() == 0)
        return {};
    if (!A.allFinite())
        throw std::invalid_argument("singular_values: the matrix has non-finite entries");
    if (A.rows() < A.cols())
        A = Eigen::MatrixXd(A.transpose());   // same singular values; upper bidiagonal path below
    constexpr Eigen::Index max_int = std::numeric_limits<int>::max();
    if (A.rows() > max_int || A.cols() > max_int)
        throw std::invalid_argument("singular_values: matrix too large for LAPACK");
    const int m = static_cast<int>(A.rows()), n = static_cast<int>(A.cols());

    const WorkMeasure cost{static_cast<double>(m), static_cast<double>(n)};
    const double reduce_total = cost.before(static_cast<double>(n));
    const double total = reduce_total + 40.0 * static_cast<double>(n) * static_cast<double>(n);
    const std::function<void(double)> report = [&](double done) {
        if (progress)
            progress(std::min(1.0, done / total));
    };
    report(0.0);

    const int scale = prepare_svd_input(A);   // subnormals to zero, extreme magnitudes scaled (metrics/svd_input.h)
    lapack_complaint();                       // a stale report of an earlier call is not this one's
    const DgesddScaling scaling(m, n, A.data());

    // dgebrd's workspace is always the optimal (m + n) nb here. One block laid out as dgesdd lays out its
    // WORK (e, tauq, taup, then dgebrd's and dbdsdc's work): OpenBLAS's kernels sum in an order that depends
    // on the alignment of X and Y, so the same layout keeps the results bit-identical to dgesdd's whenever
    // the allocator returns the same alignment.
    int nb = std::max(1, ilaenv(1, m, n));
    int nx = n;
    if (nb > 1 && nb < n)
        nx = std::max(nb, ilaenv(3, m, n));
    const std::size_t nn = static_cast<std::size_t>(n);
    std::vector<double> ws(3 * nn + static_cast<std::size_t>(std::max<std::int64_t>(
                                         {static_cast<std::int64_t>(m + n) * nb, std::max(m, n), 4 * std::int64_t{n}})));
    std::vector<double> d(nn);
    double* e = ws.data();
    double* tauq = e + nn;
    double* taup = tauq + nn;
    double* work = taup + nn;
    reduce_to_bidiagonal(m, n, Mat{A.data(), m}, nb, nx, d.data(), e, tauq, taup, work, cost, report);
    report(reduce_total);

    bidiagonal_singular_values(n, d.data(), e, work);
    scaling.unscale(n, d.data());
    std::sort(d.begin(), d.end(), std::greater<>());   // dbdsdc already returns them descending
    d = unscale_singular_values(std::move(d), scale);
    report(total);
    return d;
}

}  // namespace attnscope::metrics
