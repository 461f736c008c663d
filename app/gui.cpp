// The desktop entry: a Qt application around attnscope::widgets::MainWindow.
#include <QApplication>
#include <QStringList>

#include <cstdio>
#include <cstdlib>

#include "io/tensor_file.h"
#include "main_window.h"

namespace attnscope::app {

namespace {

widgets::FileRow describe_file(const QString& path)
{
    widgets::FileRow row;
    row.path = path;
    try {
        const auto file = io::open_tensor_file(path.toStdString());
        row.format = QString::fromStdString(std::string(file->format()));
        for (const auto& t : file->tensors()) {
            QStringList dims;
            for (auto s : t.shape)
                dims << QString::number(s);
            row.tensors.push_back({QString::fromStdString(t.name), QString::fromStdString(std::string(io::dtype_name(t.dtype))),
                                   QStringLiteral("[%1]").arg(dims.join(QStringLiteral(", ")))});
        }
    } catch (const std::exception& e) {
        row.error = QStringLiteral("error: %1").arg(QString::fromStdString(e.what()));
    }
    return row;
}

}  // namespace

int run_gui(int argc, char** argv)
{
    // Without a display Qt would abort with a cryptic xcb message; say what to do instead.
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("QT_QPA_PLATFORM")) {
        std::fprintf(stderr, "error: no display for the desktop app (DISPLAY is not set); run headless with a "
                             "subcommand: info, analyze, matrix, synth (attnscope --help)\n");
        return 2;
    }
    QApplication qapp(argc, argv);
    QApplication::setApplicationName(QStringLiteral("AttnScope"));
    widgets::MainWindow window(describe_file);
    QStringList files = QApplication::arguments();
    files.removeFirst();
    window.openFiles(files);
    window.show();
    return QApplication::exec();
}

}  // namespace attnscope::app
