#pragma once
// Exact singular values of non-causal linear and MHLA attention from their factors (docs/maths.md 3),
// never forming the N x N matrix.
//
// A = diag(s) * blockdiag(Phi_Q per block) * (Mc kron I_r) * blockdiag(Phi_K per block)^T.
// Thin QR of each block's scaled query features, diag(s_b) Phi_Q,b = U_b R_b, and of its key features,
// Phi_K,b = V_b S_b, give A = blockdiag(U) * C * blockdiag(V)^T with orthonormal blockdiag(U), (V) and
// the small core C[i,j] = Mc[i,j] * R_i S_j^T. The non-zero singular values of A are those of C:
// O(N r^2 + (M r)^3) time, O(N r + (M r)^2) memory.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attention/operator.h"

namespace attnscope::metrics {

// All N singular values of the operator with these (non-causal) factors, descending; the N - size(C)
// structural zeros are exact zeros. Throws std::invalid_argument for causal pieces or bad shapes.
std::vector<double> structured_singular_values(const attention::KernelFactors& factors);

// A rectangular block of an attention matrix given by factors (rows i, columns j of the block):
//   B[i,j] = mixing(row_block[i], col_block[j]) * x.row(i) . y.row(j),
// so rank(B) <= M r. Linear attention and the decay families have M = 1.
struct BlockFactorization {
    Eigen::MatrixXd x;                // rows by r: the query side, each row's normaliser and weights folded in
    Eigen::MatrixXd y;                // cols by r: the key side
    Eigen::MatrixXd mixing;           // M by M (0 where the mask forbids the pair of blocks)
    std::vector<Eigen::Index> row_block;   // rows block indices
    std::vector<Eigen::Index> col_block;   // cols block indices
};

// A rows x cols matrix given by factors with blocks on each side (a rectangular block of an attention matrix,
// BlockFactorization above): B[i,j] = mixing(row_block[i], col_block[j]) * x.row(i) . y.row(j). Its
// min(rows, cols) singular values, descending, as for the square case above: thin QR of each block's rows of
// x and of y, then the SVD of the small core; the structural zeros are exact zeros. O((rows + cols) r^2 +
// (M r)^3) time. Throws std::invalid_argument for bad shapes or block indices.
std::vector<double> block_factor_singular_values(const BlockFactorization& factors);

// The singular values of the inverse of the lower bidiagonal matrix with `diagonal` (n, no zero) and
// `subdiagonal` (n - 1; entry t is B[t + 1, t]), descending: 1 / the singular values of B, which LAPACK's
// dbdsqr (values only: dqds) gives to high relative accuracy, so each 1/s has a relative error of a few eps
// whatever its size. O(n^2) at worst. Throws std::invalid_argument for bad sizes or a zero on the diagonal,
// std::runtime_error when dqds does not converge.
std::vector<double> inverse_bidiagonal_singular_values(const Eigen::VectorXd& diagonal, const Eigen::VectorXd& subdiagonal);

// The causal averaging matrix of N tokens, A0 = D^{-1} L (L the lower triangle of ones, D = diag(t + 1)):
// softmax's and linear attention's content-free baseline on the causal mask (docs/maths.md 2.2). Its inverse
// L^{-1} D is lower bidiagonal with diagonal t + 1 and subdiagonal -t (0-based t), so its singular values
// are inverse_bidiagonal_singular_values of those: exact integers in, every value to a few eps relative.
std::vector<double> causal_averaging_singular_values(Eigen::Index n);

// Side of the core C for these factors (sum over blocks of min(block size, r)): the cost driver.
Eigen::Index structured_core_size(const attention::KernelFactors& factors);

// The cap a mixing matrix puts on non-causal MHLA's rank whatever the data (docs/maths.md 1.6 and 3): the
// factorisation above gives rank(A) <= rank(Mc) * r. It is worth saying when it binds below what the blocks
// allow, rank(Mc) * r < min(N, M * r): then the mixing matrix, not the data, decides the rank (1-D `cos`
// mixing has rank 2, so MHLA rank <= 2r).
struct MixingRankCap {
    Eigen::Index mixing_rank = 0;   // rank(Mc) by the numpy.linalg.matrix_rank rule on its singular values
    Eigen::Index features = 0;      // r
    Eigen::Index bound = 0;         // rank(Mc) * r
    Eigen::Index allowed = 0;       // min(N, M * r)
};

// rank(Mc): #{ s_i > s_1 * M * 2^-52 } (docs/maths.md 2).
Eigen::Index mixing_rank(const Eigen::MatrixXd& mixing);
// The cap of the operator with these kernel pieces (MHLA; linear attention, one block, never has one), or
// nothing when it does not bind or the pieces are causal (the causal mask breaks the factorisation).
std::optional<MixingRankCap> mixing_rank_cap(const attention::KernelFactors& pieces);
// The cap in words for every report, `label` naming the mechanism: "the mixing matrix has rank 2: MHLA rank <= 32
// whatever the data (rank(Mc) x r = 2 x 16 features; N and M x r allow 256)".
std::string rank_cap_sentence(const MixingRankCap& cap, std::string_view label);
// True for a warning rank_cap_sentence wrote (reports read back from JSON keep only the words).
bool is_rank_cap_sentence(std::string_view warning);

}  // namespace attnscope::metrics
