#pragma once
// Numerical rank of an attention operator at a relative tolerance, bracketed without forming N x N:
// an adaptive randomized range finder (Halko, Martinsson & Tropp, "Finding structure with randomness",
// SIAM Review 53(2), 2011, Algorithm 4.2) run in blocks of `block` Gaussian vectors, each block applied
// to the operator in one call (AttentionOperator::apply / apply_transpose, tile by tile for softmax).
//
// The algorithm, for A  N by N:
//  1. A first s1: block subspace iteration on the first block (Omega  N by b Gaussian, V = orth(A Omega),
//     then V <- orth(A A^T V) until sigma_1(V^T A) changes by <= 1e-3 relatively, at most 4 steps);
//     sigma_1(V^T A) <= sigma_1(A) (Rayleigh-Ritz). V becomes the first block of Q. The loop below stops
//     on tol_test = rtol * sigma_1(V^T A).
//  2. Repeat: draw a fresh Gaussian block Omega (b columns, independent of Q), Y = A Omega,
//     Z = (I - Q Q^T) Y (two passes of classical Gram-Schmidt). HMT Lemma 4.1: for any fixed Q and
//     alpha > 1, ||(I - Q Q^T) A||_2 <= E = alpha sqrt(2/pi) max_i ||z_i||  except with probability
//     alpha^-b (HMT eq. 4.3 is alpha = 10, b = r = 10). Stop when E <= tol_test (converged) or when Q has
//     max_rank columns (not converged, unless E <= the final tol); otherwise extend Q by orth(Z) (after `power_iterations` steps
//     Z <- A A^T orth(Z) on the deflated operator), re-orthogonalised: CGS2 against Q, then Householder QR
//     (Eigen::HouseholderQR), then once more.  When the loop stops with room left, the last block Z is
//     appended as well (it can only tighten the bracket).
//  3. B = Q^T A (via A^T Q, in chunks of max(b, 256) columns), its singular values by metrics::singular_values.
//     s1 = sigma_1(B) (>= the step-1 value, since V is part of Q; <= sigma_1(A)), tol = rtol * s1 >= tol_test,
//     so a test passed at tol_test holds at tol too. tol is never larger than rtol * sigma_1(A); every claim
//     below is about this tol, and sigma_1(A) <= s1 + E bounds how much smaller it can be.
//
// What it proves, with k_test = columns of Q at the passing test and B from the final Q:
//  - lower = #{sigma_i(B) > tol}: deterministic, since sigma_i(Q^T A) <= sigma_i(A) for any orthonormal Q
//    (Cauchy interlacing), so at least `lower` singular values of A exceed tol.
//  - upper: if converged, with probability >= 1 - failure_probability, ||(I - Q Q^T) A||_2 <= E <= tol, so
//    sigma_{k_test+1}(A) <= tol and (Weyl, A = Q B + (I - Q Q^T) A) sigma_i(A) <= sigma_i(B) + E; hence
//    upper = min(k_test, #{sigma_i(B) > tol - E}). Not converged: upper = N (nothing proven above).
//    If Q reaches N columns it spans R^N, E = 0 deterministically and upper = lower.
//  - failure_probability: the stopping time is adaptive, so the per-test probabilities are added over the
//    most tests the run could make (T_max): alpha is chosen so that T_max alpha^-b = 1e-10.
// All of this is in exact arithmetic on the computed Q (orthonormal to rounding); rounding perturbs the
// computed sigma_i(B) and E by about machine epsilon times s1, which matters only for singular values within
// that distance of tol. Memory: O(N max_rank) (Q and A^T Q); products: about 2 k (1 + power_iterations)
// plus the s1 steps.
#include <cstdint>
#include <vector>

#include "attention/operator.h"
#include "metrics/metrics.h"

namespace attnscope::metrics {

struct RandomizedRank {
    Index lower = 0;                  // proven: at least this many singular values of A exceed tol
    Index upper = 0;                  // with probability >= 1 - failure_probability: at most this many exceed tol
    double s1 = 0;                    // sigma_1(B): a lower bound on sigma_1(A) (Ritz value)
    double s1_upper = 0;              // s1 + residual_bound: sigma_1(A) <= s1_upper (same probability)
    double tol = 0;                   // absolute tolerance = rtol * s1
    double residual_bound = 0;        // E at the stop: ||(I - Q Q^T) A||_2 <= E with prob. >= 1 - failure_probability
    double failure_probability = 0;   // 1e-10, or 0 when Q reached N columns (then everything is deterministic)
    Index basis_size = 0;             // columns of Q
    Index products = 0;               // columns A or A^T was applied to, in total
    Index tests = 0;                  // probe blocks drawn (step 2)
    bool converged = false;           // E <= tol at the stop (else Q reached max_rank columns first)
    std::vector<double> singular_values;   // of B = Q^T A, descending (lower bounds of A's leading ones)
};

// rtol in (0, 1); max_rank 0 means min(N, 2048) (clamped to N); block >= 1 Gaussian vectors per block
// (also the number of probes per test); power_iterations >= 0. Deterministic for a given seed (util/rng.h).
// Throws std::invalid_argument for rtol outside (0, 1) or not finite, block < 1, max_rank < 0,
// power_iterations < 0.
RandomizedRank randomized_rank(const attention::AttentionOperator& op, double rtol, std::uint64_t seed = 0,
                               Index max_rank = 0, Index block = 32, int power_iterations = 0);

}  // namespace attnscope::metrics
