// Streaming row entropy (tiles of dense_rows) equals the dense computation for every mechanism,
// causal or not, every normalisation; dense_rows equals dense() row blocks; negative entries are
// reported, not hidden.
#include <gtest/gtest.h>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "metrics/streaming.h"
#include "support/test_support.h"

using namespace attnscope;
using attention::Mechanism;
using test::splitmix_rowwise;

namespace {

struct Case {
    Mechanism mechanism;
    attention::AttentionOptions options;
    std::string name;
};

std::vector<Case> cases()
{
    std::vector<Case> out;
    for (bool causal : {false, true}) {
        attention::AttentionOptions o;
        o.causal = causal;
        const std::string c = causal ? " causal" : "";
        out.push_back({Mechanism::softmax, o, "softmax" + c});
        out.push_back({Mechanism::linear, o, "linear" + c});
        o.blocks.blocks = 5;
        out.push_back({Mechanism::mhla, o, "mhla blocks 5" + c});
        o.blocks.kind = attention::BlockSpec::Kind::grid;
        o.blocks.grid = {6, 10};
        o.blocks.block_grid = {2, 5};
        out.push_back({Mechanism::mhla, o, "mhla grid" + c});
        o.normalize = attention::Normalize::none;
        out.push_back({Mechanism::mhla, o, "mhla grid none" + c});
        if (!causal) {
            o.normalize = attention::Normalize::official;
            out.push_back({Mechanism::mhla, o, "mhla grid official"});
        }
    }
    attention::AttentionOptions favor;
    favor.feature_map.kind = attention::FeatureMapKind::favor;
    favor.feature_map.favor_features = 16;
    out.push_back({Mechanism::linear, favor, "linear favor"});
    return out;
}

}  // namespace

TEST(Streaming, DenseRowsEqualDense)
{
    const Eigen::MatrixXd q = splitmix_rowwise(60, 7, 1), k = splitmix_rowwise(60, 7, 2);
    for (const auto& c : cases()) {
        const auto op = attention::make_operator(c.mechanism, q, k, c.options);
        const Eigen::MatrixXd a = op->dense();
        for (auto [t0, count] : {std::pair<Eigen::Index, Eigen::Index>{0, 60}, {0, 7}, {13, 17}, {59, 1}}) {
            Eigen::MatrixXd rows(count, 60);
            op->dense_rows(t0, count, rows);
            const double diff = (rows - a.middleRows(t0, count)).cwiseAbs().maxCoeff();
            EXPECT_LE(diff, 1e-14 * a.cwiseAbs().maxCoeff()) << c.name << " rows " << t0 << "+" << count;
        }
        Eigen::MatrixXd wrong(3, 59);
        EXPECT_THROW(op->dense_rows(0, 3, wrong), std::invalid_argument) << c.name;
    }
}

TEST(Streaming, EntropyEqualsDense)
{
    const Eigen::MatrixXd q = splitmix_rowwise(60, 7, 3), k = splitmix_rowwise(60, 7, 4);
    for (const auto& c : cases()) {
        const auto op = attention::make_operator(c.mechanism, q, k, c.options);
        const auto dense = metrics::row_entropy(op->dense(), op->allowed_keys());
        for (Eigen::Index tile : {0, 1, 7, 64}) {
            const auto streamed = metrics::streaming_row_entropy(*op, tile);
            ASSERT_TRUE(streamed.stats.has_value()) << c.name;
            EXPECT_FALSE(streamed.status == metrics::EntropyStatus::negative);
            const auto& s = *streamed.stats;
            EXPECT_NEAR(s.mean, dense.mean, 1e-12 * std::abs(dense.mean)) << c.name;
            EXPECT_NEAR(s.std, dense.std, 1e-10 * std::max(dense.std, 1e-3)) << c.name;
            EXPECT_NEAR(s.min, dense.min, 1e-12 * std::max(std::abs(dense.min), 1.0)) << c.name;
            EXPECT_NEAR(s.max, dense.max, 1e-12 * std::abs(dense.max)) << c.name;
            EXPECT_NEAR(s.normalized_mean, dense.normalized_mean, 1e-12) << c.name;
            ASSERT_EQ(s.rows.size(), dense.rows.size());
            for (std::size_t t = 0; t < s.rows.size(); ++t)
                EXPECT_NEAR(s.rows[t], dense.rows[t], 1e-12 * std::max(std::abs(dense.rows[t]), 1.0)) << c.name << " row " << t;
        }
    }
}

TEST(Streaming, NegativeEntriesAreReported)
{
    attention::AttentionOptions o;
    o.feature_map.kind = attention::FeatureMapKind::identity;
    const Eigen::MatrixXd q = splitmix_rowwise(30, 4, 5), k = splitmix_rowwise(30, 4, 6);
    o.blocks.blocks = 3;
    o.normalize = attention::Normalize::none;
    const auto op = attention::make_operator(Mechanism::mhla, q, k, o);
    const auto streamed = metrics::streaming_row_entropy(*op);
    EXPECT_TRUE(streamed.status == metrics::EntropyStatus::negative);
    EXPECT_FALSE(streamed.stats.has_value());
}
