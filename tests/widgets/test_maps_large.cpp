// The maps view at large N: zoomed out it draws reduced images no larger than the panels' pixels, zoomed
// in the visible region at full resolution, and panning / zooming only reads what it draws. Prints how long
// each repaint takes (never asserted: timings belong to docs/gui.md). ATTNSCOPE_MAPS_N sets N (default
// 3000; docs/gui.md's numbers are from ATTNSCOPE_MAPS_N=8192); ATTNSCOPE_MAPS_NO_PYRAMID=1 times the
// view reading the matrices themselves (results made without explore()).
#include <QElapsedTimer>
#include <QImage>
#include <QPainter>
#include <QTest>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "views.h"
#include "widget_test_support.h"

using namespace attnscope;
using attention::Mechanism;
using test::colourMaps;

namespace {

// Banded matrices with an isolated peak, and their pyramids as explore() makes them for N > 1024 (no
// spectra: only the view is timed).
std::shared_ptr<const analysis::ExploreResult> bandedResult(Eigen::Index n)
{
    auto r = std::make_shared<analysis::ExploreResult>();
    r->n = n;
    r->d = 8;
    int k = 0;
    for (Mechanism m : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla}) {
        analysis::MechanismOutcome o;
        o.result.mechanism = m;
        auto A = std::make_shared<Eigen::MatrixXd>(n, n);
        const double width = 8.0 * (k + 1);
        for (Eigen::Index j = 0; j < n; ++j)
            for (Eigen::Index t = 0; t < n; ++t)
                (*A)(t, j) = 1.0 / (width + static_cast<double>(std::abs(t - j)));
        (*A)(n / 3, n / 2 + k) = 0.9;   // an isolated peak that max reduction must keep
        if (!std::getenv("ATTNSCOPE_MAPS_NO_PYRAMID"))   // as explore() does
            o.pyramid = std::make_shared<const analysis::MatrixPyramid>(analysis::make_pyramid(*A));
        o.matrix = std::move(A);
        o.allowed_keys.assign(static_cast<std::size_t>(n), n);
        r->outcomes.push_back(std::move(o));
        ++k;
    }
    return r;
}

}  // namespace

TEST(MapsViewLarge, ReducedWhenZoomedOutFullResolutionWhenZoomedIn)
{
    const char* env = std::getenv("ATTNSCOPE_MAPS_N");
    const Eigen::Index n = env ? std::atol(env) : 3000;
    QElapsedTimer clock;
    clock.start();
    const auto result = bandedResult(n);
    std::cout << "N = " << n << ": matrices and pyramids made in " << clock.elapsed() << " ms\n";

    std::unique_ptr<widgets::ResultView> view(widgets::createMapsView());
    view->resize(1500, 600);
    view->show();
    QCoreApplication::processEvents();
    clock.restart();
    view->setResult(result);
    std::cout << "setResult (statistics, first reduced images): " << clock.elapsed() << " ms\n";
    QCustomPlot* plot = view->findChild<QCustomPlot*>();
    ASSERT_TRUE(plot);
    plot->replot(QCustomPlot::rpImmediateRefresh);
    QTest::qWait(50);   // the refresh at the panels' on-screen size
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 3);

    // Zoomed out: one cell per screen pixel at most (device pixels of a panel, with some margin).
    const QRect panel = plot->axisRect(0)->rect();
    for (QCPColorMap* m : maps) {
        EXPECT_LE(m->data()->keySize(), 2 * panel.width() + 2);
        EXPECT_LE(m->data()->valueSize(), 2 * panel.height() + 2);
        EXPECT_LT(m->data()->keySize(), n);
    }
    // Max reduction keeps the isolated peak.
    double peak = 0;
    for (int i = 0; i < maps[0]->data()->keySize(); ++i)
        for (int j = 0; j < maps[0]->data()->valueSize(); ++j)
            peak = std::max(peak, maps[0]->data()->cell(i, j));
    EXPECT_FLOAT_EQ(peak, 0.9f);   // (pyramid levels are floats)

    // Interactive steps: set the range as a drag or the wheel does; the view refreshes its images 15 ms
    // after the last change (debounce, included in "images"), then the plot repaints.
    auto repaint = [&](double x0, double x1, double y0, double y1, const char* what) {
        maps[0]->data()->clear();   // size 0 until the view refreshes it
        plot->axisRect(0)->axis(QCPAxis::atBottom)->setRange(x0, x1);
        plot->axisRect(0)->axis(QCPAxis::atLeft)->setRange(y0, y1);
        QElapsedTimer t;
        t.start();
        while (maps[0]->data()->keySize() == 0 && t.elapsed() < 60000)
            QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
        const qint64 refresh = t.elapsed();
        t.restart();
        plot->replot(QCustomPlot::rpImmediateRefresh);
        std::cout << "  " << what << ": images " << refresh << " ms, draw " << t.elapsed() << " ms ("
                  << maps[0]->data()->keySize() << " x " << maps[0]->data()->valueSize() << " cells)\n";
    };
    const double N = static_cast<double>(n);
    std::cout << "repaints (3 panels, window 1500 x 600):\n";
    repaint(N / 4, N / 4 + N / 2, N / 4, N / 4 + N / 2, "zoom to the middle half");
    repaint(N / 4 + N / 16, N / 4 + N / 2 + N / 16, N / 4, N / 4 + N / 2, "pan by N/16");
    repaint(N / 2 - 1024, N / 2 + 1024, N / 2 - 1024, N / 2 + 1024, "zoom to 2048 x 2048");
    repaint(N / 2 - 256, N / 2 + 256, N / 2 - 256, N / 2 + 256, "zoom to 512 x 512");
    repaint(N / 2 - 200, N / 2 + 312, N / 2 - 256, N / 2 + 256, "pan at 512 x 512");
    repaint(N / 2 - 64.5, N / 2 + 63.5, N / 2 - 64.5, N / 2 + 63.5, "zoom to 128 x 128");
    // Zoomed in to fewer tokens than pixels: every entry of the visible region, exactly.
    for (QCPColorMap* m : maps) {
        EXPECT_EQ(m->data()->keySize(), 128);
        EXPECT_EQ(m->data()->valueSize(), 128);
    }
    const auto& A = *result->outcomes[0].matrix;
    const Eigen::Index r0 = n / 2 - 64;
    EXPECT_DOUBLE_EQ(maps[0]->data()->cell(3, 5), A(r0 + 5, r0 + 3));
    // Export: up to 1024 cells per axis whatever the panels' size.
    QImage canvas(1800, 600, QImage::Format_ARGB32_Premultiplied);
    plot->axisRect(0)->axis(QCPAxis::atBottom)->setRange(-0.5, N - 0.5);
    plot->axisRect(0)->axis(QCPAxis::atLeft)->setRange(-0.5, N - 0.5);
    {
        QPainter painter(&canvas);
        view->renderTo(&painter, canvas.size(), 1.0);
    }
    EXPECT_EQ(maps[0]->data()->keySize(), std::min<Eigen::Index>(n, 1024));
    repaint(-0.5, N - 0.5, -0.5, N - 0.5, "zoomed out again");
}
