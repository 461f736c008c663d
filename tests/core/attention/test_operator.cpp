// Structure of the operators (docs/maths.md 3) and their matrix-free paths: MHLA with uniform mixing is
// linear attention, rank bounds, row sums, apply / apply_transpose / perform_op against dense(),
// kernel factors, allowed keys, and the bad arguments make_operator refuses.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "support/test_support.h"

namespace {

using namespace attnscope;
using namespace attnscope::attention;
using Eigen::MatrixXd;
using Eigen::VectorXd;
using test::message_of;
using test::splitmix_colwise;

Index rank_of(const MatrixXd& A)
{
    return metrics::spectrum_metrics(metrics::singular_values(MatrixXd(A)), A.rows(), A.cols(), std::nullopt).rank;
}

BlockSpec count_blocks(Index m)
{
    BlockSpec s;
    s.blocks = m;
    return s;
}
BlockSpec chunk_blocks(Index c)
{
    BlockSpec s;
    s.kind = BlockSpec::Kind::chunk;
    s.chunk = c;
    return s;
}
BlockSpec grid_blocks(std::vector<Index> g, std::vector<Index> b, TokenOrder order = TokenOrder::raster)
{
    BlockSpec s;
    s.kind = BlockSpec::Kind::grid;
    s.grid = std::move(g);
    s.block_grid = std::move(b);
    s.order = order;
    return s;
}

struct Config {
    std::string name;
    Mechanism mechanism;
    AttentionOptions options;
};

// A broad set of configurations for N = 300 (several softmax tiles and causal chunks per block).
std::vector<Config> configs_300()
{
    std::vector<Config> out;
    auto add = [&](std::string name, Mechanism m, std::function<void(AttentionOptions&)> f) {
        AttentionOptions o;
        f(o);
        out.push_back({std::move(name), m, o});
    };
    for (bool causal : {false, true}) {
        const std::string c = causal ? "_causal" : "";
        add("softmax" + c, Mechanism::softmax, [&](AttentionOptions& o) { o.causal = causal; });
        add("softmax_scale" + c, Mechanism::softmax, [&](AttentionOptions& o) {
            o.causal = causal;
            o.scale = 0.9;
        });
        for (auto fm : {FeatureMapKind::relu, FeatureMapKind::elu1, FeatureMapKind::identity, FeatureMapKind::favor}) {
            const std::string f(to_string(fm));
            add("linear_" + f + c, Mechanism::linear, [&](AttentionOptions& o) {
                o.causal = causal;
                o.feature_map.kind = fm;
                o.feature_map.favor_features = 17;
                o.feature_map.seed = 4;
                if (fm == FeatureMapKind::identity)
                    o.normalize = Normalize::none;
            });
            add("mhla_" + f + c, Mechanism::mhla, [&](AttentionOptions& o) {
                o.causal = causal;
                o.feature_map.kind = fm;
                o.feature_map.favor_features = 11;
                o.blocks = count_blocks(3);
                if (fm == FeatureMapKind::identity)
                    o.normalize = Normalize::none;
            });
        }
        add("linear_none" + c, Mechanism::linear, [&](AttentionOptions& o) {
            o.causal = causal;
            o.normalize = Normalize::none;
        });
        add("mhla_blocks7" + c, Mechanism::mhla, [&](AttentionOptions& o) {
            o.causal = causal;
            o.blocks = count_blocks(7);
        });
        add("mhla_chunk" + c, Mechanism::mhla, [&](AttentionOptions& o) {
            o.causal = causal;
            o.blocks = chunk_blocks(70);
            o.mixing.preset = "exp";
            o.mixing.sigma = 1.2;
        });
        add("mhla_grid_raster" + c, Mechanism::mhla, [&](AttentionOptions& o) {
            o.causal = causal;
            o.blocks = grid_blocks({15, 20}, {3, 4});
        });
        add("mhla_grid_blocked" + c, Mechanism::mhla, [&](AttentionOptions& o) {
            o.causal = causal;
            o.blocks = grid_blocks({15, 20}, {3, 4}, TokenOrder::blocked);
            o.mixing.preset = "local";
        });
        add("mhla_grid3d_raster" + c, Mechanism::mhla, [&](AttentionOptions& o) {
            o.causal = causal;
            o.blocks = grid_blocks({3, 10, 10}, {3, 2, 5});
            o.mixing.preset = "gaussian";
            o.normalize = Normalize::none;
        });
        add("mhla_matrix" + c, Mechanism::mhla, [&](AttentionOptions& o) {
            o.causal = causal;
            o.blocks = count_blocks(4);
            o.mixing.preset = "mc.npy";
            o.mixing.matrix = splitmix_colwise(4, 4, 77).cwiseAbs();
        });
    }
    add("mhla_official", Mechanism::mhla, [&](AttentionOptions& o) {
        o.blocks = count_blocks(5);
        o.normalize = Normalize::official;
    });
    add("mhla_official_grid", Mechanism::mhla, [&](AttentionOptions& o) {
        o.blocks = grid_blocks({15, 20}, {5, 2});
        o.normalize = Normalize::official;
        o.mixing.preset = "linear";
    });
    add("linear_official", Mechanism::linear, [&](AttentionOptions& o) { o.normalize = Normalize::official; });
    return out;
}

TEST(Operator, ApplyAndTransposeMatchDense)
{
    const Index n = 300;
    const MatrixXd Q = splitmix_colwise(n, 8, 1), K = splitmix_colwise(n, 8, 2);
    const MatrixXd X = splitmix_colwise(n, 4, 3);
    double worst = 0;
    for (const auto& c : configs_300()) {
        SCOPED_TRACE(c.name);
        const auto op = make_operator(c.mechanism, Q, K, c.options);
        const MatrixXd A = op->dense();
        MatrixXd Y(n, 4), Yt(n, 4);
        op->apply(X, Y);
        op->apply_transpose(X, Yt);
        const MatrixXd ref = A * X, reft = A.transpose() * X;
        const double d = std::max(test::max_rel_diff(Y, ref), test::max_rel_diff(Yt, reft));
        worst = std::max(worst, d);
        EXPECT_LE(test::max_rel_diff(Y, ref), 1e-12);
        EXPECT_LE(test::max_rel_diff(Yt, reft), 1e-12);
        MatrixXd G(n, 4);   // A^T A X in one pass (softmax: each tile of A computed once)
        op->apply_gram(X, G);
        EXPECT_LE(test::max_rel_diff(G, A.transpose() * (A * X)), 1e-12);

        // Spectra's interface, and output into a block of a larger matrix (an outer stride).
        VectorXd x = X.col(1), y(n);
        op->perform_op(x.data(), y.data());
        EXPECT_LE(test::max_rel_diff(y, ref.col(1)), 1e-12);
        MatrixXd big = MatrixXd::Constant(n + 5, 6, 7.0);
        op->apply(X.leftCols(2), big.block(2, 1, n, 2));
        EXPECT_LE(test::max_rel_diff(big.block(2, 1, n, 2), ref.leftCols(2)), 1e-12);
        EXPECT_EQ(big(0, 1), 7.0);
        EXPECT_EQ(big(n + 4, 2), 7.0);
        EXPECT_EQ(op->rows(), n);
        EXPECT_EQ(op->cols(), n);
    }
    std::printf("max relative difference of apply / apply_transpose vs dense(): %.3g\n", worst);
}

TEST(Operator, UniformMixingIsLinearAttention)
{
    const Index n = 96;
    const MatrixXd Q = splitmix_colwise(n, 6, 11), K = splitmix_colwise(n, 6, 12);
    const std::vector<std::pair<BlockSpec, bool>> layouts = {
        {count_blocks(5), true},  {count_blocks(96), true},
        {chunk_blocks(10), true}, {grid_blocks({8, 12}, {4, 3}), false},
        {grid_blocks({8, 12}, {4, 3}, TokenOrder::blocked), true}, {grid_blocks({4, 4, 6}, {2, 2, 3}), false}};
    for (auto fm : {FeatureMapKind::relu, FeatureMapKind::elu1, FeatureMapKind::favor, FeatureMapKind::identity})
        for (auto norm : {Normalize::row, Normalize::none})
            for (const auto& [blocks, contiguous] : layouts)
                for (bool causal : {false, true}) {
                    // Causal MHLA is causal linear attention only when blocks are contiguous in token order.
                    if (causal && !contiguous)
                        continue;
                    if (fm == FeatureMapKind::identity && norm == Normalize::row)
                        continue;   // row sums of signed scores can vanish
                    AttentionOptions o;
                    o.causal = causal;
                    o.feature_map.kind = fm;
                    o.feature_map.favor_features = 9;
                    o.normalize = norm;
                    const MatrixXd lin = make_operator(Mechanism::linear, Q, K, o)->dense();
                    o.blocks = blocks;
                    o.mixing.preset = "uniform";
                    const MatrixXd mhla = make_operator(Mechanism::mhla, Q, K, o)->dense();
                    EXPECT_LE(test::max_rel_diff(mhla, lin), 1e-14)
                        << to_string(fm) << " " << to_string(norm) << " causal " << causal << " M "
                        << blocks.blocks << " grid " << blocks.grid.size();
                }
}

TEST(Operator, LinearRankAtMostFeatureDimension)
{
    const Index n = 150;
    const MatrixXd Q = splitmix_colwise(n, 6, 21), K = splitmix_colwise(n, 6, 22);
    for (auto fm : {FeatureMapKind::relu, FeatureMapKind::elu1, FeatureMapKind::identity, FeatureMapKind::favor}) {
        AttentionOptions o;
        o.feature_map.kind = fm;
        o.feature_map.favor_features = 5;
        o.normalize = fm == FeatureMapKind::identity ? Normalize::none : Normalize::row;
        const auto op = make_operator(Mechanism::linear, Q, K, o);
        const Index r = fm == FeatureMapKind::favor ? 5 : 6;
        const Index rank = rank_of(op->dense());
        EXPECT_LE(rank, r) << to_string(fm);
        EXPECT_GE(rank, r - 1) << to_string(fm);   // generic data: (nearly) full feature rank
    }
}

TEST(Operator, MhlaRankAtMostRankOfMixingTimesFeatureDimension)
{
    const Index n = 256;
    const MatrixXd Q = splitmix_colwise(n, 3, 31), K = splitmix_colwise(n, 3, 32);
    struct Case {
        BlockSpec blocks;
        std::string preset;
    };
    const std::vector<Case> cases = {{count_blocks(16), "cos"},      {count_blocks(16), "exp"},
                                     {count_blocks(16), "identity"}, {chunk_blocks(20), "linear"},
                                     {grid_blocks({16, 16}, {4, 4}), "cos"}, {grid_blocks({16, 16}, {8, 8}), "gaussian"}};
    for (const auto& c : cases) {
        AttentionOptions o;
        o.blocks = c.blocks;
        o.mixing.preset = c.preset;
        const auto op = make_operator(Mechanism::mhla, Q, K, o);
        const KernelFactors* f = op->factors();
        ASSERT_NE(f, nullptr);
        const Index rank_mc = rank_of(f->mixing);
        const Index r = f->phi_q.cols();
        const Index bound = std::min<Index>(n, rank_mc * r);
        const Index rank = rank_of(op->dense());
        EXPECT_LE(rank, bound) << c.preset << " M=" << f->mixing.rows() << " rank(Mc)=" << rank_mc;
        if (c.preset == "cos" && c.blocks.kind != BlockSpec::Kind::grid) {
            EXPECT_EQ(rank_mc, 2);   // docs/maths.md 3: cos mixing on 1-D blocks has rank 2
            EXPECT_LE(rank, 2 * r);
        }
    }
}

// Issue 23's check of the 1-D default (docs/maths.md 1.6): on random data, N = 256, d = 16, 16 blocks, default
// MHLA goes above 2d = 32, where the rank-2 `cos` preset stops it.
TEST(Operator, DefaultOneDimensionalMixingDoesNotCapMhlaAtTwiceTheFeatures)
{
    const MatrixXd Q = test::gaussian_matrix(256, 16, 7), K = test::gaussian_matrix(256, 16, 8);
    AttentionOptions o;
    o.blocks = count_blocks(16);
    EXPECT_GT(rank_of(make_operator(Mechanism::mhla, Q, K, o)->dense()), 32);
    o.mixing.preset = "cos";
    EXPECT_LE(rank_of(make_operator(Mechanism::mhla, Q, K, o)->dense()), 32);
}

// A signed learned Mc (docs/maths.md 1.4): rows with a positive normaliser are P / z as usual (they sum to 1 and
// may hold negative entries); a row whose normaliser is <= 0 is not defined: the first is reported and every such
// row is NaN (row and official normalisation), so no path measures a matrix that does not exist.
TEST(Operator, SignedMixingRowsAndTheDegenerateNormaliserRule)
{
    const Index n = 40;
    const MatrixXd Q = test::gaussian_matrix(n, 4, 5), K = test::gaussian_matrix(n, 4, 6);
    AttentionOptions o;
    o.blocks = count_blocks(4);
    MatrixXd mc = MatrixXd::Constant(4, 4, 0.5);
    mc(1, 2) = -0.1;
    o.mixing.matrix = mc;
    const auto fine = make_operator(Mechanism::mhla, Q, K, o);
    EXPECT_FALSE(fine->unnormalisable_row());
    EXPECT_TRUE(fine->may_be_negative());
    const MatrixXd A = fine->dense();
    EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-13);
    EXPECT_LT(A.minCoeff(), 0.0);
    mc.row(2) << -1.0, -1.0, 0.01, -1.0;   // block 2's rows (tokens 20..29) sum to < 0
    o.mixing.matrix = mc;
    for (Normalize norm : {Normalize::row, Normalize::official}) {
        o.normalize = norm;
        const auto bad = make_operator(Mechanism::mhla, Q, K, o);
        ASSERT_TRUE(bad->unnormalisable_row()) << to_string(norm);
        EXPECT_EQ(*bad->unnormalisable_row(), 20) << to_string(norm);
        EXPECT_LT(bad->unnormalisable_sum(), 0.0);
        const MatrixXd B = bad->dense();
        EXPECT_FALSE(B.middleRows(20, 10).array().isFinite().any()) << to_string(norm);
        EXPECT_TRUE(B.topRows(20).allFinite()) << to_string(norm);
    }
}

TEST(Operator, RowNormalisedRowsSumToOne)
{
    const Index n = 120;
    const MatrixXd Q = splitmix_colwise(n, 5, 41), K = splitmix_colwise(n, 5, 42);
    for (const auto& mech : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla})
        for (auto fm : {FeatureMapKind::relu, FeatureMapKind::elu1, FeatureMapKind::favor})
            for (bool causal : {false, true})
                for (const char* preset : {"", "cos", "local", "causal", "gaussian"}) {
                    AttentionOptions o;
                    o.causal = causal;
                    o.feature_map.kind = fm;
                    o.feature_map.favor_features = 13;
                    o.blocks = grid_blocks({10, 12}, {5, 3});
                    o.mixing.preset = preset;
                    const auto op = make_operator(mech, Q, K, o);
                    const MatrixXd A = op->dense();
                    EXPECT_LE((A.rowwise().sum().array() - 1.0).abs().maxCoeff(), 1e-14)
                        << to_string(mech) << " " << to_string(fm) << " causal " << causal << " " << preset;
                    EXPECT_GE(A.minCoeff(), 0.0);
                    EXPECT_FALSE(op->may_be_negative());
                }
}

TEST(Operator, FactorsReconstructDense)
{
    const Index n = 90;
    const MatrixXd Q = splitmix_colwise(n, 4, 51), K = splitmix_colwise(n, 4, 52);
    for (auto mech : {Mechanism::linear, Mechanism::mhla})
        for (bool causal : {false, true})
            for (auto norm : {Normalize::row, Normalize::none, Normalize::official}) {
                if (causal && norm == Normalize::official)
                    continue;
                AttentionOptions o;
                o.causal = causal;
                o.normalize = norm;
                o.blocks = grid_blocks({9, 10}, {3, 2});
                const auto op = make_operator(mech, Q, K, o);
                const KernelFactors* f = op->kernel_pieces();
                ASSERT_NE(f, nullptr);
                EXPECT_EQ(f->causal, causal);
                if (causal) {
                    EXPECT_EQ(op->factors(), nullptr);
                } else {
                    EXPECT_EQ(op->factors(), f);
                }
                ASSERT_EQ(f->phi_q.rows(), n);
                ASSERT_EQ(static_cast<Index>(f->block.size()), n);
                MatrixXd R(n, n);
                for (Index t = 0; t < n; ++t)
                    for (Index j = 0; j < n; ++j) {
                        const Index bt = f->block[static_cast<std::size_t>(t)], bj = f->block[static_cast<std::size_t>(j)];
                        const bool allowed = !causal || bj < bt || (bj == bt && j <= t);
                        R(t, j) = allowed ? f->row_scale(t) * f->mixing(bt, bj) * f->phi_q.row(t).dot(f->phi_k.row(j))
                                          : 0.0;
                    }
                EXPECT_LE(test::max_rel_diff(R, op->dense()), 1e-13)
                    << to_string(mech) << " causal " << causal << " " << to_string(norm);
                if (mech == Mechanism::linear) {
                    EXPECT_EQ(f->mixing, MatrixXd::Ones(1, 1));
                }
                if (norm == Normalize::none) {
                    EXPECT_EQ(f->row_scale, VectorXd::Ones(n));
                }
            }
    const auto soft = make_operator(Mechanism::softmax, Q, K, AttentionOptions{});
    EXPECT_EQ(soft->factors(), nullptr);
    EXPECT_EQ(soft->kernel_pieces(), nullptr);
}

TEST(Operator, AllowedKeys)
{
    const Index n = 48;
    const MatrixXd Q = splitmix_colwise(n, 4, 61), K = splitmix_colwise(n, 4, 62);
    AttentionOptions o;
    for (auto mech : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla})
        EXPECT_EQ(make_operator(mech, Q, K, o)->allowed_keys(), std::vector<Index>(n, n));
    o.causal = true;
    std::vector<Index> t1(n);
    for (Index t = 0; t < n; ++t)
        t1[static_cast<std::size_t>(t)] = t + 1;
    EXPECT_EQ(make_operator(Mechanism::softmax, Q, K, o)->allowed_keys(), t1);
    EXPECT_EQ(make_operator(Mechanism::linear, Q, K, o)->allowed_keys(), t1);
    o.blocks = count_blocks(5);
    EXPECT_EQ(make_operator(Mechanism::mhla, Q, K, o)->allowed_keys(), t1);
    // Raster grid: blocks are not contiguous, so earlier blocks' later tokens count too.
    o.blocks = grid_blocks({6, 8}, {2, 2});
    const auto op = make_operator(Mechanism::mhla, Q, K, o);
    const MatrixXd A = op->dense();
    const auto allowed = op->allowed_keys();
    const auto blk = op->kernel_pieces()->block;
    for (Index t = 0; t < n; ++t) {
        Index count = 0;
        for (Index j = 0; j < n; ++j) {
            const Index bt = blk[static_cast<std::size_t>(t)], bj = blk[static_cast<std::size_t>(j)];
            if (bj < bt || (bj == bt && j <= t))
                ++count;
            else
                EXPECT_EQ(A(t, j), 0.0);
        }
        EXPECT_EQ(allowed[static_cast<std::size_t>(t)], count) << "t=" << t;
    }
}

TEST(Operator, MayBeNegativeOnlyForIdentityFeatures)
{
    const MatrixXd Q = splitmix_colwise(20, 3, 71), K = splitmix_colwise(20, 3, 72);
    AttentionOptions o;
    o.feature_map.kind = FeatureMapKind::identity;
    o.normalize = Normalize::none;
    EXPECT_TRUE(make_operator(Mechanism::linear, Q, K, o)->may_be_negative());
    EXPECT_TRUE(make_operator(Mechanism::mhla, Q, K, o)->may_be_negative());
    EXPECT_FALSE(make_operator(Mechanism::softmax, Q, K, o)->may_be_negative());
    EXPECT_LT(make_operator(Mechanism::linear, Q, K, o)->dense().minCoeff(), 0.0);
}

TEST(Operator, BadArgumentsThrowWithUsefulMessages)
{
    const MatrixXd Q = splitmix_colwise(20, 4, 81), K = splitmix_colwise(20, 4, 82);
    AttentionOptions o;
    for (auto mech : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla}) {
        const std::string shape = message_of([&] { make_operator(mech, Q, K.topRows(19), o); });
        EXPECT_NE(shape.find("20x4"), std::string::npos) << shape;
        EXPECT_NE(shape.find("19x4"), std::string::npos) << shape;
        EXPECT_THROW(make_operator(mech, Q, K.leftCols(3), o), std::invalid_argument);
        EXPECT_NE(message_of([&] { make_operator(mech, Q.topRows(0), K.topRows(0), o); }).find("N=0"),
                  std::string::npos);
        EXPECT_NE(message_of([&] { make_operator(mech, Q.leftCols(0), K.leftCols(0), o); }).find("d=0"),
                  std::string::npos);
        MatrixXd bad = Q;
        bad(3, 2) = std::numeric_limits<double>::quiet_NaN();
        EXPECT_THROW(make_operator(mech, bad, K, o), std::invalid_argument);
    }
    o.blocks = count_blocks(21);
    EXPECT_EQ(message_of([&] { make_operator(Mechanism::mhla, Q, K, o); }), "blocks M=21 exceeds tokens N=20");
    // softmax and linear attention ignore the blocks and the mixing
    EXPECT_NO_THROW(make_operator(Mechanism::softmax, Q, K, o));
    EXPECT_NO_THROW(make_operator(Mechanism::linear, Q, K, o));

    o.blocks = count_blocks(3);
    o.normalize = Normalize::official;
    const std::string unequal = message_of([&] { make_operator(Mechanism::mhla, Q, K, o); });
    EXPECT_NE(unequal.find("official"), std::string::npos) << unequal;
    EXPECT_NE(unequal.find("equal size"), std::string::npos) << unequal;
    o.blocks = count_blocks(4);
    EXPECT_NO_THROW(make_operator(Mechanism::mhla, Q, K, o));
    o.causal = true;
    const std::string causal = message_of([&] { make_operator(Mechanism::mhla, Q, K, o); });
    EXPECT_NE(causal.find("non-causal"), std::string::npos) << causal;
    EXPECT_THROW(make_operator(Mechanism::linear, Q, K, o), std::invalid_argument);

    o = AttentionOptions{};
    o.blocks = count_blocks(4);
    o.mixing.preset = "mc.npy";
    o.mixing.matrix = MatrixXd::Ones(5, 5);
    const std::string mix = message_of([&] { make_operator(Mechanism::mhla, Q, K, o); });
    EXPECT_NE(mix.find("5x5"), std::string::npos) << mix;
    EXPECT_NE(mix.find("M=4"), std::string::npos) << mix;
    o.mixing.matrix = MatrixXd::Zero(4, 4);   // every row sum vanishes: MHLA is not defined, but is built
    const auto zero_op = make_operator(Mechanism::mhla, Q, K, o);
    ASSERT_TRUE(zero_op->kernel_pieces()->unnormalisable_row.has_value());
    EXPECT_EQ(zero_op->kernel_pieces()->unnormalisable_sum, 0.0);
    o.mixing.matrix.reset();
    o.mixing.preset = "nearest";
    EXPECT_NE(message_of([&] { make_operator(Mechanism::mhla, Q, K, o); }).find("nearest"), std::string::npos);

    o = AttentionOptions{};
    o.feature_map.kind = FeatureMapKind::favor;
    o.feature_map.favor_features = 0;
    EXPECT_NE(message_of([&] { make_operator(Mechanism::linear, Q, K, o); }).find("favor-features"),
              std::string::npos);
    o = AttentionOptions{};
    o.scale = std::numeric_limits<double>::infinity();
    EXPECT_THROW(make_operator(Mechanism::softmax, Q, K, o), std::invalid_argument);

    // apply with the wrong shapes
    const auto op = make_operator(Mechanism::mhla, Q, K, AttentionOptions{});
    MatrixXd Y(20, 2);
    EXPECT_THROW(op->apply(MatrixXd::Ones(19, 2), Y), std::invalid_argument);
    EXPECT_THROW(op->apply_transpose(MatrixXd::Ones(20, 3), Y), std::invalid_argument);
    const auto sm = make_operator(Mechanism::softmax, Q, K, AttentionOptions{});
    EXPECT_THROW(sm->apply(MatrixXd::Ones(20, 3), Y), std::invalid_argument);
}

TEST(Operator, LargeSoftmaxAndMhlaApplyWithoutDense)
{
    // N = 3000: the matrix-free paths against a few rows / columns formed by hand (no N x N anywhere).
    const Index n = 3000;
    const MatrixXd Q = splitmix_colwise(n, 16, 91), K = splitmix_colwise(n, 16, 92);
    const MatrixXd X = splitmix_colwise(n, 2, 93);
    for (bool causal : {false, true}) {
        AttentionOptions o;
        o.causal = causal;
        const auto sm = make_operator(Mechanism::softmax, Q, K, o);
        MatrixXd Y(n, 2);
        sm->apply(X, Y);
        for (Index t : {Index(0), Index(1234), n - 1}) {
            VectorXd s = (K * Q.row(t).transpose()) / 4.0;
            const Index allowed = causal ? t + 1 : n;
            s.tail(n - allowed).setConstant(-std::numeric_limits<double>::infinity());
            const VectorXd e = (s.array() - s.maxCoeff()).exp();
            const VectorXd a = e / e.sum();
            EXPECT_LE((Y.row(t) - a.transpose() * X).cwiseAbs().maxCoeff(), 1e-12 * X.cwiseAbs().maxCoeff());
        }

        // MHLA on a raster grid (blocks not contiguous in token order): rows and columns from the pieces.
        o.blocks = grid_blocks({50, 60}, {5, 6});
        o.feature_map.kind = FeatureMapKind::favor;
        o.feature_map.favor_features = 32;
        const auto op = make_operator(Mechanism::mhla, Q, K, o);
        const KernelFactors& f = *op->kernel_pieces();
        auto entry = [&](Index t, Index j) {
            const Index bt = f.block[static_cast<std::size_t>(t)], bj = f.block[static_cast<std::size_t>(j)];
            if (causal && !(bj < bt || (bj == bt && j <= t)))
                return 0.0;
            return f.row_scale(t) * f.mixing(bt, bj) * f.phi_q.row(t).dot(f.phi_k.row(j));
        };
        MatrixXd Yt(n, 2);
        op->apply(X, Y);
        op->apply_transpose(X, Yt);
        for (Index t : {Index(0), Index(59), Index(1777), n - 1}) {
            Eigen::RowVectorXd row(n), col(n);
            for (Index j = 0; j < n; ++j) {
                row(j) = entry(t, j);
                col(j) = entry(j, t);
            }
            EXPECT_LE(test::max_rel_diff(Y.row(t), row * X), 1e-12) << "row " << t << " causal " << causal;
            EXPECT_LE(test::max_rel_diff(Yt.row(t), col * X), 1e-12) << "column " << t << " causal " << causal;
        }
    }
}

}  // namespace

// docs/maths.md 1.6: reports say in words when MHLA is linear attention by construction. The claim is made
// exactly when the two dense matrices are equal, and causal-local (the causal default) never makes it.
TEST(OperatorStructure, SameAsLinearIsSaidExactlyWhenTheMatricesAreEqual)
{
    const MatrixXd Q = test::gaussian_matrix(48, 5, 41), K = test::gaussian_matrix(48, 5, 42);
    struct Case {
        std::string name;
        AttentionOptions o;
    };
    std::vector<Case> cases;
    for (bool causal : {false, true}) {
        AttentionOptions o;
        o.causal = causal;
        o.blocks.blocks = 6;
        for (const char* preset : {"", "cos", "uniform", "causal", "causal-local", "identity"}) {
            o.mixing.preset = preset;
            cases.push_back({std::string(preset) + (causal ? " causal" : ""), o});
        }
        AttentionOptions one = o;
        one.blocks.blocks = 1;
        one.mixing.preset = "cos";
        cases.push_back({"M=1" + std::string(causal ? " causal" : ""), one});
        AttentionOptions raster = o;   // raster grid: blocks not contiguous in token order
        raster.blocks.kind = BlockSpec::Kind::grid;
        raster.blocks.grid = {6, 8};
        raster.blocks.block_grid = {2, 4};
        raster.mixing.preset = causal ? "causal" : "uniform";
        cases.push_back({"raster grid " + raster.mixing.preset + (causal ? " causal" : ""), raster});
        AttentionOptions none = o;
        none.mixing.preset = "uniform";
        none.normalize = Normalize::none;
        cases.push_back({"uniform, normalize none" + std::string(causal ? " causal" : ""), none});
    }
    int said = 0;
    for (const Case& c : cases) {
        AttentionOptions lin = c.o;
        lin.normalize = Normalize::row;
        const MatrixXd a = make_operator(Mechanism::mhla, Q, K, c.o)->dense();
        const MatrixXd b = make_operator(Mechanism::linear, Q, K, lin)->dense();
        const bool equal = (a - b).cwiseAbs().maxCoeff() <= 1e-12 * b.cwiseAbs().maxCoeff();
        const std::string reason = mhla_same_as_linear(c.o, Q.rows());
        EXPECT_EQ(!reason.empty(), equal) << c.name << ": " << reason;
        said += reason.empty() ? 0 : 1;
        if (c.o.causal && c.o.mixing.preset.empty()) {
            EXPECT_TRUE(reason.empty()) << "the causal default must not collapse to linear attention";
        }
    }
    EXPECT_GE(said, 5);   // uniform x2, causal preset (causal), M = 1 x2
}
