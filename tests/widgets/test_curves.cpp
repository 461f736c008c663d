// Curves and model overview views on real sweeps (core run_sweep on synthetic data and on a small HDF5
// file with layers and heads): curves equal the core's sweep_summary, reference lines, log axes, hover,
// exports are non-blank PNG / valid PDF / SVG, state round-trips, the empty state exports. Also the maps
// view's square panels, on screen after a resize and in renderTo. ATTNSCOPE_SCREENSHOTS=1 writes
// docs/views-curves-n.png, docs/views-curves-m.png and docs/views-overview.png.
#include <QApplication>
#include <QImage>
#include <QJsonArray>
#include <QPainter>
#include <QSet>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <cstdlib>
#include <memory>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "analysis/sweep.h"
#include "analysis/synth.h"
#include "curve_sets.h"
#include "curves.h"
#include "export.h"
#include "io/writers.h"
#include "support/test_support.h"
#include "views.h"
#include "widget_test_support.h"

using namespace attnscope;
using test::checkExports;
using test::colourMaps;
using test::graphNamed;
using test::plotOf;
using widgets::ResultView;
using widgets::SweepView;
using Sweep = std::shared_ptr<const analysis::SweepResult>;

namespace {

Sweep runSweep(analysis::SweepSpec spec)
{
    auto r = std::make_shared<analysis::SweepResult>();
    r->records = analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{});
    r->spec = std::move(spec);
    return r;
}

Sweep sweepN(std::vector<Eigen::Index> values = {32, 64, 128}, Eigen::Index seeds = 2)
{
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"local1d", 16, seeds, 0};
    spec.vary = 'n';
    spec.values = std::move(values);
    return runSweep(spec);
}

Sweep sweepM(Eigen::Index n = 64, std::vector<Eigen::Index> values = {1, 2, 4, 8})
{
    analysis::SweepSpec spec;
    spec.synth = analysis::SynthSource{"local1d", 16, 2, n};
    spec.vary = 'm';
    spec.values = std::move(values);
    return runSweep(spec);
}

// An lhnd file (layers x heads x N x d) of synthetic activations, one kind and seed per (layer, head),
// and its overview sweep.
Sweep overview(const std::string& name, int layers, int heads, Eigen::Index n, Eigen::Index d, bool mixedKinds)
{
    const std::string dir = test::fresh_work_dir(name);
    std::vector<double> q, k;
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            analysis::SynthOptions o;
            o.n = n;
            o.d = d;
            const char* kinds[] = {"local1d", "gaussian", "lowrank"};
            o.kind = mixedKinds ? kinds[(l + 2 * h) % 3] : "gaussian";
            o.seed = static_cast<std::uint64_t>(10 * l + h);
            const auto data = analysis::synthesize(o, 1ULL << 31);
            q.insert(q.end(), data.q.begin(), data.q.end());
            k.insert(k.end(), data.k.begin(), data.k.end());
        }
    const std::vector<std::int64_t> shape{layers, heads, n, d};
    io::write_hdf5(dir + "/model.h5", {io::DatasetOut{"/q", shape, q}, io::DatasetOut{"/k", shape, k}});
    analysis::TensorSource src;
    src.q_ref = io::parse_tensor_ref(dir + "/model.h5:/q");
    src.k_ref = io::parse_tensor_ref(dir + "/model.h5:/k");
    src.selection.layout = "lhnd";
    return runSweep(analysis::overview_spec(src, {}, {}));
}

const Sweep& smallN()
{
    static Sweep s = sweepN();
    return s;
}
const Sweep& smallM()
{
    static Sweep s = sweepM();
    return s;
}
const Sweep& smallOverview()
{
    static Sweep s = overview("curves_overview", 2, 3, 36, 8, false);
    return s;
}

// Empty state, a sweep, every metric, exports, and a state round trip into a fresh view.
void exercise(SweepView* (*create)(QWidget*), const Sweep& sweep, const QString& name)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir(name.toStdString()));
    std::unique_ptr<SweepView> view(create(nullptr));
    EXPECT_FALSE(view->viewTitle().isEmpty());
    checkExports(view.get(), dir, "empty", {.colourful = false});
    view->setSweep(sweep);
    for (const char* m : {"relative_rank", "effective_rank", "stable_rank", "entropy_mean", "entropy_normalized_mean", "seconds", "rank"}) {
        view->setMetric(m);
        EXPECT_EQ(view->saveState()["metric"].toString(), m);
        EXPECT_GT(plotOf(view.get())->plottableCount(), 0) << m;
    }
    view->setMetric("no_such_metric");
    EXPECT_EQ(view->saveState()["metric"].toString(), "rank");
    checkExports(view.get(), dir, "rank", {});
    view->setMetric("entropy_mean");
    checkExports(view.get(), dir, "entropy", {});

    QJsonObject state = view->saveState();
    state["metric"] = "stable_rank";
    view->restoreState(state);
    std::unique_ptr<SweepView> twin(create(nullptr));
    twin->setSweep(sweep);
    twin->restoreState(view->saveState());
    EXPECT_EQ(twin->saveState(), view->saveState());
    EXPECT_EQ(twin->saveState()["metric"].toString(), "stable_rank");
    view->setSweep(nullptr);
    checkExports(view.get(), dir, "cleared", {.colourful = false});
}

const nlohmann::ordered_json* summaryPoint(const nlohmann::ordered_json& summary, const std::string& mech, Eigen::Index n, Eigen::Index m)
{
    for (const auto& p : summary["points"])
        if (p["mechanism"] == mech && p["n"] == n && p["m"] == m)
            return &p;
    return nullptr;
}

}  // namespace

TEST(CurvesView, RankAgainstN)
{
    const Sweep& s = smallN();
    ASSERT_EQ(s->records.size(), 3u * 3u * 2u);   // N values x mechanisms x seeds
    std::unique_ptr<SweepView> view(widgets::createCurvesView());
    EXPECT_EQ(view->viewName(), "curves");
    view->setSweep(s);
    view->setMetric("rank");
    QCustomPlot* plot = plotOf(view.get());
    const auto summary = analysis::sweep_summary(s->spec, s->records);
    for (const char* mech : {"softmax", "linear", "MHLA"}) {
        QCPGraph* g = graphNamed(plot, mech);
        ASSERT_NE(g, nullptr) << mech;
        ASSERT_EQ(g->dataCount(), 3);
        EXPECT_EQ(g->scatterStyle().shape() != QCPScatterStyle::ssNone, true);
        const std::string core = QString(mech).toLower().toStdString();
        for (int i = 0; i < 3; ++i) {
            const double n = g->data()->at(i)->key;
            const auto* p = summaryPoint(summary, core, static_cast<Eigen::Index>(n), 16);
            ASSERT_NE(p, nullptr) << core << " N=" << n;
            EXPECT_DOUBLE_EQ(g->data()->at(i)->value, (*p)["rank"]["mean"].get<double>());
        }
    }
    // Linear rank is bounded by d = 16 at every N; softmax's grows past it.
    QCPGraph* lin = graphNamed(plot, "linear");
    for (int i = 0; i < 3; ++i)
        EXPECT_LE(lin->data()->at(i)->value, 16.0);
    EXPECT_GT(graphNamed(plot, "softmax")->data()->at(2)->value, 16.0);
    // Reference lines: rank = N (dashed) and the feature dimension (dotted).
    QCPGraph* full = graphNamed(plot, "full rank");
    ASSERT_NE(full, nullptr);
    EXPECT_EQ(full->pen().style(), Qt::DashLine);
    EXPECT_DOUBLE_EQ(full->data()->at(0)->value, full->data()->at(0)->key);
    QCPGraph* dline = graphNamed(plot, "feature dimension d = 16");
    ASSERT_NE(dline, nullptr);
    EXPECT_EQ(dline->pen().style(), Qt::DotLine);
    EXPECT_DOUBLE_EQ(dline->data()->at(5)->value, 16.0);
    // Bands: two seeds differ in effective rank, so each mechanism gets a min..max band.
    view->setMetric("effective_rank");
    int filled = 0;
    for (int i = 0; i < plot->graphCount(); ++i)
        filled += plot->graph(i)->channelFillGraph() ? 1 : 0;
    EXPECT_EQ(filled, 3);
    view->setMetric("rank");
    // 32..128 spans 4x: linear axes by default; log2 on request.
    QCPAxis* x = plot->axisRects().front()->axis(QCPAxis::atBottom);
    EXPECT_EQ(x->scaleType(), QCPAxis::stLinear);
    EXPECT_EQ(x->label(), "sequence length N");
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atLeft)->label(), "numerical rank");
    view->restoreState(QJsonObject{{"x_scale", "log2"}, {"y_scale", "log"}, {"band", "std"}});
    x = plot->axisRects().front()->axis(QCPAxis::atBottom);
    EXPECT_EQ(x->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atLeft)->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_EQ(view->saveState()["band"].toString(), "std");
    view->restoreState(QJsonObject{{"x_scale", "auto"}, {"y_scale", "auto"}, {"band", "none"}});
    for (int i = 0; i < plot->graphCount(); ++i)
        EXPECT_EQ(plot->graph(i)->channelFillGraph(), nullptr);
    view->setMetric("relative_rank");
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atLeft)->label(), "relative rank (rank / N)");
    EXPECT_NE(graphNamed(plot, "full rank"), nullptr);

    // A wide span switches to log2 by itself (powers of two).
    std::unique_ptr<SweepView> wide(widgets::createCurvesView());
    wide->setSweep(sweepN({16, 64, 256}, 1));
    EXPECT_EQ(plotOf(wide.get())->axisRects().front()->axis(QCPAxis::atBottom)->scaleType(), QCPAxis::stLogarithmic);
}

TEST(CurvesView, HoverReadsOut)
{
    std::unique_ptr<SweepView> view(widgets::createCurvesView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {900, 600}, [&] { view->setSweep(smallN()); });
    QSignalSpy status(view.get(), &ResultView::statusMessage);
    QCPAxisRect* rect = plot->axisRects().front();
    const QPointF p(rect->axis(QCPAxis::atBottom)->coordToPixel(64), rect->center().y());
    QMouseEvent move(QEvent::MouseMove, p, plot->mapToGlobal(p), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
    ASSERT_GE(status.count(), 1);
    const QString msg = status.last().at(0).toString();
    EXPECT_TRUE(msg.startsWith("N = 64")) << msg.toStdString();
    EXPECT_TRUE(msg.contains("softmax: mean")) << msg.toStdString();
    EXPECT_TRUE(msg.contains("2 records")) << msg.toStdString();
}

TEST(CurvesView, RankAgainstM)
{
    const Sweep& s = smallM();
    std::unique_ptr<SweepView> view(widgets::createCurvesView());
    view->setSweep(s);
    QCustomPlot* plot = plotOf(view.get());
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atBottom)->label(), "blocks M");
    QCPGraph* mhla = graphNamed(plot, "MHLA");
    ASSERT_NE(mhla, nullptr);
    ASSERT_EQ(mhla->dataCount(), 4);
    for (int i = 0; i < 4; ++i)
        EXPECT_DOUBLE_EQ(mhla->data()->at(i)->key, std::pow(2.0, i));
    // MHLA's rank grows with M (M = 1 is linear attention).
    EXPECT_GT(mhla->data()->at(3)->value, mhla->data()->at(0)->value);
    EXPECT_EQ(graphNamed(plot, "full rank"), nullptr);   // rank = N only against N
    EXPECT_NE(graphNamed(plot, "feature dimension"), nullptr);
}

TEST(CurvesView, ExportsAndState) { exercise(&widgets::createCurvesView, smallN(), "curves_n"); }

TEST(CurvesView, ExportsAndStateM) { exercise(&widgets::createCurvesView, smallM(), "curves_m"); }

TEST(OverviewView, LayersByHeads)
{
    const Sweep& s = smallOverview();
    ASSERT_EQ(s->records.size(), 2u * 3u * 3u);
    std::unique_ptr<SweepView> view(widgets::createOverviewView());
    EXPECT_EQ(view->viewName(), "overview");
    view->setSweep(s);
    view->setMetric("relative_rank");
    QCustomPlot* plot = plotOf(view.get());
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 3);
    for (QCPColorMap* m : maps) {
        EXPECT_EQ(m->data()->keySize(), 3);     // heads
        EXPECT_EQ(m->data()->valueSize(), 2);   // layers
        EXPECT_EQ(m->colorScale(), maps.front()->colorScale());   // one shared scale
    }
    EXPECT_FALSE(maps.front()->colorScale()->axis()->label().isEmpty());
    // Cell (head h, layer l) of the first panel is that record's relative rank.
    for (const auto& r : s->records) {
        if (r.mechanism == "softmax") {
            EXPECT_DOUBLE_EQ(maps[0]->data()->cell(static_cast<int>(*r.head), static_cast<int>(*r.layer)), r.result.spectrum->relative_rank);
        }
    }

    // Hover on the linear panel's cell (head 2, layer 1).
    test::showOnScreen(view.get(), {1100, 500});
    QSignalSpy status(view.get(), &ResultView::statusMessage);
    QCPAxisRect* rect = plot->axisRects().at(1);
    const QPointF p(rect->axis(QCPAxis::atBottom)->coordToPixel(2), rect->axis(QCPAxis::atLeft)->coordToPixel(1));
    QMouseEvent move(QEvent::MouseMove, p, plot->mapToGlobal(p), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
    ASSERT_GE(status.count(), 1);
    const QString msg = status.last().at(0).toString();
    EXPECT_TRUE(msg.contains("linear") && msg.contains("layer 1") && msg.contains("head 2")) << msg.toStdString();
    // Values are written in cells that are large enough.
    int visibleTexts = 0;
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)))
            visibleTexts += t->visible() ? 1 : 0;
    EXPECT_EQ(visibleTexts, 18);
}

TEST(OverviewView, ExportsAndState) { exercise(&widgets::createOverviewView, smallOverview(), "overview"); }

TEST(OverviewView, ClickOnACellEmitsItsLayerAndHead)
{
    std::unique_ptr<SweepView> view(widgets::createOverviewView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {1100, 500}, [&] { view->setSweep(smallOverview()); });
    QSignalSpy activated(view.get(), &SweepView::cellActivated);
    // Cell (head 2, layer 1) of the MHLA panel, then (head 0, layer 0) of the softmax panel.
    const struct {
        int panel, layer, head;
    } cells[] = {{2, 1, 2}, {0, 0, 0}};
    for (const auto& c : cells) {
        QCPAxisRect* rect = plot->axisRects().at(c.panel);
        const QPoint p(static_cast<int>(rect->axis(QCPAxis::atBottom)->coordToPixel(c.head)),
                       static_cast<int>(rect->axis(QCPAxis::atLeft)->coordToPixel(c.layer)));
        QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, p);
    }
    ASSERT_EQ(activated.count(), 2);
    EXPECT_EQ(activated.at(0).at(0).toInt(), 1);
    EXPECT_EQ(activated.at(0).at(1).toInt(), 2);
    EXPECT_EQ(activated.at(1).at(0).toInt(), 0);
    EXPECT_EQ(activated.at(1).at(1).toInt(), 0);
    // A drag is not a click; a click outside the cells emits nothing.
    QCPAxisRect* rect = plot->axisRects().front();
    const QPoint a(static_cast<int>(rect->axis(QCPAxis::atBottom)->coordToPixel(0)), static_cast<int>(rect->axis(QCPAxis::atLeft)->coordToPixel(0)));
    QTest::mousePress(plot, Qt::LeftButton, Qt::NoModifier, a);
    QTest::mouseRelease(plot, Qt::LeftButton, Qt::NoModifier, a + QPoint(30, 0));
    QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, QPoint(3, 3));
    EXPECT_EQ(activated.count(), 2);
}

TEST(CurvesView, RunsOfOneKindOverlaidTheOtherKindApart)
{
    std::unique_ptr<SweepView> view(widgets::createCurvesView());
    const Sweep other = sweepN({32, 64}, 1);
    view->setCurveSets({{smallN(), "N sweep \u00b7 a"}, {smallM(), "M sweep \u00b7 b"}, {other, "N sweep \u00b7 c"}});
    QCustomPlot* plot = plotOf(view.get());
    // The last run's kind (N): both N runs overlaid, each mechanism's line once per run, in distinct styles.
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atBottom)->label(), "sequence length N");
    QCPGraph* a = graphNamed(plot, "softmax \u00b7 N sweep \u00b7 a");
    QCPGraph* c = graphNamed(plot, "softmax \u00b7 N sweep \u00b7 c");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(c, nullptr);
    EXPECT_NE(a->pen().style(), c->pen().style());
    EXPECT_EQ(a->dataCount(), 3);
    EXPECT_EQ(c->dataCount(), 2);
    EXPECT_EQ(graphNamed(plot, "softmax \u00b7 M sweep"), nullptr);
    // The M run alone on its own axis.
    view->restoreState(QJsonObject{{"kind", "m"}});
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atBottom)->label(), "blocks M");
    EXPECT_NE(graphNamed(plot, "MHLA"), nullptr);
    EXPECT_EQ(graphNamed(plot, "softmax \u00b7"), nullptr);
    // Hidden runs stay hidden through the state; a run hidden alone leaves a message, not an old picture.
    view->restoreState(QJsonObject{{"kind", "n"}, {"hidden_runs", QJsonArray{"N sweep \u00b7 a"}}});
    EXPECT_EQ(graphNamed(plot, "softmax \u00b7"), nullptr);   // one run left: plain names
    ASSERT_NE(graphNamed(plot, "softmax"), nullptr);
    EXPECT_EQ(graphNamed(plot, "softmax")->dataCount(), 2);
    view->restoreState(QJsonObject{{"kind", "n"}, {"hidden_runs", QJsonArray{"N sweep \u00b7 a", "N sweep \u00b7 c"}}});
    EXPECT_EQ(plot->graphCount(), 0);
    // A new run is shown even when a run of that name was hidden, and its kind is shown.
    view->setCurveSets({{smallN(), "N sweep \u00b7 a"}, {smallM(), "M sweep \u00b7 b"}, {other, "N sweep \u00b7 c"}, {sweepM(64, {1, 2}), "M sweep \u00b7 d"}});
    EXPECT_EQ(plot->axisRects().front()->axis(QCPAxis::atBottom)->label(), "blocks M");
    EXPECT_NE(graphNamed(plot, "MHLA \u00b7 M sweep \u00b7 d"), nullptr);
    EXPECT_NE(graphNamed(plot, "MHLA \u00b7 M sweep \u00b7 b"), nullptr);
}

TEST(CurvesView, NoteWhileEmpty)
{
    std::unique_ptr<SweepView> view(widgets::createCurvesView());
    view->setNote("Run it again from Analysis > Sweep...");
    QCustomPlot* plot = plotOf(view.get());
    QString shown;
    for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* t = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)))
            shown += t->text();
    EXPECT_TRUE(shown.contains("Analysis > Sweep")) << shown.toStdString();
}

namespace {
void expectSquarePanels(QCustomPlot* plot, const char* where)
{
    const auto rects = plot->axisRects();
    ASSERT_EQ(rects.size(), 3) << where;
    for (QCPAxisRect* r : rects) {
        EXPECT_NEAR(r->width(), r->height(), 2) << where;
        EXPECT_NEAR(r->width(), rects.front()->width(), 1) << where;
        EXPECT_GT(r->width(), 100) << where;
    }
}
}  // namespace

TEST(MapsView, SquarePanels)
{
    const auto result = test::exploreFile(test::dataPath("lm_local1d.h5"));
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {1500, 950}, [&] { view->setResult(result); });
    expectSquarePanels(plot, "1500x950 window");
    // Centred: as much room left of the first panel as right of the colour bar, roughly.
    view->resize(900, 1000);
    QApplication::processEvents();
    plot->replot();
    expectSquarePanels(plot, "900x1000 window");
    // Export sizes: wide and tall.
    for (const QSize size : {QSize(1500, 600), QSize(1000, 900)}) {
        QImage img(size, QImage::Format_ARGB32_Premultiplied);
        img.fill(Qt::white);
        QPainter painter(&img);
        view->renderTo(&painter, size, 1.0);
        expectSquarePanels(plot, size.height() == 600 ? "render 1500x600" : "render 1000x900");
        painter.end();
    }
    // Linked zoom still works with the square layout.
    view->restoreState(QJsonObject{{"x_range", QJsonArray{99.5, 199.5}}, {"y_range", QJsonArray{99.5, 199.5}}});
    plot->replot();
    for (QCPAxisRect* rect : plot->axisRects())
        EXPECT_DOUBLE_EQ(rect->axis(QCPAxis::atBottom)->range().lower, 99.5);
    expectSquarePanels(plot, "zoomed");
}

TEST(EntropyView, PerPanelScales)
{
    const auto result = test::exploreFile(test::dataPath("vit_local2d.h5"), [](analysis::ExploreRequest& r) {
        r.options.blocks.kind = attention::BlockSpec::Kind::grid;
        r.options.blocks.grid = {16, 16};
        r.options.blocks.block_grid = {4, 4};
        r.token_grid = {16, 16};
    });
    std::unique_ptr<ResultView> view(widgets::createEntropyView());
    view->setResult(result);
    auto scales = [&] {
        QSet<QCPColorScale*> s;
        for (QCPColorMap* m : colourMaps(plotOf(view.get())))
            s.insert(m->colorScale());
        return s.size();
    };
    EXPECT_EQ(scales(), 1);
    view->restoreState(QJsonObject{{"per_panel_scale", true}});
    EXPECT_EQ(scales(), 3);
    EXPECT_TRUE(view->saveState()["per_panel_scale"].toBool());
    checkExports(view.get(), QString::fromStdString(test::fresh_work_dir("entropy_per_panel")), "per_panel", {});
}

TEST(MetricsView, FontScaleAndState)
{
    const auto result = test::exploreFile(test::dataPath("lm_local1d.h5"));
    std::unique_ptr<ResultView> view(widgets::createMetricsView());
    view->setResult(result);
    auto* table = view->findChild<QTableWidget*>();
    ASSERT_NE(table, nullptr);
    table->setCurrentCell(4, 1);
    const QJsonObject state = view->saveState();
    EXPECT_EQ(state["mechanism"].toString(), "linear");
    std::unique_ptr<ResultView> twin(widgets::createMetricsView());
    twin->setResult(result);
    twin->restoreState(state);
    EXPECT_EQ(twin->saveState(), state);
    // Larger fonts: more ink (on a page tall enough for every row at 1.5x: the 2.2 measures made the table
    // long, and rows cut off at the page's foot would hide the growth).
    auto ink = [&](double scale) {
        QImage img(QSize(1000, 2400), QImage::Format_ARGB32_Premultiplied);
        img.fill(Qt::white);
        QPainter painter(&img);
        view->renderTo(&painter, img.size(), scale);
        painter.end();
        double nonWhite = 0;
        test::distinctColours(img, &nonWhite);
        return nonWhite;
    };
    EXPECT_GT(ink(1.5), ink(1.0) * 1.3);
}

// Counts read "r / what they are out of": N for the whole matrix, min(N - h, h) for the past block A[h:N, :h]
// (lm_local1d, causal, N = 512: h = 256, so linear attention's past-block rank reads "r / 256").
TEST(MetricsView, PastBlockCountsAreOutOfTheBlock)
{
    const auto result = test::exploreFile(test::dataPath("lm_local1d.h5"),
                                          [](analysis::ExploreRequest& r) { r.options.causal = true; });
    std::unique_ptr<ResultView> view(widgets::createMetricsView());
    view->setResult(result);
    auto* table = view->findChild<QTableWidget*>();
    ASSERT_NE(table, nullptr);
    int rankRow = -1, pastRow = -1;
    for (int i = 0; i < table->rowCount(); ++i) {
        const QString label = table->verticalHeaderItem(i)->text();
        if (label == "rank")
            rankRow = i;
        if (label == "past block rank")
            pastRow = i;
    }
    ASSERT_GE(rankRow, 0);
    ASSERT_GE(pastRow, 0);
    for (int c = 0; c < table->columnCount(); ++c) {
        EXPECT_TRUE(table->item(rankRow, c)->text().endsWith(" / 512")) << table->item(rankRow, c)->text().toStdString();
        EXPECT_TRUE(table->item(pastRow, c)->text().endsWith(" / 256")) << table->item(pastRow, c)->text().toStdString();
    }
}

// Documentation figures; only when ATTNSCOPE_SCREENSHOTS is set.
TEST(CurvesView, Screenshots)
{
    if (!std::getenv("ATTNSCOPE_SCREENSHOTS"))
        GTEST_SKIP() << "set ATTNSCOPE_SCREENSHOTS=1 to write docs/views-curves-*.png and docs/views-overview.png";
    widgets::ExportOptions opt;
    opt.dpi = 96;
    std::unique_ptr<SweepView> curves(widgets::createCurvesView());
    curves->setSweep(sweepN({32, 64, 128, 256, 512, 1024}, 3));
    curves->setMetric("rank");
    curves->restoreState(QJsonObject{{"y_scale", "log"}});   // log-log: rank = N is the diagonal
    EXPECT_EQ(widgets::exportView(curves.get(), QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-curves-n.png"), opt), QString());
    // Against M with a full-rank mixing matrix (the default 1-D cos preset has rank 2, capping MHLA at 2d).
    analysis::SweepSpec m;
    m.synth = analysis::SynthSource{"local1d", 16, 3, 256};
    m.vary = 'm';
    m.values = {1, 2, 4, 8, 16, 32, 64};
    m.options.mixing.preset = "exp";
    curves->restoreState(QJsonObject{{"y_scale", "auto"}});
    curves->setSweep(runSweep(m));
    EXPECT_EQ(widgets::exportView(curves.get(), QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-curves-m.png"), opt), QString());
    std::unique_ptr<SweepView> ov(widgets::createOverviewView());
    ov->setSweep(overview("curves_overview_doc", 4, 6, 144, 16, true));
    ov->setMetric("effective_rank");
    EXPECT_EQ(widgets::exportView(ov.get(), QStringLiteral(ATTNSCOPE_DOCS_DIR "/views-overview.png"), opt), QString());
}

// A run's details say how the tokens of each N were chosen (issue 35, item 8: subsample mode and draws were
// missing): a random run names its draws and seed, first and crop runs their mode; synthetic runs neither.
TEST(CurvesView, RunDetailsSaySubsampleAndDraws)
{
    auto result = std::make_shared<analysis::SweepResult>();
    analysis::SweepSpec& spec = result->spec;
    spec.inputs.push_back({io::tensor_in("acts.h5", "/q"), io::tensor_in("acts.h5", "/k"), std::nullopt, {}});
    spec.vary = 'n';
    spec.values = {64, 128};
    spec.subsample = analysis::Subsample::random;
    spec.draws = 3;
    spec.seed = 5;
    widgets::CurveRun run;
    run.sweep = result;
    EXPECT_TRUE(widgets::runTip(run).contains(QStringLiteral("subsample random, 3 draws (seed 5)")))
        << widgets::runTip(run).toStdString();
    spec.subsample = analysis::Subsample::crop;
    EXPECT_TRUE(widgets::runTip(run).contains(QStringLiteral("subsample crop"))) << widgets::runTip(run).toStdString();
    spec.synth = analysis::SynthSource{"local1d", 16, 2, 0};
    EXPECT_FALSE(widgets::runTip(run).contains(QStringLiteral("subsample"))) << widgets::runTip(run).toStdString();
}

// Curves whose means coincide (every mechanism at rank N for N <= d) are all visible: the later ones thinner and
// dashed, named "(same as ...)" (issue 35, item 8: the softmax line was hidden under MHLA's when both were at rank N).
TEST(CurvesView, CoincidingCurvesStayVisible)
{
    const Sweep s = sweepN({8, 16}, 1);   // d = 16: softmax, linear and MHLA all reach rank N
    std::unique_ptr<SweepView> view(widgets::createCurvesView());
    view->setSweep(s);
    view->setMetric("rank");
    QCustomPlot* plot = plotOf(view.get());
    QCPGraph* softmax = graphNamed(plot, QStringLiteral("softmax"));
    QCPGraph* linear = graphNamed(plot, QStringLiteral("linear"));
    QCPGraph* mhla = graphNamed(plot, QStringLiteral("MHLA"));
    ASSERT_TRUE(softmax && linear && mhla);
    EXPECT_EQ(softmax->pen().style(), Qt::SolidLine);
    EXPECT_EQ(linear->pen().style(), Qt::CustomDashLine);
    EXPECT_EQ(mhla->pen().style(), Qt::CustomDashLine);
    EXPECT_LT(mhla->pen().widthF(), softmax->pen().widthF());   // thinner: the line under it shows at its sides
    EXPECT_EQ(mhla->name(), QStringLiteral("MHLA (same as softmax)"));
    // Where they differ (N > d: linear stays at d), nothing is dashed.
    view->setSweep(sweepN({32, 64}, 1));
    view->setMetric("rank");
    EXPECT_EQ(graphNamed(plotOf(view.get()), QStringLiteral("linear"))->pen().style(), Qt::SolidLine);
    EXPECT_EQ(graphNamed(plotOf(view.get()), QStringLiteral("linear"))->name(), QStringLiteral("linear"));
}
