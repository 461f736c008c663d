#pragma once
// Helpers shared by the widget tests (all run offscreen, see qt_test_main.cpp): explore results of data
// files, the plots inside a view, the export checks, and the main-window tests' settings, fixtures (NumPy
// files, a multi-head file written by attnscope synth) and waiting for the window's background work.
#include <functional>
#include <memory>
#include <string>

#include <QList>
#include <QString>
#include <QStringList>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "main_window.h"
#include "result_view.h"

namespace attnscope::test {

// ------------------------------------------------------------------------------------------ views
using ExploreResultPtr = std::shared_ptr<const analysis::ExploreResult>;

// tests/../data/<name>: the sample activation files.
std::string dataPath(const std::string& name);

// explore() of the file's /q and /k (everything else default until `configure` adjusts the request).
ExploreResultPtr exploreFile(const std::string& path, const std::function<void(analysis::ExploreRequest&)>& configure = {});

QCustomPlot* plotOf(widgets::ResultView* view);
// Resizes `view` to `size`, gives it its data (setData), shows it and replots its plot, in that order
// (the maps view lays its panels out for the size it has when the data arrives); returns the plot.
QCustomPlot* showOnScreen(widgets::ResultView* view, QSize size, const std::function<void()>& setData = {});
// The first graph whose name starts with `prefix`, or nullptr.
QCPGraph* graphNamed(QCustomPlot* plot, const QString& prefix);
QList<QCPColorMap*> colourMaps(QCustomPlot* plot);
QList<QCPColorScale*> colourScales(QCustomPlot* plot);
// Distinct colours among every other pixel of every other row; the fraction of those pixels that are not
// (nearly) white in *nonWhiteFraction when given.
int distinctColours(const QImage& img, double* nonWhiteFraction = nullptr);

struct ExportChecks {
    bool colourful = true;   // the PNG has > 1 % ink and > 40 colours (else > 0.1 % and > 8)
    bool hiDpi = false;      // also a 192 dpi PNG of twice the size, PDF and SVG written at 192 dpi, the
                             // PDF under 30 MiB and the SVG with an <svg> element
};
// Exports `view` as <dir>/<viewName>_<tag>.png, .pdf and .svg (96 dpi) and checks each file: the PNG's
// size and ink, a PDF header and size, an SVG that parses as XML with more than 10 elements in DejaVu Sans.
void checkExports(widgets::ResultView* view, const QString& dir, const QString& tag, const ExportChecks& checks);

// ------------------------------------------------------------------------------------ main window
// Recent files and settings go to a test folder of organisation "AttnScopeTest".
void useTestSettings();

// The main-window tests' fixture: test settings for every test.
class MainWindowTest : public ::testing::Test {
protected:
    void SetUp() override { useTestSettings(); }
};

// A main window that never waits for a user (setInteractive(false): no dialogs).
class TestWindow : public widgets::MainWindow {
public:
    TestWindow() { setInteractive(false); }
    // Opens `files` and waits until the computation they start has finished (waitIdle).
    bool openAndWait(const QStringList& files);
};

// The window's files written by NumPy / h5py (make_window_fixtures.py), once per process.
QString windowFixture(const char* name);
// A 3-head 1-D file (N = 96: no square grid guessed) written by `attnscope synth`, once per process. Runs
// the attnscope executable: a test that calls it depends on the attnscope target.
QString threeHeadFile();

// Spins the event loop until done() (true) or until `ms` have passed (false).
bool waitUntil(const std::function<bool()>& done, int ms = 120000);
// ... until the window has no computation scheduled or running.
bool waitIdle(const widgets::MainWindow& w, int ms = 120000);
// ... until it runs neither a sweep nor a computation.
bool waitSweeps(const widgets::MainWindow& w, int ms = 120000);

}  // namespace attnscope::test
