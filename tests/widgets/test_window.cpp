// Main window: the data browser on real files (written by NumPy/h5py), Q/K/V assignment from names,
// selection -> background computation -> every view updated, stepping the head, error paths, exports.
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTreeWidget>
#include <QTreeWidgetItemIterator>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "data_browser.h"
#include "main_window.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"
#include "support/test_support.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::waitIdle;

namespace {

QString fixture(const char* name) { return test::windowFixture(name); }

QTreeWidgetItem* findItem(QTreeWidget* tree, const QString& text)
{
    QTreeWidgetItemIterator it(tree);
    while (*it) {
        if ((*it)->text(0) == text)
            return *it;
        ++it;
    }
    return nullptr;
}

class WindowTest : public test::MainWindowTest {};

}  // namespace

TEST_F(WindowTest, RoleFromCommonNames)
{
    struct Case {
        const char* name;
        int role;   // -1: none
    } cases[] = {{"q", 0},           {"K", 1},          {"v", 2},           {"/layers/3/q", 0}, {"query", 0},
                 {"Keys", 1},        {"value", 2},      {"query_states", 0}, {"k_proj", 1},     {"layer0_v", 2},
                 {"attn.q_proj", 0}, {"wk", 1},         {"to_v", 2},        {"qk", -1},         {"mask", -1},
                 {"kv", -1},         {"/layers/0", -1}, {"logits", -1}};
    for (const auto& c : cases) {
        const auto r = roleFromName(QString::fromLatin1(c.name));
        EXPECT_EQ(r ? int(*r) : -1, c.role) << c.name;
    }
    QString a, b;
    roleFromName(QStringLiteral("/layers/3/q"), &a);
    roleFromName(QStringLiteral("/layers/3/k"), &b);
    EXPECT_EQ(a, b);
    roleFromName(QStringLiteral("/layers/4/k"), &b);
    EXPECT_NE(a, b);
}

TEST_F(WindowTest, BrowserShowsGroupsShapesSkippedObjectsAndErrors)
{
    DataBrowser browser;
    QString error;
    ASSERT_TRUE(browser.openFile(fixture("nested.h5"), &error)) << error.toStdString();
    QTreeWidget* tree = browser.tree();
    ASSERT_EQ(tree->topLevelItemCount(), 1);
    QTreeWidgetItem* file = tree->topLevelItem(0);
    EXPECT_TRUE(file->text(0).startsWith(QStringLiteral("nested.h5"))) << file->text(0).toStdString();
    QTreeWidgetItem* layers = findItem(tree, QStringLiteral("layers"));
    ASSERT_NE(layers, nullptr);
    EXPECT_EQ(layers->parent(), file);
    ASSERT_EQ(layers->childCount(), 2);
    QTreeWidgetItem* layer1 = layers->child(1);
    EXPECT_EQ(layer1->text(0), QStringLiteral("1"));
    ASSERT_EQ(layer1->childCount(), 3);
    QTreeWidgetItem* q = nullptr;
    for (int i = 0; i < 3; ++i)
        if (layer1->child(i)->text(0) == QStringLiteral("q"))
            q = layer1->child(i);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->text(2), QStringLiteral("[2, 17, 8]"));
    EXPECT_EQ(q->text(3), QStringLiteral("float32"));
    EXPECT_TRUE(q->toolTip(0).contains(QStringLiteral("@layer = 1"))) << q->toolTip(0).toStdString();
    EXPECT_TRUE(file->toolTip(0).contains(QStringLiteral("@kind"))) << file->toolTip(0).toStdString();

    // The string dataset is listed, greyed (disabled) with its reason.
    QTreeWidgetItem* names = findItem(tree, QStringLiteral("names"));
    ASSERT_NE(names, nullptr);
    EXPECT_FALSE(names->flags() & Qt::ItemIsEnabled);
    EXPECT_FALSE(names->text(3).isEmpty());

    // Opening the same file again lists it once; a broken file shows its error, no crash.
    EXPECT_TRUE(browser.openFile(fixture("nested.h5")));
    EXPECT_EQ(tree->topLevelItemCount(), 1);
    QString badError;
    EXPECT_FALSE(browser.openFile(fixture("bad.h5"), &badError));
    EXPECT_FALSE(badError.isEmpty());
    ASSERT_EQ(tree->topLevelItemCount(), 2);
    QTreeWidgetItem* bad = tree->topLevelItem(1);
    ASSERT_EQ(bad->childCount(), 1);
    EXPECT_EQ(bad->child(0)->text(0), badError);
    EXPECT_EQ(browser.files(), QStringList{fixture("nested.h5")});
}

TEST_F(WindowTest, AutoAssignPerGroupAndByContextChoice)
{
    DataBrowser browser;
    QSignalSpy spy(&browser, &DataBrowser::assignmentChanged);
    ASSERT_TRUE(browser.openFile(fixture("nested.h5")));
    ASSERT_TRUE(browser.autoAssign(fixture("nested.h5")));
    EXPECT_GE(spy.count(), 1);
    EXPECT_EQ(browser.assigned(TensorRole::queries)->name, QStringLiteral("/layers/0/q"));
    EXPECT_EQ(browser.assigned(TensorRole::keys)->name, QStringLiteral("/layers/0/k"));
    EXPECT_EQ(browser.assigned(TensorRole::values)->name, QStringLiteral("/layers/0/v"));
    EXPECT_EQ(browser.assigned(TensorRole::queries)->ref(), fixture("nested.h5") + QStringLiteral(":/layers/0/q"));

    // Badges and bold on the assigned tensors only.
    QTreeWidgetItem* layer0 = findItem(browser.tree(), QStringLiteral("0"));
    ASSERT_NE(layer0, nullptr);
    int badges = 0;
    for (int i = 0; i < layer0->childCount(); ++i) {
        badges += !layer0->child(i)->text(1).isEmpty();
        EXPECT_TRUE(layer0->child(i)->font(0).bold());
    }
    EXPECT_EQ(badges, 3);
    QTreeWidgetItem* layer1 = findItem(browser.tree(), QStringLiteral("1"));
    EXPECT_TRUE(layer1->child(0)->text(1).isEmpty());

    // What the context menu does.
    ASSERT_TRUE(browser.setAssignment(TensorRole::keys, fixture("nested.h5"), QStringLiteral("/layers/1/k")));
    EXPECT_EQ(browser.assigned(TensorRole::keys)->name, QStringLiteral("/layers/1/k"));
    EXPECT_FALSE(browser.setAssignment(TensorRole::keys, fixture("nested.h5"), QStringLiteral("/nope")));

    // npz members with *_states names; .npy files by their file name.
    DataBrowser b2;
    ASSERT_TRUE(b2.openFile(fixture("named.npz")));
    ASSERT_TRUE(b2.autoAssign(fixture("named.npz")));
    EXPECT_EQ(b2.assigned(TensorRole::queries)->name, QStringLiteral("query_states"));
    EXPECT_EQ(b2.assigned(TensorRole::keys)->name, QStringLiteral("key_states"));
    EXPECT_FALSE(b2.assigned(TensorRole::values));

    test::TestWindow w;
    w.openFiles({fixture("q.npy"), fixture("k.npy")});
    ASSERT_TRUE(w.dataBrowser()->assigned(TensorRole::queries));
    ASSERT_TRUE(w.dataBrowser()->assigned(TensorRole::keys));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::queries)->file, fixture("q.npy"));
    EXPECT_EQ(w.dataBrowser()->assigned(TensorRole::keys)->file, fixture("k.npy"));
    ASSERT_TRUE(waitIdle(w));
    ASSERT_TRUE(w.result());
    EXPECT_EQ(w.result()->n, 16);
}

TEST_F(WindowTest, SelectionComputesUpdatesViewsAndHeadStepping)
{
    test::TestWindow w;
    QSignalSpy finished(&w, &MainWindow::computationFinished);
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    ASSERT_GE(finished.count(), 1);
    EXPECT_TRUE(finished.last().at(0).toBool()) << finished.last().at(1).toString().toStdString();
    auto first = w.result();
    ASSERT_TRUE(first);
    // N = 17 = 4*4 + 1: one prefix token and a 4x4 grid were guessed.
    EXPECT_EQ(w.selectionPanel()->selection().prefix_tokens, 1);
    EXPECT_EQ(w.selectionPanel()->tokenGrid(), (std::vector<Eigen::Index>{4, 4}));
    EXPECT_EQ(first->n, 16);
    EXPECT_EQ(first->d, 8);
    ASSERT_EQ(first->outcomes.size(), 3u);
    for (const auto& o : first->outcomes) {
        EXPECT_TRUE(o.error.empty()) << o.error;
        ASSERT_TRUE(o.matrix);
    }
    EXPECT_EQ(first->token_grid, (std::vector<Eigen::Index>{4, 4}));
    // A grid guessed from N (no grid attribute) is for display: MHLA keeps the command line's 1-D blocks,
    // min(16, N) of them (a file's grid attribute gives grid blocks: test_window_file_defaults.cpp).
    ASSERT_TRUE(first->blocks);
    EXPECT_EQ(first->blocks->num_blocks, 16);
    EXPECT_EQ(first->blocks->block_grid, (std::vector<Eigen::Index>{16}));
    EXPECT_EQ(w.views().size(), 8);
    EXPECT_EQ(w.currentView()->viewName(), QStringLiteral("maps"));

    // Stepping the head recomputes: another slice, other matrices.
    EXPECT_EQ(w.selectionPanel()->stepAxis(), QLatin1Char('h'));
    ASSERT_TRUE(w.stepIndex(+1));
    EXPECT_TRUE(w.isComputing());
    ASSERT_TRUE(waitIdle(w));
    auto second = w.result();
    ASSERT_TRUE(second);
    EXPECT_NE(second.get(), first.get());
    EXPECT_EQ(second->input["at"]["h"], 1);
    EXPECT_GT((*second->outcomes[0].matrix - *first->outcomes[0].matrix).cwiseAbs().maxCoeff(), 1e-6);
    EXPECT_FALSE(w.stepIndex(+1));   // last head: stays
    EXPECT_TRUE(w.windowTitle().contains(QStringLiteral("h=1"))) << w.windowTitle().toStdString();

    // Fast stepping: only the newest request's result arrives.
    w.stepIndex(-1);
    w.computeNow();
    w.stepIndex(+1);
    w.computeNow();
    ASSERT_TRUE(waitIdle(w));
    EXPECT_EQ(w.result()->input["at"]["h"], 1);

    // The query reaches every view and is clamped to N.
    w.setQuery(5);
    EXPECT_EQ(w.query(), 5);
    w.setQuery(99);
    EXPECT_EQ(w.query(), -1);
}

TEST_F(WindowTest, ErrorsShowAsMessagesNotCrashes)
{
    test::TestWindow w;
    QSignalSpy finished(&w, &MainWindow::computationFinished);
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    ASSERT_TRUE(w.result());

    // A selection that leaves no token: explained, no computation.
    QJsonObject sel = w.selectionPanel()->saveState();
    sel[QStringLiteral("prefix_tokens")] = 17;
    w.selectionPanel()->restoreState(sel);
    ASSERT_TRUE(waitIdle(w));
    EXPECT_FALSE(finished.last().at(0).toBool());
    EXPECT_FALSE(w.messageText().isEmpty());
    EXPECT_FALSE(w.selectionPanel()->problem().isEmpty());

    // A layout that does not fit the tensor's rank.
    sel[QStringLiteral("prefix_tokens")] = 1;
    sel[QStringLiteral("layout")] = QStringLiteral("nd");
    w.selectionPanel()->restoreState(sel);
    ASSERT_TRUE(waitIdle(w));
    EXPECT_FALSE(finished.last().at(0).toBool());
    EXPECT_TRUE(w.messageText().contains(QStringLiteral("layout")) || w.messageText().contains(QStringLiteral("rank")))
        << w.messageText().toStdString();

    // Queries and keys of different d: the core refuses inside the job; the message says so.
    test::TestWindow w2;
    QSignalSpy finished2(&w2, &MainWindow::computationFinished);
    ASSERT_TRUE(w2.openAndWait({fixture("mismatch.h5")}));
    ASSERT_GE(finished2.count(), 1);
    EXPECT_FALSE(finished2.last().at(0).toBool());
    EXPECT_FALSE(w2.lastError().isEmpty());
    EXPECT_FALSE(w2.messageText().isEmpty());
    EXPECT_FALSE(w2.result());

    // An impossible MHLA option fails MHLA only; the message names it.
    test::TestWindow w3;
    ASSERT_TRUE(w3.openAndWait({fixture("nested.h5")}));
    QJsonObject mech = w3.mechanismPanel()->saveState();
    mech[QStringLiteral("block_mode")] = QStringLiteral("blocks");
    mech[QStringLiteral("blocks")] = 5;
    mech[QStringLiteral("normalize")] = QStringLiteral("official");
    w3.mechanismPanel()->restoreState(mech);
    EXPECT_FALSE(w3.mechanismPanel()->problems().isEmpty());
    ASSERT_TRUE(waitIdle(w3));
    ASSERT_TRUE(w3.result());
    const auto* mhla = w3.result()->find(attention::Mechanism::mhla);
    ASSERT_NE(mhla, nullptr);
    EXPECT_FALSE(mhla->error.empty());
    EXPECT_TRUE(w3.result()->find(attention::Mechanism::softmax)->error.empty());
    EXPECT_TRUE(w3.messageText().contains(QStringLiteral("mhla"))) << w3.messageText().toStdString();
}

TEST_F(WindowTest, ExportsMetricsAndMatrices)
{
    test::TestWindow w;
    QString error;
    EXPECT_FALSE(w.exportMetricsCsv(QStringLiteral("/nonexistent/x.csv"), &error));
    ASSERT_TRUE(w.openAndWait({fixture("nested.h5")}));
    ASSERT_TRUE(w.result());
    const QString dir = QString::fromStdString(test::fresh_work_dir("window_exports"));
    ASSERT_TRUE(w.exportMatrices(dir, &error)) << error.toStdString();
    for (const auto& o : w.result()->outcomes) {
        const QString path = QDir(dir).filePath(QString::fromLatin1(attention::to_string(o.result.mechanism)) + ".npy");
        const Eigen::MatrixXd m = test::read_npy_simple(path.toStdString());
        EXPECT_LT(test::max_rel_diff(m, *o.matrix), 1e-15);
    }
    EXPECT_TRUE(QFile::exists(QDir(dir).filePath(QStringLiteral("mixing.npy"))));
    const QString csv = QDir(dir).filePath(QStringLiteral("metrics.csv"));
    ASSERT_TRUE(w.exportMetricsCsv(csv, &error)) << error.toStdString();
    EXPECT_GT(QFileInfo(csv).size(), 10);
    EXPECT_FALSE(w.exportMetricsCsv(QStringLiteral("/nonexistent/dir/metrics.csv"), &error));
    EXPECT_FALSE(error.isEmpty());
}
