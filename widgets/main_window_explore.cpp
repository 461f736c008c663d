// MainWindow, the explore computation: any change of assignment, selection or options schedules one
// (debounced), the request is built from the docks and checked against the machine's memory, and the
// result of the latest job is shown in every view.
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QStatusBar>

#include "analysis/file_defaults.h"
#include "analysis/inputs.h"
#include "analysis/requests.h"
#include "data_browser.h"
#include "main_window_p.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"

namespace attnscope::widgets {

namespace {

QString mib(std::uint64_t bytes)
{
    if (bytes >= (std::uint64_t(1) << 30))
        return QObject::tr("%1 GiB").arg(double(bytes) / double(1ULL << 30), 0, 'f', 1);
    return QObject::tr("%1 MiB").arg(bytes >> 20);
}

}  // namespace

void loadMixingMatrix(const std::string& mixingRef, attention::AttentionOptions& options, const analysis::JobContext& ctx)
{
    const std::optional<io::TensorRef> ref = analysis::mixing_reference(mixingRef);   // the Mechanism dock's text
    if (!ref)
        return;
    ctx.progress(0.0, "reading the mixing matrix");
    analysis::load_mixing(options.mixing, *ref);
}

// ------------------------------------------------------------------------------------ state changes

void MainWindow::onFilesChanged()
{
    // A file that was not shown was closed: its remembered state goes with it; nothing shown changes.
    const QStringList open = m_browser->files();
    for (auto it = m_fileStates.begin(); it != m_fileStates.end();)
        it = open.contains(it.key()) ? std::next(it) : m_fileStates.erase(it);
    if (!open.contains(m_unusableFile))
        m_unusable.clear();
    updateTitle();
    updateCentral();
}

void MainWindow::onAssignmentChanged()
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const QString ref = q ? q->ref() : QString();
    const QString file = q ? q->file : QString();
    // Leaving a file: its options, selection and tensors stay with it (one state per open file); a closed
    // file's state goes with it.
    if (file != m_defaultsFile && !m_defaultsFile.isEmpty() && !m_applyingSession)
        saveFileState(m_defaultsFile);
    const QStringList open = m_browser->files();
    for (auto it = m_fileStates.begin(); it != m_fileStates.end();)
        it = open.contains(it.key()) ? std::next(it) : m_fileStates.erase(it);
    m_selection->setTensor(q);
    if (file != m_defaultsFile)
        m_attributeProblem.clear();
    if (q || !open.contains(m_unusableFile))
        m_unusable.clear();
    if (m_applyingSession) {
        m_mechanism->forgetFileDefaults();   // a session brings its own options
    } else if (!q) {
        // Nothing describes a closed file any more: the options go back to the program's defaults.
        m_settingPanels = true;
        m_mechanism->resetToDefaults();
        m_settingPanels = false;
        m_userChangedOptions = false;
    } else if (ref != m_defaultsRef) {
        const bool otherFile = file != m_defaultsFile;
        if (otherFile && m_fileStates.contains(file)) {
            // Back to a file: its options and selection as they were left (its attributes' note with them).
            const FileState st = m_fileStates.value(file);
            m_settingPanels = true;
            applyFileDefaults(q->tensor());
            m_mechanism->restoreState(st.mechanism);
            m_selection->restoreState(st.selection);
            m_settingPanels = false;
            m_userChangedOptions = st.userChanged;
            m_query = st.query;   // the query selected there (showResult drops it if out of range)
        } else if (otherFile || !m_userChangedOptions) {
            // New queries start from their file's attributes (another layer of a file keeps what the user chose).
            if (otherFile)
                m_query = -1;   // another file's token index means nothing here
            m_settingPanels = true;
            applyFileDefaults(q->tensor());
            m_settingPanels = false;
            m_userChangedOptions = false;
        }
    }
    m_defaultsRef = ref;
    m_defaultsFile = file;
    m_lastTensors.clear();
    if (q) {
        const auto k = m_browser->assigned(TensorRole::keys), v = m_browser->assigned(TensorRole::values);
        m_lastTensors = {q->name, k && k->file == file ? k->name : QString(), v && v->file == file ? v->name : QString()};
    }
    updateLayers();
    onSelectionChanged();
    if (!q && !m_applyingSession) {
        // The views describe no file now: cleared at once, not greyed until a computation that cannot start.
        m_debounce.stop();
        m_explore->cancel();
        clearResult(noDataReason());
    }
    updateCentral();
}

// What the file shows when the window comes back to it: the options (with whether the user changed them),
// the selection and the tensors assigned.
void MainWindow::saveFileState(const QString& file)
{
    FileState st;
    st.mechanism = m_mechanism->saveState();
    st.selection = m_selection->saveState();
    st.userChanged = m_userChangedOptions;
    st.tensors = m_lastTensors;
    st.query = m_query;
    m_fileStates.insert(file, st);
}

// Shows `file`: the tensors it had when the window left it, else those its names suggest. False when it
// has no queries and keys the window can use.
bool MainWindow::showFile(const QString& file)
{
    const auto it = m_fileStates.constFind(file);
    if (it != m_fileStates.cend() && it->tensors.size() == 3 &&
        m_browser->assignTensors(file, it->tensors[0], it->tensors[1], it->tensors[2]))
        return true;
    return m_browser->autoAssign(file) && m_browser->assigned(TensorRole::queries) && m_browser->assigned(TensorRole::keys);
}

// Why nothing is computed while queries or keys are missing.
QString MainWindow::noDataReason() const
{
    if (!m_unusable.isEmpty())
        return m_unusable;
    return m_browser->files().isEmpty() ? tr("no data open")
                                        : tr("queries and keys are not assigned (right-click a tensor in the Data dock)");
}

// The per-layer datasets of the queries' file, for the Selection dock's layer control.
void MainWindow::updateLayers()
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    const auto v = m_browser->assigned(TensorRole::values);
    m_layers.clear();
    int current = -1;
    if (q && k) {
        try {
            m_layers = analysis::layer_tensors(q->tensor(), k->tensor(), v ? std::optional(v->tensor()) : std::nullopt);
        } catch (const std::exception&) {
            m_layers.clear();   // a file that cannot be read reports its error when computed
        }
        for (const auto& l : m_layers)
            if (l.q_ref == q->tensor())
                current = int(l.layer);
    }
    QList<int> layers;
    for (const auto& l : m_layers)
        layers << int(l.layer);
    m_selection->setLayers(layers, current);
}

// Which key/value head the selected query head reads (grouped-query attention), for the Selection dock.
void MainWindow::updateHeadPairing()
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    if (!q || !k || !m_selection->problem().isEmpty()) {
        m_selection->setHeadPairing(-1, 0, 0);
        return;
    }
    try {
        const analysis::HeadPairing p =
            analysis::pair_heads(q->tensor(), k->tensor(), m_selection->selection());
        m_selection->setHeadPairing(p.kv_head ? int(*p.kv_head) : -1, int(p.kv_heads), int(p.heads));
    } catch (const std::exception&) {
        m_selection->setHeadPairing(-1, 0, 0);   // the computation reports why
    }
}

void MainWindow::applyFileDefaults(const io::TensorRef& ref)
{
    analysis::AnalysisSetup setup;
    setup.selection = m_selection->selection();
    analysis::FileDefaults defaults;
    try {
        defaults = analysis::read_file_defaults(ref);
    } catch (const std::exception&) {
        // A file or selection that cannot be read reports its error when computed.
        return;
    }
    nlohmann::ordered_json fromFile;
    m_attributeProblem.clear();
    try {
        fromFile = analysis::apply_file_defaults(defaults, ref, setup);
    } catch (const std::exception& e) {
        // An attribute that cannot be used (docs/cli.md "Axis selection"): said, not ignored; the options
        // start from the program's defaults and the docks override the attribute.
        m_attributeProblem = tr("The file's attributes were not applied: %1 (or set it in the docks)").arg(QString::fromStdString(e.what()));
        showMessage(m_attributeProblem, true);
        statusBar()->showMessage(m_attributeProblem, 10000);
        setup = analysis::AnalysisSetup{};
        setup.selection = m_selection->selection();
        fromFile = nlohmann::ordered_json::object();
    }
    m_mechanism->applyFileDefaults(setup.options, fromFile);
}

void MainWindow::onSelectionChanged()
{
    updateHeadPairing();
    m_mechanism->setContext(m_selection->tokens(), m_selection->tokenGrid(), !m_selection->gridGuessed());
    m_mechanism->setFeatureDim(m_selection->features());
    updateTitle();
    updateSweepProvenance();
    scheduleCompute();
}

void MainWindow::scheduleCompute()
{
    if (m_applyingSession || !m_autoCompute)
        return;
    markOutOfDate(tr("Out of date: recomputing for the changed inputs or options\u2026"));
    m_debounce.start();
}

void MainWindow::markOutOfDate(const QString& why)
{
    if (!m_result) {
        for (ResultView* v : m_views)
            if (v->freshness() != ResultView::Freshness::notComputed)
                v->setNotice(ResultView::Freshness::notComputed, tr("Computing\u2026"));
        return;
    }
    m_resultCurrent = false;
    for (ResultView* v : m_views)
        v->setNotice(ResultView::Freshness::outOfDate, why);
    m_info->setText(tr("out of date: N = %1, d = %2").arg(m_result->n).arg(m_result->d));
}

void MainWindow::clearResult(const QString& why)
{
    m_result.reset();
    m_resultCurrent = false;
    for (ResultView* v : m_views) {
        v->setResult(nullptr);
        v->setNotice(ResultView::Freshness::notComputed, tr("Not computed: %1").arg(why));
    }
    m_info->clear();
}

void MainWindow::setAutoCompute(bool on)
{
    m_autoCompute = on;
    if (!on)
        m_debounce.stop();
}

bool MainWindow::isComputing() const
{
    return m_debounce.isActive() || m_explore->running() || m_heads->job.running() || m_depth->job.running();
}

void MainWindow::computeNow()
{
    m_debounce.stop();
    startComputation();
}

void MainWindow::cancelComputation()
{
    m_debounce.stop();
    m_explore->cancel();
    m_heads->job.cancel();
    m_depth->job.cancel();
}

void MainWindow::finishWithError(const QString& error)
{
    clearResult(error);
    m_lastError = error;
    showMessage(error, true);
    statusBar()->showMessage(error, 10000);
    emit computationFinished(false, error);
}


// ---------------------------------------------------------------------------------------- computation

void MainWindow::setUpComputation()
{
    GuiJobHandlers<ExploreResultPtr> h;
    h.ended = [this] { m_computeStatus.setVisible(false); };
    h.cancelled = [this] {
        if (m_result)
            markOutOfDate(tr("Out of date: the computation for the current inputs was cancelled. These views show the "
                             "previous inputs; press F5 to compute the current ones."));
        else
            clearResult(tr("cancelled (press F5 to compute)"));
        statusBar()->showMessage(tr("Computation cancelled"), 5000);
        emit computationFinished(false, tr("cancelled"));
    };
    h.failed = [this](const QString& error) { finishWithError(error); };
    h.succeeded = [this](const ExploreResultPtr& result) { showResult(result); };
    h.progress = [this](double fraction, const QString& stage) {
        m_computeStatus.stage->setText(stage);
        m_computeStatus.progress->setValue(int(fraction * 1000));
    };
    m_explore->setHandlers(std::move(h));
}

void MainWindow::startComputation()
{
    analysis::ExploreRequest request;
    if (!buildRequest(request) || !approveMemory(request))
        return;
    const std::string mixingRef = m_mechanism->mixingFile().toStdString();
    m_explore->start([request, mixingRef](const analysis::JobContext& ctx) mutable -> ExploreResultPtr {
        loadMixingMatrix(mixingRef, request.options, ctx);
        return std::make_shared<const analysis::ExploreResult>(analysis::explore(request, ctx));
    });
    m_heads->started = request;   // the Heads view computes its page with the request of the result shown
    m_heads->startedMixing = mixingRef;
    m_depth->started = request;   // the Depth view likewise, with the options the user chose
    m_depth->startedMixing = mixingRef;
    m_depth->startedGiven = m_mechanism->explicitChoices();
    m_computeStatus.stage->setText(tr("starting"));
    m_computeStatus.progress->setValue(0);
    m_computeStatus.setVisible(true);
    if (!m_result) {
        // The first result of these inputs: the views say it is on its way (they said "No result yet ... assign
        // Q and K" for the minutes a large N takes, with Q and K assigned).
        const int n = m_selection->tokens();
        const QString what = n > 0 ? tr("Computing N = %1 tokens…").arg(n) : tr("Computing…");
        for (ResultView* v : m_views)
            v->setNotice(ResultView::Freshness::notComputed, what + tr("\nProgress in the status bar; Esc cancels."));
    }
    emit computationStarted();
}

// The request for the current assignment, selection and options. False (the reason reported) when there
// is nothing to compute; a running computation is then cancelled, as its result would no longer match.
bool MainWindow::buildRequest(analysis::ExploreRequest& request)
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    const auto v = m_browser->assigned(TensorRole::values);
    if (!q || !k) {
        m_explore->cancel();
        clearResult(noDataReason());
        emit computationFinished(false, tr("queries and keys are not assigned"));
        return false;
    }
    const QString problem = m_selection->problem();
    if (!problem.isEmpty()) {
        m_explore->cancel();
        finishWithError(tr("Selection: %1").arg(problem));
        return false;
    }
    request.source.q_ref = q->tensor();
    request.source.k_ref = k->tensor();
    if (v)
        request.source.v_ref = v->tensor();
    request.source.selection = m_selection->selection();
    request.token_grid = m_selection->tokenGrid();
    request.mechanisms = m_mechanism->mechanisms();
    if (request.mechanisms.empty()) {
        m_explore->cancel();
        finishWithError(tr("Mechanisms: none is ticked"));
        return false;
    }
    try {
        request.options = m_mechanism->options();
    } catch (const std::exception& e) {
        finishWithError(tr("Mechanism options: %1").arg(QString::fromStdString(e.what())));
        return false;
    }
    return true;
}

// Asks before a computation over the memory limit; refuses one over physical memory. An approved size is
// not asked about again, and its request may use up to physical memory.
bool MainWindow::approveMemory(analysis::ExploreRequest& request)
{
    Eigen::Index n = 0;
    try {
        n = analysis::selected_tokens(request.source);
    } catch (const std::exception& e) {
        finishWithError(QString::fromStdString(e.what()));
        return false;
    }
    const std::uint64_t need = analysis::explore_memory_bytes(n, 3);
    const std::uint64_t limit = analysis::default_memory_limit();
    const std::uint64_t physical = limit * 2;
    if (need > physical) {
        finishWithError(tr("N = %1 tokens need about %2 for three dense %1 x %1 matrices, more than this machine's %3 "
                           "of memory. Select fewer tokens (prefix tokens, another tensor) or use attnscope analyze "
                           "with one mechanism.")
                            .arg(n)
                            .arg(mib(need), mib(physical)));
        return false;
    }
    if (need > limit) {
        if (m_approvedTokens != n && m_interactive) {
            const auto answer = QMessageBox::question(
                this, tr("Large computation"),
                tr("N = %1 tokens need about %2 of memory (the limit is half the machine's memory, %3). Proceed?")
                    .arg(n)
                    .arg(mib(need), mib(limit)),
                QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
            if (answer != QMessageBox::Yes) {
                finishWithError(tr("Computation of N = %1 tokens not started (needs %2).").arg(n).arg(mib(need)));
                return false;
            }
        }
        m_approvedTokens = n;
        request.memory_limit = physical;
    }
    return true;
}

void MainWindow::showResult(ExploreResultPtr result)
{
    m_result = std::move(result);
    m_resultCurrent = true;
    m_lastError.clear();
    if (m_query >= m_result->n)
        m_query = -1;
    for (ResultView* v : m_views) {
        v->setResult(m_result);
        v->setQuery(m_query);
        v->setNotice(ResultView::Freshness::current);
    }
    QStringList problems;
    if (!m_attributeProblem.isEmpty())
        problems << m_attributeProblem;
    for (const auto& o : m_result->outcomes)
        if (!o.error.empty())
            problems << QStringLiteral("%1: %2").arg(QString::fromLatin1(attention::to_string(o.result.mechanism)),
                                                     QString::fromStdString(o.error));
    if (problems.isEmpty())
        hideMessage();
    else
        showMessage(problems.join(QLatin1Char('\n')), true);
    m_info->setText(tr("N = %1, d = %2 · %3 s").arg(m_result->n).arg(m_result->d).arg(m_result->seconds, 0, 'f', 2));
    statusBar()->showMessage(tr("Computed in %1 s").arg(m_result->seconds, 0, 'f', 2), 4000);
    updateCentral();
    updateTitle();
    m_heads->shown = m_heads->started;
    m_heads->shownMixing = m_heads->startedMixing;
    updateHeads();   // before the signal: a caller waiting for the window sees the heads' job
    m_depth->shown = m_depth->started;
    m_depth->shownMixing = m_depth->startedMixing;
    m_depth->shownGiven = m_depth->startedGiven;
    updateDepth();
    emit computationFinished(true, QString());
}

}  // namespace attnscope::widgets
