// Counts and numbers from untrusted text (docs/security.md, "Counts and sizes"): the strict parsers and
// overflow-safe products of util/checked.h, token grids whose product wraps around, a chunk size that
// overflows ceil(N / C), the parsers of comma lists, and a sweep's counts checked against their caps and
// the memory budget before anything is allocated.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "analysis/plan.h"
#include "analysis/sweep.h"
#include "analysis/vocabulary.h"
#include "attention/blocks.h"
#include "io/writers.h"
#include "support/test_support.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/rng.h"

using namespace attnscope;
using Eigen::Index;

namespace {

// The message of what `f` refuses with: std::invalid_argument, or MemoryLimitError for sizes over the memory
// limit (empty when it throws neither).
template <class F>
std::string refusal(F&& f)
{
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return e.what();
    } catch (const MemoryLimitError& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST(StrictNumbers, DecimalIntegersOnly)
{
    EXPECT_EQ(parse_decimal("0"), 0);
    EXPECT_EQ(parse_decimal("42"), 42);
    EXPECT_EQ(parse_decimal("-7"), -7);
    EXPECT_EQ(parse_decimal("010"), 10);   // decimal, never octal
    EXPECT_EQ(parse_decimal("9223372036854775807"), std::numeric_limits<std::int64_t>::max());
    EXPECT_EQ(parse_decimal("-9223372036854775808"), std::numeric_limits<std::int64_t>::min());
    for (const char* bad : {"", "-", "+1", " 1", "1 ", "0x1", "0X1F", "1e3", "1.0", "1,000", "9223372036854775808",
                            "99999999999999999999", "-9223372036854775809", "--1", "1-", "nan", "inf", "١", "1\n",
                            "0b1", "1_000", "\t2"})
        EXPECT_FALSE(parse_decimal(bad).has_value()) << "'" << bad << "'";
}

TEST(StrictNumbers, FiniteDecimalsOnly)
{
    EXPECT_EQ(parse_finite("0.5"), 0.5);
    EXPECT_EQ(parse_finite("-2"), -2.0);
    EXPECT_EQ(parse_finite("1e-3"), 1e-3);
    EXPECT_EQ(parse_finite("1E+3"), 1e3);
    for (const char* bad : {"", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "0x1p3", "+1", " 1",
                            "1 ", "1,5", "1.5.2", "e5", ".", "-", "nan(0x1)", "1e", "0x10"})
        EXPECT_FALSE(parse_finite(bad).has_value()) << "'" << bad << "'";
}

TEST(StrictNumbers, CheckedArithmetic)
{
    const std::int64_t big = std::numeric_limits<std::int64_t>::max();
    EXPECT_EQ(checked_mul<std::int64_t>(3, 4), 12);
    EXPECT_FALSE(checked_mul<std::int64_t>(big, 2).has_value());
    EXPECT_FALSE(checked_add<std::int64_t>(big, 1).has_value());
    EXPECT_EQ(checked_product<std::int64_t>({}), 1);
    EXPECT_EQ(checked_product<std::int64_t>({14, 14}), 196);
    // 17 x 4340410370284600384 = 2^66 + 64: wraps to 64 in 64 bits.
    EXPECT_FALSE(checked_product<std::int64_t>({17, 4340410370284600384}).has_value());
    EXPECT_FALSE(checked_product<std::uint64_t>({1ULL << 32, 1ULL << 32}).has_value());
}

TEST(StrictNumbers, CommaListsRefuseWhatStollWouldBend)
{
    EXPECT_EQ(analysis::parse_sizes("16, 16", "--grid"), (std::vector<Index>{16, 16}));
    for (const char* bad : {"16,0x10", "99999999999999999999", "16,+4", "1e3", "16,,16", "-4", "0"})
        EXPECT_NE(refusal([&] { analysis::parse_sizes(bad, "--grid"); }).find("--grid"), std::string::npos) << bad;
    for (const char* bad : {"0x1", "99999999999999999999", "+1", "-1"})
        EXPECT_NE(refusal([&] { analysis::parse_indices(bad, "--heads"); }).find("--heads"), std::string::npos) << bad;
}

// split_exact keeps every piece as it is (paths, platform lists); split_list is it without white space.
TEST(StrictNumbers, SplittingKeepsEmptyPieces)
{
    using V = std::vector<std::string>;
    EXPECT_EQ(analysis::split_exact("", ';'), V{""});
    EXPECT_EQ(analysis::split_exact("a;;b ;", ';'), (V{"a", "", "b ", ""}));
    EXPECT_EQ(analysis::split_exact("./a//m.h5", '/'), (V{".", "a", "", "m.h5"}));
    EXPECT_EQ(analysis::split_list(" 16 , 1 6,", ','), (V{"16", "16", ""}));
    EXPECT_EQ(analysis::split_list("", ','), V{""});
}

TEST(Blocks, GridProductThatWrapsIsRefused)
{
    attention::BlockSpec spec;
    spec.kind = attention::BlockSpec::Kind::grid;
    spec.grid = {17, 4340410370284600384};   // wraps to 64
    spec.block_grid = {1, 1};
    EXPECT_NE(refusal([&] { attention::make_blocks(spec, 64); }).find("overflows"), std::string::npos);
    spec.grid = {4611686018427387904, 4, 1};   // 2^62 x 4 wraps to 0
    spec.block_grid = {1, 1, 1};
    EXPECT_NE(refusal([&] { attention::make_blocks(spec, 64); }).find("overflows"), std::string::npos);
    spec.grid = {8, 8};
    spec.block_grid = {2, 2};
    EXPECT_EQ(refusal([&] { attention::make_blocks(spec, 64); }), "");
}

TEST(Blocks, HugeChunkIsOneBlock)
{
    attention::BlockSpec spec;
    spec.kind = attention::BlockSpec::Kind::chunk;
    spec.chunk = std::numeric_limits<Index>::max();   // N + C - 1 overflowed to a negative block count
    const attention::BlockLayout layout = attention::make_blocks(spec, 10);
    EXPECT_EQ(layout.num_blocks, 1);
    spec.chunk = 3;
    EXPECT_EQ(attention::make_blocks(spec, 10).num_blocks, 4);
    spec.chunk = 5;
    EXPECT_EQ(attention::make_blocks(spec, 10).num_blocks, 2);
}

TEST(SweepCounts, CappedBeforeAllocating)
{
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"gaussian", 8, 1, 0};
    spec.vary = 'n';
    spec.values = {16};
    spec.memory_limit = 1ULL << 30;
    EXPECT_EQ(refusal([&] { analysis::validate_sweep_counts(spec); }), "");

    spec.synth->seeds = 1'000'000'000;
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec); }).find("--seeds 1000000000"), std::string::npos);
    spec.synth->seeds = std::numeric_limits<Index>::max();
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec); }).find("--seeds"), std::string::npos);
    spec.synth->seeds = 0;
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec); }).find("--seeds"), std::string::npos);

    // Each count under its cap, their product over it.
    spec.synth->seeds = 400'000;
    spec.values = {16, 32};
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec); }).find("analyses"), std::string::npos);
    EXPECT_NE(refusal([&] { analysis::plan_sweep(spec); }).find("analyses"), std::string::npos);

    // Synthetic N x d against the memory budget, named as the front end names it.
    spec.synth->seeds = 1;
    spec.values = {Index{1} << 40};
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec); }).find("--vary n=1099511627776"), std::string::npos);
    spec.vary = 'm';
    spec.values = {1};
    spec.synth->n = Index{1} << 40;
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec); }).find("--n 1099511627776"), std::string::npos);
    EXPECT_NE(refusal([&] { analysis::plan_sweep(spec); }).find("memory limit"), std::string::npos);

    // Draws, with the names a job file uses.
    spec = analysis::SweepSpec{};
    spec.inputs.push_back({io::parse_tensor_ref("a.h5:/q"), io::parse_tensor_ref("a.h5:/k"), std::nullopt, {}});
    spec.subsample = analysis::Subsample::random;
    spec.values = {16};
    spec.draws = 1'000'000'000;
    const analysis::SweepCountNames toml{"[[sweep]] s: draws", "seeds", "[[sweep]] s: vary", "n"};
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec, toml); }).find("[[sweep]] s: draws 1000000000"),
              std::string::npos);
    spec.draws = 0;
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec, toml); }).find("[[sweep]] s: draws"), std::string::npos);
    spec.draws = 400'000;   // x 3 mechanisms
    EXPECT_NE(refusal([&] { analysis::validate_sweep_counts(spec, toml); }).find("analyses"), std::string::npos);
    spec.mechanisms = {attention::Mechanism::linear};
    EXPECT_EQ(refusal([&] { analysis::validate_sweep_counts(spec, toml); }), "");
}

// The plan's own memory: every unit keeps its points (token subsets) and a record per point and mechanism.
TEST(SweepCounts, PlanMemoryIsCheckedBeforeThePointsAreMade)
{
    const std::string dir = test::fresh_work_dir("sweep_counts");
    io::write_hdf5(dir + "/s.h5", {{"/q", {4, 256, 4}, std::vector<double>(4 * 256 * 4, 0.5)},
                                   {"/k", {4, 256, 4}, std::vector<double>(4 * 256 * 4, 0.25)}});
    analysis::SweepSpec spec;
    spec.inputs.push_back({io::parse_tensor_ref(dir + "/s.h5:/q"), io::parse_tensor_ref(dir + "/s.h5:/k"), std::nullopt, {}});
    spec.vary = 'n';
    spec.values = {200};
    spec.subsample = analysis::Subsample::random;
    spec.draws = 200'000;   // x 4 heads: 800,000 analyses, under the cap; about 0.5 KB of tokens each
    spec.mechanisms = {attention::Mechanism::linear};
    spec.heads = analysis::AxisChoice::all("--heads");
    spec.memory_limit = 64ULL << 20;
    EXPECT_NE(refusal([&] { analysis::plan_sweep(spec); }).find("memory limit"), std::string::npos);
    spec.draws = 300'000;   // 1,200,000 analyses
    EXPECT_NE(refusal([&] { analysis::plan_sweep(spec); }).find("1200000 analyses"), std::string::npos);
    spec.draws = 4;
    EXPECT_EQ(analysis::plan_sweep(spec).analyses(), 16u);
}

// (A header claiming two billion heads is tested from the command line: tests/app/test_security_counts.cpp.)
TEST(Plan, UnitsWithinTheCap)
{
    const std::string dir = test::fresh_work_dir("plan_counts");
    io::write_hdf5(dir + "/s.h5", {{"/q", {2, 8, 4}, std::vector<double>(64, 0.5)}});
    const std::vector<analysis::Unit> units =
        analysis::plan_units({{io::parse_tensor_ref(dir + "/s.h5:/q"), io::parse_tensor_ref(dir + "/s.h5:/q"), std::nullopt, {}}}, analysis::AxisChoice::parse("", "--layers"),
                             analysis::AxisChoice::all("--heads"));
    EXPECT_EQ(units.size(), 2u);
    EXPECT_GE(analysis::k_max_units, 1'000'000u);
}

// A list that names one index twice would analyse one unit twice under one name (a job's `heads = [0, 0,
// ...]` of a hundred thousand zeros ran for minutes).
TEST(Plan, IndexListedTwiceIsRefused)
{
    const std::string dir = test::fresh_work_dir("plan_twice");
    io::write_hdf5(dir + "/s.h5", {{"/q", {2, 8, 4}, std::vector<double>(64, 0.5)}});
    const std::vector<analysis::TensorSource> inputs{{io::parse_tensor_ref(dir + "/s.h5:/q"), io::parse_tensor_ref(dir + "/s.h5:/q"), std::nullopt, {}}};
    const auto layers = analysis::AxisChoice::parse("", "--layers");
    EXPECT_EQ(analysis::plan_units(inputs, layers, analysis::AxisChoice::parse("1,0", "--heads")).size(), 2u);
    EXPECT_NE(refusal([&] { analysis::plan_units(inputs, layers, analysis::AxisChoice::parse("0,1,0", "--heads")); })
                  .find("--heads: index 0 is listed twice"),
              std::string::npos);
}

// Random subsets cost O(n) per draw, not O(available) (many draws of a few tokens of a long input), and
// are the very subsets of the dense partial Fisher-Yates they replace (util/rng.h's SplitMix64).
TEST(SweepCounts, RandomSubsetsAreTheDenseFisherYates)
{
    auto dense = [](Index available, Index n, std::uint64_t seed, Index draw) {
        std::vector<Index> all(static_cast<std::size_t>(available));
        for (Index i = 0; i < available; ++i)
            all[static_cast<std::size_t>(i)] = i;
        SplitMix64 rng(seed + static_cast<std::uint64_t>(draw));
        for (Index i = 0; i < n; ++i) {
            const auto left = static_cast<double>(available - i);
            const Index j = i + std::min(static_cast<Index>(rng.uniform() * left), available - i - 1);
            std::swap(all[static_cast<std::size_t>(i)], all[static_cast<std::size_t>(j)]);
        }
        std::vector<Index> out(all.begin(), all.begin() + n);
        std::sort(out.begin(), out.end());
        return out;
    };
    for (const auto& [available, n] : std::vector<std::pair<Index, Index>>{{1, 1}, {5, 5}, {10, 3}, {100, 30}, {257, 256}, {4096, 17}})
        for (Index draw = 0; draw < 4; ++draw)
            EXPECT_EQ(analysis::subset_tokens(analysis::Subsample::random, available, n, 7, draw), dense(available, n, 7, draw))
                << available << " " << n << " " << draw;
    // A billion tokens available, 16 drawn: no billion-entry array.
    const auto big = analysis::subset_tokens(analysis::Subsample::random, Index{1} << 30, 16, 3, 0);
    EXPECT_EQ(big.size(), 16u);
    EXPECT_TRUE(std::is_sorted(big.begin(), big.end()));
}
