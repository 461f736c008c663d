// MainWindow, the explore computation: any change of assignment, selection or options schedules one
// (debounced), the request is built from the docks and checked against the machine's memory, and the
// result of the latest job is shown in every view.
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QStatusBar>

#include "analysis/file_defaults.h"
#include "analysis/inputs.h"
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
    if (mixingRef.empty())
        return;
    ctx.progress(0.0, "reading the mixing matrix");
    options.mixing.matrix = analysis::load_matrix(mixingRef);
}

// ------------------------------------------------------------------------------------ state changes

void MainWindow::onAssignmentChanged()
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const QString ref = q ? q->ref() : QString();
    m_selection->setTensor(q);
    // New queries start from their file's attributes (a session restores its own options instead).
    if (ref != m_defaultsRef && q && !m_applyingSession)
        applyFileDefaults(ref);
    m_defaultsRef = ref;
    onSelectionChanged();
    updateCentral();
}

void MainWindow::applyFileDefaults(const QString& queriesRef)
{
    analysis::AnalysisSetup setup;
    setup.selection = m_selection->selection();
    nlohmann::ordered_json fromFile;
    try {
        fromFile = analysis::resolve_file_defaults(queriesRef.toStdString(), setup);
    } catch (const std::exception&) {
        // A file or selection that cannot be read reports its error when computed.
        return;
    }
    m_mechanism->applyFileDefaults(setup.options, fromFile);
}

void MainWindow::onSelectionChanged()
{
    m_mechanism->setContext(m_selection->tokens(), m_selection->tokenGrid());
    updateTitle();
    scheduleCompute();
}

void MainWindow::scheduleCompute()
{
    if (m_applyingSession || !m_autoCompute)
        return;
    m_debounce.start();
}

void MainWindow::setAutoCompute(bool on)
{
    m_autoCompute = on;
    if (!on)
        m_debounce.stop();
}

bool MainWindow::isComputing() const
{
    return m_debounce.isActive() || m_explore->running();
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
}

void MainWindow::finishWithError(const QString& error)
{
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
    m_computeStatus.stage->setText(tr("starting"));
    m_computeStatus.progress->setValue(0);
    m_computeStatus.setVisible(true);
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
        emit computationFinished(false, tr("queries and keys are not assigned"));
        return false;
    }
    const QString problem = m_selection->problem();
    if (!problem.isEmpty()) {
        m_explore->cancel();
        finishWithError(tr("Selection: %1").arg(problem));
        return false;
    }
    request.source.q_ref = q->ref().toStdString();
    request.source.k_ref = k->ref().toStdString();
    if (v)
        request.source.v_ref = v->ref().toStdString();
    request.source.selection = m_selection->selection();
    request.token_grid = m_selection->tokenGrid();
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
    m_lastError.clear();
    if (m_query >= m_result->n)
        m_query = -1;
    for (ResultView* v : m_views) {
        v->setResult(m_result);
        v->setQuery(m_query);
    }
    QStringList problems;
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
    emit computationFinished(true, QString());
}

}  // namespace attnscope::widgets
