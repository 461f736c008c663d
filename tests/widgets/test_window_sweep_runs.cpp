// Sweeps from the app: the dialog proposes values that fit the data and checks them before it closes (in the
// app's words), runs over N and over M stay separate curve sets, Cancel stops a sweep inside a point with
// "cancelling…" in the status bar, a failed sweep's banner goes, and sessions store finished sweeps (and
// never start one), including zoom of the maps view.
#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QSignalSpy>
#include <QStatusBar>
#include <QTest>
#include <QThread>
#include <iostream>

#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "analysis/sweep.h"
#include "curves.h"
#include "data_browser.h"
#include "main_window.h"
#include "mechanism_panel.h"
#include "selection_panel.h"
#include "session.h"
#include "support/test_support.h"
#include "sweep_dialog.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::waitIdle;
using test::waitSweeps;

namespace {

QString vitFile() { return QString::fromStdString(test::dataPath("vit_local2d.h5")); }

// What the window hands its sweep dialog: its queries, keys, selection and mechanism options.
SweepDataContext windowData(const MainWindow& w)
{
    SweepDataContext data;
    const auto q = w.dataBrowser()->assigned(TensorRole::queries);
    const auto k = w.dataBrowser()->assigned(TensorRole::keys);
    data.haveData = q && k;
    if (data.haveData)
        data.source = analysis::TensorSource{io::parse_tensor_ref(q->ref().toStdString()), io::parse_tensor_ref(k->ref().toStdString()), std::nullopt, w.selectionPanel()->selection()};
    data.options = w.mechanismPanel()->options();
    return data;
}

QComboBox* kindBox(SweepView* view)
{
    for (QComboBox* box : view->findChildren<QComboBox*>())
        if (box->count() == 2 && box->itemData(0).toString() == QLatin1String("n") && box->itemData(1).toString() == QLatin1String("m"))
            return box;
    return nullptr;
}

QCustomPlot* plotOf(SweepView* view) { return view->findChild<QCustomPlot*>(); }

QString xLabel(SweepView* view)
{
    QCustomPlot* plot = plotOf(view);
    return plot->axisRects().isEmpty() ? QString() : plot->axisRects().front()->axis(QCPAxis::atBottom)->label();
}

QStringList graphNames(SweepView* view)
{
    QStringList names;
    QCustomPlot* plot = plotOf(view);
    for (int i = 0; i < plot->graphCount(); ++i)
        if (!plot->graph(i)->name().isEmpty())
            names << plot->graph(i)->name();
    return names;
}

// The status bar's label of the sweep indicator (its text starts with "sweep: ").
QLabel* sweepStage(const MainWindow& w)
{
    for (QLabel* l : w.statusBar()->findChildren<QLabel*>())
        if (l->text().startsWith(QStringLiteral("sweep: ")))
            return l;
    return nullptr;
}

bool noFlags(const QString& text) { return !text.contains(QStringLiteral("--")); }

class SweepRuns : public test::MainWindowTest {};

}  // namespace

TEST_F(SweepRuns, DialogProposesCropsOfTheSixteenBySixteenSample)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({vitFile()}));
    ASSERT_TRUE(w.result()) << w.lastError().toStdString();
    // The dialog's own defaults (N = 64,128,256,512 of the first tokens) do not fit a 16 x 16 grid with grid
    // blocks: it opens with centred crops that hold whole blocks instead, and they validate.
    SweepDialog dialog(SweepParams(), windowData(w), &w);
    EXPECT_TRUE(dialog.problem().isEmpty()) << dialog.problem().toStdString();
    EXPECT_TRUE(dialog.canRun());
    const SweepParams p = dialog.params();
    EXPECT_EQ(p.subsample, QStringLiteral("crop"));
    EXPECT_EQ(p.values, QStringLiteral("16,64,144,256"));
    EXPECT_TRUE(dialog.hint().contains(QStringLiteral("16\u00d716"))) << dialog.hint().toStdString();

    // Values that do not fit: Run is disabled and the reason is shown, without command-line flags.
    auto* values = dialog.findChild<QLineEdit*>(QStringLiteral("values"));
    ASSERT_NE(values, nullptr);
    for (const char* bad : {"64,128,256,512", "32", "16,300", "16,x"}) {
        values->setText(QString::fromLatin1(bad));
        const QString problem = dialog.validate();
        EXPECT_FALSE(problem.isEmpty()) << bad;
        EXPECT_FALSE(dialog.canRun()) << bad;
        EXPECT_TRUE(noFlags(problem)) << bad << ": " << problem.toStdString();
        auto* label = dialog.findChild<QLabel*>(QStringLiteral("problem"));
        ASSERT_NE(label, nullptr);
        EXPECT_EQ(label->text(), problem);
        EXPECT_FALSE(label->isHidden());
    }
    values->setText(QStringLiteral("128"));
    EXPECT_TRUE(dialog.validate().contains(QStringLiteral("N = 128"))) << dialog.problem().toStdString();
    // Typing waits a moment, then checks by itself.
    values->clear();
    QTest::keyClicks(values, QStringLiteral("64,256"));
    ASSERT_TRUE(test::waitUntil([&] { return dialog.canRun(); }, 5000)) << dialog.problem().toStdString();

    // First tokens of grid data: the message names the way out in the app's words.
    QComboBox* sub = nullptr;
    for (QComboBox* box : dialog.findChildren<QComboBox*>())
        if (box->findText(QStringLiteral("crop")) >= 0 && box->findText(QStringLiteral("first")) >= 0)
            sub = box;
    ASSERT_NE(sub, nullptr);
    sub->setCurrentText(QStringLiteral("first"));   // only all 256 tokens fit now: proposed
    EXPECT_EQ(dialog.params().values, QStringLiteral("256"));
    values->setText(QStringLiteral("64"));
    const QString firstProblem = dialog.validate();
    EXPECT_TRUE(firstProblem.contains(QStringLiteral("crop"))) << firstProblem.toStdString();
    EXPECT_TRUE(noFlags(firstProblem)) << firstProblem.toStdString();

    // Over M: block-grid sides that divide the grid.
    sub->setCurrentText(QStringLiteral("crop"));
    QComboBox* vary = nullptr;
    for (QComboBox* box : dialog.findChildren<QComboBox*>())
        if (box->count() == 2 && box->itemData(1).toString() == QLatin1String("m"))
            vary = box;
    ASSERT_NE(vary, nullptr);
    vary->setCurrentIndex(1);
    EXPECT_TRUE(dialog.canRun()) << dialog.problem().toStdString();
    EXPECT_EQ(dialog.params().values, QStringLiteral("1,2,4,8,16"));
    values->setText(QStringLiteral("3"));
    EXPECT_FALSE(dialog.validate().isEmpty());
    EXPECT_TRUE(noFlags(dialog.problem())) << dialog.problem().toStdString();
}

TEST_F(SweepRuns, DialogOnOneDimensionalDataProposesNUpToTheTokens)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    SweepDialog dialog(SweepParams(), windowData(w), &w);   // 512 > 96 tokens: replaced
    EXPECT_TRUE(dialog.canRun()) << dialog.problem().toStdString();
    EXPECT_EQ(dialog.params().subsample, QStringLiteral("first"));
    EXPECT_EQ(dialog.params().values, QStringLiteral("6,12,24,48,96"));
    auto* values = dialog.findChild<QLineEdit*>(QStringLiteral("values"));
    values->setText(QStringLiteral("24,200"));
    const QString problem = dialog.validate();
    EXPECT_TRUE(problem.contains(QStringLiteral("N = 200")) && problem.contains(QStringLiteral("96"))) << problem.toStdString();
    EXPECT_TRUE(noFlags(problem)) << problem.toStdString();
    // Parameters that fit are kept as they are.
    SweepParams mine;
    mine.values = QStringLiteral("10,20,30");
    SweepDialog again(mine, windowData(w), &w);
    EXPECT_EQ(again.params().values, QStringLiteral("10,20,30"));
    EXPECT_TRUE(again.canRun());
}

TEST_F(SweepRuns, ProblemTextHasNoFlags)
{
    for (const char* core : {"--vary n=64 with grid blocks: a subset of a 16x16 grid is not a grid; use --subsample crop",
                             "--subsample crop: N=32 is not a centred crop of the 16x16 grid with its aspect ratio",
                             "--subsample crop needs grid data (--grid G1,G2[,G3])", "--vary n=600: the input has 256 tokens",
                             "--draws needs --subsample random", "--q a.h5:/q: --prefix-tokens 3 exceeds the 2 tokens",
                             "--vary m needs a list of block counts, e.g. --vary m=1,2,4,8,16", "blocks M=300 exceeds tokens N=196"}) {
        const QString text = sweepProblemText(QString::fromLatin1(core));
        EXPECT_TRUE(noFlags(text)) << text.toStdString();
        EXPECT_FALSE(text.isEmpty());
        EXPECT_TRUE(text.at(0).isUpper() || text.at(0).isDigit()) << text.toStdString();
    }
    EXPECT_EQ(sweepProblemText(QStringLiteral("--vary n=600: the input has 256 tokens")), QStringLiteral("N = 600: the selection has 256 tokens"));
}

TEST_F(SweepRuns, NAndMSweepsStaySeparateCurveSets)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    SweepParams n;
    n.values = QStringLiteral("24,48,96");
    w.runSweep(n);
    ASSERT_TRUE(waitSweeps(w));
    SweepParams m;
    m.vary = QLatin1Char('m');
    m.values = QStringLiteral("1,2,4,8");
    w.runSweep(m);
    ASSERT_TRUE(waitSweeps(w));
    EXPECT_TRUE(w.lastSweepError().isEmpty()) << w.lastSweepError().toStdString();
    SweepView* view = w.curvesView();
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(w.sweepResult(QStringLiteral("curves"))->spec.vary, 'm');   // the last run
    EXPECT_EQ(w.sessionState(QString()).value(QStringLiteral("sweeps")).toObject().value(QStringLiteral("curves")).toArray().size(), 2);

    // One kind at a time: the M run is shown (the last), the N run is one choice away.
    QComboBox* kind = kindBox(view);
    ASSERT_NE(kind, nullptr);
    EXPECT_FALSE(kind->isHidden());
    EXPECT_EQ(kind->currentData().toString(), QStringLiteral("m"));
    EXPECT_EQ(xLabel(view), QStringLiteral("blocks M"));
    kind->setCurrentIndex(0);
    EXPECT_EQ(xLabel(view), QStringLiteral("sequence length N"));
    EXPECT_EQ(plotOf(view)->axisRects().front()->axis(QCPAxis::atBottom)->range().upper > 90, true);
    auto* runs = view->findChild<QListWidget*>();
    ASSERT_NE(runs, nullptr);
    ASSERT_EQ(runs->count(), 1);
    EXPECT_TRUE(runs->item(0)->text().startsWith(QStringLiteral("N sweep \u00b7 lm.h5 h=0"))) << runs->item(0)->text().toStdString();
    kind->setCurrentIndex(1);
    ASSERT_EQ(runs->count(), 1);
    EXPECT_TRUE(runs->item(0)->text().startsWith(QStringLiteral("M sweep"))) << runs->item(0)->text().toStdString();

    // A second N run (another head) is overlaid with the first; each has its checkbox.
    w.selectionPanel()->setIndex(QLatin1Char('h'), 2);
    ASSERT_TRUE(waitIdle(w));
    w.runSweep(n);
    ASSERT_TRUE(waitSweeps(w));
    EXPECT_EQ(kind->currentData().toString(), QStringLiteral("n"));   // the new run's kind
    ASSERT_EQ(runs->count(), 2);
    EXPECT_TRUE(runs->item(1)->text().contains(QStringLiteral("h=2"))) << runs->item(1)->text().toStdString();
    QStringList names = graphNames(view);
    EXPECT_TRUE(names.contains(QStringLiteral("softmax \u00b7 ") + runs->item(0)->text())) << names.join(" | ").toStdString();
    EXPECT_TRUE(names.contains(QStringLiteral("softmax \u00b7 ") + runs->item(1)->text())) << names.join(" | ").toStdString();
    runs->item(0)->setCheckState(Qt::Unchecked);
    names = graphNames(view);
    EXPECT_TRUE(names.contains(QStringLiteral("softmax"))) << names.join(" | ").toStdString();   // one run left: plain names
    EXPECT_EQ(view->saveState().value(QStringLiteral("hidden_runs")).toArray().size(), 1);

    // All three runs (and the hidden one) come back with the session, without running anything.
    const QString dir = QString::fromStdString(test::fresh_work_dir("sweep_runs_session"));
    QString error;
    ASSERT_TRUE(w.saveSession(dir + "/runs.attnscope", &error)) << error.toStdString();
    test::TestWindow again;
    QSignalSpy finished(&again, &MainWindow::sweepFinished);
    ASSERT_TRUE(again.loadSession(dir + "/runs.attnscope", &error)) << error.toStdString();
    EXPECT_FALSE(again.isSweeping());
    ASSERT_TRUE(waitSweeps(again));
    EXPECT_EQ(finished.count(), 0);
    ASSERT_NE(again.curvesView(), nullptr);
    EXPECT_EQ(again.curvesView()->saveState(), view->saveState());
    EXPECT_EQ(again.curvesView()->findChild<QListWidget*>()->count(), 2);
}

TEST_F(SweepRuns, CompletedSweepReopensWithItsCurvesAndNoJob)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    SweepParams p;
    p.values = QStringLiteral("24,48,96");
    p.allHeads = true;
    p.metric = QStringLiteral("effective_rank");
    w.runSweep(p);
    w.runOverview();
    ASSERT_TRUE(waitSweeps(w));
    const auto result = w.sweepResult(QStringLiteral("curves"));
    ASSERT_TRUE(result);
    w.setCurrentView(QStringLiteral("curves"));
    const QString dir = QString::fromStdString(test::fresh_work_dir("sweep_runs_completed"));
    QString error;
    ASSERT_TRUE(w.saveSession(dir + "/s.attnscope", &error)) << error.toStdString();

    test::TestWindow again;
    QSignalSpy finished(&again, &MainWindow::sweepFinished);
    ASSERT_TRUE(again.loadSession(dir + "/s.attnscope", &error)) << error.toStdString();
    // The curves are there at once: nothing runs.
    EXPECT_FALSE(again.isSweeping());
    ASSERT_NE(again.curvesView(), nullptr);
    ASSERT_NE(again.overviewView(), nullptr);
    EXPECT_EQ(again.currentView(), again.curvesView());
    const auto back = again.sweepResult(QStringLiteral("curves"));
    ASSERT_TRUE(back);
    EXPECT_EQ(analysis::sweep_csv(back->records), analysis::sweep_csv(result->records));
    EXPECT_EQ(again.sweepResult(QStringLiteral("overview"))->records.size(), w.sweepResult(QStringLiteral("overview"))->records.size());
    EXPECT_EQ(again.curvesView()->saveState().value(QStringLiteral("metric")).toString(), QStringLiteral("effective_rank"));
    ASSERT_TRUE(waitSweeps(again));
    EXPECT_FALSE(again.isSweeping());
    EXPECT_EQ(finished.count(), 0);
    // Saved again, the session is the same document.
    EXPECT_EQ(again.sessionState(dir + "/s.attnscope"), w.sessionState(dir + "/s.attnscope"));
}

TEST_F(SweepRuns, CancelledOrFailedSweepIsNeitherStoredNorRerun)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir("sweep_runs_not_stored"));
    QString error;
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    SweepParams big;
    big.synthetic = true;
    big.d = 16;
    big.seeds = 4;
    big.values = QStringLiteral("1024,1024,1024");
    w.runSweep(big);
    QCoreApplication::processEvents();
    w.cancelSweeps();
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_TRUE(w.saveSession(dir + "/cancelled.attnscope", &error)) << error.toStdString();
    EXPECT_FALSE(w.sessionState(QString()).contains(QStringLiteral("sweeps")));

    SweepParams bad;
    bad.vary = QLatin1Char('m');
    bad.values = QStringLiteral("4,500");   // M = 500 > N = 96: the core refuses
    w.runSweep(bad);
    ASSERT_TRUE(waitSweeps(w));
    EXPECT_FALSE(w.lastSweepError().isEmpty());
    ASSERT_TRUE(w.saveSession(dir + "/failed.attnscope", &error)) << error.toStdString();

    for (const char* name : {"cancelled.attnscope", "failed.attnscope"}) {
        test::TestWindow again;
        QSignalSpy finished(&again, &MainWindow::sweepFinished);
        ASSERT_TRUE(again.loadSession(dir + "/" + name, &error)) << error.toStdString();
        EXPECT_FALSE(again.isSweeping()) << name;
        ASSERT_TRUE(waitSweeps(again));
        EXPECT_EQ(finished.count(), 0) << name;
        EXPECT_EQ(again.curvesView(), nullptr) << name;
        EXPECT_TRUE(again.lastSweepError().isEmpty()) << name;
    }
}

TEST_F(SweepRuns, OldSessionsKeepTheirSettingsButDoNotRerun)
{
    // A session of an older version: the dialog's parameters under "sweep" and "overview": true, no results.
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    const QString dir = QString::fromStdString(test::fresh_work_dir("sweep_runs_old_session"));
    QString error;
    ASSERT_TRUE(w.saveSession(dir + "/new.attnscope", &error));
    QJsonObject old = *readSessionFile(dir + "/new.attnscope", &error);
    SweepParams p;
    p.values = QStringLiteral("24,48");
    p.metric = QStringLiteral("entropy_mean");
    old[QStringLiteral("sweep")] = p.toJson();
    old[QStringLiteral("overview")] = true;
    old[QStringLiteral("view")] = QStringLiteral("curves");
    ASSERT_TRUE(writeSessionFile(dir + "/old.attnscope", old, &error));

    test::TestWindow again;
    QSignalSpy finished(&again, &MainWindow::sweepFinished);
    ASSERT_TRUE(again.loadSession(dir + "/old.attnscope", &error)) << error.toStdString();
    EXPECT_FALSE(again.isSweeping());
    // The message bar says it was not rerun (until the computation's result replaces the message) ...
    EXPECT_TRUE(again.messageText().contains(QStringLiteral("Analysis > Sweep"))) << again.messageText().toStdString();
    ASSERT_TRUE(waitSweeps(again));
    EXPECT_EQ(finished.count(), 0);
    // ... and the tabs say how to run them again.
    ASSERT_NE(again.curvesView(), nullptr);
    ASSERT_NE(again.overviewView(), nullptr);
    EXPECT_FALSE(again.hasSweepResult(QStringLiteral("curves")));
    EXPECT_EQ(again.currentView(), again.curvesView());
    for (SweepView* v : {again.curvesView(), again.overviewView()}) {
        QString shown;
        QCustomPlot* plot = plotOf(v);
        for (int i = 0; i < plot->plotLayout()->elementCount(); ++i)
            if (auto* t = qobject_cast<QCPTextElement*>(plot->plotLayout()->elementAt(i)))
                shown += t->text();
        EXPECT_TRUE(shown.contains(v == again.curvesView() ? QStringLiteral("Analysis > Sweep") : QStringLiteral("Analysis > Model Overview")))
            << shown.toStdString();
    }
    EXPECT_TRUE(again.lastSweepError().isEmpty());
    // The dialog opens with the old settings (and they fit the data).
    EXPECT_EQ(again.sessionState(QString()).value(QStringLiteral("sweep_dialog")).toObject().value(QStringLiteral("values")).toString(),
              QStringLiteral("24,48"));
    // Run from there, the sweep replaces the note with its curves.
    again.runSweep(SweepParams::fromJson(again.sessionState(QString()).value(QStringLiteral("sweep_dialog")).toObject()));
    ASSERT_TRUE(waitSweeps(again));
    EXPECT_TRUE(again.hasSweepResult(QStringLiteral("curves")));
}

TEST_F(SweepRuns, CancelInsideAPointIsPromptAndSaysCancelling)
{
    // Synthetic N = 512 (the size): points of three mechanisms; cancel once the status bar shows the
    // longest stage inside a point, softmax's singular values.
    test::TestWindow w;
    QSignalSpy finished(&w, &MainWindow::sweepFinished);
    SweepParams p;
    p.synthetic = true;
    p.synthKind = QStringLiteral("local1d");
    p.d = 32;
    p.seeds = 4;
    p.values = QStringLiteral("512,512,512,512");
    w.runSweep(p);
    QElapsedTimer clock;
    clock.start();
    QLabel* stage = nullptr;
    while (clock.elapsed() < 120000 && finished.isEmpty()) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        stage = sweepStage(w);
        if (stage && stage->text().contains(QStringLiteral(", softmax: singular values")))
            break;
        QThread::msleep(1);
    }
    ASSERT_TRUE(finished.isEmpty()) << "finished before it was cancelled";
    ASSERT_NE(stage, nullptr);
    const QString inside = stage->text();
    const qint64 cancelAt = clock.elapsed();
    w.cancelSweeps();
    EXPECT_TRUE(stage->text().contains(QStringLiteral("cancelling"))) << stage->text().toStdString();
    while (finished.isEmpty() && clock.elapsed() - cancelAt < 60000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        if (finished.isEmpty()) {
            const QString now = stage->text();
            EXPECT_TRUE(now.contains(QStringLiteral("cancelling"))) << now.toStdString();   // no progress overwrites it
        }
        QThread::msleep(1);
    }
    const qint64 latency = clock.elapsed() - cancelAt;
    ASSERT_EQ(finished.count(), 1);
    EXPECT_EQ(finished.at(0).at(2).toString(), QStringLiteral("cancelled"));
    EXPECT_FALSE(w.isSweeping());
    std::cout << "sweep cancel in the window (synthetic N = 512, at \"" << inside.toStdString() << "\"): cancelled " << latency
              << " ms after Cancel\n";
    EXPECT_LT(latency, 3000);
}

TEST_F(SweepRuns, AFailedSweepsBannerGoesWithTheNextSweep)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    SweepParams bad;
    bad.vary = QLatin1Char('m');
    bad.values = QStringLiteral("4,500");
    w.runSweep(bad);
    ASSERT_TRUE(waitSweeps(w));
    ASSERT_FALSE(w.lastSweepError().isEmpty());
    EXPECT_EQ(w.messageText(), w.lastSweepError());
    // Starting another sweep takes the banner down at once; its success leaves none.
    SweepParams good;
    good.values = QStringLiteral("24,96");
    w.runSweep(good);
    EXPECT_TRUE(w.messageText().isEmpty()) << w.messageText().toStdString();
    ASSERT_TRUE(waitSweeps(w));
    EXPECT_TRUE(w.lastSweepError().isEmpty());
    EXPECT_TRUE(w.messageText().isEmpty()) << w.messageText().toStdString();
}

TEST_F(SweepRuns, MapsZoomSurvivesSaveAndLoad)
{
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({test::threeHeadFile()}));
    ResultView* maps = nullptr;
    for (ResultView* v : w.views())
        if (v->viewName() == QLatin1String("maps"))
            maps = v;
    ASSERT_NE(maps, nullptr);
    QCustomPlot* plot = maps->findChild<QCustomPlot*>();
    ASSERT_NE(plot, nullptr);
    ASSERT_FALSE(plot->axisRects().isEmpty());
    // Zoom as a wheel or drag does: one panel's axes move, the others follow.
    plot->axisRects().front()->axis(QCPAxis::atBottom)->setRange(10.5, 40.5);
    plot->axisRects().front()->axis(QCPAxis::atLeft)->setRange(20.5, 60.5);
    for (QCPAxisRect* r : plot->axisRects())
        EXPECT_DOUBLE_EQ(r->axis(QCPAxis::atBottom)->range().lower, 10.5);
    const QString dir = QString::fromStdString(test::fresh_work_dir("sweep_runs_zoom"));
    QString error;
    ASSERT_TRUE(w.saveSession(dir + "/zoom.attnscope", &error)) << error.toStdString();

    test::TestWindow again;
    ASSERT_TRUE(again.loadSession(dir + "/zoom.attnscope", &error)) << error.toStdString();
    ASSERT_TRUE(waitIdle(again));
    ASSERT_TRUE(again.result());
    ResultView* maps2 = nullptr;
    for (ResultView* v : again.views())
        if (v->viewName() == QLatin1String("maps"))
            maps2 = v;
    QCustomPlot* plot2 = maps2->findChild<QCustomPlot*>();
    ASSERT_EQ(plot2->axisRects().size(), plot->axisRects().size());
    for (int i = 0; i < plot2->axisRects().size(); ++i) {
        const QCPRange x = plot2->axisRects().at(i)->axis(QCPAxis::atBottom)->range();
        const QCPRange y = plot2->axisRects().at(i)->axis(QCPAxis::atLeft)->range();
        EXPECT_DOUBLE_EQ(x.lower, 10.5);
        EXPECT_DOUBLE_EQ(x.upper, 40.5);
        EXPECT_DOUBLE_EQ(y.lower, 20.5);
        EXPECT_DOUBLE_EQ(y.upper, 60.5);
    }
    EXPECT_EQ(maps2->saveState(), maps->saveState());
}
