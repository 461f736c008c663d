#pragma once
// What every dense SVD entry point (singular_values, the two-stage reduction, the interruptible replica) does
// to its input before LAPACK sees it, so that every finite matrix has its singular values (docs/maths.md 2):
//
//  - Subnormal entries (0 < |a| < 2^-1022) become exact zeros. The SVDs run with flush-to-zero and
//    denormals-are-zero (util/flush_subnormals.h); a subnormal in the *input* is then zero to arithmetic and
//    comparisons but not to bitwise steps (fabs, LAPACK's dlange/dlanst), and dgesdd, meeting such a matrix,
//    handed dlascl a zero norm and returned NaN singular values (softmax of logits ~1e9 has entries of
//    1e-309 beside its ones). The zeros are below every rank tolerance (eps N s_1), so no reported number
//    changes.
//  - A matrix whose largest entry lies outside [2^-500, 2^500] is scaled by a power of two first (exact: every
//    entry keeps its mantissa) and the singular values scaled back: the two-stage reduction has no scaling of
//    its own, and products of entries near 2^±1023 overflow or underflow.
//
// And what LAPACK says: its error handler xerbla_ (an illegal argument, which LAPACK prints to the terminal)
// is replaced by one that records the routine and the argument for the calling thread; lapack_complaint()
// returns and clears it, and the callers turn it into one error naming the SVD (never LAPACK's raw lines).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <Eigen/Core>

namespace attnscope::metrics {

// Zeroes subnormal entries; returns the power-of-two exponent k such that the singular values of the scaled
// matrix times 2^k are those of the input (0 when nothing was scaled). The input must be finite.
inline int prepare_svd_input(Eigen::MatrixXd& A)
{
    double* p = A.data();
    const Eigen::Index count = A.size();
    double amax = 0.0;
    for (Eigen::Index i = 0; i < count; ++i) {
        std::uint64_t bits;
        std::memcpy(&bits, p + i, sizeof bits);
        const std::uint64_t magnitude = bits & 0x7fffffffffffffffULL;
        if (magnitude != 0 && magnitude < 0x0010000000000000ULL) {   // exponent field 0, mantissa not: subnormal
            p[i] = 0.0;
            continue;
        }
        const double a = std::fabs(p[i]);
        if (a > amax)
            amax = a;
    }
    if (amax == 0.0 || (amax >= 0x1.0p-500 && amax <= 0x1.0p500))
        return 0;
    const int k = std::ilogb(amax);   // amax in [2^k, 2^(k+1))
    A *= std::ldexp(1.0, -k);         // exact; entries far below the largest may round to zero (below every tolerance)
    return k;
}

// The last illegal-argument report of LAPACK on this thread ("DLASCL argument 4"), cleared by reading.
std::optional<std::string> lapack_complaint();

}  // namespace attnscope::metrics
