#pragma once
// What an attention map's colours stand for: the keys a causal query may not see (drawn apart from a zero
// weight) and a colour range that shows a map's structure (from 0, or symmetric around 0 for signed
// values, up to a percentile so that a few peaks do not turn the rest into one colour; or logarithmic).
// A map's range is taken from the whole matrix as the zoomed-out map draws it: reduce_region at
// kRangeCells cells per axis (every entry when N <= kRangeCells; for larger N the cells of the pyramid,
// max or mean as drawn), once per result and reduction, never per repaint. Cells that hold only entries a
// causal query may not see are left out of the range (the app draws them in its mask colour).
#include <cstdint>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "analysis/explore.h"

namespace attnscope::analysis {

// Cells per axis of the image a colour range is taken from (exact entries up to N = 1024).
constexpr Eigen::Index kRangeCells = 1024;

// The keys a causal query may not see: j > t for softmax and linear attention (docs/maths.md 1.1, 1.3),
// MHLA's block rule for MHLA: blk(j) > blk(t), or the same block and j > t (docs/maths.md 1.4). An outcome
// is causal when some query sees fewer than N keys (MechanismOutcome::allowed_keys).
class CausalMask {
public:
    CausalMask() = default;
    static CausalMask of(const ExploreResult& result, const MechanismOutcome& outcome);
    bool active() const { return !m_key.empty(); }
    bool allowed(Eigen::Index t, Eigen::Index j) const
    {
        return m_key.empty() || m_key[static_cast<std::size_t>(j)] <= m_key[static_cast<std::size_t>(t)];
    }
    // For each cell of `img` (row-major, as reduce_region lays it out over an n x n matrix): 1 when none of
    // the entries it covers is allowed. Empty when the mask is not active.
    std::vector<char> masked_cells(const ReducedImage& img, Eigen::Index n) const;

private:
    std::vector<std::int64_t> m_key;   // key j is allowed to query t when m_key[j] <= m_key[t]
};

// The first entry of each of img's cells along one axis and the end of the last (cells + 1 values): the
// partition reduce_region uses (cell i holds source units [i h / cells, (i + 1) h / cells) of the level's
// block size), in entries of the n x n matrix.
std::vector<Eigen::Index> cell_edges(Eigen::Index first, Eigen::Index end, Eigen::Index cells, Eigen::Index factor, Eigen::Index n);

// The values a map's colour range is taken from: its cells that hold an allowed entry.
struct MapValues {
    std::vector<float> values;   // magnitudes when signed_values
    double min = 0, max = 0;
    double min_positive = std::numeric_limits<double>::infinity();
    bool signed_values = false;   // a difference, or a matrix with negative entries (identity feature maps)
    // The p-th percentile of the values (nearest rank), or for p >= 100 the largest (magnitude).
    double top(double percentile) const;
};

// A map's values: matrix `a` (minus matrix `b` for a difference; cells masked in both are left out).
MapValues map_values(const MechanismOutcome& a, const CausalMask& mask_a, const MechanismOutcome* b, const CausalMask* mask_b,
                     Eigen::Index n, Reduce how);

struct ColourRange {
    double lo = 0, hi = 1;
    bool log = false;
    bool diverging = false;   // symmetric around 0 (differences, signed scores)
};
// The range of maps whose values are `values`: from 0 (or, on a log scale, the smallest positive value,
// at least 1e-5 of the top) to their largest top(percentile); symmetric around 0 when any is signed (no
// log scale then).
ColourRange colour_range(const std::vector<const MapValues*>& values, double percentile, bool log_requested);

}  // namespace attnscope::analysis
