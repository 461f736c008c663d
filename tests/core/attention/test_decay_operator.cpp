// The decay and gated families (docs/maths.md 1.8): dense matrices against the NumPy reference
// (make_decay_cases.py -> tests/reference/attnref.py), the recurrences of apply / apply_transpose / the row
// normaliser against dense(), the identities (constant gates = causal decay, gamma = 1 = linear attention),
// the errors, streamed row entropies, and a large-N product that never forms N x N.
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attention/decay.h"
#include "attention/operator.h"
#include "case_options.h"
#include "metrics/metrics.h"
#include "metrics/streaming.h"
#include "support/test_support.h"

namespace {

using namespace attnscope;
using namespace attnscope::attention;
using Eigen::MatrixXd;
using Eigen::VectorXd;
using test::message_of;

std::unique_ptr<AttentionOperator> make_family(Mechanism m, const MatrixXd& Q, const MatrixXd& K,
                                               const AttentionOptions& o)
{
    return m == Mechanism::gated ? make_gated_operator(Q, K, o) : make_decay_operator(Q, K, o);
}

double max_abs(const MatrixXd& a) { return a.size() ? a.cwiseAbs().maxCoeff() : 0.0; }

// ---------------------------------------------------------------------------------------------------
// Against the NumPy reference.

struct Case {
    std::string name;
    Mechanism mechanism;
    AttentionOptions options;
    MatrixXd Q, K, A;
    std::vector<Index> allowed;
};

std::vector<Case> load_cases()
{
    const std::string dir = test::fresh_work_dir("decay_reference");
    test::run_python("core/attention/make_decay_cases.py", {dir});
    std::ifstream in(dir + "/decay_cases.json");
    const nlohmann::json all = nlohmann::json::parse(in);
    std::vector<Case> cases;
    for (const auto& c : all) {
        Case k;
        k.name = c.at("name").get<std::string>();
        k.mechanism = c.at("mechanism").get<std::string>() == "gated" ? Mechanism::gated : Mechanism::decay;
        nlohmann::json o = c.at("options");
        if (o.at("block_grid").is_null())
            o["block_grid"] = nlohmann::json::array();   // a raster grid needs no block grid here
        k.options = test::options_from_json(o, dir);
        if (!o.at("decay").is_null())
            k.options.decay.gamma = o.at("decay").get<double>();
        k.options.query_head = o.at("head").get<Index>();
        if (!o.at("gates").is_null()) {
            k.options.gates.source = o.at("gates").get<std::string>();
            k.options.gates.values = test::read_npy_simple(dir + "/" + k.options.gates.source).col(0);
        }
        k.options.gates.log = o.at("gates_log").get<bool>();
        k.Q = test::read_npy_simple(dir + "/" + c.at("q").get<std::string>());
        k.K = test::read_npy_simple(dir + "/" + c.at("k").get<std::string>());
        k.A = test::read_npy_simple(dir + "/" + c.at("a").get<std::string>());
        k.allowed = c.at("allowed").get<std::vector<Index>>();
        cases.push_back(std::move(k));
    }
    return cases;
}

TEST(DecayOperator, MatchesNumPyReference)
{
    const auto cases = load_cases();
    ASSERT_GE(cases.size(), 30u);
    double worst_dense = 0, worst_apply = 0;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const auto op = make_family(c.mechanism, c.Q, c.K, c.options);
        EXPECT_EQ(op->mechanism(), c.mechanism);
        EXPECT_EQ(op->causal(), c.options.causal);
        EXPECT_EQ(op->allowed_keys(), c.allowed);
        EXPECT_FALSE(op->unnormalisable_row());
        const MatrixXd A = op->dense();
        ASSERT_EQ(A.rows(), c.A.rows());
        const double d = max_abs(A - c.A);
        worst_dense = std::max(worst_dense, d);
        EXPECT_LE(d, 1e-12);

        const Index n = A.rows();
        const MatrixXd X = test::gaussian_matrix(n, 3, 11);
        MatrixXd Y(n, 3), Yt(n, 3);
        op->apply(X, Y);
        op->apply_transpose(X, Yt);
        const double e = std::max(test::max_rel_diff(Y, c.A * X), test::max_rel_diff(Yt, c.A.transpose() * X));
        worst_apply = std::max(worst_apply, e);
        EXPECT_LE(e, 1e-12);
    }
    std::printf("decay / gated over %zu cases: max |dense - NumPy| %.3g, max relative difference of products %.3g\n",
                cases.size(), worst_dense, worst_apply);
}

// ---------------------------------------------------------------------------------------------------
// The recurrences against dense(), N = 300.

struct Config {
    std::string name;
    Mechanism mechanism;
    AttentionOptions options;
};

AttentionOptions grid_options(std::vector<Index> grid, std::vector<Index> block_grid, TokenOrder order)
{
    AttentionOptions o;
    o.blocks.kind = BlockSpec::Kind::grid;
    o.blocks.grid = std::move(grid);
    o.blocks.block_grid = std::move(block_grid);
    o.blocks.order = order;
    return o;
}

std::vector<Config> configs_300()
{
    const Index n = 300;
    std::vector<Config> out;
    const VectorXd gates = (test::uniform_matrix(n, 1, 5, 0.7, 1.0)).col(0);
    for (auto fm : {FeatureMapKind::relu, FeatureMapKind::identity}) {
        const std::string f(fm == FeatureMapKind::relu ? "relu" : "identity");
        const Normalize norm = fm == FeatureMapKind::relu ? Normalize::row : Normalize::none;
        auto add = [&](std::string name, Mechanism m, AttentionOptions o) {
            o.feature_map.kind = fm;
            o.normalize = norm;
            out.push_back({name + "_" + f, m, std::move(o)});
        };
        AttentionOptions o;
        o.decay.gamma = 0.97;
        add("decay_1d", Mechanism::decay, o);
        o.causal = true;
        add("decay_causal", Mechanism::decay, o);
        o = grid_options({15, 20}, {3, 4}, TokenOrder::raster);
        o.decay.gamma = 0.9;
        add("decay_grid_raster", Mechanism::decay, o);
        o.blocks.order = TokenOrder::blocked;
        add("decay_grid_blocked", Mechanism::decay, o);
        o = grid_options({6, 5, 10}, {2, 5, 2}, TokenOrder::blocked);
        o.query_head = 2;
        add("decay_grid3d_blocked", Mechanism::decay, o);
        o.causal = true;
        add("decay_grid3d_causal", Mechanism::decay, o);
        o = AttentionOptions{};
        o.causal = true;
        o.gates.values = gates;
        add("gated", Mechanism::gated, o);
        o.gates.values = gates.array().log();
        o.gates.log = true;
        add("gated_log", Mechanism::gated, o);
    }
    return out;
}

TEST(DecayOperator, RecurrencesAgreeWithDense)
{
    const Index n = 300;
    const MatrixXd Q = test::gaussian_matrix(n, 8, 1), K = test::gaussian_matrix(n, 8, 2);
    double worst = 0;
    for (const auto& c : configs_300()) {
        SCOPED_TRACE(c.name);
        const auto op = make_family(c.mechanism, Q, K, c.options);
        const MatrixXd A = op->dense();
        ASSERT_TRUE(A.allFinite());
        for (Index k : {1, 5}) {
            const MatrixXd X = test::gaussian_matrix(n, k, static_cast<unsigned>(10 + k));
            MatrixXd Y(n, k), Yt(n, k);
            op->apply(X, Y);
            op->apply_transpose(X, Yt);
            const double d = std::max(test::max_rel_diff(Y, A * X), test::max_rel_diff(Yt, A.transpose() * X));
            worst = std::max(worst, d);
            EXPECT_LE(d, 1e-12) << "k=" << k;
        }
        // The normaliser: with row normalisation A 1 = 1; without, P 1 is the dense row sums.
        MatrixXd ones = MatrixXd::Ones(n, 1), z(n, 1);
        op->apply(ones, z);
        const VectorXd expected =
            c.options.normalize == Normalize::row ? VectorXd::Ones(n) : VectorXd(A.rowwise().sum());
        const double dz = test::max_rel_diff(z, expected);
        worst = std::max(worst, dz);
        EXPECT_LE(dz, 1e-12);
        // Spectra's perform_op and a tile of dense_rows in the middle.
        VectorXd x = test::gaussian_matrix(n, 1, 30).col(0), y(n);
        op->perform_op(x.data(), y.data());
        EXPECT_LE(test::max_rel_diff(y, A * x), 1e-12);
        MatrixXd rows(7, n);
        op->dense_rows(101, 7, rows);
        EXPECT_LE(max_abs(rows - A.middleRows(101, 7)), 1e-14);
    }
    std::printf("recurrences vs dense(), N=%lld: max relative difference %.3g\n", static_cast<long long>(n), worst);
}

// ---------------------------------------------------------------------------------------------------
// Identities of docs/maths.md 1.8.

TEST(DecayOperator, ConstantGatesAreCausalDecay)
{
    const Index n = 120;
    const MatrixXd Q = test::gaussian_matrix(n, 6, 3), K = test::gaussian_matrix(n, 6, 4);
    for (bool log : {false, true})
        for (Normalize norm : {Normalize::row, Normalize::none}) {
            AttentionOptions g;
            g.causal = true;
            g.normalize = norm;
            g.gates.log = log;
            g.gates.values = VectorXd::Constant(n, log ? std::log(0.93) : 0.93);
            AttentionOptions d = g;
            d.decay.gamma = 0.93;
            const MatrixXd Ag = make_gated_operator(Q, K, g)->dense(), Ad = make_decay_operator(Q, K, d)->dense();
            EXPECT_LE(max_abs(Ag - Ad), 1e-12) << "log " << log;
        }
}

TEST(DecayOperator, GammaOneIsLinearAttention)
{
    const Index n = 96;
    const MatrixXd Q = test::gaussian_matrix(n, 6, 5), K = test::gaussian_matrix(n, 6, 6);
    std::vector<AttentionOptions> all;
    for (bool causal : {false, true}) {
        AttentionOptions o;
        o.causal = causal;
        all.push_back(o);
        o.normalize = Normalize::none;
        o.feature_map.kind = FeatureMapKind::elu1;
        all.push_back(o);
    }
    all.push_back(grid_options({8, 12}, {2, 3}, TokenOrder::blocked));
    for (auto o : all) {
        o.decay.gamma = 1.0;
        const auto dec = make_decay_operator(Q, K, o);
        const auto lin = make_operator(Mechanism::linear, Q, K, o);
        EXPECT_LE(test::max_rel_diff(dec->dense(), lin->dense()), 1e-12);
        const MatrixXd X = test::gaussian_matrix(n, 2, 9);
        MatrixXd Y1(n, 2), Y2(n, 2);
        dec->apply_transpose(X, Y1);
        lin->apply_transpose(X, Y2);
        EXPECT_LE(test::max_rel_diff(Y1, Y2), 1e-12);
        EXPECT_EQ(dec->allowed_keys(), lin->allowed_keys());
    }
}

TEST(DecayOperator, DefaultGammaAndAllowedKeys)
{
    AttentionOptions o;
    EXPECT_DOUBLE_EQ(decay_gamma(o), 1.0 - 1.0 / 32.0);
    o.query_head = 3;
    EXPECT_DOUBLE_EQ(decay_gamma(o), 1.0 - 1.0 / 256.0);
    o.decay.gamma = 0.5;
    EXPECT_DOUBLE_EQ(decay_gamma(o), 0.5);
    o.decay.gamma.reset();
    o.query_head = 100000;
    EXPECT_DOUBLE_EQ(decay_gamma(o), 1.0);

    const MatrixXd Q = test::gaussian_matrix(5, 3, 7);
    AttentionOptions c;
    c.causal = true;
    EXPECT_EQ(make_decay_operator(Q, Q, c)->allowed_keys(), (std::vector<Index>{1, 2, 3, 4, 5}));
    EXPECT_EQ(make_decay_operator(Q, Q, AttentionOptions{})->allowed_keys(), (std::vector<Index>{5, 5, 5, 5, 5}));
    c.gates.values = VectorXd::Constant(5, 0.5);
    EXPECT_EQ(make_gated_operator(Q, Q, c)->allowed_keys(), (std::vector<Index>{1, 2, 3, 4, 5}));
    EXPECT_EQ(dynamic_cast<const DecayOperator&>(*make_decay_operator(Q, Q, o)).gamma(), 1.0);
    c.feature_map.kind = FeatureMapKind::identity;
    EXPECT_TRUE(make_gated_operator(Q, Q, c)->may_be_negative());
    EXPECT_FALSE(make_decay_operator(Q, Q, AttentionOptions{})->may_be_negative());
}

// ---------------------------------------------------------------------------------------------------
// Errors: clear words, no command-line flags.

TEST(DecayOperator, BadOptionsAreClearErrors)
{
    const Index n = 10;
    const MatrixXd Q = test::gaussian_matrix(n, 4, 8);
    auto decay_with = [&](double gamma) {
        AttentionOptions o;
        o.decay.gamma = gamma;
        return message_of([&] { make_decay_operator(Q, Q, o); });
    };
    EXPECT_EQ(decay_with(0.0), "the decay gamma must lie in (0, 1], got 0");
    EXPECT_EQ(decay_with(1.5), "the decay gamma must lie in (0, 1], got 1.5");
    EXPECT_EQ(decay_with(std::numeric_limits<double>::quiet_NaN()), "the decay gamma must lie in (0, 1], got nan");
    AttentionOptions h;
    h.query_head = -5;
    EXPECT_EQ(decay_problem(h, n), "the decay gamma must lie in (0, 1], got 0 (RetNet's 1 - 2^(-5 - h) for query "
                                   "head h=-5)");

    AttentionOptions g;
    g.causal = true;
    auto gated_with = [&](VectorXd values, bool log) {
        g.gates.values = std::move(values);
        g.gates.log = log;
        if (!gates_problem(g, n).empty()) {
            EXPECT_EQ(gates_problem(g, n), message_of([&] { make_gated_operator(Q, Q, g); }));
        }
        return gates_problem(g, n);
    };
    VectorXd ok = VectorXd::Constant(n, 0.5);
    EXPECT_EQ(gated_with(VectorXd::Constant(n - 1, 0.5), false),
              "the gates must hold one value per token: N=10 tokens, got 9 gates");
    EXPECT_EQ(gated_with(VectorXd(), false), "gated attention needs the gates, one value per token (N=10)");
    g.gates.source = "gates.npy:/g";   // named, not read yet: only the factory, which needs the values, refuses
    g.gates.values = VectorXd();
    EXPECT_EQ(gates_problem(g, n), "");
    EXPECT_EQ(message_of([&] { make_gated_operator(Q, Q, g); }),
              "gated attention needs the gates, one value per token (N=10)");
    g.gates.source.clear();
    VectorXd bad = ok;
    bad(3) = 0.0;
    EXPECT_EQ(gated_with(bad, false), "the gates must lie in (0, 1]: token 3 has g = 0");
    bad(3) = 1.2;
    bad(7) = 0.0;
    EXPECT_EQ(gated_with(bad, false), "the gates must lie in (0, 1]: token 3 has g = 1.2");
    bad = VectorXd::Constant(n, -0.1);
    bad(4) = 0.1;
    EXPECT_EQ(gated_with(bad, true), "the log gates must be finite and <= 0 (gates in (0, 1]): token 4 has ln g = 0.1");
    bad(4) = -std::numeric_limits<double>::infinity();
    EXPECT_EQ(gated_with(bad, true),
              "the log gates must be finite and <= 0 (gates in (0, 1]): token 4 has ln g = -inf");
    EXPECT_EQ(gated_with(ok, false), "");
    EXPECT_EQ(gated_with(VectorXd::Zero(n), true), "");   // ln g = 0: gates of 1

    g.causal = false;
    EXPECT_EQ(gates_problem(g, n), "gated attention is causal only (a token's gate decays the keys before it): choose "
                                   "causal attention");
    EXPECT_EQ(message_of([&] { make_gated_operator(Q, Q, g); }), gates_problem(g, n));
    g.causal = true;
    g.normalize = Normalize::official;
    EXPECT_EQ(gates_problem(g, n),
              "gated attention is normalised by rows or not at all; the official normalisation is MHLA's");
    AttentionOptions d;
    d.normalize = Normalize::official;
    EXPECT_EQ(message_of([&] { make_decay_operator(Q, Q, d); }),
              "decay attention is normalised by rows or not at all; the official normalisation is MHLA's");

    AttentionOptions grid = grid_options({3, 4}, {}, TokenOrder::raster);
    EXPECT_EQ(decay_problem(grid, n), "grid 3x4 has 12 tokens but N=10");
    grid.blocks.grid = {2, 5};
    EXPECT_EQ(decay_problem(grid, n), "");   // raster order needs no block grid
    grid.blocks.order = TokenOrder::blocked;
    EXPECT_NE(decay_problem(grid, n).find("block-grid has 0 axes"), std::string::npos);
    grid.blocks.block_grid = {2, 2};
    EXPECT_EQ(decay_problem(grid, n), "block-grid axis 1: 2 blocks do not divide the grid's 5");
    grid.causal = true;   // the grid is checked also when causal (its distance is then t - j)
    EXPECT_EQ(message_of([&] { make_decay_operator(Q, Q, grid); }), decay_problem(grid, n));

    EXPECT_EQ(message_of([&] { make_decay_operator(Q, test::gaussian_matrix(n, 3, 1), AttentionOptions{}); }),
              "Q is 10x4 but K is 10x3 (they must have the same shape)");
    for (const auto& msg : {decay_with(2.0), gates_problem(g, n), decay_problem(grid, n)})
        EXPECT_EQ(msg.find("--"), std::string::npos) << msg;
}

TEST(DecayOperator, UnnormalisableRowIsReported)
{
    // Identity features of a zero query: its row of P is 0 and cannot be normalised.
    MatrixXd Q = test::gaussian_matrix(20, 4, 2);
    const MatrixXd K = test::gaussian_matrix(20, 4, 3);
    Q.row(6).setZero();
    AttentionOptions o;
    o.causal = true;
    o.feature_map.kind = FeatureMapKind::identity;
    const auto op = make_decay_operator(Q, K, o);
    ASSERT_TRUE(op->unnormalisable_row());
    EXPECT_EQ(*op->unnormalisable_row(), 6);
    const auto& d = dynamic_cast<const DecayOperator&>(*op);
    EXPECT_EQ(d.unnormalisable_sum(), 0.0);
    EXPECT_FALSE(op->dense().row(6).allFinite());
    o.normalize = Normalize::none;
    EXPECT_FALSE(make_decay_operator(Q, K, o)->unnormalisable_row());
    EXPECT_FALSE(make_operator(Mechanism::linear, Q, K, o)->unnormalisable_row());
}

// ---------------------------------------------------------------------------------------------------
// Streamed row entropies: the generic dense_rows path of metrics/streaming.h serves these operators.

TEST(DecayOperator, StreamedEntropyMatchesDense)
{
    const Index n = 200;
    const MatrixXd Q = test::gaussian_matrix(n, 6, 12), K = test::gaussian_matrix(n, 6, 13);
    AttentionOptions grid = grid_options({10, 20}, {2, 4}, TokenOrder::blocked);
    AttentionOptions gated;
    gated.causal = true;
    gated.gates.values = test::uniform_matrix(n, 1, 3, 0.5, 1.0).col(0);
    AttentionOptions causal;
    causal.causal = true;
    for (const auto& [m, o] : {std::pair{Mechanism::decay, grid}, std::pair{Mechanism::gated, gated},
                               std::pair{Mechanism::decay, causal}}) {
        const auto op = make_family(m, Q, K, o);
        const metrics::EntropyStats ref = metrics::row_entropy(op->dense(), op->allowed_keys());
        for (Index tile : {0, 7}) {
            const metrics::StreamedEntropy s = metrics::streaming_row_entropy(*op, tile);
            ASSERT_EQ(s.status, metrics::EntropyStatus::ok);
            ASSERT_TRUE(s.stats);
            EXPECT_NEAR(s.stats->mean, ref.mean, 1e-12 * std::abs(ref.mean));
            EXPECT_NEAR(s.stats->normalized_mean, ref.normalized_mean, 1e-12);
            for (std::size_t t = 0; t < ref.rows.size(); ++t)
                EXPECT_NEAR(s.stats->rows[t], ref.rows[t], 1e-12 * std::max(1.0, ref.rows[t]));
        }
    }
    AttentionOptions neg;
    neg.feature_map.kind = FeatureMapKind::identity;
    neg.normalize = Normalize::none;
    EXPECT_EQ(metrics::streaming_row_entropy(*make_decay_operator(Q, K, neg)).status, metrics::EntropyStatus::negative);
}

// ---------------------------------------------------------------------------------------------------
// Large N: products by recurrences only (O(N r k) memory; N x N would be 3.2 GB), checked on a few rows.
// (The grid's columns go 3 + 1 through its 8 MiB buffer.)

TEST(DecayOperator, LargeProductsNeverFormTheMatrix)
{
    const Index n = 20000, r = 16, k = 4;
    const MatrixXd Q = test::gaussian_matrix(n, r, 21), K = test::gaussian_matrix(n, r, 22);
    const MatrixXd X = test::gaussian_matrix(n, k, 23);
    AttentionOptions causal;
    causal.causal = true;
    AttentionOptions gated = causal;
    gated.gates.values = test::uniform_matrix(n, 1, 4, 0.9, 1.0).col(0);
    gated.gates.values(5000) = 1e-300;
    for (const auto& [m, o] : {std::pair{Mechanism::decay, AttentionOptions{}}, std::pair{Mechanism::decay, causal},
                               std::pair{Mechanism::gated, gated},
                               std::pair{Mechanism::decay, grid_options({100, 200}, {}, TokenOrder::raster)}}) {
        const auto op = make_family(m, Q, K, o);
        MatrixXd Y(n, k), Yt(n, k), ones(n, 1), z(n, 1);
        op->apply(X, Y);
        op->apply_transpose(X, Yt);
        ones.setOnes();
        op->apply(ones, z);
        EXPECT_TRUE(Y.allFinite() && Yt.allFinite());
        EXPECT_LE((z.array() - 1.0).abs().maxCoeff(), 1e-12);
        for (Index t0 : {Index{0}, Index{4999}, n - 3}) {
            MatrixXd rows(3, n);
            op->dense_rows(t0, 3, rows);
            EXPECT_LE(test::max_rel_diff(Y.middleRows(t0, 3), rows * X), 1e-12) << t0;
        }
    }
}

}  // namespace
