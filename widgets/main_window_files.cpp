// MainWindow, opening files: the file dialog, several files at once (data files and sessions), the recent
// files and drag and drop.
#include <QAction>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QMenu>
#include <QMimeData>
#include <QSettings>
#include <QStatusBar>
#include <QUrl>

#include "data_browser.h"
#include "main_window.h"

namespace attnscope::widgets {

namespace {

constexpr int kMaxRecent = 10;
const char* kRecentKey = "recentFiles";

}  // namespace

void MainWindow::chooseFiles()
{
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open activations"), QString(),
        tr("Activations and sessions (*.h5 *.hdf5 *.npy *.npz *.safetensors *.attnscope);;All files (*)"));
    openFiles(paths);
}

bool MainWindow::openOne(const QString& path, QString* error)
{
    if (path.endsWith(QLatin1String(".attnscope"), Qt::CaseInsensitive))
        return loadSession(path, error);
    const bool ok = m_browser->openFile(path, error);
    addRecentFile(path);
    return ok;
}

void MainWindow::openFiles(const QStringList& paths)
{
    QStringList errors;
    QStringList opened;
    for (const QString& path : paths) {
        QString error;
        if (openOne(path, &error)) {
            if (!path.endsWith(QLatin1String(".attnscope"), Qt::CaseInsensitive))
                opened << path;
        } else {
            errors << QStringLiteral("%1: %2").arg(QFileInfo(path).fileName(), error);
        }
    }
    // Opening a file shows it: Q/K/V from the names of the newest file that has them (the current ones stay
    // when none of the opened files names queries and keys).
    // A file the window was showing before comes back with its own tensors and options (showFile).
    bool shown = false;
    for (auto it = opened.crbegin(); it != opened.crend() && !shown; ++it)
        shown = showFile(*it);
    if (!opened.isEmpty() && !shown) {
        // Opening a file shows it: one the app cannot use says so in the views, where its data would be,
        // instead of leaving the previous file on screen.
        const QString name = QFileInfo(opened.last()).fileName();
        m_unusable = tr("%1 has no queries and keys the app recognises (%2). Right-click a tensor in the Data dock and "
                        "choose \"Use as queries\" / \"Use as keys\".")
                         .arg(name, m_browser->tensorCount(opened.last()) == 1 ? tr("it holds one tensor; attention needs two")
                                                                             : tr("no tensor names like q / k"));
        m_unusableFile = opened.last();
        for (TensorRole r : {TensorRole::queries, TensorRole::keys, TensorRole::values})
            m_browser->clearAssignment(r);
        clearResult(m_unusable);
        showMessage(m_unusable, false);
    }
    if (!errors.isEmpty()) {
        showMessage(errors.join(QLatin1Char('\n')), true);
        statusBar()->showMessage(errors.first(), 10000);
    } else if (!opened.isEmpty()) {
        statusBar()->showMessage(tr("Opened %1").arg(opened.join(QStringLiteral(", "))), 5000);
    }
    updateCentral();
    updateTitle();
}

void MainWindow::addRecentFile(const QString& path)
{
    QSettings settings;
    QStringList recent = settings.value(QString::fromLatin1(kRecentKey)).toStringList();
    const QString abs = QFileInfo(path).absoluteFilePath();
    recent.removeAll(abs);
    recent.prepend(abs);
    while (recent.size() > kMaxRecent)
        recent.removeLast();
    settings.setValue(QString::fromLatin1(kRecentKey), recent);
}

void MainWindow::fillRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = QSettings().value(QString::fromLatin1(kRecentKey)).toStringList();
    for (const QString& path : recent) {
        QAction* a = m_recentMenu->addAction(QFileInfo(path).fileName(), this, [this, path] { openFiles({path}); });
        a->setToolTip(path);
        a->setStatusTip(path);
        a->setEnabled(QFileInfo::exists(path));
    }
    if (recent.isEmpty())
        m_recentMenu->addAction(tr("(none)"))->setEnabled(false);
    else {
        m_recentMenu->addSeparator();
        m_recentMenu->addAction(tr("Clear List"), this, [] { QSettings().remove(QString::fromLatin1(kRecentKey)); });
    }
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls())
        for (const QUrl& url : event->mimeData()->urls())
            if (url.isLocalFile()) {
                event->acceptProposedAction();
                return;
            }
}

void MainWindow::dropEvent(QDropEvent* event)
{
    QStringList paths;
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile())
            paths << url.toLocalFile();
    event->acceptProposedAction();
    openFiles(paths);
}

}  // namespace attnscope::widgets
