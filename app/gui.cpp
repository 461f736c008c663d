// The desktop entry: a Qt application around attnscope::widgets::MainWindow, and its scripted runs
// (docs/cli.md "Desktop app from the command line", docs/gui.md "Sessions").
//
//   attnscope [FILE...] [--view NAME]                     opens the files (data or .attnscope sessions)
//   attnscope --session S.attnscope [FILE...] [--view NAME]
//   attnscope (FILE... | --session S.attnscope) --screenshot OUT.png [--view NAME] [--size WxH]
//       waits for every computation, writes a grab of the main window (1500x950, or WxH) to OUT.png and exits
//   attnscope FILE... --save-session OUT.attnscope [--view NAME]
//       writes the session the window shows on opening FILE... (their attributes applied by the window's
//       own rule) without computing anything, and exits
// The scripted runs need no display (they switch to Qt's offscreen platform), exit 0, or 2 with one
// `error:` line and no output file.
#include <QApplication>
#include <QIcon>
#include <QBuffer>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonArray>
#include <QJsonObject>
#include <QPixmap>
#include <QStringList>
#include <QTimer>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/explore.h"
#include "attention/options.h"
#include "data_browser.h"
#include "figure.h"
#include "kernels/kernels.h"
#include "cli.h"
#include "main_window.h"
#include "qt_platform.h"
#include "session.h"
#include "util/error.h"
#include "util/output.h"

namespace attnscope::app {

namespace {

// --screenshot waits this long for the computation (and a session's sweeps): N = 8192 takes minutes on a
// busy 2-core machine (docs/gui.md "Large N"), as long as `attnscope figure --session` waits.
constexpr int kScreenshotTimeoutMinutes = 60;

enum class Mode { window, screenshot, saveSession };

struct GuiArgs {
    std::string session, screenshot, saveSession, view, size;
    int width = 1500, height = 950;   // the --screenshot window (--size WxH)
    QStringList files;
    std::string error;
    Mode mode() const
    {
        return !screenshot.empty() ? Mode::screenshot : !saveSession.empty() ? Mode::saveSession : Mode::window;
    }
};

// The --screenshot window: at least 320 x 240, at most 8000 x 8000 logical pixels.
constexpr std::pair<int, int> kMinWindow{320, 240};
constexpr int kMaxWindow = 8000;

// "WxH" (or "WXH"): two decimal numbers of digits only, each parsed whole with overflow detected (sscanf's
// %d wrapped 4294967616 round to 320), inside the limits above.
bool parseWindowSize(const std::string& text, int* width, int* height)
{
    const std::size_t x = text.find_first_of("xX");
    if (x == std::string::npos)
        return false;
    auto number = [](std::string_view digits, int* out) {
        if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
            return false;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *out);
        return ec == std::errc() && end == digits.data() + digits.size();
    };
    const std::string_view all(text);
    int w = 0, h = 0;
    if (!number(all.substr(0, x), &w) || !number(all.substr(x + 1), &h))
        return false;
    if (w < kMinWindow.first || h < kMinWindow.second || w > kMaxWindow || h > kMaxWindow)
        return false;
    *width = w;
    *height = h;
    return true;
}

bool isSessionFile(const QString& path) { return path.endsWith(QLatin1String(".attnscope"), Qt::CaseInsensitive); }

GuiArgs parse_args(int argc, char** argv)
{
    GuiArgs a;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](const char* name) -> std::string {
            const std::string prefix = std::string(name) + "=";
            if (arg.rfind(prefix, 0) == 0)
                return arg.substr(prefix.size());
            if (i + 1 >= argc) {
                a.error = std::string(name) + " needs a value";
                return {};
            }
            return argv[++i];
        };
        auto is = [&](const char* name) { return arg == name || arg.rfind(std::string(name) + "=", 0) == 0; };
        if (is("--session"))
            a.session = value("--session");
        else if (is("--screenshot"))
            a.screenshot = value("--screenshot");
        else if (is("--save-session"))
            a.saveSession = value("--save-session");
        else if (is("--view"))
            a.view = value("--view");
        else if (is("--size"))
            a.size = value("--size");
        else if (!arg.empty() && arg[0] == '-')
            a.error = "unknown option " + arg +
                      " for the desktop app (FILE..., --session S.attnscope, --screenshot OUT.png, --save-session OUT.attnscope, "
                      "--view NAME, --size WxH; headless subcommands: attnscope --help)";
        else
            a.files << QString::fromLocal8Bit(argv[i]);
        if (!a.error.empty())
            return a;
    }
    if (!a.size.empty()) {
        if (!parseWindowSize(a.size, &a.width, &a.height))
            a.error = "--size " + a.size + ": give the window's width and height in pixels as WxH, e.g. 1280x720 (" +
                      std::to_string(kMinWindow.first) + "x" + std::to_string(kMinWindow.second) + " to " +
                      std::to_string(kMaxWindow) + "x" + std::to_string(kMaxWindow) + ")";
        else if (a.screenshot.empty())
            a.error = "--size sets the window of --screenshot; give --screenshot OUT.png with it";
    }
    if (!a.error.empty())
        return a;
    if (!a.view.empty() && !is_explore_view(a.view) && !is_sweep_view(a.view))
        a.error = "--view " + a.view + " is not one of " + figure_explore_view_names() + " (or curves, overview of a session)";
    else if (!a.screenshot.empty() && !a.saveSession.empty())
        a.error = "--screenshot and --save-session are separate runs: give one of them";
    else if (!a.screenshot.empty() && a.session.empty() && a.files.isEmpty())
        a.error = "--screenshot needs data files or --session S.attnscope";
    else if (!a.saveSession.empty()) {
        if (!a.session.empty())
            a.error = "--save-session writes the session of data files; --session " + a.session + " is one already";
        else if (a.files.isEmpty())
            a.error = "--save-session needs data files: attnscope FILE... --save-session OUT.attnscope";
        else if (!isSessionFile(QString::fromStdString(a.saveSession)))
            a.error = "--save-session " + a.saveSession + ": name a .attnscope file (the app opens sessions by that extension)";
        for (const QString& f : a.files)
            if (a.error.empty() && isSessionFile(f))
                a.error = "--save-session takes data files; " + f.toStdString() + " is a session already";
    }
    // A scripted run given one session among its files loads it as --session (the window would too).
    if (a.error.empty() && a.mode() == Mode::screenshot && a.session.empty()) {
        for (const QString& f : a.files)
            if (isSessionFile(f)) {
                if (!a.session.empty()) {
                    a.error = "--screenshot grabs one session, not " + a.session + " and " + f.toStdString();
                    break;
                }
                a.session = f.toStdString();
            }
        a.files.removeIf(isSessionFile);
    }
    // The grab is written as PNG, whatever the name says: any other name is refused (a .h5 name was written
    // as a PNG under that name).
    if (a.error.empty() && !a.screenshot.empty() && !QString::fromStdString(a.screenshot).endsWith(QLatin1String(".png"), Qt::CaseInsensitive))
        a.error = "--screenshot " + a.screenshot + ": name a .png file (the screenshot is written as a PNG image)";
    // The sweep tabs exist only where a session has run the sweep.
    if (a.error.empty() && is_sweep_view(a.view) && a.session.empty())
        a.error = "--view " + a.view + " shows a sweep: open a session that has one (--session S.attnscope)";
    return a;
}

// Scripted runs promise one `error:` line on stderr: Qt's platform chatter (XDG_RUNTIME_DIR,
// propagateSizeHints on offscreen) is dropped unless ATTNSCOPE_QT_MESSAGES is set.
void quiet_script_handler(QtMsgType type, const QMessageLogContext&, const QString& message)
{
    if (type == QtCriticalMsg || type == QtFatalMsg)
        std::fprintf(stderr, "qt: %s\n", message.toLocal8Bit().constData());
}

int fail(const QString& message)
{
    std::fprintf(stderr, "error: %s\n", message.toLocal8Bit().constData());
    return 2;
}

// A session whose data file does not exist and that cannot make it (widgets/session.h, "generate"): which
// one and, when the session says how to make it (its "data_note"), how. Empty when every file exists or is
// made on loading, or when the session cannot be read (loading it then says why).
QString missingSessionData(const QString& session)
{
    const auto doc = widgets::readSessionFile(session, nullptr);
    if (!doc)
        return {};
    QStringList stored;
    for (const auto& f : doc->value(QStringLiteral("files")).toArray())
        stored << f.toString();
    for (const auto& t : doc->value(QStringLiteral("tensors")).toObject())
        stored << t.toObject().value(QStringLiteral("file")).toString();
    const QStringList generated = widgets::generatedSessionPaths(*doc, session);
    for (const QString& s : stored) {
        const QString path = widgets::sessionResolvedPath(session, s);
        if (path.isEmpty() || QFileInfo::exists(path) || generated.contains(path))   // made on loading
            continue;
        const QString note = doc->value(QStringLiteral("data_note")).toString();
        return QStringLiteral("session %1: its data file %2 does not exist%3")
            .arg(session, path, note.isEmpty() ? QString() : QStringLiteral(" (%1)").arg(note));
    }
    return {};
}

// Opens the data files (headers only) the way the window does; false and the first file's error.
bool openDataFiles(widgets::MainWindow& window, const QStringList& files, QString* error)
{
    for (const QString& f : files) {
        QString why;
        if (!window.dataBrowser()->openFile(f, &why)) {
            *error = QStringLiteral("cannot open %1: %2").arg(f, why);
            return false;
        }
    }
    window.openFiles(files);   // assigns queries, keys and values from the names, applies the file's attributes
    if (!window.dataBrowser()->assigned(widgets::TensorRole::queries) || !window.dataBrowser()->assigned(widgets::TensorRole::keys)) {
        *error = QStringLiteral("no queries and keys recognised from the tensor names in %1 (q/k, query/key, *_q, q_proj ..., "
                                "docs/gui.md); assign them in the app and save a session")
                     .arg(files.join(QStringLiteral(", ")));
        return false;
    }
    return true;
}

// The failure of a computation whose result is there: a mechanism the core could not compute, by name.
QString mechanismErrors(const analysis::ExploreResult& result)
{
    QStringList problems;
    for (const auto& o : result.outcomes)
        if (!o.error.empty())
            problems << QStringLiteral("%1: %2").arg(QString::fromLatin1(attention::to_string(o.result.mechanism)),
                                                     QString::fromStdString(o.error));
    return problems.join(QStringLiteral("; "));
}

int runWindow(widgets::MainWindow& window, const GuiArgs& args)
{
    window.show();
    if (!args.session.empty()) {
        const QString session = QString::fromStdString(args.session);
        QString error = missingSessionData(session);
        if (!window.loadSession(session, error.isEmpty() ? &error : nullptr))
            std::fprintf(stderr, "error: %s\n", error.toLocal8Bit().constData());
    }
    window.openFiles(args.files);
    if (!args.view.empty())
        window.setCurrentView(QString::fromStdString(args.view));
    return QApplication::exec();
}

// The session the window shows on opening the files, written without computing it.
int runSaveSession(widgets::MainWindow& window, const GuiArgs& args)
{
    window.setAutoCompute(false);
    QString error;
    if (!openDataFiles(window, args.files, &error))
        return fail(error);
    if (!args.view.empty())
        window.setCurrentView(QString::fromStdString(args.view));
    const QString out = QString::fromStdString(args.saveSession);
    if (!window.saveSession(out, &error))
        return fail(error);
    std::fprintf(stderr, "wrote %s\n", out.toLocal8Bit().constData());
    return 0;
}

// Waits for the last computation (and a session's sweeps), grabs the window, exits.
int runScreenshot(widgets::MainWindow& window, const GuiArgs& args)
{
    // The grab has one size whatever the screen (docs/cli.md "Desktop app from the command line"), so
    // screenshots made anywhere match; the window fitted to the screen is for people.
    window.resize(args.width, args.height);
    window.show();
    window.fitDocks();   // the docks' shares of this size, not of the screen the window was first fitted to
    const QString session = QString::fromStdString(args.session);
    const QString what = session.isEmpty() ? args.files.join(QStringLiteral(", ")) : QStringLiteral("session %1").arg(session);
    QString error;
    if (!session.isEmpty()) {
        if (const QString missing = missingSessionData(session); !missing.isEmpty())
            return fail(missing);
        if (!window.loadSession(session, &error))
            return fail(error);
        if (!args.files.isEmpty())
            window.openFiles(args.files);
    } else if (!openDataFiles(window, args.files, &error)) {
        return fail(error);
    }
    if (!args.view.empty())
        window.setCurrentView(QString::fromStdString(args.view));

    const QString out = QString::fromStdString(args.screenshot);
    int status = -1;
    auto finish = [&](int code, const QString& message) {
        if (status >= 0)
            return;
        status = code;
        if (code != 0)
            fail(message);
        QApplication::exit(code);
    };
    auto grab = [&] {
        // Let the views lay out and replot before the grab.
        QTimer::singleShot(300, &window, [&] {
            if (window.isComputing() || window.isSweeping())
                return;   // a later computation or sweep will call back
            if (const QString problems = mechanismErrors(*window.result()); !problems.isEmpty()) {
                finish(2, QStringLiteral("%1: %2").arg(what, problems));
                return;
            }
            if (!args.view.empty())
                window.setCurrentView(QString::fromStdString(args.view));   // a sweep's tab exists once it has run
            QCoreApplication::processEvents();
            const QImage image = window.grab().toImage();
            // Through the core's one writer (util/output.h): atomic, a device or FIFO refused, never replaced.
            try {
                QByteArray png;
                QBuffer buffer(&png);
                if (!buffer.open(QIODevice::WriteOnly) || !image.save(&buffer, "PNG"))
                    throw InputError(out.toStdString() + ": cannot encode the screenshot");
                OutputFile file(QFile::encodeName(out).toStdString(), SpecialFiles::refuse);
                file.write([&](const std::string& temp) { write_text_file(temp, png.toStdString()); });
                file.commit();
                finish(0, QString());
            } catch (const std::exception& e) {
                finish(2, QString::fromStdString(e.what()));
            }
        });
    };
    // A session's sweeps (curves, overview) rerun too: the grab waits for them.
    QObject::connect(&window, &widgets::MainWindow::sweepFinished, &window, [&](const QString&, bool ok, const QString& message) {
        if (!ok)
            finish(2, QStringLiteral("%1: %2").arg(what, message));
        else if (!window.isComputing() && !window.isSweeping() && window.result())
            grab();
    });
    const auto finished = [&](bool ok, const QString& message) {
        if (window.isComputing())
            return;
        if (!ok)
            finish(2, QStringLiteral("%1: %2").arg(what, message));
        else
            grab();
    };
    QObject::connect(&window, &widgets::MainWindow::computationFinished, &window, finished);
    // The Heads view's page and the Depth view's products are computed after the result they belong to: the grab
    // waits for them too.
    QObject::connect(&window, &widgets::MainWindow::headsFinished, &window, finished);
    QObject::connect(&window, &widgets::MainWindow::depthFinished, &window, finished);
    QTimer::singleShot(kScreenshotTimeoutMinutes * 60 * 1000, &window, [&] {
        finish(2, QStringLiteral("%1: timed out after %2 minutes waiting for the computation").arg(what).arg(kScreenshotTimeoutMinutes));
    });
    if (!window.isComputing()) {
        if (window.result())
            grab();
        else
            finish(2, QStringLiteral("%1: %2").arg(what, window.lastError().isEmpty() ? QStringLiteral("nothing to compute") : window.lastError()));
    }
    return status >= 0 ? status : QApplication::exec();
}

}  // namespace

int run_gui(int argc, char** argv)
{
    const GuiArgs args = parse_args(argc, argv);
    if (!args.error.empty())
        return fail(QString::fromStdString(args.error));
    try {
        kernels::check_environment();   // a misspelt ATTNSCOPE_* override is an error, as on the command line
        (void)kernels::reserve_blas_buffers();   // under ulimit -v: an error line, never OpenBLAS waiting for its buffer
    } catch (const std::invalid_argument& e) {
        return fail(QString::fromStdString(e.what()));
    }
    const Mode mode = args.mode();
    // An output of a scripted run is never one of its inputs, by file identity (device and inode: a hard link
    // or a symlink to the data is the data): the data files, the session and every file the session names
    // (util/output.h check_output_paths, as `figure --session` checks its --out).
    if (mode != Mode::window) {
        std::vector<NamedPath> inputs;
        for (const QString& f : args.files)
            inputs.push_back({"FILE", QFile::encodeName(f).toStdString()});
        if (!args.session.empty())
            for (NamedPath& in : session_inputs(args.session))
                inputs.push_back(std::move(in));
        try {
            check_output_paths({{mode == Mode::screenshot ? "--screenshot" : "--save-session",
                                 mode == Mode::screenshot ? args.screenshot : args.saveSession}},
                               inputs);
        } catch (const std::invalid_argument& e) {
            return fail(QString::fromStdString(e.what()));
        }
    }
    // Qt aborts when its platform cannot start: checked first (app/qt_platform.h).
    if (const std::string problem = prepare_qt_platform(mode == Mode::window ? QtUse::window : QtUse::scripted); !problem.empty()) {
        if (mode == Mode::window)
            return fail(QString::fromStdString("no display for the desktop app (" + problem +
                                               "): cannot open a window; run headless with a subcommand: " + subcommand_list() +
                                               " (attnscope --help), or with --screenshot or --save-session"));
        return fail(QString::fromStdString("no display for " + std::string(mode == Mode::screenshot ? "--screenshot" : "--save-session") +
                                           " (" + problem + "): unset QT_QPA_PLATFORM or set it to offscreen"));
    }
    if (mode != Mode::window && !std::getenv("ATTNSCOPE_QT_MESSAGES"))
        qInstallMessageHandler(quiet_script_handler);
    std::unique_ptr<QApplication> qappOwner;
    {
        QtFatalGuard guard;   // a platform that fails anyway: one error line, exit 2
        qappOwner = std::make_unique<QApplication>(argc, argv);
    }
    QApplication::setApplicationName(QStringLiteral("AttnScope"));
    QApplication::setOrganizationName(QStringLiteral("AttnScope"));
    QApplication::setApplicationVersion(QStringLiteral(ATTNSCOPE_VERSION));
    // The installed desktop entry and icon (packaging/CMakeLists.txt, ATTNSCOPE_APP_ID): Wayland compositors match
    // the window to the entry by this name; the icon comes from the theme when the package installed it.
    QGuiApplication::setDesktopFileName(QStringLiteral("io.github.attnscope.AttnScope"));
    QApplication::setWindowIcon(QIcon::fromTheme(QStringLiteral("attnscope")));

    widgets::MainWindow window;
    if (mode == Mode::window)
        return runWindow(window, args);
    window.setInteractive(false);   // no dialogs
    return mode == Mode::saveSession ? runSaveSession(window, args) : runScreenshot(window, args);
}

}  // namespace attnscope::app
