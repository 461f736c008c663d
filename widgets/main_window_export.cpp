// MainWindow, exports: the figure export dialog (current view or every view), the metrics CSV, the
// matrices as .npy files and the long-format CSV of a sweep.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QStatusBar>
#include <algorithm>

#include "curves.h"
#include "export.h"
#include "export_dialog.h"
#include "io/writers.h"
#include "main_window_p.h"
#include "result_view.h"
#include "util/error.h"
#include "util/output.h"
#include "views.h"

namespace attnscope::widgets {

namespace {

// Writes `bytes` through the core's one writer (util/output.h): a temporary file renamed on commit, so a
// failure never leaves half a file; a device or FIFO is written in place, never replaced.
bool writeCsv(const QString& path, const QByteArray& bytes, QString* error)
{
    try {
        write_text_output_file(QFile::encodeName(path).toStdString(), bytes.toStdString());
    } catch (const std::exception& e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return false;
    }
    return true;
}

}  // namespace

QString MainWindow::exportFolder() const { return defaultExportFolder(m_lastExportFolder, m_defaultsFile); }

QList<ResultView*> MainWindow::exportableViews() const
{
    QList<ResultView*> views = m_views;
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (s->view && s->result)
            views << s->view;
    return views;
}

void MainWindow::showExportDialog()
{
    ResultView* view = currentView();
    const bool sweepView = view && (view == curvesView() || view == overviewView());
    // A view still computing its own part (the Heads view's page) is not current either.
    if (!view || (sweepView ? !hasSweepResult(view->viewName()) : !resultIsCurrent() || view->freshness() != ResultView::Freshness::current)) {
        showMessage(m_result && !sweepView ? tr("Nothing to export: the views are out of date. Wait for the computation of the "
                                                "current inputs (or press F5).")
                                           : tr("Nothing to export yet: open data and wait for the computation."),
                    false);
        return;
    }
    ExportDialog dialog(view->viewName(), view->preferredExportSize(), exportFolder(), this);
    dialog.setHeightFor([view](int width, double font_scale, int fallback) { return view->exportHeightFor(width, font_scale, fallback); });
    if (dialog.exec() != QDialog::Accepted)
        return;
    const QString target = dialog.target();
    QApplication::setOverrideCursor(Qt::WaitCursor);
    QStringList errors;
    QStringList leftOut;   // views not showing the current inputs: named in the message, never exported stale
    int exported = 0;
    if (dialog.allViews()) {
        errors = exportEveryView(target, dialog.format(), dialog.preset(), dialog.options(), &exported, &leftOut);
        m_lastExportFolder = target;
    } else {
        const QString err = exportViewTo(view, target, dialog.options());
        if (!err.isEmpty())
            errors << err;
        m_lastExportFolder = QFileInfo(target).absolutePath();
    }
    QApplication::restoreOverrideCursor();
    if (errors.isEmpty() && dialog.allViews() && exported == 0)
        showMessage(tr("Nothing exported into %1: no view shows the current inputs yet (%2).").arg(target, leftOut.join(QStringLiteral(", "))), true);
    else if (errors.isEmpty() && !leftOut.isEmpty())
        showMessage(tr("Exported %n view(s) to %1; left out, not computed for the current inputs: %2 (a view computes when its tab is shown; then export "
                       "again).", nullptr, exported).arg(target, leftOut.join(QStringLiteral(", "))),
                    false);
    else if (errors.isEmpty())
        statusBar()->showMessage(tr("Exported to %1").arg(target), 8000);
    else
        showMessage(errors.join(QLatin1Char('\n')), true);
}

QStringList MainWindow::exportEveryView(const QString& folder, const QString& format, const QString& preset,
                                        const ExportOptions& options, int* exported, QStringList* leftOut)
{
    QDir().mkpath(folder);
    QList<ResultView*> views = exportableViews();
    QStringList stale;
    // Only views that show the current inputs (the sweep views show their runs, marked). A view that computes
    // only while its tab is shown (Heads, Depth) is left out until it has been shown, and the message says so.
    views.erase(std::remove_if(views.begin(), views.end(),
                               [this, &stale](ResultView* v) {
                                   const bool out = m_views.contains(v) &&
                                                    (!resultIsCurrent() || v->freshness() != ResultView::Freshness::current);
                                   if (out)
                                       stale << v->viewName();
                                   return out;
                               }),
                views.end());
    QStringList errors;
    if (const ExportPreset* p = findExportPreset(preset)) {
        // A printed size: each view keeps its own aspect (or the height it asks for) at the preset's width and font size.
        for (ResultView* v : views) {
            ExportOptions o = presetOptions(*p, v->preferredExportSize(), options.dpi);
            if (p->aspect <= 0)
                o.height = v->exportHeightFor(o.width, o.font_scale, o.height);
            errors += exportAllViews({v}, folder, format, o);
        }
    } else {
        errors = exportAllViews(views, folder, format, options);
    }
    if (exported)
        *exported = int(views.size());
    if (leftOut)
        *leftOut = stale;
    return errors;
}

bool MainWindow::exportMetricsCsv(const QString& path, QString* error)
{
    if (!resultIsCurrent()) {
        if (error)
            *error = tr("no result to export yet");
        return false;
    }
    return writeCsv(path, metricsCsv(*m_result).toUtf8(), error);
}

bool MainWindow::exportMatrices(const QString& folder, QString* error)
{
    if (!resultIsCurrent()) {
        if (error)
            *error = tr("no result to export yet");
        return false;
    }
    try {
        for (const auto& o : m_result->outcomes) {
            if (!o.matrix)
                continue;
            const std::string path = QFile::encodeName(
                QDir(folder).filePath(QStringLiteral("%1.npy").arg(QString::fromLatin1(attention::to_string(o.result.mechanism))))).toStdString();
            OutputFile out(path, SpecialFiles::refuse);
            out.write([&](const std::string& temp) { io::write_npy(temp, *o.matrix); });
            out.commit();
        }
        if (m_result->mixing.size() > 0) {
            OutputFile out(QFile::encodeName(QDir(folder).filePath(QStringLiteral("mixing.npy"))).toStdString(), SpecialFiles::refuse);
            out.write([&](const std::string& temp) { io::write_npy(temp, m_result->mixing); });
            out.commit();
        }
    } catch (const std::exception& e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return false;
    }
    return true;
}

void MainWindow::chooseMetricsCsv()
{
    if (!resultIsCurrent()) {
        showMessage(tr("Nothing to export yet: open data and wait for the computation."), false);
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export metrics"),
                                                      QDir(exportFolder()).filePath(QStringLiteral("metrics.csv")),
                                                      tr("CSV (*.csv)"));
    if (path.isEmpty())
        return;
    QString error;
    if (exportMetricsCsv(path, &error))
        statusBar()->showMessage(tr("Metrics written to %1").arg(path), 8000);
    else
        showMessage(error, true);
}

void MainWindow::chooseMatricesFolder()
{
    if (!resultIsCurrent()) {
        showMessage(tr("Nothing to export yet: open data and wait for the computation."), false);
        return;
    }
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Export matrices (softmax.npy, linear.npy, mhla.npy, mixing.npy) into"),
                                                             exportFolder());
    if (folder.isEmpty())
        return;
    QApplication::setOverrideCursor(Qt::WaitCursor);
    QString error;
    const bool ok = exportMatrices(folder, &error);
    QApplication::restoreOverrideCursor();
    if (ok)
        statusBar()->showMessage(tr("Matrices written to %1").arg(folder), 8000);
    else
        showMessage(error, true);
}

bool MainWindow::exportSweepCsv(const QString& path, const QString& view, QString* error)
{
    const auto result = sweepResult(view);
    if (!result) {
        if (error)
            *error = tr("no %1 result to export yet").arg(view);
        return false;
    }
    return writeCsv(path, QByteArray::fromStdString(analysis::sweep_csv(result->records)), error);
}

void MainWindow::chooseSweepCsv()
{
    // The sweep of the current tab when it shows one, else the curves.
    ResultView* v = currentView();
    QString view = (v && v == overviewView()) ? m_overviewSlot->name : m_curvesSlot->name;
    if (!hasSweepResult(view))
        view = hasSweepResult(m_overviewSlot->name) ? m_overviewSlot->name : m_curvesSlot->name;
    if (!hasSweepResult(view)) {
        showMessage(tr("No sweep yet: run Analysis > Sweep... or Analysis > Model Overview."), false);
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export sweep CSV"),
                                                      QDir(exportFolder()).filePath(view + QStringLiteral(".csv")),
                                                      tr("CSV (*.csv)"));
    if (path.isEmpty())
        return;
    QString error;
    if (exportSweepCsv(path, view, &error))
        statusBar()->showMessage(tr("Sweep written to %1").arg(path), 8000);
    else
        showMessage(error, true);
}

}  // namespace attnscope::widgets
