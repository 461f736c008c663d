// MainWindow, sweeps: the two sweep slots, "curves" (Analysis > Sweep...) and "overview" (Analysis > Model
// Overview). Each runs on its own GuiJob; its progress shares the status bar's sweep indicator (with
// "cancelling…" from Cancel until the job stops), and the first result creates the slot's tab. The curves
// keep every finished run as a curve set of its own (an N sweep and an M sweep, several runs of each).
#include <QFileInfo>
#include <QLabel>
#include <QProgressBar>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <algorithm>
#include <stdexcept>

#include "analysis/inputs.h"
#include "analysis/plan.h"
#include "analysis/requests.h"
#include "io/selection.h"
#include "curves.h"
#include "data_browser.h"
#include "main_window_p.h"
#include "mechanism_panel.h"
#include "selection_panel.h"
#include "sweep_dialog.h"
#include "util/json_text.h"

namespace attnscope::widgets {

namespace {

// The file of a reference, as the Data dock names it.
QString fileOf(const io::TensorRef& ref) { return QString::fromStdString(ref.file); }

// The layer a run's queries are when its file has per-layer datasets (/layers/<i>/q); -1 otherwise or when
// the records carry their layers. Headers only.
int datasetLayerOf(const analysis::SweepResult& r)
{
    if (r.spec.synth || r.spec.inputs.empty())
        return -1;
    if (!r.spec.input_layers.empty() && r.spec.input_layers.front())
        return static_cast<int>(*r.spec.input_layers.front());
    const analysis::TensorSource& in = r.spec.inputs.front();
    try {
        for (const analysis::LayerTensors& l : analysis::layer_tensors(in.q_ref, in.k_ref, std::nullopt))
            if (l.q_ref == in.q_ref)
                return static_cast<int>(l.layer);
    } catch (const std::exception&) {
        // A file that moved or cannot be read: the run is named without its layer.
    }
    return -1;
}

}  // namespace

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
    source.q_ref = q->tensor();
    source.k_ref = k->tensor();
    source.selection = m_selection->selection();
    return true;
}

void MainWindow::showSweepDialog()
{
    SweepDialog dialog(*m_sweepParams, sweepDataContext(), this);
    if (dialog.exec() == QDialog::Accepted)
        runSweep(dialog.params());
}

SweepDataContext MainWindow::sweepDataContext() const
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
    // The learned mixing matrix as the run will read it: the dialog checks it against every point's blocks.
    if (const QString mixing = m_mechanism->mixingFile(); !mixing.isEmpty() && data.source) {
        try {
            if (const auto ref = analysis::mixing_reference(mixing.toStdString()))
                analysis::load_mixing(data.options.mixing, *ref);
        } catch (const std::exception& e) {
            data.source.reset();
            data.problem = tr("Mixing matrix: %1").arg(QString::fromStdString(e.what()));
        }
    }
    return data;
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
        const QString base = curveSetName(*result, datasetLayerOf(*result));
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
            if (curveSetName(*run.sweep, run.datasetLayer) != base)
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


// Why run `r` no longer matches what the window shows ("" when it does): its file closed or not the one shown,
// another layer or selection (the axes it swept aside), or other mechanism options. Synthetic runs depend on
// nothing the window shows.
QString MainWindow::staleReason(const analysis::SweepResult& r, bool overview) const
{
    if (r.spec.synth || r.spec.inputs.empty())
        return {};
    const analysis::TensorSource& in = r.spec.inputs.front();
    const QString file = fileOf(in.q_ref);
    const QString name = QFileInfo(file).fileName();
    if (!m_browser->files().contains(file))
        return tr("%1 is closed").arg(name);
    const auto q = m_browser->assigned(TensorRole::queries);
    if (!q)
        return tr("no queries are assigned now");
    QStringList parts;
    if (q->file != file)   // another file's options differ anyway: the file says it
        return tr("computed on %1, the window shows %2").arg(name, QFileInfo(q->file).fileName());
    if (!overview) {
        const int layer = m_selection->currentLayer();
        if (q->tensor() != in.q_ref)
            parts << (layer >= 0 ? tr("other queries (now layer %1)").arg(layer) : tr("other queries (now %1)").arg(q->name));
        const io::AxisSelection now = m_selection->selection();
        if (now.prefix_tokens != in.selection.prefix_tokens)
            parts << tr("prefix tokens %1 (now %2)").arg(in.selection.prefix_tokens).arg(now.prefix_tokens);
        for (const auto& [axis, index] : in.selection.at) {
            const bool swept = (axis == 'h' && r.spec.heads.kind != analysis::AxisChoice::Kind::selection) ||
                               (axis == 'l' && r.spec.layers.kind != analysis::AxisChoice::Kind::selection);
            const auto it = now.at.find(axis);
            const std::int64_t current = it == now.at.end() ? 0 : it->second;
            if (!swept && current != index)
                parts << tr("%1=%2 (now %3)").arg(QChar::fromLatin1(axis)).arg(index).arg(current);
        }
    }
    try {
        if (const QString d = optionsDifference(r.spec.options, m_mechanism->options()); !d.isEmpty())
            parts << d;
    } catch (const std::exception& e) {
        parts << tr("the current options are incomplete (%1)").arg(QString::fromStdString(e.what()));
    }
    return parts.join(QStringLiteral("; "));
}

// Every run says whether it still matches the current inputs and options (checked on every change of files,
// selection or options); a view is redrawn only when that changed.
void MainWindow::updateSweepProvenance()
{
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()}) {
        bool changed = false;
        for (CurveSet& run : s->runs) {
            const QString why = staleReason(*run.sweep, s == m_overviewSlot.get());
            changed = changed || why != run.stale;
            run.stale = why;
        }
        if (changed && s->view)
            s->view->setCurveSets(s->runs);
    }
}

// A click on an overview cell shows that layer and head of the overview's own file: the window switches to
// the file when another is shown (with that file's options), and refuses when the file was closed.
void MainWindow::activateOverviewCell(int layer, int head)
{
    const SweepResultPtr r = m_overviewSlot->result;
    if (!r || r->spec.inputs.empty()) {
        jumpTo(layer, head);
        return;
    }
    const QString file = fileOf(r->spec.inputs.front().q_ref);
    const auto q = m_browser->assigned(TensorRole::queries);
    if (!q || q->file != file) {
        if (!m_browser->files().contains(file) || !showFile(file)) {
            const QString why = tr("The overview is of %1, which is not open: open it again to see layer %2, head %3.")
                                    .arg(QFileInfo(file).fileName())
                                    .arg(layer)
                                    .arg(head);
            showMessage(why, true);
            statusBar()->showMessage(why, 8000);
            return;
        }
        statusBar()->showMessage(tr("Switched to %1, the overview's file").arg(QFileInfo(file).fileName()), 6000);
    }
    jumpTo(layer, head);
    if (!m_overviewSlot->runs.isEmpty() && !m_overviewSlot->runs.back().stale.isEmpty())
        statusBar()->showMessage(tr("Layer %1, head %2 with the current options, not the overview's: %3")
                                     .arg(layer)
                                     .arg(head)
                                     .arg(m_overviewSlot->runs.back().stale),
                                 10000);
}

// A run the user removed from the Curves tab: gone from the tab, the session and the Sweep CSV export.
void MainWindow::removeRun(SweepSlot& s, const QString& name)
{
    const auto it = std::find_if(s.runs.begin(), s.runs.end(), [&](const CurveSet& r) { return r.name == name; });
    if (it == s.runs.end())
        return;
    s.runs.erase(it);
    s.result = s.runs.isEmpty() ? nullptr : s.runs.back().sweep;
    showSweepRuns(s);
    statusBar()->showMessage(tr("Removed the run %1").arg(name), 5000);
}

void MainWindow::showSweepRuns(SweepSlot& s)
{
    for (CurveSet& run : s.runs) {
        run.stale = staleReason(*run.sweep, &s == m_overviewSlot.get());
        if (run.datasetLayer < 0)
            run.datasetLayer = datasetLayerOf(*run.sweep);
    }
    if (!s.view) {
        const bool overview = &s == m_overviewSlot.get();
        s.view = overview ? createOverviewView(m_tabs) : createCurvesView(m_tabs);
        // Fixed places after the views, Curves before Overview whichever came first: a reopened session keeps
        // every tab, and so every Ctrl+number, where it was.
        const int at = overview || !m_overviewSlot->view ? m_tabs->count() : m_tabs->indexOf(m_overviewSlot->view);
        m_tabs->insertTab(at, s.view, overview ? tr("Overview") : tr("Curves"));
        connect(s.view, &ResultView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 6000); });
        connect(s.view, &SweepView::cellActivated, this, &MainWindow::activateOverviewCell);
        connect(s.view, &SweepView::runRemovalRequested, this, [this, &s](const QString& name) { removeRun(s, name); });
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
