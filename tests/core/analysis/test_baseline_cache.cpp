// The content-free baseline computed once per setting (analysis/baseline_cache.h) and the structured paths of the
// mask measures (analysis/mask_measures.h, docs/maths.md 2.2):
//  - the cache: one computation for concurrent requests of one key, a failure leaves nothing behind, a bounded
//    size; through analyze(): a hit gives the very numbers a fresh computation gives, softmax and linear share
//    one entry, and everything that shapes A0 (a learned Mc's values, the gates, decay's gamma) separates keys;
//  - the causal averaging baseline D^{-1} L by its bidiagonal inverse against the dense SVD and against NumPy;
//  - the past block from the operator's factors against the dense SVD of the formed block, for every mechanism
//    with factors, causal and not, 1-D and grid blocks, a learned Mc with zeros, and at N = 4096.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

#include "analysis/analyze.h"
#include "analysis/baseline_cache.h"
#include "analysis/mask_measures.h"
#include "attention/operator.h"
#include "metrics/metrics.h"
#include "metrics/structured.h"

using namespace attnscope;
using attention::Mechanism;
using Eigen::Index;
using Eigen::MatrixXd;

namespace {

MatrixXd gaussian(Index rows, Index cols, unsigned seed) { return test::gaussian_matrix(rows, cols, seed); }

analysis::CachedBaseline value(double x)
{
    analysis::CachedBaseline b;
    b.warnings.push_back(std::to_string(x));
    return b;
}

// Every number of two baselines, compared exactly.
void expect_identical(const analysis::MechanismResult& a, const analysis::MechanismResult& b)
{
    ASSERT_EQ(a.baseline.has_value(), b.baseline.has_value());
    if (!a.baseline)
        return;
    ASSERT_EQ(a.baseline->spectrum.has_value(), b.baseline->spectrum.has_value());
    if (a.baseline->spectrum) {
        const metrics::SpectrumMetrics &x = *a.baseline->spectrum, &y = *b.baseline->spectrum;
        EXPECT_EQ(x.singular_values, y.singular_values);
        EXPECT_EQ(x.tol, y.tol);
        EXPECT_EQ(x.rank, y.rank);
        EXPECT_EQ(x.effective_rank, y.effective_rank);
        EXPECT_EQ(x.stable_rank, y.stable_rank);
        EXPECT_EQ(x.energy_rank_90, y.energy_rank_90);
        EXPECT_EQ(x.energy_rank_99, y.energy_rank_99);
        EXPECT_EQ(x.rank_at_rtol, y.rank_at_rtol);
    }
    ASSERT_EQ(a.baseline->entropy.has_value(), b.baseline->entropy.has_value());
    if (a.baseline->entropy) {
        EXPECT_EQ(a.baseline->entropy->mean, b.baseline->entropy->mean);
        EXPECT_EQ(a.baseline->entropy->std, b.baseline->entropy->std);
        EXPECT_EQ(a.baseline->entropy->normalized_mean, b.baseline->entropy->normalized_mean);
    }
    EXPECT_EQ(a.warnings, b.warnings);
}

// MHLA on 4 blocks of a 1-D sequence with a learned mixing matrix that has zeros.
attention::AttentionOptions mhla_with_zeros(bool causal)
{
    attention::AttentionOptions o;
    o.causal = causal;
    o.blocks.blocks = 4;
    MatrixXd mc(4, 4);
    mc << 1.0, 0.5, 0.0, 0.25, 0.0, 1.0, 0.5, 0.0, 0.25, 0.0, 1.0, 0.5, 0.0, 0.0, 0.5, 1.0;
    o.mixing.preset = "learned";
    o.mixing.matrix = mc;
    return o;
}

analysis::MetricOptions dense_metrics()
{
    analysis::MetricOptions m;
    m.method = analysis::SpectrumMethod::dense;
    return m;
}

// ---------------------------------------------------------------------------------------------------
// The cache itself

TEST(BaselineCache, ConcurrentRequestsForOneKeyComputeOnce)
{
    analysis::BaselineCache cache;
    std::atomic<int> computations{0};
    std::vector<std::shared_ptr<const analysis::CachedBaseline>> got(8);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < got.size(); ++i)
        threads.emplace_back([&, i] {
            got[i] = cache.get_or_compute("k", [&] {
                ++computations;
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                return value(1.0);
            });
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(computations.load(), 1);
    for (const auto& g : got)
        EXPECT_EQ(g.get(), got[0].get());   // the same stored object for every caller
    EXPECT_EQ(cache.stats().computed, 1u);
    EXPECT_EQ(cache.stats().hits, 7u);
}

TEST(BaselineCache, AFailedComputationLeavesNothingBehind)
{
    analysis::BaselineCache cache;
    // The first caller fails while a second waits for it: the waiter computes the value itself, the failure
    // reaches the first caller only.
    std::atomic<bool> started{false};
    std::thread first([&] {
        EXPECT_THROW(cache.get_or_compute("k",
                                          [&]() -> analysis::CachedBaseline {
                                              started = true;
                                              std::this_thread::sleep_for(std::chrono::milliseconds(150));
                                              throw std::runtime_error("cancelled");
                                          }),
                     std::runtime_error);
    });
    while (!started)
        std::this_thread::yield();
    const auto v = cache.get_or_compute("k", [] { return value(2.0); });
    first.join();
    EXPECT_EQ(v->warnings, std::vector<std::string>{std::to_string(2.0)});
    EXPECT_EQ(cache.stats().size, 1u);
    EXPECT_EQ(cache.get_or_compute("k", [] { return value(3.0); }).get(), v.get());
}

TEST(BaselineCache, HoldsAtMostItsCapacity)
{
    analysis::BaselineCache cache(3);
    int computations = 0;
    const auto get = [&](const std::string& k) {
        return cache.get_or_compute(k, [&] {
            ++computations;
            return value(0.0);
        });
    };
    for (const char* k : {"a", "b", "c", "d", "e"})
        get(k);
    EXPECT_EQ(cache.stats().size, 3u);
    EXPECT_EQ(computations, 5);
    get("e");   // held
    EXPECT_EQ(computations, 5);
    get("a");   // the least recently used went first
    EXPECT_EQ(computations, 6);
    EXPECT_EQ(cache.stats().size, 3u);
}

// ---------------------------------------------------------------------------------------------------
// Through analyze()

TEST(BaselineCache, AHitGivesTheNumbersOfAFreshComputation)
{
    const Index n = 200;
    attention::AttentionOptions o;
    o.causal = true;
    const std::vector<Mechanism> mechanisms{Mechanism::softmax, Mechanism::linear, Mechanism::mhla};
    analysis::baseline_cache().clear();
    const auto first = analysis::analyze(gaussian(n, 8, 1), gaussian(n, 8, 2), mechanisms, o, dense_metrics(), 1ULL << 34);
    // softmax's A0 is linear attention's (1 / n_t on the causal rule): one entry for both, one for MHLA.
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 2u);
    EXPECT_EQ(analysis::baseline_cache().stats().hits, 1u);
    expect_identical(first[0], first[1]);

    // Other data of the same shape: every baseline from the cache.
    const auto second = analysis::analyze(gaussian(n, 8, 3), gaussian(n, 8, 4), mechanisms, o, dense_metrics(), 1ULL << 34);
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 2u);
    EXPECT_EQ(analysis::baseline_cache().stats().hits, 4u);
    // ... and a fresh computation gives the same bits.
    analysis::baseline_cache().clear();
    const auto fresh = analysis::analyze(gaussian(n, 8, 3), gaussian(n, 8, 4), mechanisms, o, dense_metrics(), 1ULL << 34);
    for (std::size_t i = 0; i < mechanisms.size(); ++i) {
        expect_identical(second[i], fresh[i]);
        expect_identical(first[i], fresh[i]);
        ASSERT_TRUE(fresh[i].baseline && fresh[i].baseline->spectrum);
        EXPECT_EQ(fresh[i].baseline->spectrum->rank, n);   // the causal mask alone gives full rank
    }
}

TEST(BaselineCache, WhatShapesTheBaselineSeparatesTheKeys)
{
    const Index n = 64;
    const MatrixXd Q = gaussian(n, 4, 5), K = gaussian(n, 4, 6);
    const auto baseline_of = [&](Mechanism m, const attention::AttentionOptions& o) {
        return analysis::analyze(Q, K, {m}, o, dense_metrics(), 1ULL << 34)[0];
    };
    analysis::baseline_cache().clear();
    // A learned Mc: same source name, other values.
    attention::AttentionOptions a = mhla_with_zeros(true), b = a;
    (*b.mixing.matrix)(1, 0) = 0.75;
    const auto ra = baseline_of(Mechanism::mhla, a), rb = baseline_of(Mechanism::mhla, b);
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 2u);
    EXPECT_NE(ra.baseline->entropy->mean, rb.baseline->entropy->mean);
    // Gates: same source, other values.
    attention::AttentionOptions g;
    g.causal = true;
    g.gates.source = "gates.h5:/g";
    g.gates.values = Eigen::VectorXd::Constant(n, 0.9);
    const auto g1 = baseline_of(Mechanism::gated, g);
    g.gates.values(10) = 0.5;
    const auto g2 = baseline_of(Mechanism::gated, g);
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 4u);
    EXPECT_NE(g1.baseline->entropy->mean, g2.baseline->entropy->mean);
    // Decay's default gamma follows the query head.
    attention::AttentionOptions d;
    d.causal = true;
    const auto d0 = baseline_of(Mechanism::decay, d);
    d.query_head = 3;
    const auto d3 = baseline_of(Mechanism::decay, d);
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 6u);
    EXPECT_NE(d0.baseline->entropy->mean, d3.baseline->entropy->mean);
    // What A0 never reads shares the entry: the feature map (A0 replaces every phi(q) . phi(k) by 1), softmax's scale.
    attention::AttentionOptions f;
    f.causal = true;
    baseline_of(Mechanism::linear, f);
    f.feature_map.kind = attention::FeatureMapKind::elu1;
    baseline_of(Mechanism::linear, f);
    f.scale = 3.0;
    baseline_of(Mechanism::softmax, f);
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 7u);
    // The metric options are part of the key.
    analysis::MetricOptions rtol = dense_metrics();
    rtol.rank_rtol = 1e-3;
    analysis::analyze(Q, K, {Mechanism::linear}, f, rtol, 1ULL << 34);
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 8u);
}

TEST(BaselineCache, ConcurrentAnalysesShareOneComputation)
{
    const Index n = 600;   // the two-stage SVD's size range
    attention::AttentionOptions o;
    o.causal = true;
    analysis::baseline_cache().clear();
    std::vector<std::vector<analysis::MechanismResult>> got(4);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < got.size(); ++i)
        threads.emplace_back([&, i] {
            const unsigned seed = 10 + 2 * static_cast<unsigned>(i);
            got[i] = analysis::analyze(gaussian(n, 8, seed), gaussian(n, 8, seed + 1), {Mechanism::softmax, Mechanism::linear},
                                       o, dense_metrics(), 1ULL << 34);
        });
    for (auto& t : threads)
        t.join();
    EXPECT_EQ(analysis::baseline_cache().stats().computed, 1u);
    EXPECT_EQ(analysis::baseline_cache().stats().hits, 7u);
    analysis::baseline_cache().clear();
    // Every analysis holds the one shared computation: bit for bit the same baseline.
    for (const auto& g : got)
        for (const auto& r : g)
            expect_identical(r, got[0][0]);
    // And it is the baseline an analysis alone computes: to rounding (OpenBLAS may split the products over
    // another number of threads when four analyses call it at once, which changes the last bits).
    const auto fresh = analysis::analyze(gaussian(n, 8, 1), gaussian(n, 8, 2), {Mechanism::linear}, o, dense_metrics(), 1ULL << 34);
    ASSERT_TRUE(got[0][0].baseline && got[0][0].baseline->spectrum && fresh[0].baseline && fresh[0].baseline->spectrum);
    const auto &shared = *got[0][0].baseline->spectrum, &alone = *fresh[0].baseline->spectrum;
    ASSERT_EQ(shared.singular_values.size(), alone.singular_values.size());
    for (std::size_t i = 0; i < shared.singular_values.size(); ++i)
        EXPECT_NEAR(shared.singular_values[i], alone.singular_values[i], 1e-12 * alone.singular_values[0]) << i;
    EXPECT_EQ(shared.rank, alone.rank);
    EXPECT_NEAR(shared.effective_rank, alone.effective_rank, 1e-10 * alone.effective_rank);
    ASSERT_TRUE(got[0][0].baseline->entropy && fresh[0].baseline->entropy);
    EXPECT_NEAR(got[0][0].baseline->entropy->mean, fresh[0].baseline->entropy->mean, 1e-12);
}

// ---------------------------------------------------------------------------------------------------
// The causal averaging baseline by its bidiagonal inverse

// The dense causal averaging matrix A0[t, j] = 1/(t+1), j <= t.
MatrixXd causal_averaging(Index n)
{
    MatrixXd a = MatrixXd::Zero(n, n);
    for (Index t = 0; t < n; ++t)
        a.row(t).head(t + 1).setConstant(1.0 / static_cast<double>(t + 1));
    return a;
}

void expect_same_spectrum(const std::vector<double>& structured, const std::vector<double>& dense, Index rows, Index cols,
                          double rel_of_each, const std::string& what)
{
    ASSERT_EQ(structured.size(), dense.size()) << what;
    const double s1 = dense.empty() ? 0.0 : dense[0];
    double worst = 0.0;
    for (std::size_t i = 0; i < dense.size(); ++i)
        worst = std::max(worst, std::abs(structured[i] - dense[i]) / (rel_of_each > 0 ? dense[i] : s1));
    EXPECT_LE(worst, rel_of_each > 0 ? rel_of_each : 1e-12) << what;
    const metrics::SpectrumMetrics a = metrics::spectrum_metrics(structured, rows, cols, std::nullopt);
    const metrics::SpectrumMetrics b = metrics::spectrum_metrics(dense, rows, cols, std::nullopt);
    EXPECT_EQ(a.rank, b.rank) << what;
    EXPECT_EQ(a.rank_at_rtol, b.rank_at_rtol) << what;
    EXPECT_EQ(a.energy_rank_90, b.energy_rank_90) << what;
    EXPECT_EQ(a.energy_rank_99, b.energy_rank_99) << what;
    EXPECT_NEAR(a.effective_rank, b.effective_rank, 1e-10 * b.effective_rank) << what;
}

TEST(StructuredBaseline, CausalAveragingMatchesTheDenseSvd)
{
    for (const Index n : {1, 2, 3, 10, 300, 1024, 4096}) {
        const std::vector<double> s = metrics::causal_averaging_singular_values(n);
        const std::vector<double> d = metrics::singular_values(causal_averaging(n));
        // Every value, the smallest included, to 1e-12 of itself (the bidiagonal inverse is accurate to a few
        // eps relative; the dense SVD to ~eps s_1, and s_N / s_1 ~ 1 / (4 N) here).
        expect_same_spectrum(s, d, n, n, 1e-12, "N=" + std::to_string(n));
    }
}

TEST(StructuredBaseline, CausalAveragingMatchesNumPy)
{
    const std::string dir = test::fresh_work_dir("baseline_reference");
    test::run_python("core/analysis/baseline_reference.py", {dir + "/cases.json", "512", "2048"});
    std::ifstream in(dir + "/cases.json");
    for (const nlohmann::json& c : nlohmann::json::parse(in)) {
        const Index n = c["n"].get<Index>();
        const std::vector<double> s = metrics::causal_averaging_singular_values(n);
        const std::vector<double> ref = c["singular_values"].get<std::vector<double>>();
        ASSERT_EQ(s.size(), ref.size());
        for (std::size_t i = 0; i < s.size(); ++i)
            EXPECT_NEAR(s[i], ref[i], 1e-12 * ref[i]) << "N=" << n << " i=" << i;
        const metrics::SpectrumMetrics m = metrics::spectrum_metrics(s, n, n, std::nullopt);
        EXPECT_EQ(m.rank, c["rank"].get<Index>()) << "numpy.linalg.matrix_rank, N=" << n;
        EXPECT_EQ(m.rank, c["spectrum_rank"].get<Index>());
        for (std::size_t i = 0; i < m.rank_at_rtol.size(); ++i)
            EXPECT_EQ(m.rank_at_rtol[i], c["rank_at_rtol"][i].get<Index>()) << "N=" << n << " rtol " << i;
        EXPECT_NEAR(m.effective_rank, c["effective_rank"].get<double>(), 1e-10 * m.effective_rank);
    }
}

TEST(StructuredBaseline, MeasuredWithoutTheMatrixAsTheDensePathMeasuresIt)
{
    // The baseline request of mask_measures at N = 4096: entropy from rows formed tile by tile equals the
    // entropy of the formed matrix bit for bit; the spectrum's metrics agree with the dense SVD's.
    const Index n = 4096;
    attention::AttentionOptions o;
    o.causal = true;
    const auto op = attention::make_operator(Mechanism::softmax, gaussian(n, 4, 1), gaussian(n, 4, 2), o);
    attention::AttentionOptions o0;
    const auto op0 = analysis::make_baseline_operator(*op, o, &o0);
    ASSERT_EQ(op0->mechanism(), Mechanism::linear);
    analysis::MeasureRequest req;
    req.path = analysis::SpectrumPath::dense;
    req.metrics = dense_metrics();
    req.metrics.baseline = false;
    req.is_baseline = true;
    const analysis::Measurement dense = analysis::measure(*op0, o0, req);
    const analysis::Measurement structured =
        analysis::measure_with_known_values(*op0, o0, req, metrics::causal_averaging_singular_values(n), nullptr);
    ASSERT_TRUE(dense.result.entropy && structured.result.entropy);
    EXPECT_EQ(structured.result.entropy->rows, dense.result.entropy->rows);
    EXPECT_EQ(structured.result.entropy->mean, dense.result.entropy->mean);
    EXPECT_EQ(structured.result.entropy->normalized_mean, dense.result.entropy->normalized_mean);
    ASSERT_TRUE(dense.result.spectrum && structured.result.spectrum);
    expect_same_spectrum(structured.result.spectrum->singular_values, dense.result.spectrum->singular_values, n, n, 1e-12,
                         "measure at N=4096");

    // analyze() from k_structured_mask_measures_from on takes this path (the same metrics as the dense SVD).
    analysis::baseline_cache().clear();
    const auto r = analysis::analyze(gaussian(n, 4, 1), gaussian(n, 4, 2), {Mechanism::linear}, o, dense_metrics(), 1ULL << 34);
    ASSERT_TRUE(r[0].baseline && r[0].baseline->spectrum);
    EXPECT_EQ(r[0].baseline->spectrum->singular_values, structured.result.spectrum->singular_values);
    EXPECT_EQ(r[0].baseline->entropy->mean, dense.result.entropy->mean);
    EXPECT_EQ(r[0].baseline->spectrum->rank, dense.result.spectrum->rank);
}

// ---------------------------------------------------------------------------------------------------
// The past block from the operator's factors

struct PastCase {
    std::string name;
    Mechanism mechanism;
    attention::AttentionOptions options;
    Index n;
    bool has_factors = true;
};

std::vector<PastCase> past_cases(Index n)
{
    std::vector<PastCase> c;
    for (const bool causal : {false, true}) {
        const std::string tag = causal ? " causal" : "";
        attention::AttentionOptions o;
        o.causal = causal;
        c.push_back({"linear" + tag, Mechanism::linear, o, n});
        c.push_back({"cosformer" + tag, Mechanism::cosformer, o, n});
        c.push_back({"decay" + tag, Mechanism::decay, o, n});
        attention::AttentionOptions none = o;
        none.normalize = attention::Normalize::none;
        c.push_back({"decay none" + tag, Mechanism::decay, none, n});
        attention::AttentionOptions fm = o;
        fm.feature_map.kind = attention::FeatureMapKind::favor;
        fm.feature_map.favor_features = 16;
        c.push_back({"linear favor" + tag, Mechanism::linear, fm, n});
        attention::AttentionOptions blocks = o;
        blocks.blocks.blocks = 7;
        c.push_back({"mhla 7 blocks" + tag, Mechanism::mhla, blocks, n});
        c.push_back({"mhla learned Mc with zeros" + tag, Mechanism::mhla, mhla_with_zeros(causal), n});
        for (const auto order : {attention::TokenOrder::raster, attention::TokenOrder::blocked}) {
            attention::AttentionOptions grid = o;
            grid.blocks.kind = attention::BlockSpec::Kind::grid;
            grid.blocks.grid = {16, 16};
            grid.blocks.block_grid = {4, 4};
            grid.blocks.order = order;
            const std::string name = std::string("mhla grid ") + (order == attention::TokenOrder::raster ? "raster" : "blocked");
            c.push_back({name + tag, Mechanism::mhla, grid, 256});
            if (order == attention::TokenOrder::raster) {
                grid.blocks.kind = attention::BlockSpec::Kind::grid;
                c.push_back({"decay grid" + tag, Mechanism::decay, grid, 256, causal});   // non-causal: no factors
            }
        }
    }
    attention::AttentionOptions g;
    g.causal = true;
    g.gates.values = (0.8 + 0.2 * test::uniform_matrix(n, 1, 9, 0.0, 1.0).array()).matrix();
    c.push_back({"gated", Mechanism::gated, g, n});
    g.gates.log = true;
    g.gates.values = g.gates.values.array().log().matrix();
    c.push_back({"gated log", Mechanism::gated, g, n});
    return c;
}

TEST(PastBlockFactors, EqualTheDenseBlockForEveryMechanismWithFactors)
{
    for (const PastCase& c : past_cases(300)) {
        const MatrixXd Q = gaussian(c.n, 5, 21), K = gaussian(c.n, 5, 22);
        const auto op = attention::make_operator(c.mechanism, Q, K, c.options);
        const MatrixXd A = op->dense();
        for (const Index h : {Index{1}, c.n / 3, c.n / 2, c.n - 1}) {
            const std::string what = c.name + ", h=" + std::to_string(h);
            const std::optional<metrics::BlockFactorization> f = analysis::past_block_factors(*op, h);
            ASSERT_EQ(f.has_value(), c.has_factors) << what;
            if (!f)
                continue;
            const std::vector<double> s = metrics::block_factor_singular_values(*f);
            const std::vector<double> d = metrics::singular_values(MatrixXd(A.bottomLeftCorner(c.n - h, h)));
            expect_same_spectrum(s, d, c.n - h, h, 0.0, what);   // to 1e-12 of s_1
        }
    }
    // Softmax has no factors.
    const auto softmax = attention::make_operator(Mechanism::softmax, gaussian(20, 3, 1), gaussian(20, 3, 2), {});
    EXPECT_FALSE(analysis::past_block_factors(*softmax, 10));
    EXPECT_THROW(analysis::past_block_factors(*softmax, 20), std::invalid_argument);
}

TEST(PastBlockFactors, AtLongContextAgreeWithTheDenseSvd)
{
    // measure_past_block from N = k_structured_mask_measures_from on takes the factors; the dense SVD of the
    // formed 2048 x 2048 block gives the same metrics.
    const Index n = 4096;
    const MatrixXd Q = gaussian(n, 16, 31), K = gaussian(n, 16, 32);
    attention::AttentionOptions causal;
    causal.causal = true;
    attention::AttentionOptions gated = causal;
    gated.gates.values = (0.9 + 0.1 * test::uniform_matrix(n, 1, 3, 0.0, 1.0).array()).matrix();
    const std::vector<PastCase> cases{{"linear causal", Mechanism::linear, causal, n},
                                      {"mhla causal (causal-local, 16 blocks)", Mechanism::mhla, causal, n},
                                      {"mhla learned Mc with zeros", Mechanism::mhla, mhla_with_zeros(true), n},
                                      {"gated", Mechanism::gated, gated, n}};
    for (const PastCase& c : cases) {
        const auto op = attention::make_operator(c.mechanism, Q, K, c.options);
        analysis::MechanismResult r;
        analysis::MeasureRequest req;
        req.metrics = dense_metrics();
        analysis::measure_past_block(r, *op, nullptr, req, nullptr);
        ASSERT_TRUE(r.past_block && r.past_block->spectrum) << c.name;
        Eigen::MatrixXd rows(n / 2, n);
        op->dense_rows(n / 2, n / 2, rows);
        const std::vector<double> d = metrics::singular_values(MatrixXd(rows.leftCols(n / 2)));
        expect_same_spectrum(r.past_block->spectrum->singular_values, d, n / 2, n / 2, 0.0, c.name);
        EXPECT_EQ(r.past_block->rows, n / 2);
        EXPECT_EQ(r.past_block->cols, n / 2);
    }
}

}  // namespace
