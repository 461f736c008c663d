#pragma once
// Exact singular values of non-causal linear and MHLA attention from their factors (docs/maths.md 3),
// never forming the N x N matrix.
//
// A = diag(s) * blockdiag(Phi_Q per block) * (Mc kron I_r) * blockdiag(Phi_K per block)^T.
// Thin QR of each block's scaled query features, diag(s_b) Phi_Q,b = U_b R_b, and of its key features,
// Phi_K,b = V_b S_b, give A = blockdiag(U) * C * blockdiag(V)^T with orthonormal blockdiag(U), (V) and
// the small core C[i,j] = Mc[i,j] * R_i S_j^T. The non-zero singular values of A are those of C:
// O(N r^2 + (M r)^3) time, O(N r + (M r)^2) memory.
#include <vector>

#include "attention/operator.h"

namespace attnscope::metrics {

// All N singular values of the operator with these (non-causal) factors, descending; the N - size(C)
// structural zeros are exact zeros. Throws std::invalid_argument for causal pieces or bad shapes.
std::vector<double> structured_singular_values(const attention::KernelFactors& factors);

// Side of the core C for these factors (sum over blocks of min(block size, r)): the cost driver.
Eigen::Index structured_core_size(const attention::KernelFactors& factors);

}  // namespace attnscope::metrics
