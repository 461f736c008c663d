// MainWindow, sweeps: the two sweep slots, "curves" (Analysis > Sweep...) and "overview" (Analysis > Model
// Overview). Each runs on its own GuiJob; its progress shares the status bar's sweep indicator, and the
// first result creates the slot's tab.
#include <QLabel>
#include <QProgressBar>
#include <QStatusBar>
#include <QTabWidget>
#include <algorithm>
#include <stdexcept>

#include "analysis/inputs.h"
#include "curves.h"
#include "data_browser.h"
#include "main_window_p.h"
#include "mechanism_panel.h"
#include "selection_panel.h"
#include "sweep_dialog.h"

namespace attnscope::widgets {

MainWindow::SweepSlot& MainWindow::slot(const QString& view) const
{
    return view == m_overviewSlot->name ? *m_overviewSlot : *m_curvesSlot;
}

void MainWindow::setUpSweepSlot(SweepSlot& s)
{
    const QString view = s.name;
    const QString what = view == m_overviewSlot->name ? tr("Model overview") : tr("Sweep");
    GuiJobHandlers<SweepResultPtr> h;
    h.ended = [this] { updateSweepStatus(); };
    h.cancelled = [this, view, what] {
        statusBar()->showMessage(tr("%1 cancelled").arg(what), 5000);
        emit sweepFinished(view, false, tr("cancelled"));
    };
    h.failed = [this, view, what](const QString& error) {
        m_lastSweepError = tr("%1: %2").arg(what, error);
        showMessage(m_lastSweepError, true);
        statusBar()->showMessage(m_lastSweepError, 10000);
        emit sweepFinished(view, false, m_lastSweepError);
    };
    h.succeeded = [this, view, what](const SweepResultPtr& result) {
        finishSweep(view, result);
        statusBar()->showMessage(tr("%1 done: %2 analyses").arg(what).arg(qsizetype(result->records.size())), 5000);
        emit sweepFinished(view, true, QString());
    };
    h.progress = [this, &s](double fraction, const QString& stage) {
        s.fraction = fraction;
        s.stage = stage;
        updateSweepStatus();
    };
    s.job.setHandlers(std::move(h));
}

SweepView* MainWindow::curvesView() const { return m_curvesSlot->view; }
SweepView* MainWindow::overviewView() const { return m_overviewSlot->view; }

bool MainWindow::hasSweepResult(const QString& view) const
{
    return (view == m_curvesSlot->name || view == m_overviewSlot->name) && slot(view).result != nullptr;
}

std::shared_ptr<const analysis::SweepResult> MainWindow::sweepResult(const QString& view) const
{
    return hasSweepResult(view) ? slot(view).result : nullptr;
}

bool MainWindow::isSweeping() const
{
    return m_curvesSlot->job.running() || m_overviewSlot->job.running();
}

void MainWindow::cancelSweeps()
{
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        s->job.cancel();
}

void MainWindow::resetSweeps()
{
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()}) {
        s->job.forget();   // a late outcome of the cancelled job is dropped
        s->result.reset();
        s->pendingState.reset();
        s->requested = false;
        if (s->view) {
            m_tabs->removeTab(m_tabs->indexOf(s->view));
            s->view->deleteLater();
            s->view = nullptr;
        }
    }
    m_lastSweepError.clear();
    m_pendingView.clear();
    updateSweepStatus();
}

bool MainWindow::currentSource(analysis::TensorSource& source, QString* error) const
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    if (!q || !k) {
        *error = tr("queries and keys are not assigned");
        return false;
    }
    const QString problem = m_selection->problem();
    if (!problem.isEmpty()) {
        *error = tr("Selection: %1").arg(problem);
        return false;
    }
    source.q_ref = q->ref().toStdString();
    source.k_ref = k->ref().toStdString();
    source.selection = m_selection->selection();
    return true;
}

void MainWindow::showSweepDialog()
{
    const bool haveData = m_browser->assigned(TensorRole::queries) && m_browser->assigned(TensorRole::keys);
    SweepDialog dialog(*m_sweepParams, haveData, this);
    if (dialog.exec() == QDialog::Accepted)
        runSweep(dialog.params());
}

void MainWindow::runSweep(const SweepParams& params)
{
    *m_sweepParams = params;
    m_curvesSlot->requested = true;
    analysis::SweepSpec spec;
    try {
        analysis::TensorSource source;
        QString why;
        const bool have = !params.synthetic && currentSource(source, &why);
        if (!params.synthetic && !have)
            throw std::invalid_argument(why.toStdString());
        spec = sweepSpec(params, have ? &source : nullptr, m_mechanism->options());
    } catch (const std::exception& e) {
        refuseSweep(m_curvesSlot->name, tr("Sweep: %1").arg(QString::fromStdString(e.what())));
        return;
    }
    const std::string mixingRef = m_mechanism->mixingFile().toStdString();
    startSweep(m_curvesSlot->name, [spec, mixingRef](const analysis::JobContext& ctx) mutable {
        loadMixingMatrix(mixingRef, spec.options, ctx);
        auto records = analysis::run_sweep(analysis::plan_sweep(spec), ctx);
        return std::make_shared<const analysis::SweepResult>(analysis::SweepResult{std::move(spec), std::move(records)});
    });
}

void MainWindow::runOverview()
{
    m_overviewSlot->requested = true;
    analysis::TensorSource source;
    attention::AttentionOptions options;
    QString why;
    try {
        if (!currentSource(source, &why))
            throw std::invalid_argument(why.toStdString());
        options = m_mechanism->options();
    } catch (const std::exception& e) {
        refuseSweep(m_overviewSlot->name, tr("Model overview: %1").arg(QString::fromStdString(e.what())));
        return;
    }
    const std::string mixingRef = m_mechanism->mixingFile().toStdString();
    startSweep(m_overviewSlot->name, [source, options, mixingRef](const analysis::JobContext& ctx) mutable {
        loadMixingMatrix(mixingRef, options, ctx);
        // overview_spec opens the file (layout of the queries): here, off the GUI thread.
        analysis::SweepSpec spec = analysis::overview_spec(source, options, analysis::MetricOptions{});
        spec.given = {true, true, true, true};   // the panels show every option in use
        auto records = analysis::run_sweep(analysis::plan_sweep(spec), ctx);
        return std::make_shared<const analysis::SweepResult>(analysis::SweepResult{std::move(spec), std::move(records)});
    });
}

// A sweep that cannot start (no data, bad parameters) ends at once with `error`.
void MainWindow::refuseSweep(const QString& view, const QString& error)
{
    m_lastSweepError = error;
    showMessage(m_lastSweepError, true);
    emit sweepFinished(view, false, m_lastSweepError);
}

void MainWindow::startSweep(const QString& view, std::function<SweepResultPtr(const analysis::JobContext&)> work)
{
    SweepSlot& s = slot(view);
    m_lastSweepError.clear();
    s.activate = true;
    s.fraction = 0;
    s.stage = tr("starting");
    s.job.start(std::move(work));
    updateSweepStatus();
}

void MainWindow::finishSweep(const QString& view, SweepResultPtr result)
{
    SweepSlot& s = slot(view);
    s.result = std::move(result);
    const bool created = s.view == nullptr;
    if (created) {
        s.view = view == m_overviewSlot->name ? createOverviewView(m_tabs) : createCurvesView(m_tabs);
        m_tabs->addTab(s.view, view == m_overviewSlot->name ? tr("Overview") : tr("Curves"));
        connect(s.view, &ResultView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 6000); });
    }
    s.view->setSweep(s.result);
    if (s.pendingState) {
        s.view->restoreState(*s.pendingState);
        s.pendingState.reset();
    } else if (view == m_curvesSlot->name && created) {
        s.view->setMetric(m_sweepParams->metric);
    }
    if (s.activate || m_pendingView == view)
        m_tabs->setCurrentWidget(s.view);
    if (m_pendingView == view)
        m_pendingView.clear();
    updateCentral();
}

void MainWindow::updateSweepStatus()
{
    QStringList stages;
    double fraction = 1.0;
    bool any = false;
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (s->job.running()) {
            any = true;
            stages << tr("%1: %2").arg(s == m_overviewSlot.get() ? tr("overview") : tr("sweep"), s->stage);
            fraction = std::min(fraction, s->fraction);
        }
    m_sweepStatus.stage->setText(stages.join(QStringLiteral(" · ")));
    m_sweepStatus.progress->setValue(int(fraction * 1000));
    m_sweepStatus.setVisible(any);
}

}  // namespace attnscope::widgets
