// The attention maps' causal masks and colour ranges (analysis/map_scale.h) on small matrices whose
// answers are written out by hand: the causal rule j <= t and MHLA's block rule (docs/maths.md 1.1, 1.4),
// masked cells of a reduced image, nearest-rank percentiles without the masked entries, ranges from 0, on
// a log scale and symmetric for differences.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "analysis/map_scale.h"

using namespace attnscope;
using analysis::CausalMask;
using analysis::MapValues;
using Eigen::Index;

namespace {

// n x n, causal: entry (t, j) = 10 t + j + 1 for j <= t, 0 above the diagonal.
analysis::MechanismOutcome causal_outcome(Index n)
{
    analysis::MechanismOutcome o;
    o.result.mechanism = attention::Mechanism::softmax;
    Eigen::MatrixXd A = Eigen::MatrixXd::Zero(n, n);
    for (Index t = 0; t < n; ++t) {
        for (Index j = 0; j <= t; ++j)
            A(t, j) = static_cast<double>(10 * t + j + 1);
        o.allowed_keys.push_back(t + 1);
    }
    o.matrix = std::make_shared<const Eigen::MatrixXd>(A);
    return o;
}

analysis::ExploreResult result_of(Index n)
{
    analysis::ExploreResult r;
    r.n = n;
    return r;
}

}  // namespace

TEST(MapScale, CausalMaskIsTheLowerTriangle)
{
    const auto r = result_of(4);
    const auto o = causal_outcome(4);
    const CausalMask mask = CausalMask::of(r, o);
    ASSERT_TRUE(mask.active());
    for (Index t = 0; t < 4; ++t)
        for (Index j = 0; j < 4; ++j)
            EXPECT_EQ(mask.allowed(t, j), j <= t) << t << ", " << j;

    auto full = o;
    full.allowed_keys.assign(4, 4);
    EXPECT_FALSE(CausalMask::of(r, full).active());   // not causal: nothing masked
    auto odd = o;
    odd.allowed_keys = {2, 2, 3, 4};   // counts no rule gives: no mask rather than a wrong one
    EXPECT_FALSE(CausalMask::of(r, odd).active());
}

TEST(MapScale, MhlaMaskFollowsTheBlockRule)
{
    // Blocks interleaved as on a raster grid: tokens 0, 2 in block 0 and 1, 3 in block 1. Query t sees key
    // j when blk(j) < blk(t), or the same block and j <= t: t = 1 sees 0, 1 and 2 (a later token of an
    // earlier block), t = 2 sees 0 and 2.
    auto r = result_of(4);
    attention::BlockLayout b;
    b.num_tokens = 4;
    b.num_blocks = 2;
    b.block_of_token = {0, 1, 0, 1};
    b.tokens = {{0, 2}, {1, 3}};
    r.blocks = b;
    auto o = causal_outcome(4);
    o.result.mechanism = attention::Mechanism::mhla;
    o.allowed_keys = {1, 3, 2, 4};
    const CausalMask mask = CausalMask::of(r, o);
    ASSERT_TRUE(mask.active());
    const bool expected[4][4] = {{true, false, false, false}, {true, true, true, false}, {true, false, true, false}, {true, true, true, true}};
    for (Index t = 0; t < 4; ++t)
        for (Index j = 0; j < 4; ++j)
            EXPECT_EQ(mask.allowed(t, j), expected[t][j]) << t << ", " << j;
}

TEST(MapScale, MaskedCellsOfAReducedImage)
{
    const auto r = result_of(4);
    const auto o = causal_outcome(4);
    const CausalMask mask = CausalMask::of(r, o);
    // 2 x 2 cells of 2 x 2 entries: only the top right cell (rows 0-1, keys 2-3) holds no allowed entry.
    const auto img = analysis::reduce_region(*o.matrix, 0, 4, 0, 4, 2, 2, analysis::Reduce::max);
    ASSERT_EQ(img.rows, 2);
    EXPECT_EQ(mask.masked_cells(img, 4), (std::vector<char>{0, 1, 0, 0}));
    EXPECT_TRUE(CausalMask().masked_cells(img, 4).empty());
}

TEST(MapScale, PercentilesLeaveTheMaskOut)
{
    const auto r = result_of(4);
    const auto o = causal_outcome(4);
    const CausalMask mask = CausalMask::of(r, o);
    const MapValues v = analysis::map_values(o, mask, nullptr, nullptr, 4, analysis::Reduce::max);
    // The 10 allowed entries: 1; 11 12; 21 22 23; 31 32 33 34 (the six zeros above the diagonal left out).
    ASSERT_EQ(v.values.size(), 10u);
    EXPECT_EQ(v.min, 1);
    EXPECT_EQ(v.max, 34);
    EXPECT_EQ(v.min_positive, 1);
    EXPECT_FALSE(v.signed_values);
    EXPECT_EQ(v.top(100), 34);
    EXPECT_EQ(v.top(50), 22);   // nearest rank: index floor(0.5 * 9) = 4 of the sorted values
    EXPECT_EQ(v.top(90), 33);   // index floor(0.9 * 9) = 8

    const auto range = analysis::colour_range({&v}, 90, false);
    EXPECT_EQ(range.lo, 0);
    EXPECT_EQ(range.hi, 33);
    EXPECT_FALSE(range.diverging);
    const auto log = analysis::colour_range({&v}, 100, true);
    EXPECT_TRUE(log.log);
    EXPECT_EQ(log.lo, 1);   // the smallest positive value
    EXPECT_EQ(log.hi, 34);
}

// A matrix with a negative entry (a signed Mc) gets a diverging scale even when the max cells of its pyramid hide
// the entry (N > kRangeCells).
TEST(MapScale, NegativeEntriesHiddenByMaxCellsStillMakeTheScaleSigned)
{
    const Index n = 2 * analysis::kRangeCells;   // each cell the max of 2 x 2 entries
    Eigen::MatrixXd A = Eigen::MatrixXd::Constant(n, n, 1.0 / static_cast<double>(n));
    A(5, 7) = -1e-4;   // its cell's max is positive
    analysis::MechanismOutcome o;
    o.result.mechanism = attention::Mechanism::mhla;
    o.allowed_keys.assign(static_cast<std::size_t>(n), n);
    o.pyramid = std::make_shared<const analysis::MatrixPyramid>(analysis::make_pyramid(A));
    o.matrix = std::make_shared<const Eigen::MatrixXd>(std::move(A));
    const auto r = result_of(n);
    const MapValues v = analysis::map_values(o, CausalMask::of(r, o), nullptr, nullptr, n, analysis::Reduce::max);
    EXPECT_GE(v.min, 0.0);   // no cell shows the negative entry
    EXPECT_TRUE(v.signed_values);
    EXPECT_TRUE(analysis::colour_range({&v}, 100, false).diverging);
}

TEST(MapScale, DifferencesAreSymmetricAroundZero)
{
    const auto r = result_of(4);
    const auto a = causal_outcome(4);
    auto b = causal_outcome(4);
    Eigen::MatrixXd B = *b.matrix;
    B(3, 0) += 50;   // a - b = -50 there, 0 elsewhere
    b.matrix = std::make_shared<const Eigen::MatrixXd>(B);
    const CausalMask mask = CausalMask::of(r, a);
    const MapValues v = analysis::map_values(a, mask, &b, &mask, 4, analysis::Reduce::mean);
    EXPECT_TRUE(v.signed_values);
    EXPECT_EQ(v.min, -50);
    EXPECT_EQ(v.top(100), 50);   // magnitudes
    const auto range = analysis::colour_range({&v}, 100, true);
    EXPECT_TRUE(range.diverging);
    EXPECT_FALSE(range.log);   // no log scale for signed values
    EXPECT_EQ(range.lo, -50);
    EXPECT_EQ(range.hi, 50);
}
