// Sweeps in the main window: the sweep dialog's parameters -> a background run_sweep -> the Curves tab;
// the model overview -> the Overview tab; cancel; export (figure and CSV); sessions store finished sweeps.
#include <QAction>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QSignalSpy>
#include <QTabWidget>

#include <unistd.h>

#include <gtest/gtest.h>

#include "analysis/sweep.h"
#include "curves.h"
#include "data_browser.h"
#include "export.h"
#include "main_window.h"
#include "sweep_dialog.h"
#include "support/test_support.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::waitSweeps;

namespace {

SweepParams smallSynthetic()
{
    SweepParams p;
    p.synthetic = true;
    p.synthKind = QStringLiteral("local1d");
    p.d = 8;
    p.seeds = 2;
    p.values = QStringLiteral("32,48,64");
    p.blocks = 4;
    p.metric = QStringLiteral("entropy_mean");
    return p;
}

class WindowSweep : public test::MainWindowTest {};

}  // namespace

TEST_F(WindowSweep, ParamsRoundTripAndSpec)
{
    SweepParams p = smallSynthetic();
    p.vary = QLatin1Char('m');
    p.values = QStringLiteral("1, 2,4");
    p.allHeads = true;
    p.mechanisms = {QStringLiteral("linear"), QStringLiteral("mhla")};
    const SweepParams q = SweepParams::fromJson(p.toJson());
    EXPECT_EQ(q.toJson(), p.toJson());

    const auto spec = sweepSpec(q, nullptr, {});
    EXPECT_EQ(spec.vary, 'm');
    EXPECT_EQ(spec.values, (std::vector<Eigen::Index>{1, 2, 4}));
    ASSERT_TRUE(spec.synth);
    EXPECT_EQ(spec.synth->n, 256);
    EXPECT_EQ(spec.mechanisms.size(), 2u);

    // The dialog shows and returns the parameters it was given.
    SweepDialog dialog(q, false, nullptr);
    EXPECT_EQ(dialog.params().toJson(), q.toJson());

    SweepParams bad = smallSynthetic();
    bad.values = QStringLiteral("32,x");
    EXPECT_THROW(sweepSpec(bad, nullptr, {}), std::invalid_argument);
    bad = smallSynthetic();
    bad.synthetic = false;
    EXPECT_THROW(sweepSpec(bad, nullptr, {}), std::invalid_argument);   // no data assigned
    bad = smallSynthetic();
    bad.mechanisms.clear();
    EXPECT_THROW(sweepSpec(bad, nullptr, {}), std::invalid_argument);
}

TEST_F(WindowSweep, SyntheticSweepOpensCurvesTab)
{
    test::TestWindow w;
    QSignalSpy finished(&w, &MainWindow::sweepFinished);
    SweepDialog dialog(smallSynthetic(), false, &w);   // the dialog's path: its parameters go to runSweep
    w.runSweep(dialog.params());
    EXPECT_TRUE(w.isSweeping());
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_EQ(finished.count(), 1);
    EXPECT_EQ(finished.at(0).at(0).toString(), QStringLiteral("curves"));
    EXPECT_TRUE(finished.at(0).at(1).toBool()) << finished.at(0).at(2).toString().toStdString();

    ASSERT_NE(w.curvesView(), nullptr);
    EXPECT_TRUE(w.hasSweepResult(QStringLiteral("curves")));
    const auto result = w.sweepResult(QStringLiteral("curves"));
    ASSERT_TRUE(result);
    EXPECT_EQ(result->records.size(), 3u * 3u * 2u);   // mechanisms x N x seeds
    EXPECT_EQ(w.currentView(), w.curvesView());
    EXPECT_TRUE(w.exportableViews().contains(w.curvesView()));
    EXPECT_EQ(w.curvesView()->viewName(), QStringLiteral("curves"));

    // Export like any view, and the CSV.
    const QString dir = QString::fromStdString(test::fresh_work_dir("window_sweep_export"));
    ExportOptions opt;
    opt.dpi = 96;
    ASSERT_EQ(exportView(w.curvesView(), dir + "/curves.png", opt), QString());
    EXPECT_FALSE(QImage(dir + "/curves.png").isNull());
    EXPECT_TRUE(exportAllViews(w.exportableViews(), dir + "/all", QStringLiteral("svg"), opt).isEmpty());
    EXPECT_TRUE(QFile::exists(dir + "/all/curves.svg"));
    QString error;
    ASSERT_TRUE(w.exportSweepCsv(dir + "/sweep.csv", QStringLiteral("curves"), &error)) << error.toStdString();
    QFile csv(dir + "/sweep.csv");
    ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
    EXPECT_EQ(QString::fromUtf8(csv.readAll()), QString::fromStdString(analysis::sweep_csv(result->records)));
    EXPECT_FALSE(w.exportSweepCsv(dir + "/o.csv", QStringLiteral("overview"), &error));

    // Running again replaces the result in the same tab.
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    const int count = tabs->count();
    w.runSweep(smallSynthetic());
    ASSERT_TRUE(waitSweeps(w));
    EXPECT_EQ(tabs->count(), count);
}

TEST_F(WindowSweep, OverviewAndCurrentDataSweepAndSession)
{
    test::TestWindow w;
    w.openFiles({test::threeHeadFile()});
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_TRUE(w.result());

    w.runOverview();
    SweepParams p;
    p.values = QStringLiteral("24,48,96");
    p.allHeads = true;
    p.metric = QStringLiteral("relative_rank");
    w.runSweep(p);
    ASSERT_TRUE(waitSweeps(w));
    EXPECT_TRUE(w.lastSweepError().isEmpty()) << w.lastSweepError().toStdString();
    ASSERT_NE(w.overviewView(), nullptr);
    ASSERT_NE(w.curvesView(), nullptr);
    const auto overview = w.sweepResult(QStringLiteral("overview"));
    ASSERT_TRUE(overview);
    EXPECT_EQ(overview->records.size(), 3u * 3u);   // heads x mechanisms
    EXPECT_EQ(w.sweepResult(QStringLiteral("curves"))->records.size(), 3u * 3u * 3u);   // N x heads x mechanisms

    // Sessions store the finished sweeps and view states; a fresh window shows them.
    const QString dir = QString::fromStdString(test::fresh_work_dir("window_sweep_session"));
    const QString session = dir + "/s.attnscope";
    w.setCurrentView(QStringLiteral("curves"));
    QString error;
    ASSERT_TRUE(w.saveSession(session, &error)) << error.toStdString();
    const QJsonObject saved = w.sessionState(session);
    EXPECT_EQ(saved.value(QStringLiteral("sweeps")).toObject().value(QStringLiteral("curves")).toArray().size(), 1);
    EXPECT_TRUE(saved.value(QStringLiteral("sweeps")).toObject().contains(QStringLiteral("overview")));
    EXPECT_TRUE(saved.value(QStringLiteral("views")).toObject().contains(QStringLiteral("curves")));

    test::TestWindow again;
    ASSERT_TRUE(again.loadSession(session, &error)) << error.toStdString();
    ASSERT_TRUE(waitSweeps(again));
    ASSERT_NE(again.curvesView(), nullptr);
    ASSERT_NE(again.overviewView(), nullptr);
    EXPECT_EQ(again.sweepResult(QStringLiteral("curves"))->records.size(), 27u);
    EXPECT_EQ(again.currentView(), again.curvesView());
    EXPECT_EQ(again.curvesView()->saveState(), w.curvesView()->saveState());

    // Loading another session without sweeps removes the tabs.
    test::TestWindow plain;
    plain.openFiles({test::threeHeadFile()});
    ASSERT_TRUE(waitSweeps(plain));
    ASSERT_TRUE(plain.saveSession(dir + "/plain.attnscope", &error));
    ASSERT_TRUE(again.loadSession(dir + "/plain.attnscope", &error));
    ASSERT_TRUE(waitSweeps(again));
    EXPECT_EQ(again.curvesView(), nullptr);
    EXPECT_FALSE(again.hasSweepResult(QStringLiteral("overview")));
}

TEST_F(WindowSweep, CancelAndErrors)
{
    test::TestWindow w;
    QSignalSpy finished(&w, &MainWindow::sweepFinished);
    SweepParams big = smallSynthetic();
    big.values = QStringLiteral("256,512,1024,1536,2048");
    big.seeds = 8;
    w.runSweep(big);
    QCoreApplication::processEvents();
    w.cancelSweeps();
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_EQ(finished.count(), 1);
    EXPECT_FALSE(finished.at(0).at(1).toBool());
    EXPECT_EQ(finished.at(0).at(2).toString(), QStringLiteral("cancelled"));
    EXPECT_EQ(w.curvesView(), nullptr);

    // Current data without any file: a clear error, no tab.
    SweepParams p;
    w.runSweep(p);
    ASSERT_EQ(finished.count(), 2);
    EXPECT_FALSE(finished.at(1).at(1).toBool());
    EXPECT_TRUE(w.lastSweepError().contains(QStringLiteral("not assigned"))) << w.lastSweepError().toStdString();
    w.runOverview();
    ASSERT_EQ(finished.count(), 3);
    EXPECT_FALSE(finished.at(2).at(1).toBool());

    // An impossible point is the core's error, reported after the job.
    SweepParams bad = smallSynthetic();
    bad.vary = QLatin1Char('m');
    bad.n = 32;
    bad.values = QStringLiteral("4,64");
    w.runSweep(bad);
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_EQ(finished.count(), 4);
    EXPECT_FALSE(finished.at(3).at(1).toBool());
    EXPECT_FALSE(w.lastSweepError().isEmpty());
    EXPECT_EQ(w.curvesView(), nullptr);
}

// Close All while a sweep runs (issue 35, item 9: the sweep then finished silently behind the start page, and the
// message bar still named the closed file): the finished sweep opens its Curves tab, the message bar is cleared.
TEST_F(WindowSweep, SweepFinishingAfterCloseAllOpensItsTab)
{
    test::TestWindow w;
    w.show();
    const QString missing = QString::fromStdString(test::fresh_work_dir("window_sweep_close_all") + "/gone.h5");
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("vit_local2d.h5"))}));
    w.openFiles({missing});
    ASSERT_FALSE(w.messageText().isEmpty());   // the file that could not be opened, named in the message bar
    w.runSweep(smallSynthetic());
    QAction* closeAll = nullptr;
    for (QAction* a : w.findChildren<QAction*>())
        if (a->text() == QStringLiteral("Close &All Files"))
            closeAll = a;
    ASSERT_TRUE(closeAll);
    closeAll->trigger();
    EXPECT_TRUE(w.messageText().isEmpty()) << w.messageText().toStdString();
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_NE(w.curvesView(), nullptr);
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_TRUE(tabs);
    EXPECT_TRUE(tabs->isVisible());   // not the start page
    EXPECT_EQ(tabs->currentWidget(), w.curvesView());
}

// The sweep tabs have fixed places, Curves before Overview whichever ran first (issue 35, item 9: a reopened
// session put them in another order, so Ctrl+9 and Ctrl+0 changed meaning).
TEST_F(WindowSweep, CurvesTabComesBeforeOverviewWhicheverRanFirst)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("char_lm_licenses.h5"))}));
    w.runOverview();
    ASSERT_TRUE(waitSweeps(w));
    w.runSweep(smallSynthetic());
    ASSERT_TRUE(waitSweeps(w));
    auto* tabs = w.findChild<QTabWidget*>();
    ASSERT_TRUE(tabs && w.curvesView() && w.overviewView());
    EXPECT_EQ(tabs->indexOf(w.curvesView()) + 1, tabs->indexOf(w.overviewView()));
    EXPECT_EQ(tabs->indexOf(w.overviewView()), tabs->count() - 1);
    EXPECT_EQ(w.viewActions().size(), tabs->count());
    EXPECT_EQ(w.viewActions().at(tabs->indexOf(w.curvesView()))->text(), QStringLiteral("Curves"));
}
