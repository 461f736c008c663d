// MainWindow, the Depth view: the products of the layers of the views' queries' file (analysis::explore_depth) are
// computed for the explore request whose result the views show and the view's alpha and heads, only while its tab
// is current, on a GuiJob of its own (queue depth one: newer inputs or settings replace the running job). The view
// is marked like the others: out of date while its depth answers other inputs or settings, not computed when it
// has none. Stepping to another layer or (for the mean over heads) another head gives the same depth: nothing is
// recomputed then.
#include <QStatusBar>
#include <QTabWidget>
#include <cmath>

#include "attention/options_json.h"
#include "io/selection.h"
#include "main_window_p.h"

namespace attnscope::widgets {

namespace {

// The parts of a depth request the depth depends on: the layer shown ('l', or which of the file's per-layer
// datasets `layers` are assigned) never; the head only for one head; the options the file's attributes set (not
// `given`) come from each layer's own attributes; the values never.
analysis::ExploreDepthRequest depthEssentials(analysis::ExploreDepthRequest r, const std::vector<analysis::LayerTensors>& layers)
{
    analysis::TensorSource& src = r.base.source;
    src.selection.at.erase('l');
    if (r.head_mean) {
        src.selection.at.erase('h');
        src.selection.kv_head.reset();
    }
    src.v_ref.reset();
    for (const analysis::LayerTensors& l : layers)
        if (l.q_ref == src.q_ref && l.k_ref == src.k_ref) {
            src.q_ref = layers.front().q_ref;
            src.k_ref = layers.front().k_ref;
            break;
        }
    attention::AttentionOptions& o = r.base.options;
    const attention::AttentionOptions defaults;
    if (!r.given.causal)
        o.causal = defaults.causal;
    if (!r.given.scale)
        o.scale = defaults.scale;
    if (!r.given.blocks)
        o.blocks = defaults.blocks;
    if (!r.given.mixing)
        o.mixing = defaults.mixing;
    if (!r.given.gates)
        o.gates = defaults.gates;
    r.base.token_grid.clear();   // display only
    return r;
}

bool sameDepth(const analysis::ExploreDepthRequest& x, const analysis::ExploreDepthRequest& y,
               const std::vector<analysis::LayerTensors>& layers)
{
    const analysis::ExploreDepthRequest a = depthEssentials(x, layers), b = depthEssentials(y, layers);
    const io::AxisSelection &sa = a.base.source.selection, &sb = b.base.source.selection;
    return a.alpha == b.alpha && a.head_mean == b.head_mean && a.given == b.given && a.base.source.q_ref == b.base.source.q_ref &&
           a.base.source.k_ref == b.base.source.k_ref && sa.layout == sb.layout && sa.at == sb.at && sa.all == sb.all &&
           sa.prefix_tokens == sb.prefix_tokens && sa.kv_head == sb.kv_head && a.base.mechanisms == b.base.mechanisms &&
           attention::options_to_json(a.base.options) == attention::options_to_json(b.base.options) &&
           a.base.rank_rtol == b.base.rank_rtol && a.base.past_split == b.base.past_split;
}

}  // namespace

void MainWindow::setUpDepth()
{
    DepthSlot& d = *m_depth;
    for (ResultView* v : m_views)
        if (auto* dv = qobject_cast<DepthView*>(v))
            d.view = dv;
    if (!d.view)
        return;
    connect(d.view, &DepthView::settingsChanged, this, [this] { updateDepth(); });
    connect(m_tabs, &QTabWidget::currentChanged, this, [this](int) { updateDepth(); });

    GuiJobHandlers<std::shared_ptr<const analysis::ExploreDepthResult>> handlers;
    handlers.ended = [this] { m_depth->view->setProgress(-1, QString()); };
    handlers.succeeded = [this](const std::shared_ptr<const analysis::ExploreDepthResult>& depth) {
        DepthSlot& s = *m_depth;
        s.basis = s.computing;
        s.basisMixing = s.computingMixing;
        s.view->setDepth(depth);
        updateDepth();   // current when it answers what the views show now, else the next one starts
        emit depthFinished(true, QString());
    };
    handlers.failed = [this](const QString& error) {
        DepthSlot& s = *m_depth;
        s.basis.reset();
        s.view->setDepth(nullptr);
        const QString text = tr("Depth: %1").arg(error);
        s.view->setNotice(ResultView::Freshness::notComputed, tr("Not computed: %1").arg(text));
        statusBar()->showMessage(text, 10000);
        emit depthFinished(false, text);
    };
    handlers.cancelled = [this] {
        DepthSlot& s = *m_depth;
        s.view->setNotice(s.view->depth() ? ResultView::Freshness::outOfDate : ResultView::Freshness::notComputed,
                          tr("The depth's computation was cancelled (press F5, or change \u03b1, to compute it)"));
        emit depthFinished(false, tr("cancelled"));
    };
    // The notice covers the view while its depth is computed: the progress goes there too.
    handlers.progress = [this](double fraction, const QString& stage) {
        DepthSlot& s = *m_depth;
        s.view->setProgress(fraction, stage);
        if (s.view->freshness() != ResultView::Freshness::current && !s.notice.isEmpty() && m_resultCurrent)
            s.view->setNotice(s.view->freshness(), tr("%1\n%2 (%3 %)").arg(s.notice, stage).arg(std::lround(fraction * 100)));
    };
    d.job.setHandlers(std::move(handlers));
}

// Starts the depth the view asks for when its tab is current and its depth does not answer the views' inputs.
void MainWindow::updateDepth()
{
    DepthSlot& d = *m_depth;
    if (!d.view || !m_result || !d.shown)
        return;
    analysis::ExploreDepthRequest want;
    want.base = *d.shown;
    want.given = d.shownGiven;
    want.head_mean = d.view->headMean();
    want.alpha = d.view->alpha();
    const std::string mixing = want.given.mixing ? d.shownMixing : std::string();
    const bool answered = d.view->depth() && d.basis && sameDepth(*d.basis, want, m_layers) && d.basisMixing == mixing;
    if (answered) {
        if (m_resultCurrent)
            d.view->setNotice(ResultView::Freshness::current);
        return;
    }
    const auto stale = d.view->depth() ? ResultView::Freshness::outOfDate : ResultView::Freshness::notComputed;
    if (m_tabs->currentWidget() != d.view) {
        d.view->setNotice(stale, tr("The depth is computed when the Depth tab is shown"));
        return;
    }
    if (d.job.running() && d.computing && sameDepth(*d.computing, want, m_layers) && d.computingMixing == mixing)
        return;
    d.computing = want;
    d.computingMixing = mixing;
    const std::string mixingRef = d.shownMixing;
    d.job.start([want, mixingRef](const analysis::JobContext& ctx) mutable {
        loadMixingMatrix(mixingRef, want.base.options, ctx);   // each layer's own instead where the file sets it (given)
        return std::make_shared<const analysis::ExploreDepthResult>(analysis::explore_depth(want, ctx));
    });
    d.notice = d.view->depth() ? tr("Out of date: computing the depth for the current inputs (\u03b1 = %1)\u2026").arg(want.alpha)
                               : tr("Computing the products of the layers\u2026");
    d.view->setNotice(stale, d.notice);
}

}  // namespace attnscope::widgets
