// Qt's platform plugin, chosen and checked before the QApplication exists (qt_platform.h).
#include "qt_platform.h"

#include <QString>
#include <QtGlobal>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <dlfcn.h>

#include "analysis/vocabulary.h"

namespace attnscope::app {

namespace {

std::string env(const char* name)
{
    const char* v = std::getenv(name);
    return v ? v : "";
}

// The platform names of a QT_QPA_PLATFORM value: "name[:options]", several separated by ';' (tried in order).
std::vector<std::string> platform_names(const std::string& spec)
{
    std::vector<std::string> out;
    for (const std::string& entry : analysis::split_exact(spec, ';'))
        out.push_back(entry.substr(0, entry.find(':')));
    return out;
}

// The probe's connection, kept open until Qt has its own (QtFatalGuard's end): an X server with no other
// client resets when its last client leaves, and refuses connections meanwhile, so closing the probe at once
// made Qt's own connection fail now and then ("could not connect to display") under Xvfb without a window
// manager, as in CI and tools/make_screenshots.sh.
void* g_probe = nullptr;
void (*g_probe_disconnect)(void*) = nullptr;
void* g_probe_library = nullptr;

void close_probe()
{
    if (g_probe && g_probe_disconnect)
        g_probe_disconnect(g_probe);
    if (g_probe_library)
        ::dlclose(g_probe_library);
    g_probe = nullptr;
    g_probe_disconnect = nullptr;
    g_probe_library = nullptr;
}

// Why an X connection cannot be opened ("" when it can): what Qt's xcb plugin does first, through libxcb
// (loaded here only to ask; the plugin links it anyway). The display comes from DISPLAY, as in Qt. A
// connection that works stays open (g_probe above).
std::string x_display_problem()
{
    const std::string display = env("DISPLAY");
    if (display.empty())
        return "DISPLAY is not set";
    void* xcb = ::dlopen("libxcb.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!xcb)
        return "the X client library libxcb.so.1 cannot be loaded";
    using Connect = void* (*)(const char*, int*);
    using HasError = int (*)(void*);
    using Disconnect = void (*)(void*);
    auto connect = reinterpret_cast<Connect>(::dlsym(xcb, "xcb_connect"));
    auto has_error = reinterpret_cast<HasError>(::dlsym(xcb, "xcb_connection_has_error"));
    auto disconnect = reinterpret_cast<Disconnect>(::dlsym(xcb, "xcb_disconnect"));
    std::string problem;
    if (!connect || !has_error || !disconnect) {
        problem = "the X client library libxcb.so.1 lacks xcb_connect";
    } else {
        void* c = connect(nullptr, nullptr);
        if (has_error(c)) {
            problem = "cannot connect to the X server of DISPLAY=" + display;
        } else if (!g_probe) {
            g_probe = c;
            g_probe_disconnect = disconnect;
            g_probe_library = xcb;
            return problem;
        }
        disconnect(c);
    }
    ::dlclose(xcb);
    return problem;
}

bool offscreen_value(const std::string& spec) { return spec == "offscreen" || spec.rfind("offscreen:", 0) == 0; }

// A fatal message during QApplication's construction: Qt calls abort() right after the handler returns.
// The other messages meanwhile are held back (a failing platform warns before its fatal message, and the
// run promises one error line) and passed on when the application has started.
QtMessageHandler g_previous = nullptr;
std::vector<std::pair<QtMsgType, QString>> g_held;

void pass_on(QtMsgType type, const QMessageLogContext& context, const QString& message)
{
    if (g_previous)
        g_previous(type, context, message);
    else
        std::fprintf(stderr, "%s\n", message.toLocal8Bit().constData());
}

void fatal_guard_handler(QtMsgType type, const QMessageLogContext&, const QString& message)
{
    if (type != QtFatalMsg) {
        g_held.emplace_back(type, message);
        return;
    }
    // Qt's text: "This application failed to start because no Qt platform plugin could be initialized.
    // Reinstalling ... \n\nAvailable platform plugins are: ...": the cause and the list, on one line.
    QString cause = message.section(QLatin1Char('\n'), 0, 0).trimmed();
    const qsizetype because = cause.indexOf(QLatin1String("because "));
    if (because >= 0)
        cause = cause.mid(because + 8).section(QLatin1Char('.'), 0, 0);
    const qsizetype list = message.indexOf(QLatin1String("Available platform plugins are:"));
    if (list >= 0)
        cause += QStringLiteral(" (available: %1)").arg(message.mid(list + 31).trimmed().remove(QLatin1Char('.')));
    // What the platform said before it gave up (e.g. "could not connect to display :0") names the cause.
    for (auto it = g_held.rbegin(); it != g_held.rend(); ++it)
        if (it->first == QtWarningMsg || it->first == QtCriticalMsg) {
            cause += QStringLiteral("; the platform said: ") + it->second.section(QLatin1Char('\n'), 0, 0).trimmed();
            break;
        }
    const std::string spec = env("QT_QPA_PLATFORM");
    std::fprintf(stderr, "error: Qt could not start (QT_QPA_PLATFORM=%s): %s; set QT_QPA_PLATFORM=offscreen for a run without a display\n",
                 spec.empty() ? "(unset)" : spec.c_str(), cause.simplified().toLocal8Bit().constData());
    std::fflush(stderr);
    std::_Exit(2);
}

}  // namespace

std::string prepare_qt_platform(QtUse use)
{
    const std::string spec = env("QT_QPA_PLATFORM");
    if (use == QtUse::headless) {
        // docs/cli.md: a subcommand never needs a display, whatever the environment says.
        if (!offscreen_value(spec))
            ::setenv("QT_QPA_PLATFORM", "offscreen", 1);
        return {};
    }
    if (spec.empty()) {
        if (!env("WAYLAND_DISPLAY").empty())
            return {};   // Qt picks the Wayland session's platform
        // Qt's default on this system is xcb.
        const std::string problem = x_display_problem();
        if (problem.empty())
            return {};
        if (use == QtUse::scripted) {
            ::setenv("QT_QPA_PLATFORM", "offscreen", 1);   // a scripted run needs no display
            return {};
        }
        return problem;
    }
    // Several platforms are tried in order: the first that can start is the one Qt uses. Only xcb is
    // checked here; a plugin that is missing or fails otherwise is caught by QtFatalGuard.
    std::string first_problem;
    for (const std::string& name : platform_names(spec)) {
        if (name != "xcb")
            return {};
        const std::string problem = x_display_problem();
        if (problem.empty())
            return {};
        if (first_problem.empty())
            first_problem = problem;
    }
    return "QT_QPA_PLATFORM=" + spec + ": " + first_problem;
}

QtFatalGuard::QtFatalGuard() { g_previous = qInstallMessageHandler(fatal_guard_handler); }

QtFatalGuard::~QtFatalGuard()
{
    close_probe();   // Qt is connected (or gone): the probe's connection may go
    qInstallMessageHandler(g_previous);
    const QMessageLogContext context;
    for (const auto& [type, message] : g_held)
        pass_on(type, context, message);
    g_held.clear();
    g_previous = nullptr;
}

}  // namespace attnscope::app
