// Every view shows exactly the state it was computed from, or says it does not (docs/gui.md): the window is
// driven through a failure, a cancel, Close All, a file switch and one-tensor files, and after each step
// every view is checked against the inputs the docks describe. Also the navigation: opening a file shows
// it, closing one file, the layer control of per-layer datasets, grouped-query pairing in the Selection dock.
#include <QAction>
#include <QCoreApplication>
#include <QFileInfo>
#include <QSignalSpy>
#include <QSpinBox>
#include <QThread>
#include <QTreeWidget>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "analysis/synth.h"
#include "curves.h"
#include "data_browser.h"
#include "io/writers.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"
#include "support/test_support.h"
#include "analysis/depth_curves.h"
#include "analysis/heads.h"
#include "depth_view.h"
#include "heads_view.h"
#include "io/selection.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::waitIdle;

namespace {

QString fixture(const char* name) { return test::windowFixture(name); }

class WindowViewsState : public test::MainWindowTest {};

// The invariant: a view marked current holds the window's result, and that result answers the queries and
// keys the Data dock assigns and the selection the Selection dock shows; otherwise the view says it is out
// of date or not computed, with a reason.
void expectViewsAgree(const MainWindow& w, const char* step)
{
    const auto q = w.dataBrowser()->assigned(TensorRole::queries);
    const auto k = w.dataBrowser()->assigned(TensorRole::keys);
    for (const ResultView* v : w.views()) {
        SCOPED_TRACE(std::string(step) + ", view " + v->viewName().toStdString());
        // The Heads view computes its page after the result, while its tab is shown (docs/gui.md "Every head
        // of a layer"): until then it says why, whatever the others show; current, its page is of the queries
        // and keys assigned.
        if (const auto* heads = qobject_cast<const HeadsView*>(v)) {
            if (v->freshness() != ResultView::Freshness::current) {
                EXPECT_FALSE(v->noticeText().isEmpty());
                continue;
            }
            ASSERT_TRUE(heads->heads() && w.resultIsCurrent() && q && k);
            EXPECT_EQ(heads->heads()->request.base.source.q_ref.text, q->ref().toStdString());
            EXPECT_EQ(heads->heads()->request.base.source.k_ref.text, k->ref().toStdString());
            continue;
        }
        // The Depth view likewise (docs/gui.md "Collapse with depth"); current, its products are of the layers of the
        // file of the queries assigned.
        if (const auto* depth = qobject_cast<const DepthView*>(v)) {
            if (v->freshness() != ResultView::Freshness::current) {
                EXPECT_FALSE(v->noticeText().isEmpty());
                continue;
            }
            ASSERT_TRUE(depth->depth() && w.resultIsCurrent() && q && k);
            EXPECT_EQ(depth->depth()->file, io::parse_tensor_ref(q->ref().toStdString()).file);
            continue;
        }
        if (v->freshness() == ResultView::Freshness::current) {
            ASSERT_TRUE(w.result());
            ASSERT_TRUE(w.resultIsCurrent());
            ASSERT_TRUE(q && k);
            EXPECT_EQ(w.result()->input["q"].get<std::string>(), q->ref().toStdString());
            EXPECT_EQ(w.result()->input["k"].get<std::string>(), k->ref().toStdString());
            for (const auto& [axis, index] : w.selectionPanel()->selection().at) {
                EXPECT_EQ(w.result()->input["at"][std::string(1, axis)], index) << "axis " << axis;
            }
        } else {
            EXPECT_FALSE(v->noticeText().isEmpty());
            EXPECT_FALSE(w.resultIsCurrent());
        }
        if (v->freshness() == ResultView::Freshness::notComputed) {
            EXPECT_FALSE(w.result());
        }
    }
}

std::string writeSynthetic(const std::string& name, Eigen::Index n, Eigen::Index heads)
{
    const std::string dir = test::fresh_work_dir("views_state_" + name);
    analysis::SynthOptions o;
    o.n = n;
    o.d = 16;
    o.heads = heads;
    o.kind = "local1d";
    const std::string path = dir + "/" + name + ".h5";
    test::write_synthetic_h5(path, o, 1ULL << 31);
    return path;
}

}  // namespace

TEST_F(WindowViewsState, FailureClearsEveryView)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    expectViewsAgree(w, "opened");
    ASSERT_TRUE(w.resultIsCurrent());
    // A selection that leaves no token: nothing can be computed for it, so nothing is shown.
    QJsonObject sel = w.selectionPanel()->saveState();
    sel[QStringLiteral("prefix_tokens")] = 17;
    w.selectionPanel()->restoreState(sel);
    ASSERT_TRUE(waitIdle(w));
    expectViewsAgree(w, "failed");
    for (const ResultView* v : w.views()) {
        EXPECT_EQ(v->freshness(), ResultView::Freshness::notComputed) << v->viewName().toStdString();
        EXPECT_TRUE(v->noticeText().startsWith(QStringLiteral("Not computed"))) << v->noticeText().toStdString();
    }
    QString error;
    EXPECT_FALSE(w.exportMetricsCsv(QString::fromStdString(test::fresh_work_dir("views_state_export") + "/m.csv"), &error));
}

TEST_F(WindowViewsState, FileSwitchAndCoreErrorNeverShowTheOldFile)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    w.openFiles({fixture("mismatch.h5")});   // opening a file shows it: its q and k (of different d)
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, fixture("mismatch.h5"));
    for (const ResultView* v : w.views())   // until computed, the nested.h5 pictures are marked
        EXPECT_NE(v->freshness(), ResultView::Freshness::current) << v->viewName().toStdString();
    ASSERT_TRUE(waitIdle(w));
    expectViewsAgree(w, "mismatch computed");
    EXPECT_FALSE(w.result());
    EXPECT_TRUE(w.windowTitle().contains(QStringLiteral("mismatch.h5"))) << w.windowTitle().toStdString();

    // Back to a good file: current again, for that file.
    w.openFiles({QString::fromStdString(test::dataPath("vit_local2d.h5"))});
    ASSERT_TRUE(waitIdle(w));
    expectViewsAgree(w, "vit_local2d computed");
    ASSERT_TRUE(w.resultIsCurrent());
}

TEST_F(WindowViewsState, CloseAllAndOneTensorFiles)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    // A one-tensor file: opening it shows it, so the views say what it is instead of keeping nested.h5 on screen
    // (nested.h5 stays open with its state).
    const std::string dir = test::fresh_work_dir("views_state_one");
    io::write_npy(dir + "/weights.npy", test::gaussian_matrix(5, 5, 3));
    w.openFiles({QString::fromStdString(dir + "/weights.npy")});
    ASSERT_TRUE(waitIdle(w));
    expectViewsAgree(w, "one-tensor file");
    EXPECT_FALSE(w.result());
    for (const ResultView* v : w.views())
        EXPECT_TRUE(v->noticeText().contains(QStringLiteral("weights.npy"))) << v->noticeText().toStdString();
    EXPECT_TRUE(w.dataBrowser()->files().contains(fixture("nested.h5")));

    w.dataBrowser()->closeAll();
    ASSERT_TRUE(waitIdle(w));
    expectViewsAgree(w, "closed all");
    EXPECT_FALSE(w.result());
    for (const ResultView* v : w.views())
        EXPECT_EQ(v->freshness(), ResultView::Freshness::notComputed);

    // Only a one-tensor file open: nothing assigned, nothing shown.
    w.openFiles({QString::fromStdString(dir + "/weights.npy")});
    ASSERT_TRUE(waitIdle(w));
    expectViewsAgree(w, "only a one-tensor file");
    EXPECT_FALSE(w.result());
}

TEST_F(WindowViewsState, CancelMarksTheOldPictureOutOfDate)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    const std::string big = writeSynthetic("big", 2048, 1);
    QSignalSpy finished(&w, &MainWindow::computationFinished);
    w.openFiles({QString::fromStdString(big)});
    w.computeNow();
    QCoreApplication::processEvents();
    w.cancelComputation();
    ASSERT_TRUE(test::waitUntil([&] { return !finished.isEmpty(); }));
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(finished.last().at(1).toString(), QStringLiteral("cancelled"));
    expectViewsAgree(w, "cancelled");
    for (const ResultView* v : w.views()) {
        EXPECT_EQ(v->freshness(), ResultView::Freshness::outOfDate) << v->viewName().toStdString();
        EXPECT_TRUE(v->noticeText().contains(QStringLiteral("cancelled"))) << v->noticeText().toStdString();
    }
    QString error;
    EXPECT_FALSE(w.exportMetricsCsv(QString::fromStdString(test::fresh_work_dir("views_state_cancel") + "/m.csv"), &error));
}

TEST_F(WindowViewsState, CloseOneFileAndLayers)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("vit_local2d.h5")),
                               QString::fromStdString(test::dataPath("char_lm_licenses.h5"))}));
    // The newest file is shown, at its first layer; its layers are offered.
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, QString::fromStdString(test::dataPath("char_lm_licenses.h5")));
    EXPECT_EQ(w.selectionPanel()->currentLayer(), 0);
    ASSERT_TRUE(w.stepLayer(+1));
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->name, QStringLiteral("/layers/1/q"));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::keys)->name, QStringLiteral("/layers/1/k"));
    EXPECT_EQ(w.selectionPanel()->currentLayer(), 1);
    EXPECT_TRUE(w.mechanismPanel()->options().causal);   // the file's causal attribute holds on every layer
    expectViewsAgree(w, "layer 1");
    EXPECT_TRUE(w.windowTitle().contains(QStringLiteral("layer 1"))) << w.windowTitle().toStdString();

    // Closing the shown file leaves the other one open, nothing assigned, nothing shown.
    ASSERT_TRUE(w.dataBrowser()->closeFile(QString::fromStdString(test::dataPath("char_lm_licenses.h5"))));
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->files(), QStringList{QString::fromStdString(test::dataPath("vit_local2d.h5"))});
    expectViewsAgree(w, "closed one file");
    EXPECT_FALSE(w.result());
}

// Issue 35: File > Close File (Ctrl+W) closes the file shown, whatever item the Data dock has selected; closing
// a file that is not shown (the dock's "Close this file") leaves the shown result as it is, never recomputed.
TEST_F(WindowViewsState, CloseActsOnTheFileShownAndNeverRecomputesTheOther)
{
    test::TestWindow w;
    const QString lm = QString::fromStdString(test::dataPath("lm_local1d.h5"));
    const QString vit = QString::fromStdString(test::dataPath("vit_local2d.h5"));
    ASSERT_TRUE(w.openAndWait({vit, lm}));
    const auto q = w.dataBrowser()->assigned(TensorRole::queries);
    ASSERT_TRUE(q);
    const QString shown = q->file, other = shown == lm ? vit : lm;
    ASSERT_TRUE(w.result());

    // The dock's selection is on the other file, as after a click there.
    QTreeWidget* tree = w.dataBrowser()->tree();
    for (int i = 0; i < tree->topLevelItemCount(); ++i)
        if (w.dataBrowser()->files().value(i) == other)
            tree->setCurrentItem(tree->topLevelItem(i));
    ASSERT_EQ(w.dataBrowser()->currentFile(), other);

    // Closing the other file from the dock: the shown result stays the same object (no recomputation).
    const auto before = w.result();
    ASSERT_TRUE(w.dataBrowser()->closeFile(other));
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.result(), before) << "closing a file that is not shown recomputed the shown one";
    EXPECT_EQ(w.dataBrowser()->files(), QStringList{shown});
    expectViewsAgree(w, "closed the other file");

    // Ctrl+W with the other file open again and selected in the dock closes the file shown.
    ASSERT_TRUE(w.openAndWait({other}));
    const QString shownNow = w.dataBrowser()->assigned(TensorRole::queries)->file;
    const QString notShown = shownNow == lm ? vit : lm;
    for (int i = 0; i < tree->topLevelItemCount(); ++i)
        if (w.dataBrowser()->files().value(i) == notShown)
            tree->setCurrentItem(tree->topLevelItem(i));
    ASSERT_EQ(w.dataBrowser()->currentFile(), notShown);
    QAction* close = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
        if (a->shortcut() == QKeySequence(QKeySequence::Close))
            close = a;
    ASSERT_TRUE(close);
    close->trigger();
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->files(), QStringList{notShown});
    expectViewsAgree(w, "Ctrl+W");
}

TEST_F(WindowViewsState, UserOverridesStayWithTheirFile)
{
    test::TestWindow w;
    const QString lm = QString::fromStdString(test::dataPath("char_lm_licenses.h5"));
    const QString vit = QString::fromStdString(test::dataPath("vit_digits.h5"));
    ASSERT_TRUE(w.openAndWait({lm}));
    ASSERT_TRUE(w.mechanismPanel()->options().causal);
    // The user unticks Causal for the LM (an explicit override of its attribute) ...
    QJsonObject mech = w.mechanismPanel()->saveState();
    mech[QStringLiteral("causal")] = false;
    w.mechanismPanel()->restoreState(mech);
    ASSERT_TRUE(waitIdle(w));
    EXPECT_FALSE(w.result()->outcomes[0].result.params["causal"].get<bool>());
    // ... opens the image file (its own attributes) ...
    ASSERT_TRUE(w.openAndWait({vit}));
    EXPECT_FALSE(w.mechanismPanel()->options().causal);
    // ... and goes back to the LM: its override is still there.
    ASSERT_TRUE(w.dataBrowser()->autoAssign(lm));
    ASSERT_TRUE(waitIdle(w));
    EXPECT_FALSE(w.mechanismPanel()->options().causal);
    expectViewsAgree(w, "back to the LM");
}

TEST_F(WindowViewsState, GroupedQueryPairingIsShown)
{
    // 8 query heads, 4 key/value heads: query head 5 reads key/value head 2 (docs/maths.md 1.7).
    const std::string dir = test::fresh_work_dir("views_state_gqa");
    std::vector<double> q(8 * 16 * 4), k(4 * 16 * 4);
    for (std::size_t i = 0; i < q.size(); ++i)
        q[i] = std::sin(0.1 * double(i));
    for (std::size_t i = 0; i < k.size(); ++i)
        k[i] = std::cos(0.07 * double(i));
    io::write_hdf5(dir + "/gqa.h5", {{"/q", {8, 16, 4}, q}, {"/k", {4, 16, 4}, k}});
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(dir + "/gqa.h5")}));
    w.selectionPanel()->setIndex(QLatin1Char('h'), 5);
    ASSERT_TRUE(waitIdle(w));
    ASSERT_TRUE(w.resultIsCurrent());
    EXPECT_EQ(w.result()->input["kv_head"], 2);
    EXPECT_TRUE(w.selectionPanel()->summary().contains(QStringLiteral("h=5 (kv 2)"))) << w.selectionPanel()->summary().toStdString();
    EXPECT_TRUE(w.windowTitle().contains(QStringLiteral("kv 2"))) << w.windowTitle().toStdString();
}

TEST_F(WindowViewsState, OverviewCellJumpsToItsLayerAndHead)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("char_lm_licenses.h5"))}));
    w.runOverview();
    ASSERT_TRUE(test::waitSweeps(w));
    ASSERT_TRUE(w.overviewView());
    emit w.overviewView()->cellActivated(2, 3);   // what a click on the cell (layer 2, head 3) emits
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->name, QStringLiteral("/layers/2/q"));
    EXPECT_EQ(w.selectionPanel()->index(QLatin1Char('h')), 3);
    EXPECT_EQ(w.currentView()->viewName(), QStringLiteral("maps"));
    ASSERT_TRUE(w.resultIsCurrent());
    EXPECT_EQ(w.result()->input["at"]["h"], 3);
    EXPECT_EQ(w.result()->input["q"].get<std::string>(), test::dataPath("char_lm_licenses.h5") + ":/layers/2/q");
    expectViewsAgree(w, "after the jump");
}

// Switching files through the Data dock keeps each file's layer and query (issue 35, items 3-4): its menu's "Show this file"
// and a double-click on the file go back to it as it was left (it was "Assign Q/K/V from names": the first
// layer), with the view of that layer computed.
TEST_F(WindowViewsState, DataDockSwitchKeepsTheFilesLayer)
{
    test::TestWindow w;
    const QString lm = QString::fromStdString(test::dataPath("char_lm_licenses.h5"));
    const QString vit = QString::fromStdString(test::dataPath("vit_local2d.h5"));
    ASSERT_TRUE(w.openAndWait({lm}));
    ASSERT_TRUE(w.stepLayer(+1));
    ASSERT_TRUE(waitIdle(w));
    ASSERT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->name, QStringLiteral("/layers/1/q"));
    w.setQuery(37);   // the query selected in the LM
    ASSERT_TRUE(w.openAndWait({vit}));
    ASSERT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, vit);
    EXPECT_EQ(w.query(), -1);   // the LM's token 37 means nothing in the image file

    emit w.dataBrowser()->showFileRequested(lm);   // the file's menu: Show this file
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, lm);
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->name, QStringLiteral("/layers/1/q"));
    EXPECT_EQ(w.selectionPanel()->currentLayer(), 1);
    EXPECT_EQ(w.result()->input["q"].get<std::string>(), lm.toStdString() + ":/layers/1/q");
    EXPECT_EQ(w.query(), 37);   // and its query, as it was left

    // A double-click on the other file's row shows it, and back again keeps layer 1.
    auto* tree = w.dataBrowser()->findChild<QTreeWidget*>();
    ASSERT_TRUE(tree);
    const auto row = [tree](const QString& file) -> QTreeWidgetItem* {
        for (int i = 0; i < tree->topLevelItemCount(); ++i)
            if (tree->topLevelItem(i)->text(0).startsWith(QFileInfo(file).fileName()))
                return tree->topLevelItem(i);
        return nullptr;
    };
    ASSERT_TRUE(row(vit) && row(lm));
    emit tree->itemDoubleClicked(row(vit), 0);
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, vit);
    emit tree->itemDoubleClicked(row(lm), 0);
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->name, QStringLiteral("/layers/1/q"));
    expectViewsAgree(w, "back to the LM by double-click");
}

// While the first result of a file is computed, the views say so (issue 35, item 9: during the minutes of the
// N = 8192 session they said "No result yet. Open activation files and assign Q and K").
TEST_F(WindowViewsState, FirstComputationSaysComputing)
{
    test::TestWindow w;
    QStringList notices;
    QObject::connect(&w, &MainWindow::computationStarted, &w, [&] {
        for (ResultView* v : w.exportableViews())
            notices << v->noticeText();
    });
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("vit_local2d.h5"))}));
    ASSERT_FALSE(notices.isEmpty());
    for (const QString& n : notices)
        EXPECT_TRUE(n.startsWith(QStringLiteral("Computing N = 256 tokens"))) << n.toStdString();
    for (ResultView* v : w.exportableViews())   // once computed: no notice (Heads and Depth compute when shown)
        EXPECT_TRUE(v->noticeText().isEmpty() || v->noticeText().contains(QStringLiteral("tab is shown")))
            << v->viewName().toStdString() << ": " << v->noticeText().toStdString();
}
