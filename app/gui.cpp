// The desktop entry: a Qt application around attnscope::widgets::MainWindow.
//
//   attnscope [FILE...]                                   opens the files (data or .attnscope sessions)
//   attnscope --session S.attnscope [--screenshot OUT.png] opens a session; with --screenshot waits for
//       every computation, writes a grab of the main window to OUT.png and exits (0; 2 with an `error:` line).
#include <QApplication>
#include <QFileInfo>
#include <QImage>
#include <QPixmap>
#include <QSaveFile>
#include <QStringList>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "main_window.h"

namespace attnscope::app {

namespace {

struct GuiArgs {
    std::string session, screenshot;
    QStringList files;
    std::string error;
};

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
        if (arg == "--session" || arg.rfind("--session=", 0) == 0)
            a.session = value("--session");
        else if (arg == "--screenshot" || arg.rfind("--screenshot=", 0) == 0)
            a.screenshot = value("--screenshot");
        else if (!arg.empty() && arg[0] == '-')
            a.error = "unknown option " + arg + " for the desktop app (--session S.attnscope [--screenshot OUT.png], or file names)";
        else
            a.files << QString::fromLocal8Bit(argv[i]);
        if (!a.error.empty())
            break;
    }
    if (a.error.empty() && !a.screenshot.empty() && a.session.empty())
        a.error = "--screenshot needs --session S.attnscope";
    return a;
}

// Screenshot mode promises one `error:` line on stderr: Qt's platform chatter (XDG_RUNTIME_DIR,
// propagateSizeHints on offscreen) is dropped unless ATTNSCOPE_QT_MESSAGES is set.
void quiet_handler(QtMsgType type, const QMessageLogContext&, const QString& message)
{
    if (type == QtCriticalMsg || type == QtFatalMsg)
        std::fprintf(stderr, "qt: %s\n", message.toLocal8Bit().constData());
}

int fail(const std::string& message)
{
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return 2;
}

}  // namespace

int run_gui(int argc, char** argv)
{
    const GuiArgs args = parse_args(argc, argv);
    if (!args.error.empty())
        return fail(args.error);
    const bool headless = !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("QT_QPA_PLATFORM");
    if (headless) {
        if (args.screenshot.empty()) {
            // Without a display Qt would abort with a cryptic xcb message; say what to do instead.
            std::fprintf(stderr, "error: no display for the desktop app (DISPLAY is not set); run headless with a "
                                 "subcommand: info, analyze, matrix, synth (attnscope --help)\n");
            return 2;
        }
        ::setenv("QT_QPA_PLATFORM", "offscreen", 1);   // a screenshot needs no display
    }
    if (!args.screenshot.empty() && !std::getenv("ATTNSCOPE_QT_MESSAGES"))
        qInstallMessageHandler(quiet_handler);
    QApplication qapp(argc, argv);
    QApplication::setApplicationName(QStringLiteral("AttnScope"));
    QApplication::setOrganizationName(QStringLiteral("AttnScope"));
    QApplication::setApplicationVersion(QStringLiteral(ATTNSCOPE_VERSION));

    widgets::MainWindow window;
    if (args.screenshot.empty()) {
        window.show();
        if (!args.session.empty()) {
            QString error;
            if (!window.loadSession(QString::fromStdString(args.session), &error))
                std::fprintf(stderr, "error: %s\n", error.toStdString().c_str());
        }
        window.openFiles(args.files);
        return QApplication::exec();
    }

    // Screenshot mode: no dialogs; wait for the last computation, grab, exit.
    window.setInteractive(false);
    window.show();
    QString error;
    if (!window.loadSession(QString::fromStdString(args.session), &error))
        return fail(error.toStdString());
    if (!args.files.isEmpty())
        window.openFiles(args.files);
    const QString out = QString::fromStdString(args.screenshot);
    int status = -1;
    auto finish = [&](int code, const QString& message) {
        if (status >= 0)
            return;
        status = code;
        if (code != 0)
            std::fprintf(stderr, "error: %s\n", message.toStdString().c_str());
        QApplication::exit(code);
    };
    auto grab = [&] {
        // Let the views lay out and replot before the grab.
        QTimer::singleShot(300, &window, [&] {
            if (window.isComputing() || window.isSweeping())
                return;   // a later computation or sweep will call back
            const QImage image = window.grab().toImage();
            QSaveFile file(out);
            if (!file.open(QIODevice::WriteOnly) || !image.save(&file, "PNG") || !file.commit())
                finish(2, QStringLiteral("%1: cannot write the screenshot (%2)").arg(out, file.errorString()));
            else
                finish(0, QString());
        });
    };
    // A session's sweeps (curves, overview) rerun too: the grab waits for them.
    QObject::connect(&window, &widgets::MainWindow::sweepFinished, &window, [&](const QString&, bool ok, const QString& message) {
        if (!ok)
            finish(2, QStringLiteral("session %1: %2").arg(QString::fromStdString(args.session), message));
        else if (!window.isComputing() && !window.isSweeping() && window.result())
            grab();
    });
    QObject::connect(&window, &widgets::MainWindow::computationFinished, &window, [&](bool ok, const QString& message) {
        if (window.isComputing())
            return;
        if (!ok)
            finish(2, QStringLiteral("session %1: %2").arg(QString::fromStdString(args.session), message));
        else
            grab();
    });
    QTimer::singleShot(10 * 60 * 1000, &window, [&] { finish(2, QStringLiteral("timed out waiting for the computation")); });
    if (!window.isComputing()) {
        if (window.result())
            grab();
        else
            finish(2, window.lastError().isEmpty() ? QStringLiteral("nothing to compute in the session") : window.lastError());
    }
    const int code = status >= 0 ? status : QApplication::exec();
    return code;
}

}  // namespace attnscope::app
