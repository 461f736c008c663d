// One state per open file, and results that say what they measured (docs/gui.md "Files, options and results"):
// options, head and layer stay with their file; closing files clears every dock and view that described them;
// a file the app cannot use says so in the views; curve sets and the overview carry their file, layer, heads
// and options and are marked when the current inputs differ; an overview click acts on the overview's own
// file; the sweep dialog refuses what the run would refuse (a learned mixing matrix of the wrong size); runs
// can be removed; switching Vary switches the proposal.
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QTemporaryDir>
#include <QTest>

#include <cstdlib>

#include <gtest/gtest.h>

#include "curves.h"
#include "data_browser.h"
#include "mechanism_panel.h"
#include "plot_util.h"
#include "selection_panel.h"
#include "sweep_dialog.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;

namespace {

QString data(const char* name) { return QString::fromStdString(test::dataPath(name)); }

// Sets one option of the Mechanisms dock as a user would (the dock's saved state, key as in sessions).
void setOption(MainWindow& w, const char* key, const QJsonValue& value)
{
    QJsonObject s = w.mechanismPanel()->saveState();
    s[QString::fromLatin1(key)] = value;
    w.mechanismPanel()->restoreState(s);
}

attention::FeatureMapKind featureMap(const MainWindow& w) { return w.mechanismPanel()->options().feature_map.kind; }

QString queriesFile(const MainWindow& w)
{
    const auto q = w.dataBrowser()->assigned(TensorRole::queries);
    return q ? q->file : QString();
}

// Every text a dock shows (labels), joined: what the dock says about a file.
QString dockText(QWidget* dock)
{
    QStringList texts;
    for (const QLabel* l : dock->findChildren<QLabel*>())
        if (!l->isHidden())
            texts << l->text();
    return texts.join(QLatin1Char('\n'));
}

// The texts of a sweep view's plot (titles, details and "not current" lines).
QString plotText(SweepView* view)
{
    QStringList texts;
    QCustomPlot* plot = view->findChild<QCustomPlot*>();
    for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
        if (auto* t = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i))) {
            const QString whole = elidedTitleText(t);   // a title shortened to its width on this small window
            texts << (whole.isEmpty() ? t->text() : whole);
        }
    return texts.join(QLatin1Char('\n'));
}

QStringList runItems(SweepView* view)
{
    QStringList items;
    auto* list = view->findChild<QListWidget*>(QStringLiteral("runs"));
    for (int i = 0; list && i < list->count(); ++i)
        items << list->item(i)->text();
    return items;
}

// Every result view holds nothing and says why (`why` in its notice).
void expectViewsCleared(const MainWindow& w, const QString& why)
{
    EXPECT_FALSE(w.result());
    for (ResultView* v : w.views()) {
        EXPECT_EQ(v->freshness(), ResultView::Freshness::notComputed) << v->viewName().toStdString();
        EXPECT_TRUE(v->noticeText().contains(why)) << v->viewName().toStdString() << ": " << v->noticeText().toStdString();
    }
}

class WindowProvenance : public test::MainWindowTest {};

}  // namespace

// φ = elu1 and head 2 on vit_digits do not reach char_llama_gqa, and come back with vit_digits.
TEST_F(WindowProvenance, FeatureMapAndHeadStayWithTheirFile)
{
    test::TestWindow w;
    const QString vit = data("vit_digits.h5"), gqa = data("char_llama_gqa.h5");
    ASSERT_TRUE(w.openAndWait({vit}));
    setOption(w, "feature_map", QStringLiteral("elu1"));
    setOption(w, "gates", QStringLiteral("gates.h5:/g"));   // typed for gated (not ticked): kept with the file
    w.selectionPanel()->setIndex(QLatin1Char('h'), 2);
    ASSERT_TRUE(test::waitIdle(w));
    ASSERT_EQ(featureMap(w), attention::FeatureMapKind::elu1);
    ASSERT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 2);

    ASSERT_TRUE(w.openAndWait({gqa}));
    EXPECT_EQ(queriesFile(w), gqa);
    EXPECT_EQ(featureMap(w), attention::FeatureMapKind::relu);
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 0);
    EXPECT_EQ(w.mechanismPanel()->saveState().value(QStringLiteral("gates")).toString(), QString());
    EXPECT_TRUE(w.mechanismPanel()->options().causal);   // its own attributes
    ASSERT_TRUE(w.result());
    for (const auto& o : w.result()->outcomes) {
        if (o.result.params.contains("feature_map")) {
            EXPECT_EQ(o.result.params["feature_map"], "relu") << attention::to_string(o.result.mechanism);
        }
    }

    // Back to vit_digits (opening it again shows it): its feature map, head and layer as they were left.
    w.selectionPanel()->setIndex(QLatin1Char('h'), 1);   // gqa's own choice, kept for gqa
    ASSERT_TRUE(w.openAndWait({vit}));
    EXPECT_EQ(queriesFile(w), vit);
    EXPECT_EQ(featureMap(w), attention::FeatureMapKind::elu1);
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 2);
    EXPECT_EQ(w.mechanismPanel()->saveState().value(QStringLiteral("gates")).toString(), QStringLiteral("gates.h5:/g"));
    EXPECT_FALSE(w.mechanismPanel()->options().causal);
    ASSERT_TRUE(w.openAndWait({gqa}));
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 1);
    EXPECT_EQ(featureMap(w), attention::FeatureMapKind::relu);
}

// Ctrl+W on the file shown and Close All: no view, dock or panel keeps describing the closed file.
TEST_F(WindowProvenance, ClosingFilesClearsEveryViewAndDock)
{
    test::TestWindow w;
    const QString lm = data("char_lm_licenses.h5"), vit = data("vit_digits.h5");
    ASSERT_TRUE(w.openAndWait({lm, vit}));
    ASSERT_EQ(queriesFile(w), vit);
    ASSERT_TRUE(dockText(w.mechanismPanel()).contains(QStringLiteral("attributes"))) << dockText(w.mechanismPanel()).toStdString();
    ASSERT_FALSE(w.selectionPanel()->tokenGrid().empty());

    ASSERT_TRUE(w.dataBrowser()->closeFile(vit));
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_FALSE(w.dataBrowser()->assigned(TensorRole::queries));
    expectViewsCleared(w, QStringLiteral("not assigned"));
    EXPECT_TRUE(w.selectionPanel()->tokenGrid().empty());
    EXPECT_FALSE(dockText(w.mechanismPanel()).contains(QStringLiteral("attributes"))) << dockText(w.mechanismPanel()).toStdString();
    EXPECT_FALSE(dockText(w.selectionPanel()).contains(QStringLiteral("grid 8"))) << dockText(w.selectionPanel()).toStdString();

    // The other file is shown again with its own options (causal from its attributes).
    ASSERT_TRUE(w.openAndWait({lm}));
    EXPECT_TRUE(w.mechanismPanel()->options().causal);
    ASSERT_TRUE(w.result());

    w.dataBrowser()->closeAll();
    ASSERT_TRUE(test::waitIdle(w));
    expectViewsCleared(w, QStringLiteral("no data open"));
    EXPECT_FALSE(w.mechanismPanel()->options().causal);
    EXPECT_FALSE(dockText(w.mechanismPanel()).contains(QStringLiteral("attributes"))) << dockText(w.mechanismPanel()).toStdString();
    EXPECT_EQ(w.selectionPanel()->tokens(), -1);
}

// A file with one tensor is shown as what it is: the views say so instead of keeping the previous file.
TEST_F(WindowProvenance, OneTensorFileSaysSoInTheViews)
{
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString one = dir.filePath(QStringLiteral("activations.npy"));
    ASSERT_TRUE(QFile::copy(test::windowFixture("q.npy"), one));
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({data("vit_digits.h5")}));
    ASSERT_TRUE(w.result());
    ASSERT_TRUE(w.openAndWait({one}));
    EXPECT_FALSE(w.dataBrowser()->assigned(TensorRole::queries));
    expectViewsCleared(w, QStringLiteral("activations.npy"));
    for (ResultView* v : w.views())
        EXPECT_TRUE(v->noticeText().contains(QStringLiteral("one tensor"))) << v->noticeText().toStdString();
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("one tensor"))) << w.messageText().toStdString();
}

// The overview of char_lm_licenses.h5 while vit_digits.h5 is shown: marked, and a click on layer 2 head 3
// shows the LM's layer 2 head 3 (the window switches files); with the LM closed the click is refused.
TEST_F(WindowProvenance, OverviewClickActsOnTheOverviewsFile)
{
    test::TestWindow w;
    const QString lm = data("char_lm_licenses.h5"), vit = data("vit_digits.h5");
    ASSERT_TRUE(w.openAndWait({lm}));
    w.runOverview();
    ASSERT_TRUE(test::waitSweeps(w, 600000));
    ASSERT_TRUE(w.overviewView());
    EXPECT_TRUE(plotText(w.overviewView()).contains(QStringLiteral("char_lm_licenses.h5"))) << plotText(w.overviewView()).toStdString();
    EXPECT_FALSE(plotText(w.overviewView()).contains(QStringLiteral("Not the current"))) << plotText(w.overviewView()).toStdString();

    ASSERT_TRUE(w.openAndWait({vit}));
    EXPECT_TRUE(plotText(w.overviewView()).contains(QStringLiteral("Not the current"))) << plotText(w.overviewView()).toStdString();
    emit w.overviewView()->cellActivated(2, 3);
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(queriesFile(w), lm);
    EXPECT_EQ(w.selectionPanel()->currentLayer(), 2);
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 3);
    EXPECT_TRUE(w.mechanismPanel()->options().causal);
    ASSERT_TRUE(w.result());
    EXPECT_EQ(w.result()->n, 512);
    EXPECT_EQ(w.currentView()->viewName(), QStringLiteral("maps"));

    w.dataBrowser()->closeFile(lm);
    ASSERT_TRUE(w.openAndWait({vit}));
    EXPECT_TRUE(plotText(w.overviewView()).contains(QStringLiteral("closed"))) << plotText(w.overviewView()).toStdString();
    emit w.overviewView()->cellActivated(1, 1);
    EXPECT_EQ(queriesFile(w), vit);
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("not open"))) << w.messageText().toStdString();
}

// Two M sweeps of layers 0 and 1 are told apart by name and details; changing φ marks both as not current;
// a run is removed by Delete in the list of runs.
TEST_F(WindowProvenance, CurveSetsCarryTheirInputsAndCanBeRemoved)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({data("char_lm_licenses.h5")}));
    w.selectionPanel()->setIndex(QLatin1Char('h'), 1);
    ASSERT_TRUE(test::waitIdle(w));
    SweepParams p;
    p.vary = QLatin1Char('m');
    p.values = QStringLiteral("1,2");
    p.mechanisms = {QStringLiteral("mhla")};
    w.runSweep(p);
    ASSERT_TRUE(test::waitSweeps(w, 600000)) << w.lastSweepError().toStdString();
    ASSERT_TRUE(w.stepLayer(1));
    ASSERT_TRUE(test::waitIdle(w));
    w.runSweep(p);
    ASSERT_TRUE(test::waitSweeps(w, 600000)) << w.lastSweepError().toStdString();
    SweepView* view = w.curvesView();
    ASSERT_TRUE(view);
    QStringList items = runItems(view);
    ASSERT_EQ(items.size(), 2) << items.join(QStringLiteral(" | ")).toStdString();
    EXPECT_TRUE(items[0].contains(QStringLiteral("l=0 h=1"))) << items[0].toStdString();
    EXPECT_TRUE(items[1].contains(QStringLiteral("l=1 h=1"))) << items[1].toStdString();
    EXPECT_TRUE(items[0].contains(QStringLiteral("not current"))) << items[0].toStdString();   // layer 1 is shown
    EXPECT_FALSE(items[1].contains(QStringLiteral("not current"))) << items[1].toStdString();
    const QString details = plotText(view);
    EXPECT_TRUE(details.contains(QStringLiteral("feature map relu"))) << details.toStdString();
    EXPECT_TRUE(details.contains(QStringLiteral("causal on"))) << details.toStdString();

    setOption(w, "feature_map", QStringLiteral("elu1"));
    items = runItems(view);
    EXPECT_TRUE(items[1].contains(QStringLiteral("not current"))) << items[1].toStdString();
    EXPECT_TRUE(plotText(view).contains(QStringLiteral("feature map relu (now elu1)"))) << plotText(view).toStdString();

    auto* list = view->findChild<QListWidget*>(QStringLiteral("runs"));
    list->setCurrentRow(0);
    QTest::keyClick(list, Qt::Key_Delete);
    items = runItems(view);
    ASSERT_EQ(items.size(), 1);
    EXPECT_TRUE(items[0].contains(QStringLiteral("l=1"))) << items[0].toStdString();
    ASSERT_TRUE(w.sweepResult(QStringLiteral("curves")));
    // The session keeps the remaining run, its data relative to the session like every path, and gives it back.
    const QString sessionPath = QFileInfo(data("char_lm_licenses.h5")).absoluteDir().filePath(QStringLiteral("s.attnscope"));
    const QJsonObject state = w.sessionState(sessionPath);
    const QJsonArray stored = state.value(QStringLiteral("sweeps")).toObject().value(QStringLiteral("curves")).toArray();
    ASSERT_EQ(stored.size(), 1);
    const QString q = stored[0].toObject()["result"].toObject()["spec"].toObject()["inputs"].toArray()[0].toObject()["q"].toString();
    EXPECT_EQ(q, QStringLiteral("char_lm_licenses.h5:/layers/1/q"));
    {
        test::TestWindow again;
        ASSERT_TRUE(again.applySession(state, sessionPath));
        ASSERT_TRUE(test::waitIdle(again));
        const auto run = again.sweepResult(QStringLiteral("curves"));
        ASSERT_TRUE(run);
        const QString file = QString::fromStdString(run->spec.inputs.front().q_ref.file);
        EXPECT_TRUE(QFileInfo(file).isAbsolute() && QFileInfo::exists(file)) << file.toStdString();
        EXPECT_EQ(runItems(again.curvesView()), runItems(view));
    }
    // Closing every file marks the remaining run.
    w.dataBrowser()->closeAll();
    EXPECT_TRUE(runItems(view).front().contains(QStringLiteral("not current")));
    EXPECT_TRUE(plotText(view).contains(QStringLiteral("closed"))) << plotText(view).toStdString();
}

// A learned 4 x 4 mixing matrix on grid data (vit_digits.h5's 8 x 8 grid in 2 x 2 blocks): the dialog refuses
// block counts it does not fit (the core's
// check of every point), accepts the one it fits; switching Vary puts in the other kind's proposal.
TEST_F(WindowProvenance, SweepDialogChecksLearnedMixingAndSwitchesProposals)
{
    QTemporaryDir dir;
    ASSERT_TRUE(dir.isValid());
    const QString mc = dir.filePath(QStringLiteral("mc4.npy"));
    ASSERT_EQ(std::system(QStringLiteral("/usr/bin/python3 -c \"import numpy as np; np.save('%1', np.full((4, 4), 0.25))\"")
                              .arg(mc)
                              .toLocal8Bit()
                              .constData()),
              0);
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({data("vit_digits.h5")}));
    setOption(w, "block_grid", QStringLiteral("2x2"));   // 2 x 2 blocks of 4 x 4 tokens: M = 4
    setOption(w, "mixing", QStringLiteral("file"));
    setOption(w, "mixing_file", mc);
    ASSERT_TRUE(test::waitIdle(w));
    ASSERT_TRUE(w.result()) << w.lastError().toStdString();
    ASSERT_TRUE(w.result()->blocks) << w.messageText().toStdString();
    ASSERT_EQ(w.result()->blocks->num_blocks, 4) << w.messageText().toStdString();

    SweepParams p;
    p.vary = QLatin1Char('m');
    p.values = QStringLiteral("1,2");
    SweepDialog dialog(p, w.sweepDataContext(), &w);
    auto* values = dialog.findChild<QLineEdit*>(QStringLiteral("values"));
    ASSERT_NE(values, nullptr);
    values->setText(QStringLiteral("1,2"));
    const QString problem = dialog.validate();
    EXPECT_TRUE(problem.contains(QStringLiteral("mixing matrix"))) << problem.toStdString();
    EXPECT_TRUE(problem.contains(QStringLiteral("M = 1"))) << problem.toStdString();
    EXPECT_FALSE(dialog.canRun());
    values->setText(QStringLiteral("2"));
    EXPECT_TRUE(dialog.validate().isEmpty()) << dialog.problem().toStdString();
    EXPECT_TRUE(dialog.canRun());

    // Vary M -> N: the values become the proposal of N (centred crops of the 8 x 8 grid), and back.
    auto* vary = dialog.findChild<QComboBox*>(QStringLiteral("vary"));
    ASSERT_NE(vary, nullptr);
    vary->setCurrentIndex(0);
    const QString nValues = values->text();
    EXPECT_NE(nValues, QStringLiteral("2"));
    EXPECT_TRUE(nValues.contains(QStringLiteral("64"))) << nValues.toStdString();
    vary->setCurrentIndex(1);
    EXPECT_NE(values->text(), nValues);
    EXPECT_FALSE(values->text().contains(QStringLiteral("64"))) << values->text().toStdString();
}
