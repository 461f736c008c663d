// MainWindow, the Heads view: its page of heads is computed (analysis::explore_heads) for the explore request
// whose result the views show, only while its tab is current, on a GuiJob of its own (queue depth one: a
// newer page or result replaces the running job). The view is marked like the others: out of date while its
// page answers an older result or another page, not computed when it has none.
#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <QStatusBar>
#include <QTabWidget>

#include "analysis/inputs.h"
#include "attention/options_json.h"
#include "io/selection.h"
#include "data_browser.h"
#include "main_window_p.h"
#include "selection_panel.h"

namespace attnscope::widgets {

namespace {

// Whether two explore requests differ at most in the query head: one page of heads answers both (stepping
// through the heads of a layer recomputes the maps, not the page).
bool samePage(analysis::ExploreRequest a, analysis::ExploreRequest b)
{
    io::AxisSelection& sa = a.source.selection;
    io::AxisSelection& sb = b.source.selection;
    sa.at.erase('h');
    sb.at.erase('h');
    return a.source.q_ref == b.source.q_ref && a.source.k_ref == b.source.k_ref && a.source.v_ref == b.source.v_ref &&
           sa.layout == sb.layout && sa.at == sb.at && sa.all == sb.all && sa.prefix_tokens == sb.prefix_tokens &&
           sa.kv_head == sb.kv_head && a.mechanisms == b.mechanisms &&
           attention::options_to_json(a.options) == attention::options_to_json(b.options) && a.rank_rtol == b.rank_rtol &&
           a.past_split == b.past_split && a.past_splits == b.past_splits && a.token_grid == b.token_grid;
}

}  // namespace

void MainWindow::setUpHeads()
{
    HeadsSlot& h = *m_heads;
    for (ResultView* v : m_views)
        if (auto* hv = qobject_cast<HeadsView*>(v))
            h.view = hv;
    if (!h.view)
        return;
    connect(h.view, &HeadsView::pageRequested, this, [this](int) { updateHeads(); });
    connect(h.view, &HeadsView::headActivated, this, &MainWindow::openHead);
    connect(m_tabs, &QTabWidget::currentChanged, this, [this](int) { updateHeads(); });

    GuiJobHandlers<std::shared_ptr<const analysis::HeadsResult>> handlers;
    handlers.ended = [this] { m_heads->view->setProgress(-1, QString()); };
    handlers.succeeded = [this](const std::shared_ptr<const analysis::HeadsResult>& page) {
        HeadsSlot& s = *m_heads;
        if (s.computing != m_result) {   // the views moved on to another result meanwhile: its page starts
            updateHeads();
            return;
        }
        s.basis = s.computing;
        s.basisRequest = s.computingRequest;
        s.basisMixing = s.computingMixing;
        s.view->setHeads(page);
        if (m_resultCurrent)
            s.view->setNotice(ResultView::Freshness::current);
        emit headsFinished(true, QString());
    };
    handlers.failed = [this](const QString& error) {
        HeadsSlot& s = *m_heads;
        s.basis.reset();
        s.view->setHeads(nullptr);
        const QString text = tr("Heads: %1").arg(error);
        s.view->setNotice(ResultView::Freshness::notComputed, tr("Not computed: %1").arg(text));
        statusBar()->showMessage(text, 10000);
        emit headsFinished(false, text);
    };
    handlers.cancelled = [this] {
        HeadsSlot& s = *m_heads;
        if (s.basis != m_result || !s.view->heads())
            s.view->setNotice(s.view->heads() ? ResultView::Freshness::outOfDate : ResultView::Freshness::notComputed,
                              tr("The heads' computation was cancelled (press F5, or turn the page, to compute them)"));
        emit headsFinished(false, tr("cancelled"));
    };
    // The notice covers the view while its page is computed: the progress goes there too.
    handlers.progress = [this](double fraction, const QString& stage) {
        HeadsSlot& s = *m_heads;
        s.view->setProgress(fraction, stage);
        if (s.view->freshness() != ResultView::Freshness::current && !s.notice.isEmpty() && s.computing == m_result && m_resultCurrent)
            s.view->setNotice(s.view->freshness(), tr("%1\n%2 (%3 %)").arg(s.notice, stage).arg(std::lround(fraction * 100)));
    };
    h.job.setHandlers(std::move(handlers));
}

// Starts the page the view asks for when its tab is current and its page does not answer the views' result.
void MainWindow::updateHeads()
{
    HeadsSlot& h = *m_heads;
    if (!h.view || !m_result || !h.shown)
        return;
    const auto page = h.view->heads();
    const int first = h.view->pageFirst();
    const bool answered = page && page->first == first &&
                          (h.basis == m_result || (h.basis && samePage(h.basisRequest, *h.shown) && h.basisMixing == h.shownMixing));
    if (answered) {
        h.basis = m_result;
        if (m_resultCurrent)
            h.view->setNotice(ResultView::Freshness::current);
        return;
    }
    const auto stale = page ? ResultView::Freshness::outOfDate : ResultView::Freshness::notComputed;
    if (m_tabs->currentWidget() != h.view) {
        h.view->setNotice(stale, tr("The heads are computed when the Heads tab is shown"));
        return;
    }
    if (h.job.running() && h.computing == m_result && h.computingFirst == first)
        return;
    analysis::HeadsRequest request;
    request.base = *h.shown;
    request.first = first;
    request.count = HeadsView::kPageSize;
    const std::string mixingRef = h.shownMixing;
    h.computing = m_result;
    h.computingRequest = *h.shown;
    h.computingMixing = mixingRef;
    h.computingFirst = first;
    h.job.start([request, mixingRef](const analysis::JobContext& ctx) mutable {
        loadMixingMatrix(mixingRef, request.base.options, ctx);
        // A page past the heads of these inputs (another file, fewer heads): their first page.
        const analysis::HeadPairing p = analysis::pair_heads(request.base.source.q_ref, request.base.source.k_ref,
                                                             request.base.source.selection);
        if (request.first >= std::max<Eigen::Index>(1, p.heads))
            request.first = 0;
        return std::make_shared<const analysis::HeadsResult>(analysis::explore_heads(request, ctx));
    });
    h.notice = page ? tr("Out of date: computing heads %1\u2013%2 for the current inputs\u2026").arg(first).arg(first + HeadsView::kPageSize - 1)
                    : tr("Computing the heads\u2026");
    h.view->setNotice(stale, h.notice);
}

// A click on a small map: that head of the page's queries in the Maps view. Refused when the page was
// computed from other queries than those shown (its file or layer changed since).
void MainWindow::openHead(int head)
{
    const auto page = m_heads->view ? m_heads->view->heads() : nullptr;
    const auto q = m_browser->assigned(TensorRole::queries);
    if (!page || !q)
        return;
    if (q->tensor() != page->request.base.source.q_ref) {
        const QString why = tr("These heads are of %1, not the queries shown now: wait for the heads of the current queries.")
                                .arg(QString::fromStdString(page->request.base.source.q_ref.text));
        showMessage(why, true);
        statusBar()->showMessage(why, 8000);
        return;
    }
    if (head >= 0)
        m_selection->setIndex(QLatin1Char('h'), head);
    setCurrentView(QStringLiteral("maps"));
    statusBar()->showMessage(head >= 0 ? tr("Head %1 in the Maps view").arg(head) : tr("The Maps view"), 4000);
}

}  // namespace attnscope::widgets
