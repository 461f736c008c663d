// Property tests (RapidCheck) of docs/maths.md section 3 over random shapes, block layouts, mixing
// presets, feature maps, causal and not: the identities hold for every draw, not just hand-picked cases.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "attention/blocks.h"
#include "attention/mixing.h"
#include "attention/operator.h"
#include "metrics/metrics.h"
#include "support/random_matrix.h"

using namespace attnscope;
using attention::Index;
using attention::Mechanism;
using test::splitmix_rowwise;

namespace {

const char* kPresets[] = {"cos", "linear", "exp", "gaussian", "local", "uniform", "identity", "causal-local", "causal"};

// A random but valid MHLA configuration for N tokens: 1-D counts, chunks, or a 2-D grid when N factors.
attention::AttentionOptions random_options(Index n, bool causal)
{
    attention::AttentionOptions o;
    o.causal = causal;
    o.feature_map.kind = *rc::gen::element(attention::FeatureMapKind::relu, attention::FeatureMapKind::elu1,
                                           attention::FeatureMapKind::favor);
    o.feature_map.favor_features = *rc::gen::inRange<Index>(1, 24);
    o.feature_map.seed = *rc::gen::inRange<std::uint64_t>(0, 1000);
    const int kind = *rc::gen::inRange(0, 3);
    if (kind == 0) {
        o.blocks.kind = attention::BlockSpec::Kind::count;
        o.blocks.blocks = *rc::gen::inRange<Index>(1, n + 1);
    } else if (kind == 1) {
        o.blocks.kind = attention::BlockSpec::Kind::chunk;
        o.blocks.chunk = *rc::gen::inRange<Index>(1, n + 1);
    } else {
        std::vector<Index> divisors;
        for (Index h = 1; h <= n; ++h)
            if (n % h == 0)
                divisors.push_back(h);
        const Index h = *rc::gen::elementOf(divisors);
        const Index w = n / h;
        auto divisor_of = [](Index g) {
            std::vector<Index> ds;
            for (Index b = 1; b <= g; ++b)
                if (g % b == 0)
                    ds.push_back(b);
            return *rc::gen::elementOf(ds);
        };
        o.blocks.kind = attention::BlockSpec::Kind::grid;
        o.blocks.grid = {h, w};
        o.blocks.block_grid = {divisor_of(h), divisor_of(w)};
        o.blocks.order = *rc::gen::element(attention::TokenOrder::raster, attention::TokenOrder::blocked);
    }
    o.mixing.preset = *rc::gen::elementOf(std::vector<std::string>(std::begin(kPresets), std::end(kPresets)));
    o.mixing.sigma = *rc::gen::inRange(1, 50) / 10.0;
    o.mixing.threshold = *rc::gen::inRange(0, 40) / 10.0;
    return o;
}

double rel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b)
{
    return (a - b).cwiseAbs().maxCoeff() / std::max(b.cwiseAbs().maxCoeff(), 1e-300);
}

}  // namespace

RC_GTEST_PROP(Properties, UniformMixingIsLinearAttention, ())
{
    const Index n = *rc::gen::inRange<Index>(2, 50), d = *rc::gen::inRange<Index>(1, 8);
    const bool causal = *rc::gen::arbitrary<bool>();
    auto o = random_options(n, causal);
    // Causally the identity needs blocks that are contiguous in token order: on a grid, MHLA's causal
    // rule (earlier block, or same block and j <= t) allows keys j > t that linear attention masks.
    if (causal && o.blocks.kind == attention::BlockSpec::Kind::grid) {
        o.blocks.kind = attention::BlockSpec::Kind::chunk;
        o.blocks.chunk = *rc::gen::inRange<Index>(1, n + 1);
    }
    o.mixing.preset = "uniform";
    o.normalize = *rc::gen::element(attention::Normalize::row, attention::Normalize::none);
    const auto q = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto k = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto linear = attention::make_operator(Mechanism::linear, q, k, o)->dense();
    const auto mhla = attention::make_operator(Mechanism::mhla, q, k, o)->dense();
    // Linear attention honours --normalize here too (MHLA with one block); the identity is exact.
    RC_ASSERT(rel(mhla, linear) <= 1e-13);
}

RC_GTEST_PROP(Properties, RanksAreBoundedByTheFactorisation, ())
{
    const Index n = *rc::gen::inRange<Index>(2, 60), d = *rc::gen::inRange<Index>(1, 6);
    auto o = random_options(n, false);
    o.feature_map.kind = *rc::gen::element(attention::FeatureMapKind::relu, attention::FeatureMapKind::elu1);
    const auto q = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto k = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto lin = metrics::spectrum_metrics(metrics::singular_values(attention::make_operator(Mechanism::linear, q, k, o)->dense()), n, n, std::nullopt);
    RC_ASSERT(lin.rank <= d);   // linear: rank <= feature dimension r = d
    const auto layout = attention::make_blocks(o.blocks, n);
    const auto mc = attention::make_mixing(o.mixing, layout, false);
    const auto mc_rank = metrics::spectrum_metrics(metrics::singular_values(Eigen::MatrixXd(mc)), mc.rows(), mc.cols(), std::nullopt).rank;
    const auto mhla = metrics::spectrum_metrics(metrics::singular_values(attention::make_operator(Mechanism::mhla, q, k, o)->dense()), n, n, std::nullopt);
    RC_ASSERT(mhla.rank <= std::min<Index>(n, mc_rank * d));
}

RC_GTEST_PROP(Properties, RowNormalisedRowsSumToOne, ())
{
    const Index n = *rc::gen::inRange<Index>(1, 50), d = *rc::gen::inRange<Index>(1, 8);
    const bool causal = *rc::gen::arbitrary<bool>();
    const auto o = random_options(n, causal);
    const auto q = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto k = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    for (Mechanism m : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla}) {
        const auto a = attention::make_operator(m, q, k, o)->dense();
        RC_ASSERT((a.array() >= 0.0).all());
        RC_ASSERT((a.rowwise().sum().array() - 1.0).abs().maxCoeff() <= 1e-12);
        if (causal)
            RC_ASSERT(a.triangularView<Eigen::StrictlyUpper>().toDenseMatrix().cwiseAbs().maxCoeff() == 0.0 ||
                      m == Mechanism::mhla);   // MHLA's causal rule follows blocks, not token order
    }
}

RC_GTEST_PROP(Properties, MatrixFreeApplyEqualsDense, ())
{
    const Index n = *rc::gen::inRange<Index>(1, 40), d = *rc::gen::inRange<Index>(1, 6), cols = *rc::gen::inRange<Index>(1, 4);
    const bool causal = *rc::gen::arbitrary<bool>();
    const auto o = random_options(n, causal);
    const auto q = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto k = splitmix_rowwise(n, d, *rc::gen::arbitrary<std::uint32_t>());
    const auto x = splitmix_rowwise(n, cols, 7);
    for (Mechanism m : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla}) {
        const auto op = attention::make_operator(m, q, k, o);
        const auto a = op->dense();
        Eigen::MatrixXd y(n, cols), yt(n, cols);
        op->apply(x, y);
        op->apply_transpose(x, yt);
        RC_ASSERT(rel(y, a * x) <= 1e-11);
        RC_ASSERT(rel(yt, a.transpose() * x) <= 1e-11);
    }
}
