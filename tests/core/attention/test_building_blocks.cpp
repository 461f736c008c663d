// Options, feature maps, block layouts and mixing matrices against NumPy (make_layouts.py).
#include <algorithm>
#include <fstream>
#include <limits>
#include <utility>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attention/blocks.h"
#include "attention/feature_map.h"
#include "attention/mixing.h"
#include "attention/options.h"
#include "support/test_support.h"

namespace {

using namespace attnscope;
using namespace attnscope::attention;
using Eigen::MatrixXd;
using test::message_of;

MatrixXd matrix_from_json(const nlohmann::json& rows)
{
    const auto v = rows.get<std::vector<std::vector<double>>>();
    MatrixXd m(static_cast<Index>(v.size()), v.empty() ? 0 : static_cast<Index>(v[0].size()));
    for (Index i = 0; i < m.rows(); ++i)
        for (Index j = 0; j < m.cols(); ++j)
            m(i, j) = v[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
    return m;
}

const nlohmann::json& layouts()
{
    static const nlohmann::json j = [] {
        const std::string dir = test::fresh_work_dir("attention_layouts");
        test::run_python("core/attention/make_layouts.py", {dir});
        std::ifstream in(dir + "/layouts.json");
        return nlohmann::json::parse(in);
    }();
    return j;
}

BlockSpec spec_from_json(const nlohmann::json& s)
{
    BlockSpec b;
    if (s.contains("grid")) {
        b.kind = BlockSpec::Kind::grid;
        b.grid = s.at("grid").get<std::vector<Index>>();
        b.block_grid = s.at("block_grid").get<std::vector<Index>>();
        if (s.contains("token_order"))
            b.order = parse_token_order(s.at("token_order").get<std::string>());
    } else if (s.contains("chunk")) {
        b.kind = BlockSpec::Kind::chunk;
        b.chunk = s.at("chunk").get<Index>();
    } else {
        b.blocks = s.at("blocks").is_null() ? 0 : s.at("blocks").get<Index>();
    }
    return b;
}

TEST(Options, NamesRoundTrip)
{
    for (auto m : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla})
        EXPECT_EQ(parse_mechanism(to_string(m)), m);
    for (auto f : {FeatureMapKind::relu, FeatureMapKind::elu1, FeatureMapKind::identity, FeatureMapKind::favor})
        EXPECT_EQ(parse_feature_map(to_string(f)), f);
    for (auto n : {Normalize::row, Normalize::none, Normalize::official})
        EXPECT_EQ(parse_normalize(to_string(n)), n);
    for (auto o : {TokenOrder::raster, TokenOrder::blocked})
        EXPECT_EQ(parse_token_order(to_string(o)), o);
    EXPECT_EQ(to_string(Mechanism::mhla), "mhla");
    EXPECT_EQ(to_string(FeatureMapKind::elu1), "elu1");
    EXPECT_EQ(to_string(Normalize::official), "official");
    EXPECT_EQ(to_string(TokenOrder::blocked), "blocked");
}

TEST(Options, ParseErrorsListTheValidNames)
{
    try {
        parse_mechanism("flash");
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("flash"), std::string::npos) << msg;
        EXPECT_NE(msg.find("softmax, linear, mhla"), std::string::npos) << msg;
    }
    EXPECT_THROW(parse_feature_map("Relu"), std::invalid_argument);
    EXPECT_THROW(parse_normalize(""), std::invalid_argument);
    EXPECT_THROW(parse_token_order("column"), std::invalid_argument);
    try {
        parse_feature_map("softplus");
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("relu, elu1, identity, favor"), std::string::npos) << e.what();
    }
}

TEST(FeatureMap, FavorProjectionMatchesNumPySplitMix)
{
    for (const auto& f : layouts().at("favor")) {
        FeatureMapOptions o;
        o.kind = FeatureMapKind::favor;
        o.favor_features = f.at("m").get<Index>();
        o.seed = std::stoull(f.at("seed").get<std::string>());
        const FeatureMap phi(o, f.at("d").get<Index>());
        const MatrixXd W = matrix_from_json(f.at("w"));
        ASSERT_EQ(phi.favor_projection().rows(), o.favor_features);
        EXPECT_LE(test::max_rel_diff(phi.favor_projection(), W), 1e-15) << "seed " << o.seed;
        EXPECT_EQ(phi.dim(), o.favor_features);
    }
}

TEST(FeatureMap, EveryMapMatchesNumPy)
{
    const auto& fm = layouts().at("feature_maps");
    const MatrixXd X = matrix_from_json(fm.at("x"));
    for (const auto& [name, value] : fm.at("phi").items()) {
        SCOPED_TRACE(name);
        FeatureMapOptions o;
        o.kind = parse_feature_map(name);
        o.favor_features = 7;
        o.seed = 11;
        const FeatureMap phi(o, X.cols());
        const MatrixXd ref = matrix_from_json(value);
        const MatrixXd got = phi(X);
        EXPECT_LE(test::max_rel_diff(got, ref), 1e-14);
        EXPECT_EQ(phi.dim(), ref.cols());
        EXPECT_EQ(phi.non_negative(), name != "identity");
        if (name != "identity") {
            EXPECT_GT(got.minCoeff(), 0.0);
        }
    }
}

TEST(FeatureMap, BadArguments)
{
    FeatureMapOptions o;
    o.kind = FeatureMapKind::favor;
    o.favor_features = 0;
    EXPECT_THROW(FeatureMap(o, 4), std::invalid_argument);
    o.favor_features = -3;
    EXPECT_THROW(FeatureMap(o, 4), std::invalid_argument);
    const FeatureMap relu(FeatureMapOptions{}, 4);
    EXPECT_THROW(relu(MatrixXd::Ones(3, 5)), std::invalid_argument);
}

TEST(Blocks, MatchNumPy)
{
    for (const auto& l : layouts().at("layouts")) {
        SCOPED_TRACE(l.at("spec").dump());
        const Index n = l.at("spec").at("n").get<Index>();
        const BlockLayout layout = make_blocks(spec_from_json(l.at("spec")), n);
        const auto ref = l.at("block").get<std::vector<Index>>();
        EXPECT_EQ(layout.block_of_token, ref);
        EXPECT_EQ(layout.num_tokens, n);
        const MatrixXd centres = matrix_from_json(l.at("centres"));
        ASSERT_EQ(layout.num_blocks, centres.rows());
        EXPECT_EQ(layout.centres, centres);
        // tokens[] lists each block's tokens, ascending, consistent with block_of_token.
        ASSERT_EQ(static_cast<Index>(layout.tokens.size()), layout.num_blocks);
        Index total = 0;
        for (Index b = 0; b < layout.num_blocks; ++b) {
            const auto& toks = layout.tokens[static_cast<std::size_t>(b)];
            EXPECT_FALSE(toks.empty());
            EXPECT_TRUE(std::is_sorted(toks.begin(), toks.end()));
            for (Index t : toks)
                EXPECT_EQ(ref[static_cast<std::size_t>(t)], b);
            total += static_cast<Index>(toks.size());
        }
        EXPECT_EQ(total, n);
        Index prod = 1;
        for (Index g : layout.block_grid)
            prod *= g;
        EXPECT_EQ(prod, layout.num_blocks);
    }
}

TEST(Blocks, EqualSizes)
{
    BlockSpec s;
    s.blocks = 4;
    EXPECT_TRUE(make_blocks(s, 64).equal_sizes());
    EXPECT_FALSE(make_blocks(s, 65).equal_sizes());
    s.kind = BlockSpec::Kind::chunk;
    s.chunk = 10;
    EXPECT_FALSE(make_blocks(s, 65).equal_sizes());
    EXPECT_EQ(make_blocks(s, 65).num_blocks, 7);
    EXPECT_EQ(make_blocks(s, 65).tokens.back().size(), 5u);
}

TEST(Blocks, ErrorsNameTheCondition)
{
    BlockSpec s;
    s.blocks = 300;
    EXPECT_EQ(message_of([&] { make_blocks(s, 196); }), "blocks M=300 exceeds tokens N=196");
    s.blocks = -2;
    EXPECT_NE(message_of([&] { make_blocks(s, 196); }).find("M=-2"), std::string::npos);
    s.blocks = 4;
    EXPECT_NE(message_of([&] { make_blocks(s, 0); }).find("N=0"), std::string::npos);
    s.kind = BlockSpec::Kind::chunk;
    s.chunk = 0;
    EXPECT_NE(message_of([&] { make_blocks(s, 10); }).find("chunk C=0"), std::string::npos);
    s.kind = BlockSpec::Kind::grid;
    s.grid = {14, 14};
    s.block_grid = {2, 2};
    EXPECT_EQ(message_of([&] { make_blocks(s, 197); }), "grid 14x14 has 196 tokens but N=197");
    s.block_grid = {2, 3};
    EXPECT_EQ(message_of([&] { make_blocks(s, 196); }), "grid axis 1: 14 % 3 != 0");
    s.block_grid = {2, 2, 1};
    EXPECT_NE(message_of([&] { make_blocks(s, 196); }).find("block-grid has 3 axes"), std::string::npos);
    s.grid = {196};
    s.block_grid = {4};
    EXPECT_NE(message_of([&] { make_blocks(s, 196); }).find("2 or 3 axes"), std::string::npos);
    s.grid = {14, 0};
    s.block_grid = {2, 1};
    EXPECT_NE(message_of([&] { make_blocks(s, 0); }).find("N=0"), std::string::npos);
    s.grid = {14, 14};
    s.block_grid = {0, 7};
    EXPECT_NE(message_of([&] { make_blocks(s, 196); }).find("block-grid axis 0"), std::string::npos);
}

TEST(Mixing, PresetsMatchNumPy)
{
    for (const auto& l : layouts().at("layouts")) {
        SCOPED_TRACE(l.at("spec").dump());
        const BlockLayout layout = make_blocks(spec_from_json(l.at("spec")), l.at("spec").at("n").get<Index>());
        for (const auto& [key, value] : l.at("mixing").items()) {
            SCOPED_TRACE(key);
            MixingSpec m;
            bool causal = false;
            if (key == "exp_sigma_0.9") {
                m.preset = "exp";
                m.sigma = 0.9;
            } else if (key == "local_thr_2.5") {
                m.preset = "local";
                m.threshold = 2.5;
            } else if (key == "default_causal") {
                causal = true;
            } else if (key != "default") {
                m.preset = key;
            }
            const MatrixXd ref = matrix_from_json(value);
            const MatrixXd got = make_mixing(m, layout, causal);
            ASSERT_EQ(got.rows(), layout.num_blocks);
            EXPECT_LE(test::max_rel_diff(got, ref), 1e-15);
            EXPECT_GE(got.minCoeff(), 0.0);
            if (layout.num_blocks == 1) {
                EXPECT_EQ(got, MatrixXd::Ones(1, 1));
            }
        }
    }
}

TEST(Mixing, ColumnNormalisedPresetsHaveUnitColumns)
{
    BlockSpec s;
    s.kind = BlockSpec::Kind::grid;
    s.grid = {6, 8};
    s.block_grid = {3, 4};
    const BlockLayout layout = make_blocks(s, 48);
    for (const char* p : {"cos", "linear", "exp", "local"}) {
        MixingSpec m;
        m.preset = p;
        const MatrixXd W = make_mixing(m, layout, false);
        EXPECT_LE((W.colwise().sum().array() - 1.0).abs().maxCoeff(), 1e-15) << p;
    }
}

TEST(Mixing, NamesAndDefaults)
{
    // docs/maths.md 1.6: exp on 1-D blocks, cos on a block grid, causal-local when causal (either layout).
    MixingSpec m;
    EXPECT_EQ(resolved_mixing_name(m, false, false), "exp");
    EXPECT_EQ(resolved_mixing_name(m, false, true), "cos");
    EXPECT_EQ(resolved_mixing_name(m, true, false), "causal-local");
    EXPECT_EQ(resolved_mixing_name(m, true, true), "causal-local");
    m.preset = "exp";
    EXPECT_EQ(resolved_mixing_name(m, true, true), "exp");
    m.preset = "learned.h5:/mc";
    m.matrix = MatrixXd::Identity(2, 2);
    EXPECT_EQ(resolved_mixing_name(m, false, false), "file");
}

// The default preset's matrix is the named preset's on each layout.
TEST(Mixing, DefaultMatrixFollowsTheLayout)
{
    BlockSpec line;
    line.blocks = 6;
    BlockSpec grid;
    grid.kind = BlockSpec::Kind::grid;
    grid.grid = {6, 8};
    grid.block_grid = {3, 4};
    for (const auto& [spec, name] : {std::pair{line, "exp"}, std::pair{grid, "cos"}}) {
        const BlockLayout layout = make_blocks(spec, 48);
        MixingSpec named;
        named.preset = name;
        EXPECT_EQ(make_mixing(MixingSpec{}, layout, false), make_mixing(named, layout, false)) << name;
    }
}

// causal-local: lower triangular exp(-(i - j) / sigma), each row summing to 1 (docs/maths.md 1.6).
TEST(Mixing, CausalLocal)
{
    BlockSpec s;
    s.blocks = 4;
    MixingSpec m;
    m.preset = "causal-local";
    m.sigma = 2.0;
    const MatrixXd W = make_mixing(m, make_blocks(s, 20), true);
    for (Index i = 0; i < 4; ++i) {
        double sum = 0;
        for (Index j = 0; j <= i; ++j)
            sum += std::exp(-(i - j) / 2.0);
        for (Index j = 0; j < 4; ++j)
            EXPECT_NEAR(W(i, j), j <= i ? std::exp(-(i - j) / 2.0) / sum : 0.0, 1e-15) << i << "," << j;
    }
    m.sigma = 0.0;
    EXPECT_THROW(make_mixing(m, make_blocks(s, 20), true), std::invalid_argument);
}

// `blocks` blocks of 20 tokens, and every needle in what make_mixing(m, that layout) refuses m with.
BlockLayout twenty_tokens_in(Index blocks)
{
    BlockSpec s;
    s.blocks = blocks;
    return make_blocks(s, 20);
}

void expect_mixing_refused(const MixingSpec& m, const BlockLayout& layout, std::initializer_list<const char*> needles)
{
    const std::string msg = message_of([&] { make_mixing(m, layout, false); });
    for (const char* needle : needles)
        EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

TEST(Mixing, LoadedMatrixChecks)
{
    const BlockLayout layout = twenty_tokens_in(4);
    MixingSpec m;
    m.preset = "mc.npy";
    m.matrix = MatrixXd::Constant(4, 4, 0.25);
    EXPECT_EQ(make_mixing(m, layout, false), MatrixXd::Constant(4, 4, 0.25));
    m.matrix = MatrixXd::Ones(3, 4);
    expect_mixing_refused(m, layout, {"3x4", "M=4", "mc.npy"});
    m.matrix = MatrixXd::Ones(4, 4);
    (*m.matrix)(2, 1) = -0.5;   // a signed learned Mc is accepted as it is (docs/maths.md 1.4)
    EXPECT_EQ(make_mixing(m, layout, false), *m.matrix);
    EXPECT_TRUE(signed_mixing(*m.matrix));
    EXPECT_FALSE(signed_mixing(MatrixXd::Ones(4, 4)));
    (*m.matrix)(2, 1) = std::numeric_limits<double>::quiet_NaN();
    expect_mixing_refused(m, layout, {"non-finite"});
    (*m.matrix)(2, 1) = std::numeric_limits<double>::infinity();
    EXPECT_THROW(make_mixing(m, layout, false), std::invalid_argument);
}

TEST(Mixing, BadPresetsAndDegenerateCases)
{
    const BlockLayout layout = twenty_tokens_in(5);
    MixingSpec m;
    m.preset = "rbf";
    expect_mixing_refused(m, layout, {"rbf", "gaussian"});
    m.preset = "exp";
    m.sigma = 0.0;
    expect_mixing_refused(m, layout, {"sigma"});
    m.sigma = -1.0;
    EXPECT_THROW(make_mixing(m, layout, false), std::invalid_argument);
    m.preset = "local";
    m.threshold = -1.0;   // no block is within -1 of itself: every column sums to 0
    expect_mixing_refused(m, layout, {"local", "sums to 0"});
}

}  // namespace
