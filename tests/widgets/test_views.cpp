// Result views on real explore results (1-D, grid, large N, failing and signed mechanisms): results show,
// queries select, exports are valid non-blank PNG / PDF / SVG, state round-trips, the maps view links
// clicks to queries, switches to difference mode and log colour scales, draws reduced images for large
// N; metricsCsv matches the result. Set ATTNSCOPE_SCREENSHOTS=1 to also write docs/views-<name>.png.
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QSignalSpy>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sys/stat.h>
#include <memory>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "analysis/synth.h"
#include "export.h"
#include "support/test_support.h"
#include "views.h"
#include "widget_test_support.h"

using namespace attnscope;
using attention::Mechanism;
using test::colourMaps;
using test::colourScales;
using test::plotOf;
using widgets::ResultView;

namespace {

using Result = test::ExploreResultPtr;

// Every export check, the 192 dpi ones included.
void checkExports(ResultView* view, const QString& dir, const QString& tag, bool expectColourful = true)
{
    test::checkExports(view, dir, tag, {.colourful = expectColourful, .hiDpi = true});
}

Result exploreSample(const std::string& file, bool grid)
{
    return test::exploreFile(test::dataPath(file), [grid](analysis::ExploreRequest& r) {
        r.source.selection.at['h'] = 0;
        if (grid) {
            r.options.blocks.kind = attention::BlockSpec::Kind::grid;
            r.options.blocks.grid = {16, 16};
            r.options.blocks.block_grid = {4, 4};
            r.token_grid = {16, 16};
        }
    });
}

// A synthetic file written with core's writer; `configure` adjusts the request.
Result exploreSynth(const std::string& name, Eigen::Index n, Eigen::Index d, const std::string& kind,
                    const std::function<void(analysis::ExploreRequest&)>& configure = {})
{
    const std::string dir = test::fresh_work_dir("views_" + name);
    analysis::SynthOptions o;
    o.n = n;
    o.d = d;
    o.kind = kind;
    o.seed = 7;
    test::write_synthetic_h5(dir + "/s.h5", o, 1ULL << 31);
    return test::exploreFile(dir + "/s.h5", configure);
}

const Result& result1d()
{
    static Result r = exploreSample("lm_local1d.h5", false);
    return r;
}
const Result& resultGrid()
{
    static Result r = exploreSample("vit_local2d.h5", true);
    return r;
}

void exerciseAll(const Result& result, const std::string& name, int query)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir(name));
    QWidget parent;
    const auto views = widgets::createAllViews(&parent);
    ASSERT_EQ(views.size(), 8);
    const QStringList names{"maps", "query", "spectrum", "entropy", "mixing", "metrics", "heads", "depth"};
    for (int i = 0; i < views.size(); ++i) {
        ResultView* v = views[i];
        EXPECT_EQ(v->viewName(), names[i]);
        EXPECT_FALSE(v->viewTitle().isEmpty());
        checkExports(v, dir, "empty", false);   // the empty state exports too
        v->setResult(result);
        v->setQuery(query);
        // The heads and depth views draw what the window computes for them (test_heads_view.cpp,
        // test_depth_view.cpp), not a result alone.
        checkExports(v, dir, "result", {v->viewName() != "heads" && v->viewName() != "depth"});
        // State round trip into a fresh view of the same kind.
        const QJsonObject state = v->saveState();
        std::unique_ptr<ResultView> twin(widgets::createAllViews()[i]);
        twin->setResult(result);
        twin->restoreState(state);
        EXPECT_EQ(twin->saveState(), state) << v->viewName().toStdString();
        v->setResult(nullptr);
        v->setResult(result);
    }
    EXPECT_TRUE(widgets::exportAllViews(views, dir + "/all", "svg", {}).isEmpty());
    EXPECT_EQ(QDir(dir + "/all").entryList(QDir::Files).size(), 8);
}

}  // namespace

TEST(Views, OneDimensional) { exerciseAll(result1d(), "views_1d", 100); }

TEST(Views, Grid) { exerciseAll(resultGrid(), "views_grid", 120); }

TEST(Views, FailedAndSignedMechanisms)
{
    // Official normalisation needs equal blocks: 100 tokens in 7 blocks makes MHLA fail alone.
    const Result failed = exploreSynth("failed", 100, 16, "local1d", [](analysis::ExploreRequest& r) {
        r.options.blocks.blocks = 7;
        r.options.normalize = attention::Normalize::official;
    });
    const auto* mhla = failed->find(Mechanism::mhla);
    ASSERT_NE(mhla, nullptr);
    ASSERT_FALSE(mhla->error.empty());
    exerciseAll(failed, "views_failed", 5);
    const QString csv = widgets::metricsCsv(*failed);
    EXPECT_TRUE(csv.contains(QString::fromStdString(mhla->error).left(20)));

    // Identity features: signed entries, entropy undefined; a log request falls back to a linear scale.
    const Result signedResult = exploreSynth("signed", 96, 16, "gaussian", [](analysis::ExploreRequest& r) {
        r.options.feature_map.kind = attention::FeatureMapKind::identity;
        r.options.normalize = attention::Normalize::none;
    });
    exerciseAll(signedResult, "views_signed", 3);
    std::unique_ptr<ResultView> maps(widgets::createMapsView());
    maps->setResult(signedResult);
    maps->restoreState(QJsonObject{{"log", true}});
    const auto signedMaps = colourMaps(plotOf(maps.get()));
    ASSERT_EQ(signedMaps.size(), 3);   // one scale per panel by default: softmax keeps its log scale
    for (int i = 0; i < 3; ++i) {
        const QCPColorScale* s = signedMaps[i]->colorScale();
        if (signedResult->outcomes[static_cast<std::size_t>(i)].matrix->minCoeff() >= 0) {
            EXPECT_EQ(s->dataScaleType(), QCPAxis::stLogarithmic);
            continue;
        }
        EXPECT_EQ(s->dataScaleType(), QCPAxis::stLinear);
        EXPECT_LT(s->dataRange().lower, 0);
        EXPECT_DOUBLE_EQ(s->dataRange().lower, -s->dataRange().upper);
        EXPECT_TRUE(s->axis()->label().contains("log scale unavailable"));
    }
}

TEST(MapsView, ClickSelectsQuery)
{
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {1300, 600}, [&] { view->setResult(result1d()); });
    QSignalSpy spy(view.get(), &ResultView::querySelected);
    QCPAxisRect* rect = plot->axisRects().at(1);   // the linear panel: clicks anywhere select the row
    const int px = static_cast<int>(rect->axis(QCPAxis::atBottom)->coordToPixel(200));
    const int py = static_cast<int>(rect->axis(QCPAxis::atLeft)->coordToPixel(321));
    QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, QPoint(px, py));
    ASSERT_EQ(spy.count(), 1);
    // Within the rows one pixel spans (the panel's height depends on its title's lines).
    const double rowsPerPixel = std::abs(rect->axis(QCPAxis::atLeft)->pixelToCoord(py + 1) -
                                         rect->axis(QCPAxis::atLeft)->pixelToCoord(py));
    EXPECT_NEAR(spy.at(0).at(0).toInt(), 321, std::max(1.0, std::ceil(rowsPerPixel)));

    // Hover reports query, key and value.
    QSignalSpy status(view.get(), &ResultView::statusMessage);
    QTest::mouseMove(plot, QPoint(px, py));
    QMouseEvent move(QEvent::MouseMove, QPointF(px, py), plot->mapToGlobal(QPointF(px, py)), Qt::NoButton, Qt::NoButton,
                     Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
    ASSERT_GE(status.count(), 1);
    EXPECT_TRUE(status.last().at(0).toString().contains("linear"));
    EXPECT_TRUE(status.last().at(0).toString().contains("key j = "));
}

TEST(MapsView, DifferenceAndLogModes)
{
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    view->setResult(result1d());
    QCustomPlot* plot = plotOf(view.get());
    EXPECT_EQ(plot->axisRects().size(), 3);
    view->restoreState(QJsonObject{{"difference", "softmax"}});
    EXPECT_EQ(view->saveState()["difference"].toString(), "softmax");
    EXPECT_EQ(plot->axisRects().size(), 2);   // linear - softmax, MHLA - softmax
    auto scales = colourScales(plot);
    ASSERT_EQ(scales.size(), 1);
    EXPECT_LT(scales[0]->dataRange().lower, 0);
    EXPECT_DOUBLE_EQ(scales[0]->dataRange().lower, -scales[0]->dataRange().upper);
    // Full resolution: the drawn difference is exactly A_linear - A_softmax.
    const auto& A = *result1d()->find(Mechanism::linear)->matrix;
    const auto& S = *result1d()->find(Mechanism::softmax)->matrix;
    QCPColorMap* map = colourMaps(plot).at(0);
    EXPECT_EQ(map->data()->keySize(), 512);
    EXPECT_NEAR(map->data()->cell(40, 30), A(30, 40) - S(30, 40), 1e-15);
    checkExports(view.get(), QString::fromStdString(test::fresh_work_dir("views_diff")), "diff");

    view->restoreState(QJsonObject{{"difference", "off"}, {"log", true}, {"colormap", "magma"}});
    scales = colourScales(plot);
    ASSERT_EQ(scales.size(), 3);   // one per panel by default
    for (QCPColorScale* s : scales) {
        EXPECT_EQ(s->dataScaleType(), QCPAxis::stLogarithmic);
        EXPECT_GT(s->dataRange().lower, 0);
    }
    EXPECT_EQ(view->saveState()["colormap"].toString(), "magma");
    checkExports(view.get(), QString::fromStdString(test::fresh_work_dir("views_log")), "log");
}

TEST(MapsView, LargeMatrixUsesReducedImages)
{
    const Result big = exploreSynth("large", 2048, 32, "local1d");
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    view->setResult(big);
    QCustomPlot* plot = plotOf(view.get());
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 3);
    EXPECT_EQ(maps[0]->data()->keySize(), 1024);
    EXPECT_EQ(maps[0]->data()->valueSize(), 1024);
    // Max reduction: each cell is the max of a 2x2 block.
    const auto& A = *big->outcomes[0].matrix;
    EXPECT_DOUBLE_EQ(maps[0]->data()->cell(7, 5), A.block(10, 14, 2, 2).maxCoeff());
    // Zoomed in: full resolution of the visible region, linked across panels.
    view->restoreState(QJsonObject{{"x_range", QJsonArray{99.5, 299.5}}, {"y_range", QJsonArray{999.5, 1099.5}}});
    for (QCPColorMap* m : colourMaps(plot)) {
        EXPECT_EQ(m->data()->keySize(), 200);
        EXPECT_EQ(m->data()->valueSize(), 100);
    }
    for (QCPAxisRect* r : plot->axisRects())
        EXPECT_DOUBLE_EQ(r->axis(QCPAxis::atBottom)->range().lower, 99.5);
    EXPECT_DOUBLE_EQ(colourMaps(plot)[0]->data()->cell(0, 0), A(1000, 100));
    checkExports(view.get(), QString::fromStdString(test::fresh_work_dir("views_large")), "zoom");
}

// Rank against the relative tolerance: one step curve per mechanism through the core's rank_at_rtol (docs/maths.md 2.2).
TEST(SpectrumView, RankAgainstTolerance)
{
    std::unique_ptr<ResultView> view(widgets::createSpectrumView());
    const auto result = result1d();
    view->setResult(result);
    view->restoreState(QJsonObject{{"rank_vs_tolerance", true}});
    EXPECT_TRUE(view->saveState()["rank_vs_tolerance"].toBool());
    QCustomPlot* plot = plotOf(view.get());
    ASSERT_EQ(plot->graphCount(), static_cast<int>(result->outcomes.size()));
    for (int g = 0; g < plot->graphCount(); ++g) {
        const auto& sp = *result->outcomes[static_cast<std::size_t>(g)].result.spectrum;
        const auto data = plot->graph(g)->data();
        ASSERT_EQ(data->size(), 7);
        EXPECT_DOUBLE_EQ(data->at(0)->key, 1e-12);   // ascending tolerance
        EXPECT_EQ(data->at(0)->value, static_cast<double>(sp.rank_at_rtol[6]));
        EXPECT_EQ(data->at(6)->value, static_cast<double>(sp.rank_at_rtol[0]));
    }
}

// The semiseparable profile (docs/maths.md 2.2): one curve per mechanism through the core's past_profile (rank
// against the split h), the full-rank bound and the d line; a non-causal result says how to get one.
TEST(SpectrumView, SemiseparableProfile)
{
    const Result causal = exploreSynth("profile", 200, 8, "local1d", [](analysis::ExploreRequest& r) {
        r.options.causal = true;
        r.options.blocks.kind = attention::BlockSpec::Kind::count;
        r.options.blocks.blocks = 4;
    });
    std::unique_ptr<ResultView> view(widgets::createSpectrumView());
    view->setResult(causal);
    view->restoreState(QJsonObject{{"profile", true}});
    EXPECT_TRUE(view->saveState()["profile"].toBool());
    QCustomPlot* plot = plotOf(view.get());
    // Each mechanism's curve, then the full-rank bound and the d line's legend entry.
    ASSERT_EQ(plot->graphCount(), static_cast<int>(causal->outcomes.size()) + 2);
    for (std::size_t g = 0; g < causal->outcomes.size(); ++g) {
        const auto& pp = causal->outcomes[g].result.past_profile;
        ASSERT_TRUE(pp);
        const auto data = plot->graph(static_cast<int>(g))->data();
        ASSERT_EQ(data->size(), static_cast<int>(pp->splits.size()));
        for (int i = 0; i < data->size(); ++i) {
            EXPECT_EQ(data->at(i)->key, static_cast<double>(pp->splits[static_cast<std::size_t>(i)].h));
            EXPECT_EQ(data->at(i)->value, static_cast<double>(pp->splits[static_cast<std::size_t>(i)].rank));
        }
        EXPECT_TRUE(plot->graph(static_cast<int>(g))->name().contains(QString::number(pp->semiseparable_rank)));
    }
    EXPECT_TRUE(plot->graph(plot->graphCount() - 1)->name().startsWith("d = 8"));
    checkExports(view.get(), QString::fromStdString(test::fresh_work_dir("views_profile")), "profile");
    // Not causal: no profile, and the plot says why.
    view->setResult(result1d());
    EXPECT_EQ(plot->graphCount(), 0);
}

TEST(MetricsCsv, MatchesResult)
{
    const auto& r = *resultGrid();
    const QStringList lines = widgets::metricsCsv(r).split('\n', Qt::SkipEmptyParts);
    ASSERT_EQ(lines.size(), 1 + static_cast<int>(r.outcomes.size()));
    // Copy as CSV's columns in their order (the metric table's Metrics view rows, analysis/metric_table.h).
    EXPECT_EQ(lines[0], "mechanism,n,rank,relative_rank,tol,s1,effective_rank,stable_rank,energy_rank_90,energy_rank_99,"
                        "entropy_mean,entropy_std,entropy_min,entropy_max,entropy_normalized_mean,"
                        "entropy_support_normalized_mean,baseline_rank,baseline_effective_rank,baseline_entropy_mean,"
                        "excess_effective_rank,entropy_below_baseline,past_block_rank,past_block_effective_rank,"
                        "semiseparable_rank,logit_norm,mean_distance,mass_within_1,mass_within_4,mass_within_16,"
                        "rank_at_rtol_1e-2,rank_at_rtol_1e-3,rank_at_rtol_1e-4,rank_at_rtol_1e-6,rank_at_rtol_1e-8,"
                        "rank_at_rtol_1e-10,rank_at_rtol_1e-12,output_rank,output_effective_rank,output_energy_rank_99,"
                        "retrieval_mass,retrieval_rank,params,warnings,error");
    const QStringList header = lines[0].split(',');
    EXPECT_EQ(header[0], "mechanism");
    const int rankCol = header.indexOf("rank"), tolCol = header.indexOf("tol"), meanCol = header.indexOf("entropy_mean"),
              stableCol = header.indexOf("stable_rank");
    ASSERT_GE(rankCol, 0);
    ASSERT_GE(meanCol, 0);
    for (std::size_t i = 0; i < r.outcomes.size(); ++i) {
        const auto& o = r.outcomes[i];
        const QStringList f = lines[static_cast<int>(i) + 1].split(',');   // numeric columns precede the quoted params
        EXPECT_EQ(f[0].toStdString(), std::string(attention::to_string(o.result.mechanism)));
        ASSERT_TRUE(o.result.spectrum);
        EXPECT_EQ(f[rankCol].toLongLong(), o.result.spectrum->rank);
        EXPECT_EQ(f[tolCol].toDouble(), o.result.spectrum->tol);
        EXPECT_EQ(f[stableCol].toDouble(), o.result.spectrum->stable_rank);
        ASSERT_TRUE(o.result.entropy);
        EXPECT_EQ(f[meanCol].toDouble(), o.result.entropy->mean);
    }
}

TEST(Export, Errors)
{
    std::unique_ptr<ResultView> view(widgets::createSpectrumView());
    const QString dir = QString::fromStdString(test::fresh_work_dir("views_export_errors"));
    const QString bad = widgets::exportView(view.get(), dir + "/fig.bmp", {});
    EXPECT_TRUE(bad.contains(dir + "/fig.bmp"));
    EXPECT_FALSE(bad.contains('\n'));
    const QString missing = widgets::exportView(view.get(), dir + "/no/such/folder/fig.png", {});
    EXPECT_TRUE(missing.contains("fig.png"));
    EXPECT_FALSE(QFileInfo::exists(dir + "/no/such/folder/fig.png"));
    // An existing file is replaced only by a complete figure.
    ASSERT_EQ(widgets::exportView(view.get(), dir + "/fig.png", {}), QString());
    EXPECT_EQ(QDir(dir).entryList(QDir::Files | QDir::Hidden).size(), 1);
    EXPECT_FALSE(widgets::exportAllViews({view.get()}, dir, "tiff", {}).isEmpty());
}

// Exporting every view into a folder goes through the one writer: a FIFO already in the folder under a view's
// name is refused, never replaced by a regular file, and the other views are still written (docs/security.md).
TEST(Views, ExportAllNeverReplacesASpecialFile)
{
    std::unique_ptr<ResultView> spectrum(widgets::createSpectrumView());
    std::unique_ptr<ResultView> metrics(widgets::createMetricsView());
    const QString dir = QString::fromStdString(test::fresh_work_dir("views_export_fifo"));
    const QString fifo = dir + "/" + spectrum->viewName() + ".svg";
    ASSERT_EQ(::mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
    const QStringList errors = widgets::exportAllViews({spectrum.get(), metrics.get()}, dir, "svg", {});
    ASSERT_EQ(errors.size(), 1);
    EXPECT_TRUE(errors[0].contains(fifo)) << errors[0].toStdString();
    struct stat st {};
    ASSERT_EQ(::lstat(QFile::encodeName(fifo).constData(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    EXPECT_TRUE(QFileInfo::exists(dir + "/" + metrics->viewName() + ".svg"));
}

// Documentation figures (docs/views-<name>.png); only when ATTNSCOPE_SCREENSHOTS is set. The maps are
// exported smaller: noisy log-scale images compress poorly and the docs keep figures under 300 KB.
TEST(Views, Screenshots)
{
    if (!std::getenv("ATTNSCOPE_SCREENSHOTS"))
        GTEST_SKIP() << "set ATTNSCOPE_SCREENSHOTS=1 to write docs/views-*.png";
    const auto views = widgets::createAllViews();
    for (ResultView* v : views) {
        const bool grid = v->viewName() == "query" || v->viewName() == "entropy" || v->viewName() == "mixing";
        v->setResult(grid ? resultGrid() : result1d());
        v->setQuery(grid ? 120 : 300);
        widgets::ExportOptions opt;
        opt.dpi = 96;
        EXPECT_EQ(widgets::exportView(v, QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-%1.png").arg(v->viewName()), opt), QString());
        if (v->viewName() == "maps") {
            opt.width = 1020;
            opt.height = 400;
            opt.font_scale = 0.9;
            v->restoreState(QJsonObject{{"log", true}});
            EXPECT_EQ(widgets::exportView(v, QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-maps.png"), opt), QString());
            v->setResult(resultGrid());
            v->setQuery(120);
            EXPECT_EQ(widgets::exportView(v, QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-maps-grid.png"), opt), QString());
            v->restoreState(QJsonObject{{"difference", "softmax"}, {"log", false}});
            EXPECT_EQ(widgets::exportView(v, QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-maps-difference.png"), opt), QString());
        }
        if (v->viewName() == "query" || v->viewName() == "entropy") {
            v->setResult(result1d());
            v->setQuery(300);
            v->restoreState(QJsonObject{{"log_y", true}});
            EXPECT_EQ(widgets::exportView(v, QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-%1-1d.png").arg(v->viewName()), opt),
                      QString());
        }
        delete v;
    }
}
