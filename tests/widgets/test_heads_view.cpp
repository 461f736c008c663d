// The Heads view in the window (docs/gui.md "Heads"): one small map per head of the layer and mechanism,
// titled with the rank and normalised entropy the Metrics view and `analyze --json` give for that head;
// paging through many heads; a click opens the head in the Maps view; the page is marked out of date when an
// option changes and recomputed; `attnscope figure --view heads` and `--screenshot --view heads` draw it.
#include <QImage>
#include <fstream>
#include <QPushButton>
#include <QTest>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "analysis/heads.h"
#include "analysis/metric_table.h"
#include "heads_view.h"
#include "mechanism_panel.h"
#include "plot_style.h"
#include "plot_util.h"
#include "selection_panel.h"
#include "support/attnscope_binary.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::TestWindow;

namespace {

class HeadsViewTest : public test::MainWindowTest {};

HeadsView* headsView(const MainWindow& w)
{
    for (ResultView* v : w.views())
        if (auto* h = qobject_cast<HeadsView*>(v))
            return h;
    return nullptr;
}

// Every title the plot shows, whole (elided or wrapped titles as their full text), its line breaks and
// separators (" · ") read as spaces.
QStringList titles(QCustomPlot* plot)
{
    QStringList out;
    const QList<QCPLayoutElement*> all = plot->plotLayout()->elements(true);
    for (QCPLayoutElement* e : all)
        if (auto* t = qobject_cast<QCPTextElement*>(e)) {
            const QString whole = elidedTitleText(t);
            QString text = whole.isEmpty() ? t->text() : whole;
            out << text.replace(QChar(0x00b7), QLatin1Char(' ')).simplified();
        }
    return out;
}

// The Metrics view's text of a metric for a result: the count, or the value in the view's digits.
QString metricsViewText(const analysis::MechanismResult& r, const char* key)
{
    const analysis::MetricEntry* e = analysis::find_metric(key);
    const std::optional<double> v = e->read(r);
    if (!v)
        return QStringLiteral("\u2014");
    return e->kind == analysis::MetricKind::count ? QString::number(static_cast<qlonglong>(*v)) : fmtNum(*v, e->view_digits);
}

// A file of `heads` heads (N = 48, 1-D) written by attnscope synth.
QString synthHeads(int heads)
{
    const std::string dir = test::fresh_work_dir("heads_view_synth" + std::to_string(heads));
    const std::string file = dir + "/h.h5";
    const auto r = test::run_attnscope("synth --n 48 --d 8 --heads " + std::to_string(heads) + " --kind local1d --out " + file);
    if (r.status != 0)
        throw std::runtime_error(r.err);
    return QString::fromStdString(file);
}

bool showHeads(TestWindow& w)
{
    w.setCurrentView(QStringLiteral("heads"));
    return test::waitIdle(w);
}

}  // namespace

TEST_F(HeadsViewTest, OneMapPerHeadTitledWithItsMetricsAndAnalyzeNumbers)
{
    TestWindow w;
    const QString file = QString::fromStdString(test::dataPath("char_llama_gqa.h5"));
    ASSERT_TRUE(w.openAndWait({file}));
    ASSERT_TRUE(showHeads(w));
    HeadsView* view = headsView(w);
    ASSERT_NE(view, nullptr);
    const auto page = view->heads();
    ASSERT_TRUE(page);
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    ASSERT_EQ(page->heads, 4);
    EXPECT_EQ(page->kv_heads, 2);
    ASSERT_EQ(page->maps.size(), 4u);
    const std::size_t mechanisms = w.result()->outcomes.size();
    QCustomPlot* plot = test::plotOf(view);
    EXPECT_EQ(test::colourMaps(plot).size(), static_cast<int>(4 * mechanisms));
    EXPECT_EQ(test::colourScales(plot).size(), static_cast<int>(mechanisms));   // one scale per row
    const QStringList shown = titles(plot);
    EXPECT_TRUE(shown.filter(QStringLiteral("heads 0\u20133 of 4")).size() == 1) << shown.join('|').toStdString();
    EXPECT_TRUE(shown.filter(QStringLiteral("layer 0")).size() >= 1) << shown.join('|').toStdString();

    for (int h = 0; h < 4; ++h) {
        // The Maps and Metrics views' result for head h, as the window computes it.
        w.selectionPanel()->setIndex(QLatin1Char('h'), h);
        ASSERT_TRUE(test::waitIdle(w));
        const auto r = w.result();
        ASSERT_TRUE(r);
        ASSERT_EQ(r->input["at"]["h"], h);
        // ... and analyze --json of the same file and head (the file's attributes apply alike).
        const std::string q = r->input["q"], k = r->input["k"];
        const auto cli = test::run_attnscope("analyze --q " + q + " --k " + k + " --at h=" + std::to_string(h) + " --json -");
        ASSERT_EQ(cli.status, 0) << cli.err;
        const nlohmann::json json = nlohmann::json::parse(cli.out);
        for (std::size_t m = 0; m < mechanisms; ++m) {
            const auto& res = r->outcomes[m].result;
            const QString mech = QString::fromLatin1(attention::to_string(res.mechanism));
            // The file is causal: each cell leads with the past block's rank (issue 35), not the full rank.
            ASSERT_TRUE(res.past_block && res.past_block->spectrum) << mech.toStdString();
            // Head names head their columns ("q head 1 (kv 0)"); each cell's title is its numbers.
            EXPECT_EQ(shown.count(QStringLiteral("q head %1 (kv %2)").arg(h).arg(h / 2)), 1) << shown.join('|').toStdString();
            const QString expected =
                QStringLiteral("past rank %1 H/ln n %2").arg(metricsViewText(res, "past_block_rank"), metricsViewText(res, "entropy_normalized_mean"));
            EXPECT_GE(shown.count(expected), 1) << expected.toStdString() << " in " << shown.join('|').toStdString();
            bool found = false;
            for (const auto& jm : json["results"])
                if (jm["mechanism"] == mech.toStdString()) {
                    found = true;
                    EXPECT_EQ(jm["rank"].get<long long>(), static_cast<long long>(res.spectrum->rank)) << mech.toStdString() << " head " << h;
                    EXPECT_EQ(jm["past_block"]["rank"].get<long long>(), static_cast<long long>(res.past_block->spectrum->rank))
                        << mech.toStdString() << " head " << h;
                    EXPECT_NEAR(jm["entropy"]["normalized_mean"].get<double>(), res.entropy->normalized_mean, 1e-9);
                }
            EXPECT_TRUE(found) << mech.toStdString();
        }
    }
}

TEST_F(HeadsViewTest, PagesThroughManyHeads)
{
    TestWindow w;
    ASSERT_TRUE(w.openAndWait({synthHeads(10)}));
    ASSERT_TRUE(showHeads(w));
    HeadsView* view = headsView(w);
    auto page = view->heads();
    ASSERT_TRUE(page);
    EXPECT_EQ(page->heads, 10);
    ASSERT_EQ(page->maps.size(), 8u);
    EXPECT_EQ(*page->maps.front().head, 0);
    EXPECT_EQ(*page->maps.back().head, 7);
    QPushButton *next = nullptr, *prev = nullptr;
    for (QPushButton* b : view->findChildren<QPushButton*>()) {
        if (b->text().contains(QStringLiteral("Next")))
            next = b;
        if (b->text().contains(QStringLiteral("Prev")))
            prev = b;
    }
    ASSERT_TRUE(next && prev);
    EXPECT_FALSE(prev->isEnabled());
    ASSERT_TRUE(next->isEnabled());
    next->click();
    EXPECT_TRUE(w.isComputing());
    ASSERT_TRUE(test::waitIdle(w));
    page = view->heads();
    ASSERT_EQ(page->maps.size(), 2u);
    EXPECT_EQ(*page->maps.front().head, 8);
    EXPECT_EQ(*page->maps.back().head, 9);
    EXPECT_EQ(test::colourMaps(test::plotOf(view)).size(), static_cast<int>(2 * w.result()->outcomes.size()));
    EXPECT_TRUE(titles(test::plotOf(view)).filter(QStringLiteral("heads 8\u20139 of 10")).size() == 1);
    EXPECT_FALSE(next->isEnabled());
    EXPECT_TRUE(prev->isEnabled());
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    // The page is part of the view's state (sessions, figure --view-state).
    EXPECT_EQ(view->saveState()[QStringLiteral("first_head")].toInt(), 8);
    prev->click();
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(view->heads()->maps.size(), 8u);
    // Stepping the head recomputes the maps, not the page (it holds every head already), which stays current.
    const auto shownPage = view->heads();
    w.selectionPanel()->setIndex(QLatin1Char('h'), 3);
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(w.result()->input["at"]["h"], 3);
    EXPECT_EQ(view->heads(), shownPage);
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
}

TEST_F(HeadsViewTest, ClickOpensTheHeadInMaps)
{
    TestWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(w.openAndWait({synthHeads(4)}));
    ASSERT_TRUE(showHeads(w));
    HeadsView* view = headsView(w);
    ASSERT_TRUE(view->heads());
    QCustomPlot* plot = test::plotOf(view);
    plot->replot();
    // The softmax row's third map is head 2 (maps are made row by row, heads across).
    const QList<QCPAxisRect*> rects = plot->axisRects();
    ASSERT_GE(rects.size(), 4);
    const QPoint centre = rects[2]->rect().center();
    QTest::mouseClick(plot, Qt::LeftButton, Qt::NoModifier, centre);
    EXPECT_EQ(w.currentView()->viewName(), QStringLiteral("maps"));
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 2);
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(w.result()->input["at"]["h"], 2);
}

TEST_F(HeadsViewTest, OutOfDateWhenAnOptionChangesThenRecomputed)
{
    TestWindow w;
    ASSERT_TRUE(w.openAndWait({synthHeads(3)}));
    ASSERT_TRUE(showHeads(w));
    HeadsView* view = headsView(w);
    ASSERT_TRUE(view->heads());
    ASSERT_EQ(view->freshness(), ResultView::Freshness::current);
    const auto before = view->heads();
    QJsonObject s = w.mechanismPanel()->saveState();
    ASSERT_EQ(before->request.base.options.feature_map.kind, attention::FeatureMapKind::relu);   // the default
    s[QStringLiteral("feature_map")] = QStringLiteral("elu1");
    w.mechanismPanel()->restoreState(s);
    EXPECT_EQ(view->freshness(), ResultView::Freshness::outOfDate);
    EXPECT_FALSE(view->noticeText().isEmpty());
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    ASSERT_NE(view->heads(), before);
    EXPECT_EQ(view->heads()->request.base.options.feature_map.kind, attention::FeatureMapKind::elu1);
    // Another tab: the heads wait for their tab, marked as not answering the new inputs.
    w.setCurrentView(QStringLiteral("maps"));
    s[QStringLiteral("feature_map")] = QStringLiteral("relu");
    w.mechanismPanel()->restoreState(s);
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(view->freshness(), ResultView::Freshness::outOfDate);
    EXPECT_EQ(view->heads()->request.base.options.feature_map.kind, attention::FeatureMapKind::elu1);
    ASSERT_TRUE(showHeads(w));
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    EXPECT_EQ(view->heads()->request.base.options.feature_map.kind, attention::FeatureMapKind::relu);
}

TEST_F(HeadsViewTest, FigureAndScreenshotDrawEveryHead)
{
    const std::string dir = test::fresh_work_dir("heads_view_figure");
    const std::string lm = test::dataPath("trained_lm_mhla.h5");
    const std::string layer0 = " --q " + lm + ":/layers/0/q --k " + lm + ":/layers/0/k";
    for (const char* ext : {"png", "pdf", "svg"}) {
        const std::string out = dir + "/heads." + ext;
        const auto r = test::run_attnscope("figure --view heads" + layer0 + " --width 1100 --height 760 --dpi 96 --out " + out);
        ASSERT_EQ(r.status, 0) << ext << ": " << r.err;
        const std::string text = test::read_text(out);
        ASSERT_GT(text.size(), 2000u) << ext;
        if (std::string(ext) == "pdf") {
            EXPECT_EQ(text.rfind("%PDF", 0), 0u);
        } else if (std::string(ext) == "svg") {
            EXPECT_NE(text.find("<svg"), std::string::npos);
        }
    }
    QImage png(QString::fromStdString(dir + "/heads.png"));
    EXPECT_EQ(png.width(), 1100);
    EXPECT_EQ(png.height(), 760);
    double ink = 0;
    EXPECT_GT(test::distinctColours(png, &ink), 40);
    EXPECT_GT(ink, 0.2);
    // The second page of a file with 10 heads: by the view's state.
    const std::string ten = synthHeads(10).toStdString();
    const auto r2 = test::run_attnscope("figure --view heads --q " + ten + ":/q --k " + ten + ":/k --view-state '{\"first_head\": 8}' --out " + dir + "/p2.svg");
    ASSERT_EQ(r2.status, 0) << r2.err;
    const std::string svg = test::read_text(dir + "/p2.svg");
    EXPECT_NE(svg.find("heads 8"), std::string::npos);
    // A batch figure is one unit's (one head): the page of every head is refused there, saying where it is made.
    {
        std::ofstream job(dir + "/job.toml");
        job << "inputs = [\"" << ten << "\"]\n[[figure]]\nview = \"heads\"\n";
    }
    const auto batch = test::run_attnscope("batch " + dir + "/job.toml --out " + dir + "/batch_out");
    test::expect_one_error(batch, {"view = \"heads\"", "attnscope figure --view heads"}, "batch figure heads");
    // The desktop app's screenshot of the Heads tab.
    const auto shot = test::run_attnscope(lm + " --screenshot " + dir + "/shot.png --view heads --size 1280x720");
    ASSERT_EQ(shot.status, 0) << shot.err;
    QImage s(QString::fromStdString(dir + "/shot.png"));
    EXPECT_GT(s.width(), 600);
}

// Issue 35: a page of 8 of 12 heads reads whole at 1600 x 1000 and at 1280 x 720: every map at least 96 px
// (the page wraps onto more rows and scrolls when the view is too low), no title elided.
TEST_F(HeadsViewTest, TwelveHeadsWholeAtBothWindowSizes)
{
    const std::string dir = test::fresh_work_dir("heads_view_twelve");
    const std::string file = dir + "/h12.h5";
    const auto made = test::run_attnscope("synth --n 256 --d 32 --heads 12 --kind local2d --grid 16,16 --out " + file);
    ASSERT_EQ(made.status, 0) << made.err;
    for (const QSize size : {QSize(1600, 1000), QSize(1280, 720)}) {
        TestWindow w;
        w.resize(size);
        w.show();
        ASSERT_TRUE(w.openAndWait({QString::fromStdString(file)}));
        ASSERT_TRUE(showHeads(w));
        HeadsView* view = headsView(w);
        ASSERT_TRUE(view->heads());
        ASSERT_EQ(view->heads()->maps.size(), 8u);
        QCustomPlot* plot = test::plotOf(view);
        QApplication::processEvents();
        plot->replot(QCustomPlot::rpImmediateRefresh);
        const QList<QCPAxisRect*> rects = plot->axisRects();
        ASSERT_EQ(rects.size(), static_cast<int>(8 * w.result()->outcomes.size()));
        for (QCPAxisRect* r : rects)
            EXPECT_GE(std::min(r->width(), r->height()), 96) << size.width() << "x" << size.height() << ": a map of " << r->width() << " x " << r->height();
        for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
            if (auto* t = qobject_cast<QCPTextElement*>(e)) {
                EXPECT_TRUE(elidedTitleText(t).isEmpty() && !t->text().contains(QChar(0x2026))) << size.width() << "x" << size.height() << ": '" << elidedTitleText(t).toStdString() << "' shown as '" << t->text().toStdString() << "' in " << t->outerRect().width() << " px";
            }
        }
    }
}

// A mechanism that fails on every head (MHLA on a 3 x 3 block grid of the 8 x 8 tokens) is a row of grey
// maps that say "failed", labelled "MHLA failed", with the message under the grid; the other rows keep their maps.
TEST_F(HeadsViewTest, FailedMechanismIsALabelledRow)
{
    TestWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("vit_digits.h5"))}));
    QJsonObject s = w.mechanismPanel()->saveState();
    s[QStringLiteral("block_grid")] = QStringLiteral("3x3");
    w.mechanismPanel()->restoreState(s);
    ASSERT_TRUE(test::waitIdle(w));
    ASSERT_TRUE(showHeads(w));
    HeadsView* view = headsView(w);
    const auto page = view->heads();
    ASSERT_TRUE(page);
    std::size_t mhla = page->mechanisms.size();
    for (std::size_t m = 0; m < page->mechanisms.size(); ++m)
        if (page->mechanisms[m] == attention::Mechanism::mhla)
            mhla = m;
    ASSERT_LT(mhla, page->mechanisms.size());
    for (const auto& hm : page->maps)
        ASSERT_FALSE(hm.panels[mhla].error.empty());
    QCustomPlot* plot = test::plotOf(view);
    plot->replot(QCustomPlot::rpImmediateRefresh);
    int failedItems = 0;
    bool rowLabel = false;
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i))) {
            failedItems += t->text() == QStringLiteral("failed");
            rowLabel = rowLabel || t->text() == QStringLiteral("MHLA\nfailed");
        }
    EXPECT_EQ(failedItems, static_cast<int>(page->maps.size()));
    EXPECT_TRUE(rowLabel);
    const QStringList shown = titles(plot);
    EXPECT_GE(shown.filter(QStringLiteral("MHLA failed:")).size(), 1) << shown.join('|').toStdString();
    // The failed maps take the room of the others (not a collapsed thumbnail).
    for (QCPAxisRect* r : plot->axisRects())
        EXPECT_GE(std::min(r->width(), r->height()), 96);
    EXPECT_EQ(test::colourMaps(plot).size(), static_cast<int>(page->maps.size() * (page->mechanisms.size() - 1)));
}

// Issue 35, done when: opening data/trained_lm_mhla.h5 shows, without a click, linear attention's past-block rank
// (at most d = 16) beside MHLA's in the Heads cells.
TEST_F(HeadsViewTest, TrainedLmShowsTheCollapseInTheCells)
{
    TestWindow w;
    w.resize(1600, 1000);
    w.show();
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("trained_lm_mhla.h5"))}));
    ASSERT_TRUE(showHeads(w));
    const auto page = headsView(w)->heads();
    ASSERT_TRUE(page);
    const QStringList shown = titles(test::plotOf(headsView(w)));
    for (std::size_t m = 0; m < page->mechanisms.size(); ++m) {
        if (page->mechanisms[m] != attention::Mechanism::linear && page->mechanisms[m] != attention::Mechanism::mhla)
            continue;
        for (const auto& hm : page->maps) {
            const auto& r = hm.panels[m].result;
            ASSERT_TRUE(r.past_block && r.past_block->spectrum);
            if (page->mechanisms[m] == attention::Mechanism::linear) {
                EXPECT_LE(r.past_block->spectrum->rank, 16);
            }
            const QString cell = QStringLiteral("past rank %1 H/ln n %2").arg(metricsViewText(r, "past_block_rank"), metricsViewText(r, "entropy_normalized_mean"));
            EXPECT_GE(shown.count(cell), 1) << cell.toStdString() << " in " << shown.join('|').toStdString();
        }
    }
}
