// The main window during a long dense SVD: the status bar's progress moves while the singular values
// are computed, and Cancel ends the computation as cancelled (the SVD checks between columns). Prints
// the cancel latency; asserts no timing. ATTNSCOPE_CANCEL_N sets N (default 1500; docs/gui.md's latency
// is from ATTNSCOPE_CANCEL_N=8192).
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QLabel>
#include <QProgressBar>
#include <QSignalSpy>
#include <QStatusBar>
#include <QThread>
#include <cstdlib>
#include <iostream>

#include <gtest/gtest.h>

#include "analysis/synth.h"
#include "main_window.h"
#include "support/test_support.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;

TEST(WindowCancel, ProgressMovesDuringTheSvdAndCancelStopsIt)
{
    test::useTestSettings();
    const char* env = std::getenv("ATTNSCOPE_CANCEL_N");
    const Eigen::Index n = env ? std::atol(env) : 1500, d = 32;
    const std::string dir = test::fresh_work_dir("window_cancel");
    analysis::SynthOptions o;
    o.n = n;
    o.d = d;
    o.kind = "local1d";
    o.seed = 2;
    const std::string path = dir + "/big.h5";
    test::write_synthetic_h5(path, o, 1ULL << 31);

    test::TestWindow w;
    QSignalSpy finished(&w, &MainWindow::computationFinished);
    QElapsedTimer clock;
    clock.start();
    w.openFiles({QString::fromStdString(path)});
    w.computeNow();
    // The status bar's stage label and progress bar (the first progress bar is the computation's).
    QLabel* stage = nullptr;
    for (QLabel* l : w.statusBar()->findChildren<QLabel*>())
        if (l->isVisible() && l->text().contains(QStringLiteral("reading")) && !stage)
            stage = l;
    QProgressBar* bar = w.statusBar()->findChildren<QProgressBar*>().value(0);
    ASSERT_TRUE(bar);

    // Wait until the progress has moved twice inside the softmax SVD, then cancel.
    int svdValues = 0, lastValue = -1;
    qint64 svdStartedMs = -1;
    while (clock.elapsed() < 1200000 && finished.isEmpty()) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
        if (!stage)
            for (QLabel* l : w.statusBar()->findChildren<QLabel*>())
                if (l->text().contains(QStringLiteral(": ")))
                    stage = l;
        if (stage && stage->text() == QStringLiteral("softmax: singular values")) {
            if (svdStartedMs < 0)
                svdStartedMs = clock.elapsed();
            if (bar->value() != lastValue) {
                lastValue = bar->value();
                ++svdValues;
            }
            if (svdValues >= 3)
                break;
        }
        QThread::msleep(2);
    }
    ASSERT_TRUE(finished.isEmpty()) << "finished before the SVD was cancelled";
    ASSERT_GE(svdValues, 3) << "the progress bar did not move during the SVD";
    const int valueAtCancel = bar->value();
    const qint64 cancelAt = clock.elapsed();
    w.cancelComputation();
    while (finished.isEmpty() && clock.elapsed() - cancelAt < 600000) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        QThread::msleep(1);
    }
    const qint64 latency = clock.elapsed() - cancelAt;
    ASSERT_EQ(finished.count(), 1);
    EXPECT_FALSE(finished.last().at(0).toBool());
    EXPECT_EQ(finished.last().at(1).toString(), QStringLiteral("cancelled"));
    EXPECT_FALSE(w.isComputing());
    EXPECT_LT(valueAtCancel, 1000);
    std::cout << "N = " << n << ": SVD stage reached after " << svdStartedMs << " ms, cancelled at " << cancelAt
              << " ms (progress " << valueAtCancel / 10.0 << " %), finished cancelled " << latency << " ms later\n";
}
