#include "metrics/metrics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include <lapacke.h>

#include "kernels/kernels.h"
#include "metrics/svd_input.h"
#include "metrics/svd_two_stage.h"
#include "util/flush_subnormals.h"

namespace {
thread_local std::string t_lapack_complaint;
}

// LAPACK's error handler (see metrics/svd_input.h): it records instead of printing. Only the routine's name
// is read, up to its first blank and at most 8 characters: the hidden length argument's width differs
// between Fortran compilers and OpenBLAS's C callers, so it is not trusted.
// The signature is the one Eigen's blas.h declares (EIGEN_USE_BLAS).
extern "C" int xerbla_(const char* name, int* info, int /*length: not trusted*/)
{
    std::string routine;
    for (int i = 0; name && i < 8 && name[i] != '\0' && name[i] != ' '; ++i)
        routine += name[i];
    t_lapack_complaint = routine + " argument " + std::to_string(info ? *info : 0);
    return 0;
}

namespace attnscope::metrics {

std::optional<std::string> lapack_complaint()
{
    if (t_lapack_complaint.empty())
        return std::nullopt;
    std::string out;
    out.swap(t_lapack_complaint);
    return out;
}

std::vector<double> singular_values(Eigen::MatrixXd&& A)
{
    const util::FlushSubnormals flush;   // low-rank inputs decay into subnormals (util/flush_subnormals.h)
    const Index rows = A.rows(), cols = A.cols();
    if (rows == 0 || cols == 0)
        return {};
    if (!A.allFinite())
        throw std::invalid_argument("singular_values: the matrix has non-finite entries");
    constexpr Index max_int = std::numeric_limits<lapack_int>::max();
    if (rows > max_int || cols > max_int)
        throw std::invalid_argument("singular_values: matrix too large for LAPACK");
    const int scale = prepare_svd_input(A);   // subnormals to zero, extreme magnitudes scaled (metrics/svd_input.h)
    // Large matrices: the two-stage reduction (level-3 BLAS only; metrics/svd_two_stage.h), 2-4x faster
    // than dgesdd's one-stage bidiagonalisation here and equal to it within O(eps) * s_1.
    if (std::min(rows, cols) >= k_two_stage_min_size) {
        std::vector<double> s = singular_values_two_stage(std::move(A));
        return unscale_singular_values(std::move(s), scale);
    }
    lapack_complaint();   // a stale report of an earlier call is not this one's
    std::vector<double> s(static_cast<std::size_t>(std::min(rows, cols)));
    // Values only (jobz = 'N'): no U, no V^T; their leading dimensions must still be >= 1.
    const lapack_int info =
        LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', static_cast<lapack_int>(rows), static_cast<lapack_int>(cols), A.data(),
                       static_cast<lapack_int>(rows), s.data(), nullptr, 1, nullptr, 1);
    if (info < 0)
        throw std::runtime_error("LAPACKE_dgesdd: illegal argument " + std::to_string(-info));
    if (info > 0)
        throw std::runtime_error("LAPACKE_dgesdd: the SVD did not converge (info=" + std::to_string(info) + ")");
    std::sort(s.begin(), s.end(), std::greater<>());   // LAPACK already returns them descending
    return unscale_singular_values(std::move(s), scale);
}

std::vector<double> unscale_singular_values(std::vector<double> s, int scale)
{
    if (const auto complaint = lapack_complaint())
        throw std::runtime_error("the SVD failed inside LAPACK (" + *complaint + " was illegal) on a " +
                                 std::to_string(s.size()) + "-value spectrum; please report it with the input");
    for (double& v : s) {
        if (!std::isfinite(v))
            throw std::runtime_error("the SVD returned a non-finite singular value on a finite matrix; please report "
                                     "it with the input");
        if (scale != 0) {
            v = std::ldexp(v, scale);
            if (!std::isfinite(v))
                throw std::invalid_argument("the singular values exceed the range of double precision (s_1 > 1.8e308)");
        }
    }
    return s;
}

SpectrumMetrics spectrum_metrics(std::vector<double> s, Index rows, Index cols, std::optional<double> rtol)
{
    if (rtol && !(*rtol >= 0.0 && std::isfinite(*rtol)))
        throw std::invalid_argument("rank-rtol " + std::to_string(*rtol) + " must be finite and >= 0");
    for (double v : s)
        if (!(v >= 0.0) || !std::isfinite(v))
            throw std::invalid_argument("spectrum_metrics: singular values must be finite and >= 0");
    std::sort(s.begin(), s.end(), std::greater<>());

    SpectrumMetrics out;
    const double s1 = s.empty() ? 0.0 : s.front();
    // numpy.linalg.matrix_rank's rule: s_1 * max(rows, cols) * eps, eps = 2^-52.
    out.tol = rtol ? *rtol * s1 : s1 * static_cast<double>(std::max(rows, cols)) * 0x1.0p-52;
    out.rank = static_cast<Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > out.tol; }));
    out.relative_rank = rows > 0 ? static_cast<double>(out.rank) / static_cast<double>(rows) : 0.0;
    if (s1 > 0.0) {
        double sum = 0.0, sum_sq = 0.0;
        for (double v : s) {
            sum += v;
            sum_sq += v * v;
        }
        // Roy & Vetterli: exp of the Shannon entropy of p = s / sum s (0 ln 0 = 0).
        double h = 0.0;
        for (double v : s) {
            const double p = v / sum;
            if (p > 0.0)
                h -= p * std::log(p);
        }
        out.effective_rank = std::exp(h);
        out.stable_rank = sum_sq / (s1 * s1);
    }
    out.energy_rank_90 = energy_rank(s, 0.90);
    out.energy_rank_99 = energy_rank(s, 0.99);
    for (std::size_t i = 0; i < k_rank_rtols.size(); ++i) {
        const double tol = k_rank_rtols[i].rtol * s1;
        out.rank_at_rtol[i] = static_cast<Index>(std::count_if(s.begin(), s.end(), [&](double v) { return v > tol; }));
    }
    out.singular_values = std::move(s);
    return out;
}

Index energy_rank(const std::vector<double>& s, double fraction)
{
    std::vector<double> partial(s.size());
    double sum = 0.0;
    for (std::size_t i = 0; i < s.size(); ++i) {
        sum += s[i] * s[i];
        partial[i] = sum;
    }
    const double target = fraction * sum;
    if (!(target > 0.0))
        return 0;
    for (std::size_t k = 0; k < partial.size(); ++k)
        if (partial[k] >= target)
            return static_cast<Index>(k + 1);
    return static_cast<Index>(s.size());   // not reached: the last partial sum is the total
}

EntropyStats row_entropy(const Eigen::Ref<const Eigen::MatrixXd>& A, const std::vector<Index>& allowed)
{
    const Index n = A.rows();
    if (static_cast<Index>(allowed.size()) != n)
        throw std::invalid_argument("row_entropy: " + std::to_string(allowed.size()) + " allowed-key counts for " +
                                    std::to_string(n) + " rows");
    EntropyStats out;
    out.rows.resize(static_cast<std::size_t>(n));
    if (n == 0)
        return out;
    // Rows of a column-major matrix: accumulated column by column so memory is read in order (core/kernels).
    Eigen::VectorXd H = Eigen::VectorXd::Zero(n);
    if (kernels::accumulate_entropy(A.data(), n, A.cols(), A.outerStride(), H.data()) != 0) {
        for (Index j = 0; j < A.cols(); ++j)
            for (Index t = 0; t < n; ++t) {
                const double a = A(t, j);
                if (!(a >= 0.0) || std::isinf(a))
                    throw std::invalid_argument("row_entropy: entry (" + std::to_string(t) + ", " + std::to_string(j) +
                                                ") is negative or not finite; entropy needs a non-negative matrix");
            }
    }
    std::vector<double> h(H.data(), H.data() + n);
    return entropy_stats(std::move(h), allowed);
}

EntropyStats entropy_stats(std::vector<double> h, const std::vector<Index>& allowed)
{
    const auto n = static_cast<Index>(h.size());
    if (static_cast<Index>(allowed.size()) != n)
        throw std::invalid_argument("entropy_stats: " + std::to_string(allowed.size()) + " allowed-key counts for " +
                                    std::to_string(n) + " rows");
    EntropyStats out;
    if (n == 0)
        return out;
    double sum = 0.0, norm_sum = 0.0;
    out.min = h[0];
    out.max = h[0];
    for (Index t = 0; t < n; ++t) {
        const double v = h[static_cast<std::size_t>(t)];
        sum += v;
        out.min = std::min(out.min, v);
        out.max = std::max(out.max, v);
        const Index nt = allowed[static_cast<std::size_t>(t)];
        if (nt > 1)
            norm_sum += v / std::log(static_cast<double>(nt));
    }
    out.mean = sum / static_cast<double>(n);
    double var = 0.0;
    for (double v : h)
        var += (v - out.mean) * (v - out.mean);
    out.std = std::sqrt(var / static_cast<double>(n));   // population std
    out.normalized_mean = norm_sum / static_cast<double>(n);
    out.rows = std::move(h);
    return out;
}

double support_normalized_mean(const std::vector<double>& h, const std::vector<Index>& support)
{
    if (support.size() != h.size())
        throw std::invalid_argument("support_normalized_mean: " + std::to_string(support.size()) + " support sizes for " +
                                    std::to_string(h.size()) + " rows");
    if (h.empty())
        return 0.0;
    double sum = 0.0;
    for (std::size_t t = 0; t < h.size(); ++t)
        if (support[t] > 1)
            sum += h[t] / std::log(static_cast<double>(support[t]));
    return sum / static_cast<double>(h.size());
}

}  // namespace attnscope::metrics
