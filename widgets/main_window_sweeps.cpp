// MainWindow, sweeps: the two sweep slots, "curves" (Analysis > Sweep...) and "overview" (Analysis > Model
// Overview). Each runs on its own GuiJob; its progress shares the status bar's sweep indicator (with
// "cancelling…" from Cancel until the job stops), and the first result creates the slot's tab. The curves
// keep every finished run as a curve set of its own (an N sweep and an M sweep, several runs of each).
#include <QLabel>
#include <QProgressBar>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <algorithm>
#include <stdexcept>

#include "analysis/inputs.h"
#include "curves.h"
#include "data_browser.h"
#include "main_window_p.h"
#include "mechanism_panel.h"
#include "selection_panel.h"
#include "sweep_dialog.h"
#include "util/json_text.h"

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
    h.ended = [this, &s] {
        s.cancelling = false;
        updateSweepStatus();
    };
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
        clearSweepError();
        finishSweep(view, result);
        statusBar()->showMessage(tr("%1 done: %2 analyses").arg(what).arg(qsizetype(result->records.size())), 5000);
        emit sweepFinished(view, true, QString());
    };
    h.progress = [this, &s](double fraction, const QString& stage) {
        if (s.cancelling)
            return;   // reports still queued from before Cancel
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

// The job stops at its next check (between row tiles and SVD panels, well under a second); until it reports,
// the status bar says "cancelling…".
void MainWindow::cancelSweeps()
{
    bool any = false;
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()}) {
        if (!s->job.running() || s->cancelling)
            continue;
        s->cancelling = true;
        s->stage = tr("cancelling\u2026");
        s->job.cancel();
        any = true;
    }
    if (any)
        statusBar()->showMessage(tr("Cancelling\u2026"), 3000);
    updateSweepStatus();
}

void MainWindow::resetSweeps()
{
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()}) {
        s->job.forget();   // a late outcome of the cancelled job is dropped
        s->cancelling = false;
        s->runs.clear();
        s->result.reset();
        s->pendingState.reset();
        s->note.clear();
        if (s->view) {
            m_tabs->removeTab(m_tabs->indexOf(s->view));
            s->view->deleteLater();
            s->view = nullptr;
        }
    }
    m_lastSweepError.clear();
    updateSweepStatus();
}

// A failed sweep's banner goes when another sweep starts or one succeeds (an error of the computation stays).
void MainWindow::clearSweepError()
{
    if (!m_lastSweepError.isEmpty() && messageText() == m_lastSweepError)
        hideMessage();
    m_lastSweepError.clear();
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
    SweepDataContext data;
    data.haveData = m_browser->assigned(TensorRole::queries) && m_browser->assigned(TensorRole::keys);
    if (data.haveData) {
        analysis::TensorSource source;
        QString why;
        if (currentSource(source, &why))
            data.source = source;
        else
            data.problem = why;
    }
    data.options = m_mechanism->options();
    SweepDialog dialog(*m_sweepParams, std::move(data), this);
    if (dialog.exec() == QDialog::Accepted)
        runSweep(dialog.params());
}

void MainWindow::runSweep(const SweepParams& params)
{
    *m_sweepParams = params;
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
    clearSweepError();
    s.cancelling = false;
    s.fraction = 0;
    s.stage = tr("starting");
    s.job.start(std::move(work));
    updateSweepStatus();
}

// A finished run: the overview shows its last, the curves add it to their runs (a run with the same name,
// parameters and values replaces the older one: it draws the same curves).
void MainWindow::finishSweep(const QString& view, SweepResultPtr result)
{
    SweepSlot& s = slot(view);
    s.result = result;
    if (&s == m_overviewSlot.get()) {
        s.runs = {CurveSet{result, QString()}};
    } else {
        const QString base = curveSetName(*result);
        const auto specText = [](const analysis::SweepResult& r) {
            return json_text(analysis::sweep_result_json(analysis::SweepResult{r.spec, {}})["spec"]);
        };
        // The records without their timings.
        const auto valuesText = [](const analysis::SweepResult& r) {
            std::vector<analysis::SweepRecord> records = r.records;
            for (analysis::SweepRecord& rec : records)
                rec.seconds = 0;
            return analysis::sweep_csv(records);
        };
        const std::string spec = specText(*result), values = valuesText(*result);
        int same = -1, taken = 0;
        for (int i = 0; i < s.runs.size(); ++i) {
            const CurveSet& run = s.runs.at(i);
            if (curveSetName(*run.sweep) != base)
                continue;
            ++taken;
            if (specText(*run.sweep) == spec && valuesText(*run.sweep) == values)
                same = i;
        }
        if (same >= 0) {
            s.runs[same].sweep = result;
        } else {
            QString name = base;
            for (int k = taken + 1; std::any_of(s.runs.begin(), s.runs.end(), [&](const CurveSet& r) { return r.name == name; }); ++k)
                name = tr("%1 (%2)").arg(base).arg(k);
            s.runs.append(CurveSet{result, name});
        }
    }
    const bool created = s.view == nullptr;
    s.note.clear();
    showSweepRuns(s);
    if (created && &s == m_curvesSlot.get() && !s.pendingState)
        s.view->setMetric(m_sweepParams->metric);
    m_tabs->setCurrentWidget(s.view);
    updateCentral();
}

void MainWindow::showSweepRuns(SweepSlot& s)
{
    if (!s.view) {
        const bool overview = &s == m_overviewSlot.get();
        s.view = overview ? createOverviewView(m_tabs) : createCurvesView(m_tabs);
        m_tabs->addTab(s.view, overview ? tr("Overview") : tr("Curves"));
        connect(s.view, &ResultView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 6000); });
        connect(s.view, &SweepView::cellActivated, this, &MainWindow::jumpTo);
    }
    s.view->setNote(s.note);
    s.view->setCurveSets(s.runs);
    if (s.pendingState) {
        s.view->restoreState(*s.pendingState);
        s.pendingState.reset();
    }
}

void MainWindow::updateSweepStatus()
{
    QStringList stages;
    double fraction = 1.0;
    bool any = false, cancelling = true;
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (s->job.running()) {
            any = true;
            cancelling = cancelling && s->cancelling;
            stages << tr("%1: %2").arg(s == m_overviewSlot.get() ? tr("overview") : tr("sweep"), s->stage);
            fraction = std::min(fraction, s->fraction);
        }
    m_sweepStatus.stage->setText(stages.join(QStringLiteral(" \u00b7 ")));
    m_sweepStatus.progress->setValue(int(fraction * 1000));
    m_sweepStatus.cancel->setEnabled(!cancelling);
    m_sweepStatus.setVisible(any);
}

}  // namespace attnscope::widgets
