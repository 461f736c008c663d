// Structured singular values (docs/maths.md 3) equal the dense ones for every non-causal kernel
// operator: linear and MHLA, every block layout, feature map and normalisation, blocks smaller than the
// feature dimension, zero mixing entries.
#include <algorithm>

#include <gtest/gtest.h>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "metrics/structured.h"
#include "support/test_support.h"

using namespace attnscope;
using attention::Mechanism;

namespace {

void expect_same_spectrum(Mechanism mech, Eigen::Index n, Eigen::Index d, const attention::AttentionOptions& o,
                          const std::string& what)
{
    const Eigen::MatrixXd q = 0.8 * test::splitmix_rowwise(n, d, 11 + n), k = 0.8 * test::splitmix_rowwise(n, d, 29 + d);
    const auto op = attention::make_operator(mech, q, k, o);
    ASSERT_NE(op->factors(), nullptr) << what;
    std::vector<double> dense = metrics::singular_values(op->dense());
    const std::vector<double> fast = metrics::structured_singular_values(*op->factors());
    ASSERT_EQ(fast.size(), dense.size()) << what;
    const double s1 = dense.front();
    for (std::size_t i = 0; i < dense.size(); ++i)
        EXPECT_NEAR(fast[i], dense[i], 1e-12 * s1) << what << " singular value " << i;
    const auto a = metrics::spectrum_metrics(dense, n, n, std::nullopt);
    const auto b = metrics::spectrum_metrics(fast, n, n, std::nullopt);
    EXPECT_EQ(a.rank, b.rank) << what;
    EXPECT_NEAR(a.effective_rank, b.effective_rank, 1e-10 * a.effective_rank) << what;
    EXPECT_NEAR(a.stable_rank, b.stable_rank, 1e-10 * a.stable_rank) << what;
    EXPECT_LE(metrics::structured_core_size(*op->factors()), n);
}

}  // namespace

TEST(Structured, LinearEveryFeatureMap)
{
    for (auto fm : {attention::FeatureMapKind::relu, attention::FeatureMapKind::elu1, attention::FeatureMapKind::identity,
                    attention::FeatureMapKind::favor}) {
        attention::AttentionOptions o;
        o.feature_map.kind = fm;
        o.feature_map.favor_features = 24;
        expect_same_spectrum(Mechanism::linear, 90, 8, o, std::string(attention::to_string(fm)));
    }
}

TEST(Structured, MhlaLayoutsMixingsNormalisations)
{
    using Kind = attention::BlockSpec::Kind;
    for (const char* mix : {"cos", "linear", "exp", "gaussian", "local", "uniform", "identity", "causal"}) {
        attention::AttentionOptions o;
        o.blocks.blocks = 7;   // 96 = 6 blocks of 14 and one of 12 ... uneven
        o.mixing.preset = mix;
        expect_same_spectrum(Mechanism::mhla, 96, 6, o, std::string("blocks 7, mixing ") + mix);
    }
    attention::AttentionOptions grid;
    grid.blocks.kind = Kind::grid;
    grid.blocks.grid = {8, 12};
    grid.blocks.block_grid = {2, 3};
    for (auto order : {attention::TokenOrder::raster, attention::TokenOrder::blocked})
        for (auto norm : {attention::Normalize::row, attention::Normalize::none, attention::Normalize::official}) {
            grid.blocks.order = order;
            grid.normalize = norm;
            expect_same_spectrum(Mechanism::mhla, 96, 5, grid, "grid " + std::string(attention::to_string(order)) + " " +
                                                                   std::string(attention::to_string(norm)));
        }
}

TEST(Structured, BlocksSmallerThanFeatures)
{
    // r = 16 features, blocks of 3 tokens: every block's QR is short and wide; M = N is the extreme.
    attention::AttentionOptions o;
    o.blocks.kind = attention::BlockSpec::Kind::chunk;
    o.blocks.chunk = 3;
    expect_same_spectrum(Mechanism::mhla, 40, 16, o, "chunk 3, r 16");
    o.blocks.kind = attention::BlockSpec::Kind::count;
    o.blocks.blocks = 40;
    o.mixing.preset = "exp";
    expect_same_spectrum(Mechanism::mhla, 40, 16, o, "M = N");
}

TEST(Structured, LoadedMixingWithZeros)
{
    attention::AttentionOptions o;
    o.blocks.blocks = 4;
    Eigen::MatrixXd mc(4, 4);
    mc << 1, 0, 0, 0.5, 0, 2, 0, 0, 0.3, 0, 1, 0, 0, 0, 0, 1;
    o.mixing.matrix = mc;
    o.mixing.preset = "mc.npy";
    expect_same_spectrum(Mechanism::mhla, 48, 6, o, "sparse learned mixing");
}

TEST(Structured, RefusesCausal)
{
    attention::AttentionOptions o;
    o.causal = true;
    const Eigen::MatrixXd q = 0.8 * test::splitmix_rowwise(20, 4, 1), k = 0.8 * test::splitmix_rowwise(20, 4, 2);
    const auto op = attention::make_operator(Mechanism::linear, q, k, o);
    EXPECT_EQ(op->factors(), nullptr);
    ASSERT_NE(op->kernel_pieces(), nullptr);
    EXPECT_THROW(metrics::structured_singular_values(*op->kernel_pieces()), std::invalid_argument);
}

// docs/maths.md 1.6: the mixing matrix caps non-causal MHLA at rank(Mc) * r, and the cap is reported when it is
// below min(N, M r). 1-D `cos` has rank 2 (cos of a difference); `exp` has full rank; a causal mask breaks the
// factorisation; linear attention (one block) never has a cap; FAVOR+ counts its m features.
TEST(Structured, MixingRankCap)
{
    const Eigen::MatrixXd q = test::gaussian_matrix(256, 16, 3), k = test::gaussian_matrix(256, 16, 4);
    attention::AttentionOptions o;
    o.blocks.blocks = 16;
    o.mixing.preset = "cos";
    const auto cos_op = attention::make_operator(Mechanism::mhla, q, k, o);
    const std::optional<metrics::MixingRankCap> cap = metrics::mixing_rank_cap(*cos_op->kernel_pieces());
    ASSERT_TRUE(cap);
    EXPECT_EQ(cap->mixing_rank, 2);
    EXPECT_EQ(cap->features, 16);
    EXPECT_EQ(cap->bound, 32);
    EXPECT_EQ(cap->allowed, 256);
    const std::string words = metrics::rank_cap_sentence(*cap, "MHLA");
    EXPECT_EQ(words.rfind("the mixing matrix has rank 2: MHLA rank <= 32 whatever the data", 0), 0u) << words;
    EXPECT_TRUE(metrics::is_rank_cap_sentence(words));
    EXPECT_FALSE(metrics::is_rank_cap_sentence("MHLA is linear attention by construction here"));
    // The bound holds: the rank of the matrix is at most 32.
    EXPECT_LE(metrics::spectrum_metrics(metrics::singular_values(cos_op->dense()), 256, 256, std::nullopt).rank, 32);

    o.mixing.preset = "exp";
    EXPECT_FALSE(metrics::mixing_rank_cap(*attention::make_operator(Mechanism::mhla, q, k, o)->kernel_pieces()));
    o.mixing.preset = "cos";
    o.causal = true;
    EXPECT_FALSE(metrics::mixing_rank_cap(*attention::make_operator(Mechanism::mhla, q, k, o)->kernel_pieces()));
    o.causal = false;
    EXPECT_FALSE(metrics::mixing_rank_cap(*attention::make_operator(Mechanism::linear, q, k, o)->kernel_pieces()));
    // FAVOR+ with m = 100 features: 2 x 100 < min(256, 1600).
    o.feature_map.kind = attention::FeatureMapKind::favor;
    o.feature_map.favor_features = 100;
    const auto favor = metrics::mixing_rank_cap(*attention::make_operator(Mechanism::mhla, q, k, o)->kernel_pieces());
    ASSERT_TRUE(favor);
    EXPECT_EQ(favor->bound, 200);
    // A learned Mc of rank 3 (zeros included), M = 4, r = 16: 48 < min(256, 64).
    Eigen::MatrixXd mc(4, 4);
    mc << 1, 0, 1, 2, 0, 1, 1, 0, 1, 1, 0, 0, 2, 1, 1, 2;   // row 3 = row 0 + row 2: rank 3
    o.feature_map.kind = attention::FeatureMapKind::relu;
    o.blocks.blocks = 4;
    o.mixing.matrix = mc;
    const auto learned = metrics::mixing_rank_cap(*attention::make_operator(Mechanism::mhla, q, k, o)->kernel_pieces());
    ASSERT_TRUE(learned);
    EXPECT_EQ(learned->mixing_rank, metrics::mixing_rank(mc));
    EXPECT_EQ(learned->mixing_rank, 3);
    EXPECT_EQ(learned->bound, 48);
}
