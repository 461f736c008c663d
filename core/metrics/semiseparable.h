#pragma once
// The semiseparable profile of docs/maths.md 2.2: the rank of every past block A[h:N, 0:h] of an attention
// matrix (Mamba-2's semiseparable rank, the d bound at every split), from factors that give each block:
//   A[t, j] = mixing(block[t], block[j]) * w(t, j) * x.row(t) . y.row(j)   for t >= h > j,
//   w(t, j) = step[j+1] * ... * step[t]   (step empty: w = 1).
// Linear attention, cosformer and MHLA are this with step empty (x holds the row normaliser), decay and gated
// with one block and their per-token weights (gamma, or the gates). Splits come either from one thin QR of
// each side per split (block_factor_singular_values: any few splits) or, for many splits, from R factors
// carried along the token line by Givens rotations: the query side's R of rows h.. built once backwards and
// kept per token (packed, about N r^2 / 2 doubles), the key side's grown forwards, so that every split costs
// only the SVD of its small core (linear: r x r). Both are orthogonal reductions of the same block and agree
// to rounding; neither ever forms the (N - h) x h block.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <Eigen/Core>

namespace attnscope::metrics {

using Index = Eigen::Index;

struct SplitFactors {
    Eigen::MatrixXd x;             // N by r: the query side (rows t; each row's normaliser folded in)
    Eigen::MatrixXd y;             // N by r: the key side (rows j)
    Eigen::MatrixXd mixing;        // M by M, 0 where the mask forbids the pair of blocks (one block: 1 x 1)
    std::vector<Index> block;      // N block indices in 0..M-1 (empty: every token in block 0)
    Eigen::VectorXd step;          // N: w(t, t-1) = step[t] (step[0] unused); empty: no weights
};

// One split of the profile: the block A[h:N, 0:h] (rows x cols), its numerical rank by the rule of
// docs/maths.md 2 on its own singular values (tol = s_1 max(rows, cols) 2^-52, or rtol s_1) and its energy
// rank 99%.
struct SplitRank {
    Index h = 0, rows = 0, cols = 0, rank = 0, energy_rank_99 = 0;
};

// The default set H of docs/maths.md 2.2: `count` splits evenly spaced, h_i = floor(i N / (count + 1)) for
// i = 1..count, plus every block boundary (the first token of each block but the one holding token 0),
// ascending and distinct, each in 1..N-1. `block` may be empty (one block).
std::vector<Index> default_splits(Index n, Index count, const std::vector<Index>& block);
// Every split 1..N-1.
std::vector<Index> all_splits(Index n);

// Bytes the carried R factors of profile_from_factors hold for N tokens of width r (its memory check).
std::uint64_t carried_factor_bytes(Index n, Index r);
// From this many splits on profile_from_factors carries the R factors; below it each split has its own QRs.
inline constexpr std::size_t k_carry_from_splits = 64;

// The profile of the factored matrix at `splits` (ascending, distinct, in 1..N-1), on `threads` threads
// (splits cut into contiguous runs). `keep_going`, when given, is asked between splits and stops the work
// (the result is then empty). Throws std::invalid_argument for inconsistent shapes, a split outside 1..N-1
// or factors that are not finite.
std::vector<SplitRank> profile_from_factors(const SplitFactors& f, const std::vector<Index>& splits,
                                            std::optional<double> rtol, int threads,
                                            const std::function<bool()>& keep_going = {});

// The profile of a formed N x N matrix at `splits`: the SVD of each block. O(sum over splits of (N-h) h min).
std::vector<SplitRank> profile_from_matrix(const Eigen::Ref<const Eigen::MatrixXd>& A, const std::vector<Index>& splits,
                                           std::optional<double> rtol, const std::function<bool()>& keep_going = {});

// rank and energy rank 99% of a rows x cols block from its singular values (descending; missing ones are 0).
SplitRank split_rank(Index h, Index rows, Index cols, const std::vector<double>& s, std::optional<double> rtol);

}  // namespace attnscope::metrics
