#pragma once
// Qt's platform plugin, chosen and checked before the QApplication exists. Qt aborts the process (exit 134)
// when the platform it is given cannot start (xcb without a display, an X server that does not answer, a
// plugin that is not installed); the app and `attnscope figure` fail instead with one `error:` line and
// exit 2 (docs/cli.md, docs/security.md "Environment and caches").
//
// - Headless runs (`figure`, `sweep --plot`) always render on the offscreen platform: they never need a
//   display, whatever QT_QPA_PLATFORM says (an `offscreen:...` value keeps its options).
// - The desktop app's scripted runs (--screenshot, --save-session) use the platform QT_QPA_PLATFORM names
//   when it can start, and the offscreen platform when QT_QPA_PLATFORM is unset and no display answers.
// - The window needs a display: without one it is refused, saying what to do.
#include <string>

namespace attnscope::app {

enum class QtUse { window, scripted, headless };

// Sets QT_QPA_PLATFORM for `use` as above and returns why Qt's platform cannot start ("" when it can).
std::string prepare_qt_platform(QtUse use);

// While it lives, a fatal Qt message (Qt's last word before abort(), e.g. "no Qt platform plugin could be
// initialized") becomes one `error:` line and exit status 2. Construct it before the QApplication; it
// keeps any message handler installed before it for every other message.
class QtFatalGuard {
public:
    QtFatalGuard();
    ~QtFatalGuard();
    QtFatalGuard(const QtFatalGuard&) = delete;
    QtFatalGuard& operator=(const QtFatalGuard&) = delete;
};

}  // namespace attnscope::app
