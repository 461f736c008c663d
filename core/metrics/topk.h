#pragma once
// The k largest singular values of an attention operator without forming N x N: Spectra's symmetric
// Lanczos solver (SymEigsSolver) on the operator x -> A^T (A x), applied tile by tile
// (AttentionOperator::apply / apply_transpose), s_i = sqrt(lambda_i). O(N k) memory besides the operator.
#include <vector>

#include "attention/operator.h"

namespace attnscope::metrics {

struct TopSingularValues {
    std::vector<double> values;   // descending, k of them (all of them when k >= N - 1: dense fallback)
    bool converged = true;        // Spectra's CompInfo::Successful
    Eigen::Index products = 0;    // applications of A^T A
};

// Throws std::invalid_argument for k < 1.
TopSingularValues top_singular_values(const attention::AttentionOperator& op, Eigen::Index k, double tol = 1e-12);

}  // namespace attnscope::metrics
