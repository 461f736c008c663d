// The desktop app run from scripts (docs/cli.md "Desktop app from the command line"): `attnscope FILE...
// --save-session` records what opening the files shows (their attributes as the command line resolves them,
// nothing computed), `--screenshot` and `--view` grab any tab from files or a session, every failure is one
// `error:` line with exit 2 and no file; and every session shipped in docs/ opens and renders from a clean
// checkout (the one on generated data says how to make it, and renders on a small stand-in).
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QSignalSpy>

#include <algorithm>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/inputs.h"
#include "analysis/measure.h"
#include "attention/mixing.h"
#include "io/selection.h"
#include "attention/options.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "session.h"
#include "support/attnscope_binary.h"
#include "widget_test_support.h"

using namespace attnscope;
using test::kNoDisplay;
using test::run_attnscope;

namespace {

class HeadlessWindow : public test::MainWindowTest {};

std::string quoted(const QString& s) { return test::shell_quote(s.toStdString()); }

QString repoPath(const QString& relative) { return QDir::cleanPath(QString::fromStdString(test::tests_path("..")) + QLatin1Char('/') + relative); }

// The documented failure: exit 2 and exactly one line on stderr, starting `error: `.
void expectOneErrorLine(const test::CommandResult& r, const std::string& mentions = {})
{
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    if (!mentions.empty()) {
        EXPECT_NE(r.err.find(mentions), std::string::npos) << "expected '" << mentions << "' in: " << r.err;
    }
}

QJsonObject readSession(const QString& path)
{
    QString error;
    const auto doc = widgets::readSessionFile(path, &error);
    EXPECT_TRUE(doc) << error.toStdString();
    return doc ? *doc : QJsonObject();
}

std::vector<Eigen::Index> ints(const QJsonArray& a)
{
    std::vector<Eigen::Index> out;
    for (const auto& v : a)
        out.push_back(v.toInteger());
    return out;
}

QString sizesText(const nlohmann::json& sizes)
{
    QStringList parts;
    for (const auto& s : sizes)
        parts << QString::number(s.get<long long>());
    return parts.join(QLatin1Char('x'));
}

// Every `.attnscope` file in docs/.
QStringList shippedSessions()
{
    const QDir docs(QStringLiteral(ATTNSCOPE_DOCS_DIR));
    QStringList out;
    for (const QString& f : docs.entryList({QStringLiteral("*.attnscope")}, QDir::Files, QDir::Name))
        out << docs.filePath(f);
    return out;
}

// The maps view of the window's result, shown and grabbed: a picture with colour in it.
void expectMapsRender(test::TestWindow& w, const QString& what)
{
    SCOPED_TRACE(what.toStdString());
    const auto result = w.result();
    ASSERT_TRUE(result) << w.lastError().toStdString();
    for (const auto& o : result->outcomes)
        EXPECT_TRUE(o.error.empty()) << attention::to_string(o.result.mechanism) << ": " << o.error;
    w.setCurrentView(QStringLiteral("maps"));
    w.show();
    test::waitUntil([] { return false; }, 300);   // lay out and replot
    ASSERT_EQ(w.currentView()->viewName(), QStringLiteral("maps"));
    const QImage image = w.currentView()->grab().toImage();
    double ink = 0;
    EXPECT_GT(test::distinctColours(image, &ink), 40);
    EXPECT_GT(ink, 0.05);
}

std::string jsonText(const QJsonValue& v) { return QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact).toStdString(); }

// Each key the shipped session sets is what the window holds after loading it (a misspelt value, e.g. a
// block mode the panel does not know, would silently fall back to a default).
void expectRestoredAsWritten(const test::TestWindow& w, const QString& path, const QJsonObject& doc)
{
    const QJsonObject state = w.sessionState(path);
    for (const char* part : {"selection", "mechanism"}) {
        const QJsonObject written = doc.value(QLatin1String(part)).toObject();
        const QJsonObject held = state.value(QLatin1String(part)).toObject();
        for (auto it = written.begin(); it != written.end(); ++it)
            EXPECT_EQ(jsonText(held.value(it.key())), jsonText(it.value())) << part << "." << it.key().toStdString() << " of "
                                                                             << path.toStdString();
    }
}

}  // namespace

// `attnscope FILE --save-session` for every bundled sample: the file's attributes as `attnscope analyze`
// resolves them (input.defaults_from_file, each mechanism's params), without computing anything.
TEST_F(HeadlessWindow, SaveSessionRecordsEachSampleAsTheCommandLineResolvesIt)
{
    const QString work = QString::fromStdString(test::fresh_work_dir("headless_save_samples"));
    const QDir data(QString::fromStdString(test::dataPath("")));
    const QStringList samples = data.entryList({QStringLiteral("*.h5")}, QDir::Files, QDir::Name);
    ASSERT_GE(samples.size(), 6);
    for (const QString& sample : samples) {
        SCOPED_TRACE(sample.toStdString());
        const QString out = QDir(work).filePath(QFileInfo(sample).completeBaseName() + QStringLiteral(".attnscope"));
        const auto r = run_attnscope(quoted(data.filePath(sample)) + " --save-session " + quoted(out), kNoDisplay);
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "wrote " + out.toStdString() + "\n");
        const QJsonObject doc = readSession(out);
        const QJsonObject selection = doc.value(QStringLiteral("selection")).toObject();
        const QJsonObject mechanism = doc.value(QStringLiteral("mechanism")).toObject();
        auto tensor = [&](const char* role) {
            const QJsonObject t = doc.value(QStringLiteral("tensors")).toObject().value(QLatin1String(role)).toObject();
            return widgets::sessionResolvedPath(out, t.value(QStringLiteral("file")).toString()) + QLatin1Char(':') +
                   t.value(QStringLiteral("name")).toString();
        };
        const QString q = tensor("q"), k = tensor("k");
        ASSERT_TRUE(q.startsWith(QFileInfo(data.filePath(sample)).absoluteFilePath())) << q.toStdString();

        const auto a = run_attnscope("analyze --q " + quoted(q) + " --k " + quoted(k) + " --metrics entropy --json -");
        ASSERT_EQ(a.status, 0) << a.err;
        const nlohmann::json analyzed = nlohmann::json::parse(a.out);
        const nlohmann::json& input = analyzed["input"];
        const nlohmann::json fromFile = input.value("defaults_from_file", nlohmann::json::object());

        // The attributes, key by key.
        EXPECT_EQ(selection.value(QStringLiteral("prefix_tokens")).toInt(), input["prefix_tokens"].get<int>());
        EXPECT_EQ(mechanism.value(QStringLiteral("causal")).toBool(), fromFile.value("causal", false));
        const std::vector<Eigen::Index> tokenGrid = ints(selection.value(QStringLiteral("token_grid")).toArray());
        if (fromFile.contains("grid")) {
            EXPECT_EQ(tokenGrid, fromFile["grid"].get<std::vector<Eigen::Index>>());
            EXPECT_EQ(mechanism.value(QStringLiteral("block_mode")).toString(), QStringLiteral("grid"));
            EXPECT_EQ(mechanism.value(QStringLiteral("grid")).toString(), QString());   // the selection's grid
            EXPECT_EQ(mechanism.value(QStringLiteral("block_grid")).toString(), sizesText(fromFile["block_grid"]));
        }

        // Every parameter of every mechanism: the window's options as the core resolves them.
        widgets::MechanismPanel panel;
        panel.setContext(input["n"].get<qint64>(), tokenGrid, fromFile.contains("grid"));
        panel.restoreState(mechanism);
        attention::AttentionOptions options = panel.options();
        if (!options.mixing.preset.empty() && !attention::is_mixing_preset(options.mixing.preset)) {
            // A learned mixing matrix (the file's attribute): loaded and picked for the head as the core does.
            analysis::load_mixing(options.mixing, io::parse_tensor_ref(options.mixing.preset));
            io::AxisSelection sel;
            options = analysis::with_head_mixing(options, analysis::pair_heads(io::parse_tensor_ref(q.toStdString()), io::parse_tensor_ref(k.toStdString()), sel));
        }
        // Without a grid attribute the window may guess a display grid from N = s x s (docs/gui.md, Selection
        // dock), but MHLA keeps the command line's blocks: every mechanism's parameters agree.
        for (const auto& result : analyzed["results"]) {
            const attention::Mechanism m = attention::parse_mechanism(result["mechanism"].get<std::string>());
            const auto params = analysis::mechanism_params(m, analysis::options_for(m, options), input["n"].get<Eigen::Index>(),
                                                           input["d"].get<Eigen::Index>());
            // A learned matrix's FILE:DATASET, compared by the file it names (the paths may be spelt differently).
            const auto same_file = [](nlohmann::json p) {
                if (p.contains("mixing") && !attention::is_mixing_preset(p["mixing"].get<std::string>())) {
                    const io::TensorRef r = io::parse_tensor_ref(p["mixing"].get<std::string>());
                    p["mixing"] = std::filesystem::weakly_canonical(r.file).string() + ":" + r.name;
                }
                return p;
            };
            EXPECT_EQ(same_file(nlohmann::json::parse(params.dump())), same_file(result["params"])) << result["mechanism"];
        }
    }
}

// The character LM's causal attribute in the saved session, written by the window without a computation.
TEST_F(HeadlessWindow, SavedWithoutComputing)
{
    test::TestWindow w;
    w.setAutoCompute(false);
    QSignalSpy started(&w, &widgets::MainWindow::computationStarted);
    w.openFiles({QString::fromStdString(test::dataPath("char_lm_licenses.h5"))});
    test::waitUntil([] { return false; }, 600);   // longer than the debounce
    EXPECT_EQ(started.count(), 0);
    EXPECT_FALSE(w.isComputing());
    EXPECT_FALSE(w.result());
    const QJsonObject state = w.sessionState(QStringLiteral("s.attnscope"));
    EXPECT_TRUE(state.value(QStringLiteral("mechanism")).toObject().value(QStringLiteral("causal")).toBool());
    w.setAutoCompute(true);
    w.computeNow();
    ASSERT_TRUE(test::waitIdle(w));
    ASSERT_TRUE(w.result()) << w.lastError().toStdString();
    EXPECT_EQ(started.count(), 1);

    // The same through the binary: a file whose computation fails (keys of another d) still saves.
    const QString work = QString::fromStdString(test::fresh_work_dir("headless_save_mismatch"));
    const QString out = QDir(work).filePath(QStringLiteral("m.attnscope"));
    const auto r = run_attnscope(quoted(test::windowFixture("mismatch.h5")) + " --save-session " + quoted(out) + " --view spectrum",
                                 kNoDisplay);
    ASSERT_EQ(r.status, 0) << r.err;
    const QJsonObject doc = readSession(out);
    EXPECT_EQ(doc.value(QStringLiteral("view")).toString(), QStringLiteral("spectrum"));
    EXPECT_EQ(doc.value(QStringLiteral("tensors")).toObject().value(QStringLiteral("k")).toObject().value(QStringLiteral("name")).toString(),
              QStringLiteral("/k"));
}

// --screenshot from data files, with --view choosing the tab, and --view on a session.
TEST_F(HeadlessWindow, ScreenshotOfFilesAndSessionsWithView)
{
    const QString work = QString::fromStdString(test::fresh_work_dir("headless_screenshot"));
    const QString vit = QString::fromStdString(test::dataPath("vit_local2d.h5"));
    QImage images[2];
    const char* views[2] = {"maps", "spectrum"};
    for (int i = 0; i < 2; ++i) {
        const QString png = QDir(work).filePath(QStringLiteral("%1.png").arg(QLatin1String(views[i])));
        const auto r = run_attnscope(quoted(vit) + " --screenshot " + quoted(png) + " --view " + views[i], kNoDisplay);
        ASSERT_EQ(r.status, 0) << r.err;
        images[i] = QImage(png);
        ASSERT_FALSE(images[i].isNull());
        EXPECT_GE(images[i].width(), 800);
        EXPECT_GE(images[i].height(), 600);
        EXPECT_GT(test::distinctColours(images[i]), 40);
    }
    ASSERT_EQ(images[0].size(), images[1].size());
    qint64 differing = 0;
    for (int y = 0; y < images[0].height(); y += 4)
        for (int x = 0; x < images[0].width(); x += 4)
            differing += images[0].pixel(x, y) != images[1].pixel(x, y);
    EXPECT_GT(differing, 5000) << "the maps and spectrum screenshots look alike";

    const QString png = QDir(work).filePath(QStringLiteral("session.png"));
    const auto r = run_attnscope("--session " + quoted(repoPath(QStringLiteral("docs/screenshot-lm.attnscope"))) + " --screenshot " +
                                     quoted(png) + " --view metrics",
                                 kNoDisplay);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_FALSE(QImage(png).isNull());

    // --size grabs a window of that size: a small laptop screen.
    const QString small = QDir(work).filePath(QStringLiteral("small.png"));
    const auto s = run_attnscope(quoted(vit) + " --screenshot " + quoted(small) + " --view entropy --size 1280x720", kNoDisplay);
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_EQ(QImage(small).size(), QSize(1280, 720));
}

// Every scripted failure: one `error:` line, exit 2, no output file.
TEST_F(HeadlessWindow, ScriptedRunsFailCleanly)
{
    const QString work = QString::fromStdString(test::fresh_work_dir("headless_errors"));
    const std::string vit = quoted(QString::fromStdString(test::dataPath("vit_local2d.h5")));
    const QString png = QDir(work).filePath(QStringLiteral("out.png"));
    const QString session = QDir(work).filePath(QStringLiteral("out.attnscope"));
    const std::string missing = QDir(work).filePath(QStringLiteral("missing.h5")).toStdString();
    auto nothingWritten = [&] {
        EXPECT_FALSE(QFile::exists(png));
        EXPECT_FALSE(QFile::exists(session));
        EXPECT_EQ(QDir(work).entryList(QDir::Files | QDir::Hidden).size(), 1) << QDir(work).entryList().join(' ').toStdString();
    };
    // q.npy alone: queries but no keys.
    QFile::copy(test::windowFixture("q.npy"), QDir(work).filePath(QStringLiteral("q.npy")));

    expectOneErrorLine(run_attnscope(test::shell_quote(missing) + " --save-session " + quoted(session), kNoDisplay), missing);
    expectOneErrorLine(run_attnscope(test::shell_quote(missing) + " --screenshot " + quoted(png), kNoDisplay), missing);
    expectOneErrorLine(run_attnscope(vit + " --screenshot " + quoted(png) + " --view bogus", kNoDisplay), "--view bogus");
    expectOneErrorLine(run_attnscope(vit + " --screenshot " + quoted(png) + " --size 0x720", kNoDisplay), "--size 0x720");
    expectOneErrorLine(run_attnscope(vit + " --screenshot " + quoted(png) + " --size big", kNoDisplay), "--size big");
    expectOneErrorLine(run_attnscope(vit + " --screenshot " + quoted(png) + " --view curves", kNoDisplay), "session");
    expectOneErrorLine(run_attnscope(vit + " --save-session " + quoted(QDir(work).filePath(QStringLiteral("no/such/s.attnscope"))),
                                     kNoDisplay),
                       "no/such/s.attnscope");
    expectOneErrorLine(run_attnscope(vit + " --save-session " + quoted(QDir(work).filePath(QStringLiteral("s.json"))), kNoDisplay),
                       ".attnscope");
    expectOneErrorLine(run_attnscope(quoted(repoPath(QStringLiteral("docs/screenshot-lm.attnscope"))) + " --save-session " + quoted(session),
                                     kNoDisplay),
                       "session already");
    expectOneErrorLine(run_attnscope(vit + " --save-session " + quoted(session) + " --screenshot " + quoted(png), kNoDisplay));
    expectOneErrorLine(run_attnscope(quoted(QDir(work).filePath(QStringLiteral("q.npy"))) + " --save-session " + quoted(session), kNoDisplay),
                       "no queries and keys");
    expectOneErrorLine(run_attnscope("--screenshot " + quoted(png), kNoDisplay), "needs data files");
    // A computation that fails (keys of another d), named with its file.
    expectOneErrorLine(run_attnscope(quoted(test::windowFixture("mismatch.h5")) + " --screenshot " + quoted(png), kNoDisplay), "mismatch.h5");
    nothingWritten();
}

// docs/*.attnscope open and render from a clean checkout: their data is in the repository.
TEST_F(HeadlessWindow, ShippedSessionsOpenAndRender)
{
    int rendered = 0;
    for (const QString& path : shippedSessions()) {
        const QJsonObject doc = readSession(path);
        if (doc.contains(QStringLiteral("data_note")) || doc.contains(QStringLiteral("generate")))
            continue;   // generated data: SessionOnGeneratedDataMakesItOnFirstUse
        SCOPED_TRACE(path.toStdString());
        for (const auto& f : doc.value(QStringLiteral("files")).toArray()) {
            const QString file = widgets::sessionResolvedPath(path, f.toString());
            EXPECT_TRUE(file.startsWith(repoPath(QStringLiteral("data")) + QLatin1Char('/'))) << file.toStdString();
            EXPECT_FALSE(file.contains(QStringLiteral("/generated/"))) << file.toStdString();
        }
        test::TestWindow w;
        QString error;
        ASSERT_TRUE(w.loadSession(path, &error)) << error.toStdString();
        ASSERT_TRUE(test::waitIdle(w, 300000));
        expectRestoredAsWritten(w, path, doc);
        expectMapsRender(w, path);
        ++rendered;
    }
    EXPECT_GE(rendered, 2);   // screenshot-main, screenshot-lm
}

// A session on data the repository does not ship (docs/screenshot-n8192.attnscope, N = 8192) makes it on
// first use from its "generate" recipe: the file the session reads (generated here without computing the
// N = 8192 analysis); with a small stand-in recipe of the same kind the session opens and renders.
TEST_F(HeadlessWindow, SessionOnGeneratedDataMakesItOnFirstUse)
{
    const QString work = QString::fromStdString(test::fresh_work_dir("headless_generated"));
    int checked = 0;
    for (const QString& shipped : shippedSessions()) {
        const QJsonObject doc = readSession(shipped);
        const QJsonObject recipes = doc.value(QStringLiteral("generate")).toObject();
        if (recipes.isEmpty())
            continue;
        SCOPED_TRACE(shipped.toStdString());
        // The same layout as the repository (docs/ beside data/), without the generated data.
        const QString copy = QDir(work).filePath(QStringLiteral("docs/") + QFileInfo(shipped).fileName());
        ASSERT_TRUE(QDir(work).mkpath(QStringLiteral("docs")));
        ASSERT_TRUE(QFile::copy(shipped, copy));
        const QString data = widgets::sessionResolvedPath(copy, doc.value(QStringLiteral("files")).toArray().at(0).toString());
        ASSERT_FALSE(QFile::exists(data));
        QStringList made;
        QString why;
        ASSERT_TRUE(widgets::generateSessionData(doc, copy, &made, &why)) << why.toStdString();   // what loading does first
        EXPECT_EQ(made, QStringList{data});
        ASSERT_TRUE(QFile::exists(data));
        const auto info = run_attnscope("info --json " + quoted(data));
        ASSERT_EQ(info.status, 0) << info.err;
        const nlohmann::json tensors = nlohmann::json::parse(info.out)["tensors"];
        const QJsonObject q = doc.value(QStringLiteral("tensors")).toObject().value(QStringLiteral("q")).toObject();
        bool found = false;
        for (const auto& t : tensors)
            if (t["name"] == q.value(QStringLiteral("name")).toString().toStdString()) {
                found = true;
                EXPECT_EQ(t["shape"], nlohmann::json::array({1, 8192, 64}));   // docs/gui.md "Large N"
            }
        EXPECT_TRUE(found) << info.out;

        // A stand-in recipe of the same kind at N = 512 (another file): the session opens, computes, renders.
        QJsonObject small = doc;
        const QString standIn = QStringLiteral("generated/stand_in_n512.h5");
        QJsonObject recipe = recipes.begin()->toObject();
        recipe[QStringLiteral("n")] = 512;
        small[QStringLiteral("generate")] = QJsonObject{{standIn, recipe}};
        small[QStringLiteral("files")] = QJsonArray{standIn};
        QJsonObject tensorsSmall = small.value(QStringLiteral("tensors")).toObject();
        for (auto it = tensorsSmall.begin(); it != tensorsSmall.end(); ++it) {
            QJsonObject t = it->toObject();
            t[QStringLiteral("file")] = standIn;
            it.value() = t;
        }
        small[QStringLiteral("tensors")] = tensorsSmall;
        small[QStringLiteral("query")] = 256;
        const QString smallPath = QDir(work).filePath(QStringLiteral("docs/stand_in.attnscope"));
        QString error;
        ASSERT_TRUE(widgets::writeSessionFile(smallPath, small, &error)) << error.toStdString();
        test::TestWindow w;
        ASSERT_TRUE(w.loadSession(smallPath, &error)) << error.toStdString();
        ASSERT_TRUE(test::waitIdle(w, 300000));
        EXPECT_TRUE(QFile::exists(widgets::sessionResolvedPath(smallPath, standIn)));
        expectMapsRender(w, smallPath);
        ++checked;
    }
    EXPECT_GE(checked, 1);   // screenshot-n8192
}
