// explore_heads(): a page of heads gives, per head, the numbers explore() gives for that head alone, images
// that are the largest entry of each cell of that head's matrix, the grouped-query key/value head, one
// colour range per mechanism that covers the page, and a page clipped to the heads there are.
#include <algorithm>

#include <gtest/gtest.h>

#include "analysis/heads.h"
#include "analysis/synth.h"
#include "io/writers.h"
#include "support/test_support.h"

using namespace attnscope;
using attention::Mechanism;

namespace {

std::string write_heads(const std::string& dir, Eigen::Index heads, bool causal)
{
    analysis::SynthOptions o;
    o.n = 40;
    o.d = 8;
    o.heads = heads;
    o.kind = "gaussian";
    o.seed = 11;
    const std::string path = dir + (causal ? "/c.h5" : "/s.h5");
    test::write_synthetic_h5(path, o, 1ULL << 30);
    return path;
}

analysis::HeadsRequest page_of(const std::string& path, Eigen::Index first, Eigen::Index count, Eigen::Index cells)
{
    analysis::HeadsRequest r;
    r.base.source.q_ref = io::parse_tensor_ref(path + ":/q");
    r.base.source.k_ref = io::parse_tensor_ref(path + ":/k");
    r.base.source.selection.at['h'] = 0;
    r.first = first;
    r.count = count;
    r.cells = cells;
    return r;
}

}  // namespace

TEST(HeadPages, EachHeadIsExploresHead)
{
    const std::string f = write_heads(test::fresh_work_dir("head_pages"), 5, false);
    analysis::HeadsRequest req = page_of(f, 1, 3, 10);
    req.base.options.causal = true;
    analysis::JobContext ctx;
    double last = -1;
    ctx.on_progress = [&](double fraction, const std::string&) {
        EXPECT_GE(fraction, last - 1e-12);
        last = fraction;
    };
    const analysis::HeadsResult page = analysis::explore_heads(req, ctx);
    EXPECT_DOUBLE_EQ(last, 1.0);
    EXPECT_EQ(page.heads, 5);
    EXPECT_EQ(page.first, 1);
    ASSERT_EQ(page.maps.size(), 3u);
    EXPECT_EQ(page.n, 40);
    ASSERT_EQ(page.ranges.size(), req.base.mechanisms.size());
    for (std::size_t i = 0; i < page.maps.size(); ++i) {
        const analysis::HeadMaps& hm = page.maps[i];
        ASSERT_TRUE(hm.head);
        EXPECT_EQ(*hm.head, static_cast<Eigen::Index>(i) + 1);
        EXPECT_EQ(*hm.kv_head, *hm.head);
        analysis::ExploreRequest alone = req.base;
        alone.source.selection.at['h'] = *hm.head;
        const analysis::ExploreResult r = analysis::explore(alone, analysis::JobContext{});
        ASSERT_EQ(hm.panels.size(), r.outcomes.size());
        for (std::size_t m = 0; m < r.outcomes.size(); ++m) {
            const analysis::HeadPanel& p = hm.panels[m];
            const analysis::MechanismOutcome& o = r.outcomes[m];
            ASSERT_TRUE(p.error.empty()) << p.error;
            EXPECT_EQ(p.mechanism, o.result.mechanism);
            ASSERT_TRUE(p.result.spectrum && o.result.spectrum);
            EXPECT_EQ(p.result.spectrum->rank, o.result.spectrum->rank);
            EXPECT_DOUBLE_EQ(p.result.entropy->normalized_mean, o.result.entropy->normalized_mean);
            EXPECT_TRUE(p.result.entropy->rows.empty());
            // 40 entries in 10 cells: each cell is the largest of its 4 x 4 entries.
            ASSERT_EQ(p.image.rows, 10);
            ASSERT_EQ(p.image.cols, 10);
            const Eigen::MatrixXd& A = *o.matrix;
            for (Eigen::Index cr = 0; cr < 10; ++cr)
                for (Eigen::Index cc = 0; cc < 10; ++cc)
                    EXPECT_DOUBLE_EQ(p.image.values[static_cast<std::size_t>(cr * 10 + cc)], A.block(cr * 4, cc * 4, 4, 4).maxCoeff());
            // Causal: the cells wholly above the diagonal are masked, the others not.
            ASSERT_EQ(p.masked.size(), 100u);
            for (Eigen::Index cr = 0; cr < 10; ++cr)
                for (Eigen::Index cc = 0; cc < 10; ++cc)
                    EXPECT_EQ(p.masked[static_cast<std::size_t>(cr * 10 + cc)] != 0, cc > cr) << cr << "," << cc;
            // Attention weights: the mechanism's range starts at 0 and stays within the largest weight.
            EXPECT_EQ(page.ranges[m].lo, 0.0);
            EXPECT_FALSE(page.ranges[m].diverging);
        }
    }
    // The shared range is the largest 99th percentile over the page (map_scale's rule), so it is no
    // smaller than any single head's.
    for (std::size_t m = 0; m < page.ranges.size(); ++m) {
        double top = 0;
        for (const analysis::HeadMaps& hm : page.maps) {
            analysis::ExploreRequest alone = req.base;
            alone.source.selection.at['h'] = *hm.head;
            const analysis::ExploreResult r = analysis::explore(alone, analysis::JobContext{});
            const analysis::MechanismOutcome& o = r.outcomes[m];
            const analysis::CausalMask mask = analysis::CausalMask::of(r, o);
            top = std::max(top, analysis::map_values(o, mask, nullptr, nullptr, r.n, analysis::Reduce::max).top(99));
        }
        EXPECT_DOUBLE_EQ(page.ranges[m].hi, top);
    }
}

TEST(HeadPages, PageIsClippedAndOutsideIsRefused)
{
    const std::string f = write_heads(test::fresh_work_dir("head_pages_clip"), 3, false);
    const analysis::HeadsResult page = analysis::explore_heads(page_of(f, 2, 8, 16), analysis::JobContext{});
    ASSERT_EQ(page.maps.size(), 1u);
    EXPECT_EQ(*page.maps.front().head, 2);
    EXPECT_EQ(page.maps.front().panels.front().image.rows, 16);
    EXPECT_THROW(analysis::explore_heads(page_of(f, 3, 8, 16), analysis::JobContext{}), std::invalid_argument);
    analysis::JobContext cancelled;
    cancelled.token.cancel();
    EXPECT_THROW(analysis::explore_heads(page_of(f, 0, 8, 16), cancelled), analysis::JobCancelled);
}

TEST(HeadPages, GroupedQueryHeadsNameTheirKeyHead)
{
    const std::string dir = test::fresh_work_dir("head_pages_gqa");
    const std::string f = dir + "/gqa.h5";
    auto dataset = [](const std::string& name, std::int64_t heads, double base) {
        io::DatasetOut ds{name, {heads, 12, 4}, {}};
        for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t t = 0; t < 12; ++t)
                for (std::int64_t c = 0; c < 4; ++c)
                    ds.data.push_back(base + 0.1 * static_cast<double>(h) + 0.01 * static_cast<double>((t * 7 + c * 3) % 11));
        return ds;
    };
    io::write_hdf5(f, {dataset("/q", 4, 0.0), dataset("/k", 2, 1.0)});
    const analysis::HeadsResult page = analysis::explore_heads(page_of(f, 0, 8, 12), analysis::JobContext{});
    EXPECT_EQ(page.heads, 4);
    EXPECT_EQ(page.kv_heads, 2);
    ASSERT_EQ(page.maps.size(), 4u);
    for (const analysis::HeadMaps& hm : page.maps)
        EXPECT_EQ(*hm.kv_head, *hm.head / 2);
}

TEST(HeadPages, NoHeadAxisIsOnePage)
{
    const std::string dir = test::fresh_work_dir("head_pages_none");
    const std::string f = dir + "/one.h5";
    io::DatasetOut q{"/q", {10, 3}, {}}, k{"/k", {10, 3}, {}};
    for (int i = 0; i < 30; ++i) {
        q.data.push_back(0.1 * (i % 7));
        k.data.push_back(0.05 * (i % 5));
    }
    io::write_hdf5(f, {q, k});
    analysis::HeadsRequest req = page_of(f, 0, 8, 64);
    req.base.source.selection.at.clear();
    const analysis::HeadsResult page = analysis::explore_heads(req, analysis::JobContext{});
    EXPECT_EQ(page.heads, 0);
    ASSERT_EQ(page.maps.size(), 1u);
    EXPECT_FALSE(page.maps.front().head);
    EXPECT_EQ(page.maps.front().panels.front().image.rows, 10);   // at most N cells
}
