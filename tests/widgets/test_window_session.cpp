// Sessions: save, load into a fresh window, same state and results; the --session / --screenshot mode of
// the real attnscope binary writes a non-blank PNG (also without any display) and fails cleanly.
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QFileInfo>
#include <QJsonDocument>

#include <set>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "data_browser.h"
#include "main_window.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"
#include "session.h"
#include "support/attnscope_binary.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::kNoDisplay;
using test::run_attnscope;
using test::waitIdle;

namespace {

std::string shellQuote(const QString& s) { return test::shell_quote(s.toStdString()); }

// No display, but the offscreen platform asked for explicitly.
const std::string kOffscreen = "env -u DISPLAY QT_QPA_PLATFORM=offscreen ";

// A configured window: layer 1, head 1, causal, chunk blocks, a query, the spectrum view.
QString writeSession(const QString& dir)
{
    test::TestWindow w;
    const QString data = test::windowFixture("nested.h5");
    EXPECT_TRUE(w.openAndWait({data}));
    EXPECT_TRUE(w.dataBrowser()->setAssignment(TensorRole::queries, data, QStringLiteral("/layers/1/q")));
    EXPECT_TRUE(w.dataBrowser()->setAssignment(TensorRole::keys, data, QStringLiteral("/layers/1/k")));
    w.selectionPanel()->setIndex(QLatin1Char('h'), 1);
    QJsonObject mech = w.mechanismPanel()->saveState();
    mech[QStringLiteral("causal")] = true;
    mech[QStringLiteral("block_mode")] = QStringLiteral("chunk");
    mech[QStringLiteral("chunk")] = 4;
    mech[QStringLiteral("mixing")] = QStringLiteral("causal");
    w.mechanismPanel()->restoreState(mech);
    EXPECT_TRUE(waitIdle(w));
    w.setQuery(7);
    w.setCurrentView(QStringLiteral("spectrum"));
    const QString path = QDir(dir).filePath(QStringLiteral("s.attnscope"));
    QString error;
    EXPECT_TRUE(w.saveSession(path, &error)) << error.toStdString();
    return path;
}

class WindowSessionTest : public test::MainWindowTest {};

}  // namespace

TEST_F(WindowSessionTest, RoundTripRestoresEverything)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir("window_session_roundtrip"));
    const QString path = writeSession(dir);

    QString error;
    const auto doc = readSessionFile(path, &error);
    ASSERT_TRUE(doc) << error.toStdString();
    // Readable: indented JSON, paths relative to the session, every option by name.
    const QString text = QString::fromUtf8([&] {
        QFile f(path);
        f.open(QIODevice::ReadOnly);
        return f.readAll();
    }());
    EXPECT_TRUE(text.contains(QStringLiteral("\n    \"")));
    EXPECT_EQ(doc->value(QStringLiteral("tensors")).toObject().value(QStringLiteral("q")).toObject().value(QStringLiteral("name")).toString(),
              QStringLiteral("/layers/1/q"));
    EXPECT_FALSE(QFileInfo(doc->value(QStringLiteral("files")).toArray().at(0).toString()).isAbsolute());
    EXPECT_EQ(doc->value(QStringLiteral("mechanism")).toObject().value(QStringLiteral("chunk")).toInt(), 4);
    EXPECT_EQ(doc->value(QStringLiteral("view")).toString(), QStringLiteral("spectrum"));
    EXPECT_EQ(doc->value(QStringLiteral("query")).toInt(), 7);

    test::TestWindow w;
    ASSERT_TRUE(w.loadSession(path, &error)) << error.toStdString();
    ASSERT_TRUE(waitIdle(w));
    ASSERT_TRUE(w.result()) << w.lastError().toStdString();
    EXPECT_EQ(w.sessionState(path), *doc);
    EXPECT_EQ(w.query(), 7);
    EXPECT_EQ(w.currentView()->viewName(), QStringLiteral("spectrum"));
    EXPECT_EQ(w.result()->input["at"]["h"], 1);
    EXPECT_EQ(w.result()->n, 16);
    const auto* mhla = w.result()->find(attention::Mechanism::mhla);
    ASSERT_NE(mhla, nullptr);
    EXPECT_TRUE(mhla->error.empty()) << mhla->error;
    EXPECT_EQ(mhla->result.params["causal"], true);
    EXPECT_EQ(w.result()->blocks->num_blocks, 4);

    // Broken sessions: a readable error, the window survives.
    const QString bad = QDir(dir).filePath(QStringLiteral("bad.attnscope"));
    QFile f(bad);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{ not json");
    f.close();
    EXPECT_FALSE(w.loadSession(bad, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("JSON"))) << error.toStdString();
    QJsonObject missing = *doc;
    missing[QStringLiteral("files")] = QJsonArray{QStringLiteral("no_such_file.h5")};
    EXPECT_FALSE(w.applySession(missing, path, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("no_such_file.h5"))) << error.toStdString();
}

TEST_F(WindowSessionTest, ScreenshotModeWritesPngAndFailsCleanly)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir("window_session_screenshot"));
    const QString session = writeSession(dir);
    const QString png = QDir(dir).filePath(QStringLiteral("shot.png"));
    // No display at all: the binary switches to the offscreen platform itself.
    const auto r = run_attnscope("--session " + shellQuote(session) + " --screenshot " + shellQuote(png), kNoDisplay);
    ASSERT_EQ(r.status, 0) << r.err;
    QImage image(png);
    ASSERT_FALSE(image.isNull());
    EXPECT_GE(image.width(), 800);
    EXPECT_GE(image.height(), 600);
    std::set<QRgb> colours;
    for (int y = 0; y < image.height(); y += 7)
        for (int x = 0; x < image.width(); x += 7)
            colours.insert(image.pixel(x, y));
    EXPECT_GT(colours.size(), 20u);

    // A session that cannot be loaded: exit 2, one error line, no PNG.
    const QString png2 = QDir(dir).filePath(QStringLiteral("none.png"));
    const auto r2 = run_attnscope("--session " + shellQuote(QDir(dir).filePath(QStringLiteral("missing.attnscope"))) +
                                      " --screenshot " + shellQuote(png2),
                                  kOffscreen);
    EXPECT_EQ(r2.status, 2);
    EXPECT_EQ(r2.err.rfind("error: ", 0), 0u) << r2.err;
    EXPECT_FALSE(QFile::exists(png2));

    // A session whose computation fails (keys of another d): exit 2.
    QJsonObject doc = *readSessionFile(session, nullptr);
    QJsonObject tensors;
    tensors[QStringLiteral("q")] = QJsonObject{{QStringLiteral("file"), test::windowFixture("mismatch.h5")},
                                               {QStringLiteral("name"), QStringLiteral("/q")}};
    tensors[QStringLiteral("k")] = QJsonObject{{QStringLiteral("file"), test::windowFixture("mismatch.h5")},
                                               {QStringLiteral("name"), QStringLiteral("/k")}};
    doc[QStringLiteral("tensors")] = tensors;
    doc[QStringLiteral("files")] = QJsonArray{test::windowFixture("mismatch.h5")};
    doc[QStringLiteral("selection")] = QJsonObject();
    const QString failing = QDir(dir).filePath(QStringLiteral("failing.attnscope"));
    ASSERT_TRUE(writeSessionFile(failing, doc, nullptr));
    const auto r3 = run_attnscope("--session " + shellQuote(failing) + " --screenshot " + shellQuote(png2), kOffscreen);
    EXPECT_EQ(r3.status, 2);
    EXPECT_NE(r3.err.find("error: "), std::string::npos) << r3.err;
    EXPECT_FALSE(QFile::exists(png2));

    // Without a display and without --screenshot the app refuses with a clear message.
    const auto r4 = run_attnscope("--session " + shellQuote(session), kNoDisplay);
    EXPECT_EQ(r4.status, 2);
    EXPECT_NE(r4.err.find("error: no display"), std::string::npos) << r4.err;
}
