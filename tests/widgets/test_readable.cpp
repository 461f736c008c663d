// Readable by default (docs/gui.md): the maps' arrangement follows the view's size, the model overview shows
// effective rank on a colour scale from 0 and says so, map titles pair rank with normalised entropy, a causal
// entropy-per-query plot draws ln(t+1) as its reference, curve legends keep underscores, Ctrl+1 ... reaches
// every tab (Curves and Overview included), the start page's samples have readable names, the Metrics view's
// rows are of even heights and a session keeps the state of every open file.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHeaderView>
#include <QPushButton>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "analysis/metric_table.h"
#include "analysis/sweep.h"
#include "analysis/synth.h"
#include "curves.h"
#include "data_browser.h"
#include "io/writers.h"
#include "mechanism_panel.h"
#include "plot_style.h"
#include "plot_util.h"
#include "selection_panel.h"
#include "sweep_dialog.h"
#include "support/test_support.h"
#include "views.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using attention::Mechanism;
using Eigen::Index;
using test::colourMaps;
using test::plotOf;

namespace {

using Result = test::ExploreResultPtr;
using Sweep = std::shared_ptr<const analysis::SweepResult>;

QString data(const char* name) { return QString::fromStdString(test::dataPath(name)); }

// The digit ViT's layer 2, head 1 as its attributes say (CLS dropped, 8 x 8 grid, 4 x 4 blocks): N = 64.
const Result& vitDigits()
{
    static Result r = [] {
        const std::string path = test::dataPath("vit_digits.h5");
        return test::exploreFile(path, [&](analysis::ExploreRequest& q) {
            q.source.q_ref = io::parse_tensor_ref(path + ":/layers/2/q");
            q.source.k_ref = io::parse_tensor_ref(path + ":/layers/2/k");
            q.source.selection.at['h'] = 1;
            q.source.selection.prefix_tokens = 1;
            q.options.blocks.kind = attention::BlockSpec::Kind::grid;
            q.options.blocks.grid = {8, 8};
            q.options.blocks.block_grid = {4, 4};
            q.token_grid = {8, 8};
        });
    }();
    return r;
}

// Head 0 of a causal 1-D file (N = 96, attnscope synth local1d).
const Result& causalLm()
{
    static Result r = test::exploreFile(test::threeHeadFile().toStdString(), [](analysis::ExploreRequest& q) {
        q.options.causal = true;
        q.options.blocks.blocks = 4;
    });
    return r;
}

Sweep runSweep(analysis::SweepSpec spec)
{
    auto r = std::make_shared<analysis::SweepResult>();
    r->records = analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{});
    r->spec = std::move(spec);
    return r;
}

// The overview of a 2-layer, 3-head lhnd file of Gaussian activations (N = 36, d = 8).
const Sweep& smallOverview()
{
    static Sweep s = [] {
        const std::string dir = test::fresh_work_dir("readable_overview");
        std::vector<double> q, k;
        const int layers = 2, heads = 3;
        const Index n = 36, d = 8;
        for (int l = 0; l < layers; ++l)
            for (int h = 0; h < heads; ++h) {
                analysis::SynthOptions o;
                o.n = n;
                o.d = d;
                o.kind = "gaussian";
                o.seed = static_cast<std::uint64_t>(10 * l + h);
                const auto syn = analysis::synthesize(o, 1ULL << 31);
                q.insert(q.end(), syn.q.begin(), syn.q.end());
                k.insert(k.end(), syn.k.begin(), syn.k.end());
            }
        const std::vector<std::int64_t> shape{layers, heads, n, d};
        io::write_hdf5(dir + "/model.h5", {io::DatasetOut{"/q", shape, q}, io::DatasetOut{"/k", shape, k}});
        analysis::TensorSource src;
        src.q_ref = io::parse_tensor_ref(dir + "/model.h5:/q");
        src.k_ref = io::parse_tensor_ref(dir + "/model.h5:/k");
        src.selection.layout = "lhnd";
        return runSweep(analysis::overview_spec(src, {}, {}));
    }();
    return s;
}

// An N sweep of synthetic data (two seeds), the runs of the curves test below.
const Sweep& smallN()
{
    static Sweep s = [] {
        analysis::SweepSpec spec;
        spec.synth = analysis::SynthSource{"local1d", 16, 2, 0};
        spec.vary = 'n';
        spec.values = {32, 64};
        return runSweep(spec);
    }();
    return s;
}

// The text of every text element of the plot's layout (titles, details, notes), one entry each, joined by
// the unit separator U+001F (a title may hold newlines).
QString layoutTexts(QCustomPlot* plot)
{
    QStringList texts;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* t = qobject_cast<QCPTextElement*>(e)) {
            const QString whole = elidedTitleText(t);
            texts << (whole.isEmpty() ? t->text() : whole);
        }
    return texts.join(QLatin1Char('\x1f'));
}

class ReadableWindow : public test::MainWindowTest {};

}  // namespace

// The overview's default metric is effective rank, its colour scale starts at 0 (not at the smallest value,
// which a min-max scale would turn into the bottom colour) and the plot says so.
TEST(Readable, OverviewShowsEffectiveRankFromZero)
{
    const Sweep& s = smallOverview();
    std::unique_ptr<SweepView> view(createOverviewView());
    EXPECT_EQ(view->saveState()["metric"].toString(), QStringLiteral("effective_rank"));
    view->setSweep(s);
    QCustomPlot* plot = test::showOnScreen(view.get(), {1100, 500});
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 3);
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& r : s->records) {
        ASSERT_TRUE(r.result.spectrum);
        lo = std::min(lo, r.result.spectrum->effective_rank);
        hi = std::max(hi, r.result.spectrum->effective_rank);
    }
    ASSERT_GT(lo, 1.0);   // the data do not reach 0: the floor is the scale's, not the data's
    const QCPRange range = maps.front()->colorScale()->dataRange();
    EXPECT_EQ(range.lower, 0.0);
    EXPECT_DOUBLE_EQ(range.upper, hi);
    // Cell (head h, layer l) of the softmax panel is that record's effective rank.
    for (const auto& r : s->records)
        if (r.mechanism == "softmax") {
            EXPECT_DOUBLE_EQ(maps[0]->data()->cell(static_cast<int>(*r.head), static_cast<int>(*r.layer)), r.result.spectrum->effective_rank);
        }
    const QString texts = layoutTexts(plot);
    EXPECT_TRUE(texts.contains(QStringLiteral("Colours from 0 to %1").arg(fmtNum(hi, 4)))) << texts.toStdString();
    EXPECT_TRUE(texts.contains(QStringLiteral("Effective rank per layer and head"))) << texts.toStdString();

    // A metric that can be negative keeps its smallest value as the floor.
    view->setMetric(QStringLiteral("excess_effective_rank"));
    double exLo = INFINITY;
    for (const auto& r : s->records)
        if (const auto* e = analysis::find_metric("excess_effective_rank"); e && e->read(r.result))
            exLo = std::min(exLo, *e->read(r.result));
    ASSERT_TRUE(std::isfinite(exLo));
    if (exLo < 0) {
        EXPECT_DOUBLE_EQ(colourMaps(plot).front()->colorScale()->dataRange().lower, exLo);
        EXPECT_TRUE(layoutTexts(plot).contains(QStringLiteral("Colours from the smallest value")));
    } else {
        EXPECT_EQ(colourMaps(plot).front()->colorScale()->dataRange().lower, 0.0);
    }
}

// Each matrix's title gives its rank and its normalised entropy, the pair of the MHLA paper's Figure 3.
TEST(Readable, MapTitlesPairRankAndNormalisedEntropy)
{
    const Result& r = vitDigits();
    std::unique_ptr<ResultView> view(createMapsView());
    view->restoreState(QJsonObject{{"difference", "off"}, {"difference_panel", "none"}});
    QCustomPlot* plot = test::showOnScreen(view.get(), {1500, 600}, [&] { view->setResult(r); });
    auto check = [&] {
        const QStringList titles = layoutTexts(plot).split(QLatin1Char(0x1f));
        for (const auto& o : r->outcomes) {
            ASSERT_TRUE(o.result.spectrum && o.result.entropy) << attention::to_string(o.result.mechanism);
            const QString rank = QStringLiteral("rank %1 / %2").arg(o.result.spectrum->rank).arg(r->n);
            const QString entropy = QStringLiteral("entropy %1").arg(o.result.entropy->normalized_mean, 0, 'f', 2);
            // One title (whole, or broken into lines: the mechanism, then its numbers) holds both.
            const QString name = mechanismLabel(o.result.mechanism);
            bool found = false;
            for (const QString& t : layoutTexts(plot).split(QLatin1Char('\x1f')))
                found = found || (t.startsWith(name) && t.contains(rank) && t.contains(entropy));
            EXPECT_TRUE(found) << (name + ": " + rank + ", " + entropy).toStdString() << " in\n" << titles.join("|").toStdString();
        }
    };
    check();
    // Narrow panels break the title into lines, and no line is wider than its panel.
    view->resize(700, 700);
    plot->replot();
    check();
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
        auto* t = qobject_cast<QCPTextElement*>(e);
        if (!t || t->text().isEmpty() || t->layout() == plot->plotLayout())
            continue;
        for (const QString& line : t->text().split(QLatin1Char('\n'))) {
            EXPECT_LE(QFontMetrics(t->font()).horizontalAdvance(line), t->outerRect().width() + 1) << line.toStdString();
        }
    }
}

// A causal file: the entropy per query is drawn against ln(t+1), the largest entropy of a row that sees
// t+1 keys (uniform over them), named in a legend; no flat ln N line.
TEST(Readable, CausalEntropyPerQueryAgainstLnTPlusOne)
{
    const Result& r = causalLm();
    std::unique_ptr<ResultView> view(createEntropyView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {1200, 600}, [&] { view->setResult(r); });
    QCPGraph* ref = test::graphNamed(plot, QStringLiteral("ln(t+1)"));
    ASSERT_NE(ref, nullptr);
    ASSERT_EQ(ref->data()->size(), static_cast<int>(r->n));
    for (int t = 0; t < ref->data()->size(); ++t) {
        EXPECT_DOUBLE_EQ(ref->data()->at(t)->key, t);
        EXPECT_NEAR(ref->data()->at(t)->value, std::log(t + 1.0), 1e-12) << t;
    }
    // Every row's entropy lies under its reference (ln n_t is the largest entropy of n_t weights).
    for (const auto& o : r->outcomes)
        for (std::size_t t = 0; t < o.result.entropy->rows.size(); ++t)
            EXPECT_LE(o.result.entropy->rows[t], std::log(t + 1.0) + 1e-9) << attention::to_string(o.result.mechanism) << " t=" << t;
    bool inLegend = false;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* legend = qobject_cast<QCPLegend*>(e))
            inLegend = inLegend || legend->hasItemWithPlottable(ref);
    EXPECT_TRUE(inLegend);
    // Labels read H(t), not H_t.
    for (QCPAxisRect* rect : plot->axisRects())
        for (QCPAxis* a : rect->axes())
            EXPECT_FALSE(a->label().contains(QStringLiteral("H_t"))) << a->label().toStdString();
    // Non-causal data keep the flat ln N.
    view->setResult(vitDigits());
    plot->replot();
    EXPECT_EQ(test::graphNamed(plot, QStringLiteral("ln(t+1)")), nullptr);
}

// Legend entries keep their underscores: each item's rect holds the whole line of its font, descent included
// (QCustomPlot clips an item to its rect).
TEST(Readable, CurveLegendsKeepUnderscores)
{
    std::unique_ptr<SweepView> view(createCurvesView());
    const QString a = QStringLiteral("N sweep \u00b7 char_lm_licenses.h5 h=0"), b = QStringLiteral("N sweep \u00b7 my_other_file.h5 h=1");
    view->setCurveSets({CurveSet(smallN(), a), CurveSet(smallN(), b)});
    QCustomPlot* plot = test::showOnScreen(view.get(), {1000, 600});
    plot->replot();
    QStringList names;
    int items = 0;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* legend = qobject_cast<QCPLegend*>(e))
            for (int i = 0; i < legend->itemCount(); ++i) {
                auto* item = qobject_cast<QCPPlottableLegendItem*>(legend->item(i));
                if (!item)
                    continue;
                ++items;
                names << item->plottable()->name();
                const QFontMetrics fm(item->font());
                EXPECT_GE(item->outerRect().bottom(), item->rect().top() + fm.ascent() + fm.descent()) << item->plottable()->name().toStdString();
            }
    EXPECT_GE(items, 4);
    EXPECT_TRUE(names.join('\n').contains(QStringLiteral("char_lm_licenses.h5"))) << names.join('\n').toStdString();
    EXPECT_TRUE(names.join('\n').contains(QStringLiteral("my_other_file.h5"))) << names.join('\n').toStdString();
}

// Ctrl+1 ... reaches every tab, the Curves and Overview tabs included once they open.
TEST_F(ReadableWindow, ViewShortcutsFollowTheTabs)
{
    test::TestWindow w;
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    auto expectOnePerTab = [&] {
        const QList<QAction*> actions = w.viewActions();
        ASSERT_EQ(actions.size(), tabs->count());
        for (int i = 0; i < actions.size(); ++i) {
            EXPECT_EQ(actions[i]->shortcut(), QKeySequence(QStringLiteral("Ctrl+%1").arg((i + 1) % 10)));
            // The menu names the view in full, the tab in one word (its tool tip in full).
            const QString title = tabs->tabToolTip(i).isEmpty() ? tabs->tabText(i) : tabs->tabToolTip(i);
            EXPECT_EQ(actions[i]->text(), title);
        }
    };
    expectOnePerTab();
    EXPECT_EQ(w.viewActions().size(), w.views().size());
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    w.runOverview();
    ASSERT_TRUE(test::waitSweeps(w));
    ASSERT_EQ(tabs->count(), w.views().size() + 1);
    expectOnePerTab();
    // The last shortcut shows the Overview tab, the first the maps.
    w.viewActions().back()->trigger();
    EXPECT_EQ(tabs->tabText(tabs->currentIndex()), QStringLiteral("Overview"));
    w.viewActions().front()->trigger();
    EXPECT_EQ(tabs->currentIndex(), 0);
}

// The start page names the samples in words, each button whole, in a 1280 x 720 window.
TEST_F(ReadableWindow, SampleButtonsHaveReadableNames)
{
    qputenv("ATTNSCOPE_DATA", QFileInfo(data("vit_local2d.h5")).absolutePath().toUtf8());
    test::TestWindow w;
    w.resize(1280, 720);
    w.show();
    QApplication::processEvents();
    QStringList texts;
    for (QPushButton* b : w.findChildren<QPushButton*>(QStringLiteral("sample"))) {
        texts << b->text();
        EXPECT_FALSE(b->text().contains(QLatin1Char('_'))) << b->text().toStdString();
        EXPECT_FALSE(b->text().endsWith(QStringLiteral(".h5"))) << b->text().toStdString();
        EXPECT_GE(b->width(), b->sizeHint().width()) << b->text().toStdString() << ": cut off";
        EXPECT_TRUE(b->toolTip().endsWith(QStringLiteral(".h5")));
    }
    EXPECT_GE(texts.size(), 5);
    EXPECT_TRUE(texts.contains(QStringLiteral("Char LM licenses"))) << texts.join(", ").toStdString();
    EXPECT_TRUE(texts.contains(QStringLiteral("Trained ViT MHLA"))) << texts.join(", ").toStdString();
    qunsetenv("ATTNSCOPE_DATA");
}

// A session keeps the state of every open file, not only the one shown: φ = elu1 and head 2 of a file left
// for another come back with it after the session is opened in a new window.
TEST_F(ReadableWindow, SessionsKeepEveryOpenFilesState)
{
    // Clean paths, as a session resolves them (a file is one entry of the Data dock by its path).
    const QString vit = QFileInfo(data("vit_digits.h5")).canonicalFilePath(), gqa = QFileInfo(data("char_llama_gqa.h5")).canonicalFilePath();
    const QString path = QDir(QString::fromStdString(test::fresh_work_dir("readable_file_states"))).filePath(QStringLiteral("s.attnscope"));
    {
        test::TestWindow w;
        ASSERT_TRUE(w.openAndWait({vit}));
        QJsonObject mech = w.mechanismPanel()->saveState();
        mech[QStringLiteral("feature_map")] = QStringLiteral("elu1");
        w.mechanismPanel()->restoreState(mech);
        w.selectionPanel()->setIndex(QLatin1Char('h'), 2);
        ASSERT_TRUE(test::waitIdle(w));
        ASSERT_TRUE(w.openAndWait({gqa}));
        ASSERT_EQ(w.mechanismPanel()->options().feature_map.kind, attention::FeatureMapKind::relu);
        QString error;
        ASSERT_TRUE(w.saveSession(path, &error)) << error.toStdString();
    }
    test::TestWindow w;
    QString error;
    ASSERT_TRUE(w.loadSession(path, &error)) << error.toStdString();
    ASSERT_TRUE(test::waitIdle(w));
    ASSERT_TRUE(w.dataBrowser()->assigned(TensorRole::queries));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, gqa);
    EXPECT_EQ(w.mechanismPanel()->options().feature_map.kind, attention::FeatureMapKind::relu);
    ASSERT_TRUE(w.openAndWait({vit}));   // back to vit_digits: as it was left
    ASSERT_TRUE(w.dataBrowser()->assigned(TensorRole::queries));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, vit);
    EXPECT_EQ(w.mechanismPanel()->options().feature_map.kind, attention::FeatureMapKind::elu1);
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 2);
    ASSERT_TRUE(w.result());
    for (const auto& o : w.result()->outcomes)
        if (o.result.params.contains("feature_map")) {
            EXPECT_EQ(o.result.params["feature_map"], "elu1") << attention::to_string(o.result.mechanism);
        }
}

// The Metrics view's rows of one value are all of one height; the rows of several lines (warnings) are not cut.
TEST(Readable, MetricsRowsHaveEvenHeights)
{
    std::unique_ptr<ResultView> view(createMetricsView());
    view->resize(700, 900);
    view->setResult(causalLm());
    view->show();
    QApplication::processEvents();
    auto* table = view->findChild<QTableWidget*>();
    ASSERT_NE(table, nullptr);
    const int metricRows = static_cast<int>(analysis::metrics_view_entries().size());
    ASSERT_GT(table->rowCount(), metricRows);
    for (int r = 1; r < metricRows; ++r)
        EXPECT_EQ(table->rowHeight(r), table->rowHeight(0)) << table->verticalHeaderItem(r)->text().toStdString();
    EXPECT_GE(table->rowHeight(0), table->fontMetrics().height() + 4);
    for (int r = metricRows; r < table->rowCount(); ++r)
        for (int c = 0; c < table->columnCount(); ++c) {
            const int lines = static_cast<int>(table->item(r, c)->text().count(QLatin1Char('\n'))) + 1;
            EXPECT_GE(table->rowHeight(r), lines * table->fontMetrics().height()) << table->verticalHeaderItem(r)->text().toStdString();
        }
}

// The documentation's sessions that hold sweeps, made by the window as a user makes them, and the two
// screenshots of states no session can open into; only when ATTNSCOPE_DOCS_SESSIONS names the docs folder
// (tools/make_screenshots.sh, which then renders every session of docs/ with --screenshot):
//   screenshot-curves.attnscope             vit_local2d.h5, head 0, query 136, relative rank against N (centred crops, all heads)
//   screenshot-overview.attnscope           the overview of char_lm_licenses.h5 (every layer and head)
//   screenshot-overview-jump.attnscope      ... after a click on layer 2, head 3: its maps
//   screenshot-overview-not-current.attnscope ... after φ = elu1: the overview marked
//   screenshot-not-computed.png             prefix tokens 600 of 512 (a session with them is refused)
//   screenshot-session-refused.png          a session whose recipe leads out of its folder, refused
TEST_F(ReadableWindow, DocsSessions)
{
    const QByteArray docsDir = qgetenv("ATTNSCOPE_DOCS_SESSIONS");
    if (docsDir.isEmpty())
        GTEST_SKIP() << "set ATTNSCOPE_DOCS_SESSIONS=<docs folder> to write the docs' sweep sessions";
    const QDir docs(QString::fromUtf8(docsDir));
    auto save = [&](widgets::MainWindow& w, const char* name) {
        QString error;
        EXPECT_TRUE(w.saveSession(docs.filePath(QString::fromLatin1(name)), &error)) << name << ": " << error.toStdString();
    };
    auto grab = [&](QWidget& w, const char* name) {
        w.resize(1600, 1000);
        for (int i = 0; i < 5; ++i)
            QApplication::processEvents();
        EXPECT_TRUE(w.grab().save(docs.filePath(QString::fromLatin1(name))));
    };
    {
        test::TestWindow vit;
        vit.resize(1600, 1000);
        vit.show();
        vit.fitDocks();
        ASSERT_TRUE(vit.openAndWait({data("vit_local2d.h5")}));
        vit.setQuery(136);
        widgets::SweepParams p;
        p.values = QStringLiteral("16,64,144,256");
        p.subsample = QStringLiteral("crop");
        p.allHeads = true;
        p.metric = QStringLiteral("relative_rank");
        vit.runSweep(p);
        ASSERT_TRUE(test::waitSweeps(vit));
        ASSERT_TRUE(vit.lastSweepError().isEmpty()) << vit.lastSweepError().toStdString();
        save(vit, "screenshot-curves.attnscope");
    }
    const QString lmFile = data("char_lm_licenses.h5");
    test::TestWindow lm;
    lm.resize(1600, 1000);
    lm.show();
    lm.fitDocks();   // the docks' shares of this size, as --screenshot does
    ASSERT_TRUE(lm.openAndWait({lmFile}));
    lm.runOverview();
    ASSERT_TRUE(test::waitSweeps(lm));
    ASSERT_TRUE(lm.lastSweepError().isEmpty()) << lm.lastSweepError().toStdString();
    save(lm, "screenshot-overview.attnscope");
    lm.jumpTo(2, 3);
    ASSERT_TRUE(test::waitIdle(lm));
    lm.setCurrentView(QStringLiteral("maps"));
    save(lm, "screenshot-overview-jump.attnscope");
    QJsonObject mech = lm.mechanismPanel()->saveState();
    mech[QStringLiteral("feature_map")] = QStringLiteral("elu1");
    lm.mechanismPanel()->restoreState(mech);
    ASSERT_TRUE(test::waitIdle(lm));
    lm.setCurrentView(QStringLiteral("overview"));
    save(lm, "screenshot-overview-not-current.attnscope");

    test::TestWindow bad;
    bad.resize(1600, 1000);
    bad.show();
    bad.fitDocks();   // the docks' shares of this size, as --screenshot does
    ASSERT_TRUE(bad.openAndWait({lmFile}));
    QJsonObject sel = bad.selectionPanel()->saveState();
    sel[QStringLiteral("prefix_tokens")] = 600;
    bad.selectionPanel()->restoreState(sel);
    ASSERT_TRUE(test::waitIdle(bad));
    grab(bad, "screenshot-not-computed.png");

    const QString refused = QDir(QString::fromStdString(test::fresh_work_dir("readable_refused"))).filePath(QStringLiteral("outside.attnscope"));
    QFile f(refused);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(R"({"attnscope_session": 1, "generate": {"../outside.h5": {"kind": "gaussian", "n": 64, "d": 8}},
               "files": ["../outside.h5"]})");
    f.close();
    sel[QStringLiteral("prefix_tokens")] = 0;   // the window shows the maps again, which the refusal keeps
    bad.selectionPanel()->restoreState(sel);
    ASSERT_TRUE(test::waitIdle(bad));
    bad.openFiles({refused});   // as File > Open Session does: the refusal in the message bar
    grab(bad, "screenshot-session-refused.png");
}

// The maps' arrangement follows the view: one row of three panels in a wide view, two rows in a squarish
// one, where only the panels at the bottom of a column label the key axis (the rows above give that height
// to the maps) and only the first column the query axis.
TEST(Readable, MapsArrangementFollowsTheSize)
{
    struct Case {
        QSize size;
        int rows;
    };
    for (const Case& c : {Case{{1500, 520}, 1}, Case{{1000, 800}, 2}, Case{{720, 600}, 2}}) {
        SCOPED_TRACE(testing::Message() << c.size.width() << "x" << c.size.height());
        std::unique_ptr<ResultView> view(createMapsView());
        view->restoreState(QJsonObject{{"difference", "off"}, {"difference_panel", "none"}});
        QCustomPlot* plot = test::showOnScreen(view.get(), c.size, [&] { view->setResult(vitDigits()); });
        QTest::qWait(60);
        plot->replot();
        const auto rects = plot->axisRects();
        ASSERT_EQ(rects.size(), 3);
        std::map<int, int> tops;   // top -> panels in that row
        for (QCPAxisRect* r : rects)
            ++tops[r->top()];
        EXPECT_EQ(static_cast<int>(tops.size()), c.rows);
        const int lastTop = tops.rbegin()->first;
        for (int i = 0; i < rects.size(); ++i) {
            QCPAxis* x = rects[i]->axis(QCPAxis::atBottom);
            // Bottom of its column: nothing under it in the same column.
            bool below = false;
            for (QCPAxisRect* o : rects)
                below = below || (o != rects[i] && o->top() > rects[i]->top() && std::abs(o->left() - rects[i]->left()) < 4);
            EXPECT_EQ(x->tickLabels(), !below) << "panel " << i;
            EXPECT_EQ(x->label().isEmpty(), below) << "panel " << i;
            EXPECT_EQ(rects[i]->axis(QCPAxis::atLeft)->tickLabels(), rects[i]->left() == rects.front()->left()) << "panel " << i;
        }
        if (c.rows == 2) {
            EXPECT_GT(lastTop, rects.front()->top());
        }
    }
}
