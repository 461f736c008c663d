// Sessions store every path relative to the session file, the learned mixing file included (before, it
// was stored as the panel held it: relative to the working directory), and a session refused by its rules
// leaves the window as it was (docs/security.md "Sessions").
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>

#include <gtest/gtest.h>

#include "io/writers.h"
#include "support/test_support.h"
#include "data_browser.h"
#include "main_window.h"
#include "mechanism_panel.h"
#include "session.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;

namespace {

class WindowSessionPaths : public test::MainWindowTest {};

// Restores the working directory on leaving the scope.
struct WorkingDirectory {
    QString saved = QDir::currentPath();
    explicit WorkingDirectory(const QString& to) { QDir::setCurrent(to); }
    ~WorkingDirectory() { QDir::setCurrent(saved); }
};

QJsonObject readJson(const QString& path)
{
    QFile f(path);
    EXPECT_TRUE(f.open(QIODevice::ReadOnly)) << path.toStdString();
    return QJsonDocument::fromJson(f.readAll()).object();
}

}  // namespace

TEST_F(WindowSessionPaths, MixingFileIsStoredRelativeToTheSessionAndFoundFromAnywhere)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir("window_session_paths"));
    const QString data = QDir(dir).filePath(QStringLiteral("data.h5"));
    std::vector<double> q(16 * 4), k(16 * 4);
    for (std::size_t i = 0; i < q.size(); ++i) {
        q[i] = std::sin(0.37 * double(i)) + 0.1;
        k[i] = std::cos(0.23 * double(i)) + 0.2;
    }
    io::write_hdf5(data.toStdString(), {{"/q", {1, 16, 4}, q}, {"/k", {1, 16, 4}, k}});
    io::write_npy(QDir(dir).filePath(QStringLiteral("mix.npy")).toStdString(), Eigen::MatrixXd::Identity(4, 4));
    const QString session = QDir(dir).filePath(QStringLiteral("s.attnscope"));
    {
        // The panel holds the mixing file relative to the working directory, as a user may type it.
        WorkingDirectory cwd(dir);
        test::TestWindow w;
        ASSERT_TRUE(w.openAndWait({data}));
        QJsonObject mech = w.mechanismPanel()->saveState();
        mech[QStringLiteral("block_mode")] = QStringLiteral("blocks");
        mech[QStringLiteral("blocks")] = 4;
        mech[QStringLiteral("mixing")] = QStringLiteral("file");
        mech[QStringLiteral("mixing_file")] = QStringLiteral("mix.npy");
        w.mechanismPanel()->restoreState(mech);
        ASSERT_TRUE(test::waitIdle(w));
        QDir().mkpath(QStringLiteral("sub"));
        QString error;
        ASSERT_TRUE(w.saveSession(QDir(dir).filePath(QStringLiteral("sub/s.attnscope")), &error)) << error.toStdString();
        ASSERT_TRUE(w.saveSession(session, &error)) << error.toStdString();
    }
    EXPECT_EQ(readJson(session).value(QStringLiteral("mechanism")).toObject().value(QStringLiteral("mixing_file")).toString(),
              QStringLiteral("mix.npy"));
    EXPECT_EQ(readJson(QDir(dir).filePath(QStringLiteral("sub/s.attnscope")))
                  .value(QStringLiteral("mechanism")).toObject().value(QStringLiteral("mixing_file")).toString(),
              QStringLiteral("../mix.npy"));

    // Opened from another working directory, the session finds its data and its mixing file.
    WorkingDirectory cwd(QStringLiteral("/"));
    test::TestWindow w;
    QString error;
    ASSERT_TRUE(w.loadSession(session, &error)) << error.toStdString();
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_TRUE(w.lastError().isEmpty()) << w.lastError().toStdString();
    EXPECT_EQ(w.mechanismPanel()->mixingFile(), QDir(dir).filePath(QStringLiteral("mix.npy")));
    ASSERT_TRUE(w.result());

    // A refused session (a recipe above its folder) changes nothing in the window and writes nothing.
    const QString bad = QDir(dir).filePath(QStringLiteral("bad.attnscope"));
    QJsonObject doc = readJson(session);
    doc[QStringLiteral("generate")] = QJsonObject{{QStringLiteral("../x.h5"), QJsonObject{{QStringLiteral("n"), 16}, {QStringLiteral("d"), 4}}}};
    ASSERT_TRUE(writeSessionFile(bad, doc, &error)) << error.toStdString();
    const auto before = w.result();
    EXPECT_FALSE(w.loadSession(bad, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("generate[\"../x.h5\"]"))) << error.toStdString();
    EXPECT_FALSE(w.applySession(doc, bad, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("generate[\"../x.h5\"]"))) << error.toStdString();
    EXPECT_EQ(w.result(), before);
    EXPECT_EQ(w.dataBrowser()->files(), QStringList{data});
    EXPECT_FALSE(QFile::exists(QDir(dir).filePath(QStringLiteral("../x.h5"))));
}
