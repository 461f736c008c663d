// explore(): the GUI's pipeline gives the same numbers as analyze(), keeps the matrices, reports the
// mixing matrix, isolates a failing mechanism, maps tokens to grid coordinates like NumPy; large
// matrices are built in tiles and a cancel stops the dense SVD midway.
#include <array>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>

#include <gtest/gtest.h>

#include "analysis/analyze.h"
#include "analysis/explore.h"
#include "analysis/inputs.h"
#include "analysis/synth.h"
#include "attention/operator.h"
#include "metrics/metrics.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace attnscope;
using attention::Mechanism;

namespace {

std::string write_sample(const std::string& dir, Eigen::Index n, Eigen::Index d, const std::string& kind,
                         std::vector<Eigen::Index> grid = {})
{
    analysis::SynthOptions o;
    o.n = n;
    o.d = d;
    o.heads = 2;
    o.kind = kind;
    o.grid = grid;
    o.seed = 3;
    const std::string path = dir + "/s.h5";
    test::write_synthetic_h5(path, o, 1ULL << 30);
    return path;
}

analysis::ExploreRequest request_for(const std::string& path)
{
    analysis::ExploreRequest r;
    r.source.q_ref = io::parse_tensor_ref(path + ":/q");
    r.source.k_ref = io::parse_tensor_ref(path + ":/k");
    r.source.selection.at['h'] = 1;
    return r;
}

// analyze() on the request's selection, mechanisms and options (default metric options): the numbers
// explore() must reproduce.
auto analyze_reference(const analysis::ExploreRequest& req)
{
    const auto in = analysis::load_inputs(req.source.q_ref, req.source.k_ref, std::nullopt, req.source.selection);
    analysis::MetricOptions mo;
    return analysis::analyze(in.q.values, in.k.values, req.mechanisms, req.options, mo, 1ULL << 32);
}

}  // namespace

TEST(Explore, SameNumbersAsAnalyze)
{
    const std::string dir = test::fresh_work_dir("explore_same");
    const std::string path = write_sample(dir, 64, 8, "local2d", {8, 8});
    auto req = request_for(path);
    req.options.blocks.kind = attention::BlockSpec::Kind::grid;
    req.options.blocks.grid = {8, 8};
    req.options.blocks.block_grid = {2, 4};
    const auto res = analysis::explore(req, analysis::JobContext{});
    ASSERT_EQ(res.outcomes.size(), 3u);
    EXPECT_EQ(res.n, 64);
    EXPECT_EQ(res.d, 8);

    const auto ref = analyze_reference(req);
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& o = res.outcomes[i];
        ASSERT_TRUE(o.error.empty()) << o.error;
        ASSERT_TRUE(o.matrix);
        EXPECT_EQ(o.matrix->rows(), 64);
        ASSERT_TRUE(o.result.spectrum && ref[i].spectrum);
        EXPECT_EQ(o.result.spectrum->rank, ref[i].spectrum->rank);
        ASSERT_EQ(o.result.spectrum->singular_values.size(), ref[i].spectrum->singular_values.size());
        for (std::size_t j = 0; j < ref[i].spectrum->singular_values.size(); ++j)
            EXPECT_DOUBLE_EQ(o.result.spectrum->singular_values[j], ref[i].spectrum->singular_values[j]);
        ASSERT_TRUE(o.result.entropy && ref[i].entropy);
        EXPECT_DOUBLE_EQ(o.result.entropy->mean, ref[i].entropy->mean);
        EXPECT_EQ(o.result.entropy->rows.size(), 64u);   // row entropies always kept for the views
        EXPECT_EQ(o.result.params, ref[i].params);
    }
    // The mixing matrix of the 2x4 block grid and its rank.
    ASSERT_TRUE(res.blocks.has_value());
    EXPECT_EQ(res.mixing.rows(), 8);
    EXPECT_GE(res.mixing_rank, 1);
    EXPECT_EQ(res.mixing_singular_values.size(), 8u);
    EXPECT_EQ(res.token_grid, (std::vector<Eigen::Index>{8, 8}));
    // JSON view of the result has the analyze schema.
    const auto doc = res.to_json(false);
    EXPECT_EQ(doc["results"].size(), 3u);
    EXPECT_EQ(doc["input"]["n"], 64);
}

TEST(Explore, FailingMechanismIsIsolated)
{
    const std::string dir = test::fresh_work_dir("explore_fail");
    const std::string path = write_sample(dir, 30, 4, "gaussian");
    auto req = request_for(path);
    req.options.blocks.blocks = 7;                          // unequal blocks: official normalisation is impossible
    req.options.normalize = attention::Normalize::official;
    const auto res = analysis::explore(req, analysis::JobContext{});
    ASSERT_EQ(res.outcomes.size(), 3u);
    EXPECT_TRUE(res.outcomes[0].error.empty());
    EXPECT_TRUE(res.outcomes[1].error.empty());            // linear ignores --normalize
    EXPECT_FALSE(res.outcomes[2].error.empty());
    EXPECT_FALSE(res.outcomes[2].matrix);
    EXPECT_NE(res.outcomes[2].error.find("official"), std::string::npos) << res.outcomes[2].error;
}

TEST(Explore, BadInputThrowsAndCancelStops)
{
    const std::string dir = test::fresh_work_dir("explore_bad");
    const std::string path = write_sample(dir, 16, 4, "gaussian");
    auto req = request_for(path);
    req.source.selection.at['h'] = 5;
    EXPECT_ANY_THROW(analysis::explore(req, analysis::JobContext{}));
    req.source.selection.at['h'] = 0;
    req.memory_limit = 1000;
    EXPECT_THROW(analysis::explore(req, analysis::JobContext{}), InputError);
    req.memory_limit = 0;
    analysis::JobContext ctx;
    ctx.token.cancel();
    EXPECT_THROW(analysis::explore(req, ctx), analysis::JobCancelled);
    EXPECT_EQ(analysis::selected_tokens(req.source), 16);
}

TEST(Explore, GridCoordinatesMatchNumPy)
{
    // Raster: numpy.unravel_index(t, (4, 6)). Blocked with block grid (2, 3): block b = t // 4 at
    // unravel_index(b, (2, 3)), position p = t % 4 at unravel_index(p, (2, 2)) inside the block.
    analysis::ExploreResult r;
    r.n = 24;
    r.token_grid = {4, 6};
    EXPECT_EQ(r.grid_coords(0), (std::vector<Eigen::Index>{0, 0}));
    EXPECT_EQ(r.grid_coords(7), (std::vector<Eigen::Index>{1, 1}));
    EXPECT_EQ(r.grid_coords(23), (std::vector<Eigen::Index>{3, 5}));
    EXPECT_TRUE(r.grid_coords(24).empty());
    attention::BlockSpec spec;
    spec.kind = attention::BlockSpec::Kind::grid;
    spec.grid = {4, 6};
    spec.block_grid = {2, 3};
    spec.order = attention::TokenOrder::blocked;
    r.blocks = attention::make_blocks(spec, 24);
    r.token_order = attention::TokenOrder::blocked;
    EXPECT_EQ(r.grid_coords(0), (std::vector<Eigen::Index>{0, 0}));
    EXPECT_EQ(r.grid_coords(3), (std::vector<Eigen::Index>{1, 1}));    // block 0, position 3
    EXPECT_EQ(r.grid_coords(5), (std::vector<Eigen::Index>{0, 3}));    // block 1 (0,1), position 1 -> (0, 2+1)
    EXPECT_EQ(r.grid_coords(23), (std::vector<Eigen::Index>{3, 5}));   // block 5 (1,2), position 3 (1,1)
    // Every token's coordinates agree with the blocks' own assignment.
    for (Eigen::Index t = 0; t < 24; ++t) {
        const auto c = r.grid_coords(t);
        const Eigen::Index block = (c[0] / 2) * 3 + c[1] / 2;
        EXPECT_EQ(block, r.blocks->block_of_token[static_cast<std::size_t>(t)]) << t;
    }
}

TEST(Explore, ReduceRegion)
{
    Eigen::MatrixXd a(4, 6);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 6; ++j)
            a(i, j) = i * 6 + j;
    const auto mx = analysis::reduce_region(a, 0, 4, 0, 6, 2, 3, analysis::Reduce::max);
    EXPECT_EQ(mx.rows, 2);
    EXPECT_EQ(mx.cols, 3);
    EXPECT_EQ(mx.values, (std::vector<double>{7, 9, 11, 19, 21, 23}));
    const auto mean = analysis::reduce_region(a, 2, 4, 0, 2, 8, 8, analysis::Reduce::mean);
    EXPECT_EQ(mean.rows, 2);   // never more cells than the region
    EXPECT_EQ(mean.values, (std::vector<double>{12, 13, 18, 19}));
    EXPECT_TRUE(analysis::reduce_region(a, 3, 3, 0, 6, 2, 2, analysis::Reduce::max).values.empty());
}

TEST(Explore, WarningsAndEntropiesAreAnalyzes)
{
    // explore() measures its kept matrix tile by tile; warnings and numbers must be analyze()'s.
    const std::string dir = test::fresh_work_dir("explore_warnings");
    const std::string path = write_sample(dir, 96, 6, "gaussian");
    for (const bool identity : {false, true}) {
        auto req = request_for(path);
        req.options.blocks.blocks = 4;
        req.options.normalize = attention::Normalize::none;   // MHLA: entropy of unnormalised rows (warning)
        req.options.causal = !identity;
        if (identity)
            req.options.feature_map.kind = attention::FeatureMapKind::identity;   // negative entries (warning)
        const auto res = analysis::explore(req, analysis::JobContext{});
        const auto ref = analyze_reference(req);
        for (std::size_t i = 0; i < 3; ++i) {
            const auto& o = res.outcomes[i];
            ASSERT_TRUE(o.error.empty()) << o.error;
            EXPECT_EQ(o.result.warnings, ref[i].warnings) << attention::to_string(o.result.mechanism);
            ASSERT_EQ(o.result.entropy.has_value(), ref[i].entropy.has_value());
            if (ref[i].entropy) {
                EXPECT_EQ(o.result.entropy->rows, ref[i].entropy->rows);
            }
            ASSERT_TRUE(o.result.spectrum && ref[i].spectrum);
            EXPECT_EQ(o.result.spectrum->singular_values, ref[i].spectrum->singular_values);
            EXPECT_EQ(o.result.spectrum_method, ref[i].spectrum_method);
        }
    }
}

TEST(Explore, LargeMatricesAreBuiltInTiles)
{
    // From N = 2048 the matrix is built from dense_rows() tiles (interruptible): same matrix as dense().
    const std::string dir = test::fresh_work_dir("explore_tiles");
    const std::string path = write_sample(dir, 2100, 8, "local1d");
    auto req = request_for(path);
    req.mechanisms = {Mechanism::linear, Mechanism::mhla};   // structured spectra: no large SVD
    req.options.blocks.blocks = 8;
    const auto res = analysis::explore(req, analysis::JobContext{});
    const auto in = analysis::load_inputs(req.source.q_ref, req.source.k_ref, std::nullopt, req.source.selection);
    for (const auto& o : res.outcomes) {
        ASSERT_TRUE(o.error.empty()) << o.error;
        const auto op = attention::make_operator(o.result.mechanism, in.q.values, in.k.values,
                                                 analysis::options_for(o.result.mechanism, req.options));
        const Eigen::MatrixXd A = op->dense();
        EXPECT_LE((*o.matrix - A).cwiseAbs().maxCoeff(), 1e-15);
        const auto H = metrics::row_entropy(A, op->allowed_keys());
        for (std::size_t t = 0; t < H.rows.size(); ++t)
            ASSERT_NEAR(o.result.entropy->rows[t], H.rows[t], 1e-12);
        EXPECT_EQ(o.result.spectrum_method, "structured");
    }
}

TEST(Explore, CancelInterruptsTheSingularValues)
{
    // Cancel once the dense SVD has reported progress of its own: the job ends cancelled, and the last
    // progress shows the SVD unfinished. No timing is asserted (the SVD reports after every column).
    const std::string dir = test::fresh_work_dir("explore_cancel");
    const std::string path = write_sample(dir, 1200, 16, "local1d");
    auto req = request_for(path);
    req.mechanisms = {Mechanism::softmax};
    analysis::JobRunner runner;
    std::mutex mutex;
    std::condition_variable cv;
    std::optional<analysis::JobOutcome<int>> outcome;
    double svd_start = -1, last = 0;
    int svd_reports = 0;
    runner.submit<int>(
        [&](const analysis::JobContext& ctx) {
            analysis::explore(req, ctx);
            return 1;
        },
        [&](analysis::JobOutcome<int> o) {
            std::lock_guard lock(mutex);
            outcome = std::move(o);
            cv.notify_all();
        },
        [&](double fraction, const std::string& stage) {
            last = fraction;   // the worker thread: no lock needed until `done`
            if (stage != "softmax: singular values")
                return;
            if (svd_start < 0)
                svd_start = fraction;
            else if (fraction > svd_start && ++svd_reports == 1)
                runner.cancel();
        });
    std::unique_lock lock(mutex);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(300), [&] { return outcome.has_value(); }));
    EXPECT_TRUE(outcome->cancelled);
    EXPECT_FALSE(outcome->result.has_value());
    EXPECT_EQ(svd_reports, 1);    // cancelled from inside the SVD ...
    EXPECT_GT(last, svd_start);
    EXPECT_LT(last, 0.9);         // ... long before it finished (it is ~97 % of this job)
}

TEST(Explore, PyramidReducesLikeTheMatrix)
{
    // Cells read from a pyramid level are the exact max / mean of the whole blocks they cover.
    const Eigen::Index n = 1030;   // not a multiple of the block sizes: partial blocks at the edges
    Eigen::MatrixXd A = Eigen::MatrixXd::Random(n, n).cwiseAbs();
    A(517, 3) = 5.0;
    const analysis::MatrixPyramid p = analysis::make_pyramid(A);
    EXPECT_DOUBLE_EQ(p.max, 5.0);
    EXPECT_DOUBLE_EQ(p.min, A.minCoeff());
    EXPECT_DOUBLE_EQ(p.min_positive, A.minCoeff());
    ASSERT_GE(p.levels.size(), 2u);
    EXPECT_EQ(p.levels[0].factor, 4);
    EXPECT_EQ(p.levels[0].max.rows(), 258);
    EXPECT_EQ(p.levels[1].factor, 8);
    for (const auto how : {analysis::Reduce::max, analysis::Reduce::mean}) {
        for (const auto& [r0, r1, c0, c1, cells] : std::vector<std::array<Eigen::Index, 5>>{
                 {0, n, 0, n, 100}, {13, 1029, 2, 700, 90}, {500, 1030, 0, 530, 40}, {100, 300, 100, 300, 40}}) {
            const auto img = analysis::reduce_region(A, r0, r1, c0, c1, cells, cells, how, &p);
            const auto direct = analysis::reduce_region(A, r0, r1, c0, c1, cells, cells, how);
            EXPECT_GT(img.factor, 1);
            EXPECT_LE(img.factor * cells, std::min(r1 - r0, c1 - c0));
            EXPECT_LE(img.r0, r0);   // the region widened to whole blocks
            EXPECT_GE(img.r1, r1);
            EXPECT_LT(r0 - img.r0, img.factor);
            EXPECT_EQ(img.rows, cells);
            // Each cell against the entries of A it covers.
            const Eigen::Index h = (img.r1 - img.r0 + img.factor - 1) / img.factor, w = (img.c1 - img.c0 + img.factor - 1) / img.factor;
            for (Eigen::Index i = 0; i < img.rows; i += 7)
                for (Eigen::Index j = 0; j < img.cols; j += 5) {
                    const Eigen::Index a0 = img.r0 + (i * h / img.rows) * img.factor,
                                       a1 = std::min(n, img.r0 + ((i + 1) * h / img.rows) * img.factor);
                    const Eigen::Index b0 = img.c0 + (j * w / img.cols) * img.factor,
                                       b1 = std::min(n, img.c0 + ((j + 1) * w / img.cols) * img.factor);
                    const auto block = A.block(a0, b0, a1 - a0, b1 - b0);
                    const double want = how == analysis::Reduce::max ? block.maxCoeff() : block.mean();
                    ASSERT_NEAR(img.values[static_cast<std::size_t>(i * img.cols + j)], want, 1e-6 * want);
                }
            // And close to the direct reduction overall (cells shifted by less than a block).
            EXPECT_EQ(direct.factor, 1);
            if (how == analysis::Reduce::max) {
                EXPECT_FLOAT_EQ(*std::max_element(img.values.begin(), img.values.end()),
                                static_cast<float>(*std::max_element(direct.values.begin(), direct.values.end())));
            }
        }
    }
    // Cells narrower than the smallest block read the matrix itself.
    EXPECT_EQ(analysis::reduce_region(A, 0, 600, 0, 600, 300, 300, analysis::Reduce::max, &p).factor, 1);
}
