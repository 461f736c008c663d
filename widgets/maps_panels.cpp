// MapPanels: the attention matrices drawn side by side; see maps_panels.h.
#include "maps_panels.h"

#include <QFontMetrics>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "plot_util.h"

namespace attnscope::widgets {
namespace {

using attention::Mechanism;
using Eigen::Index;

// Inserts line breaks so a long error message fits a panel.
QString wrapText(const QString& text, int width)
{
    QStringList lines;
    QString line;
    for (const QString& w : text.split(' ', Qt::SkipEmptyParts)) {
        if (!line.isEmpty() && line.size() + 1 + w.size() > width) {
            lines << line;
            line.clear();
        }
        line += (line.isEmpty() ? "" : " ") + w;
    }
    if (!line.isEmpty())
        lines << line;
    return lines.join('\n');
}

}  // namespace

MapPanels::MatrixStats MapPanels::statsOf(const analysis::MechanismOutcome& o)
{
    MatrixStats s;
    if (o.pyramid) {   // computed by the core with the reduced images
        s.max = o.pyramid->max;
        s.min = o.pyramid->min;
        s.min_positive = o.pyramid->min_positive;
        return s;
    }
    const Eigen::MatrixXd& A = *o.matrix;
    s.max = A.maxCoeff();
    s.min = A.minCoeff();
    s.min_positive = (A.array() > 0.0).select(A.array(), std::numeric_limits<double>::infinity()).minCoeff();
    return s;
}

void MapPanels::setResult(std::shared_ptr<const analysis::ExploreResult> result)
{
    m_result = std::move(result);
    m_stats.clear();
    m_diffAbsMax.clear();
    if (m_result)
        for (const auto& o : m_result->outcomes)
            m_stats.push_back(o.matrix ? statsOf(o) : MatrixStats{});
}

// The outcome of `mechanism` when its matrix exists, else -1 (no difference mode).
int MapPanels::referenceOutcome(int mechanism) const
{
    if (mechanism < 0)
        return -1;
    for (std::size_t i = 0; i < m_result->outcomes.size(); ++i)
        if (m_result->outcomes[i].result.mechanism == Mechanism(mechanism))
            return m_result->outcomes[i].matrix ? static_cast<int>(i) : -1;
    return -1;
}

bool MapPanels::build(int reference)
{
    m_panels.clear();
    m_scale = nullptr;
    m_blockLines = 0;
    if (!m_result) {
        showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see the attention maps."));
        return false;
    }
    if (m_result->outcomes.empty()) {
        showPlotMessage(m_plot, tr("No mechanism was computed."));
        return false;
    }
    m_plot->clearItems();
    m_plot->clearPlottables();
    m_plot->plotLayout()->clear();
    m_plot->legend = nullptr;

    const int ref = referenceOutcome(reference);
    for (std::size_t i = 0; i < m_result->outcomes.size(); ++i) {
        if (ref >= 0 && static_cast<int>(i) == ref)
            continue;
        Panel p;
        p.outcome = static_cast<int>(i);
        p.minus = ref;
        m_panels.push_back(p);
    }
    if (m_panels.empty()) {
        showPlotMessage(m_plot, tr("Nothing to compare: only one mechanism was computed."));
        return false;
    }

    auto* layout = new QCPLayoutGrid;   // panels; a footnote row goes below it in the plot layout
    m_plot->plotLayout()->addElement(0, 0, layout);
    auto* group = new QCPMarginGroup(m_plot);
    int col = 0;
    for (Panel& p : m_panels)
        addPanel(p, layout, group, col++);
    addScale(layout, group, col);
    layout->setRowStretchFactor(0, 0.01);
    layout->setColumnStretchFactor(col, 0.01);
    if (m_blockLines > 0)
        addFootnote();
    layout->setColumnSpacing(6);
    layout->setRowSpacing(2);
    return true;
}

// Title above, and an axis rect over all N x N entries (drag and zoom on both axes) holding the colour
// map, or the reason the mechanism failed.
void MapPanels::addPanel(Panel& p, QCPLayoutGrid* layout, QCPMarginGroup* group, int col)
{
    const auto& o = outcome(p.outcome);
    const double N = static_cast<double>(n());
    auto* title = new QCPTextElement(m_plot, panelTitle(p), plotFont(kTitlePt, true));
    layout->addElement(0, col, title);
    auto* rect = addAxisRect(m_plot, layout, 1, col);
    rect->setMarginGroup(QCP::msLeft | QCP::msTop | QCP::msBottom | QCP::msRight, group);
    rect->setRangeDrag(Qt::Horizontal | Qt::Vertical);
    rect->setRangeZoom(Qt::Horizontal | Qt::Vertical);
    setHeatmapAxes(rect, N, N, tr("key j"), col == 0 ? tr("query t") : QString());
    auto* x = rect->axis(QCPAxis::atBottom);
    auto* y = rect->axis(QCPAxis::atLeft);
    x->ticker()->setTickCount(5);
    y->ticker()->setTickCount(5);
    if (col > 0)
        y->setTickLabels(false);
    p.rect = rect;
    p.title = title;
    if (!o.matrix) {
        addPanelMessage(m_plot, rect,
                        wrapText(tr("%1 could not be computed:").arg(mechanismLabel(o.result.mechanism)) + " " +
                                     QString::fromStdString(o.error.empty() ? "no matrix" : o.error),
                                 42));
        return;
    }
    p.map = new QCPColorMap(x, y);
    p.map->setInterpolate(false);
    p.map->setTightBoundary(false);
    p.queryLine = new QCPItemStraightLine(m_plot);
    p.queryLine->setClipAxisRect(rect);
    for (auto* pos : {p.queryLine->point1, p.queryLine->point2})
        pos->setAxes(x, y);
    p.queryLine->setPen(QPen(QColor(255, 60, 60), 1.4, Qt::DashLine));
    if (o.result.mechanism == Mechanism::mhla)
        addBlockLines(p);
}

void MapPanels::addScale(QCPLayoutGrid* layout, QCPMarginGroup* group, int col)
{
    m_scale = addColorScale(m_plot, QString(), 14, group);
    layout->addElement(1, col, m_scale);
    m_scale->axis()->setLabelPadding(6);
    for (Panel& p : m_panels)
        if (p.map)
            p.map->setColorScale(m_scale);
}

// Below the panels: what the white lines are. In raster order the blocks of one block row interleave along
// each grid row, so only the boundaries between block rows are contiguous in token index.
void MapPanels::addFootnote()
{
    QString foot = tr("White lines: MHLA block boundaries");
    if (m_result->blocks && m_result->blocks->block_grid.size() > 1 && m_result->token_order == attention::TokenOrder::raster)
        foot = tr("White lines: MHLA block boundaries (raster grids: block rows only)");
    auto* note = new QCPTextElement(m_plot, foot, plotFont(kTickPt));
    note->setTextColor(QColor(80, 80, 80));
    m_plot->plotLayout()->addElement(1, 0, note);
    m_plot->plotLayout()->setRowStretchFactor(1, 0.01);
}

QString MapPanels::panelTitle(const Panel& p) const
{
    const auto& o = outcome(p.outcome);
    QString t = mechanismLabel(o.result.mechanism);
    if (p.minus >= 0)
        return t + QStringLiteral(" \u2212 ") + mechanismLabel(outcome(p.minus).result.mechanism);
    if (!o.matrix)
        return t + tr(": failed");
    if (o.result.spectrum)
        t += tr("  (rank %1 / %2)").arg(o.result.spectrum->rank).arg(m_result->n);
    if (o.result.mechanism == Mechanism::mhla && m_result->blocks)
        t += tr(", M = %1").arg(m_result->blocks->num_blocks);
    if (o.result.same_as_linear)
        t += tr(" = linear by construction");
    return t;
}

// Lines between groups of whole blocks that are contiguous in token order: every block boundary for
// 1-D blocks and blocked grid order; for a grid in raster order the blocks interleave along a row of
// the grid, so only the boundaries between block rows are contiguous token ranges and drawn.
void MapPanels::addBlockLines(Panel& p)
{
    if (!m_result->blocks)
        return;
    const auto& L = *m_result->blocks;
    const Index N = n();
    std::vector<int> open(static_cast<std::size_t>(N + 1), 0);   // blocks spanning the cut before token k
    for (const auto& toks : L.tokens)
        if (!toks.empty())
            for (Index k = toks.front() + 1; k <= toks.back(); ++k)
                open[static_cast<std::size_t>(k)] = 1;
    std::vector<Index> cuts;
    for (Index k = 1; k < N; ++k)
        if (!open[static_cast<std::size_t>(k)])
            cuts.push_back(k);
    if (cuts.empty() || cuts.size() > 256)
        return;
    auto* x = p.rect->axis(QCPAxis::atBottom);
    auto* y = p.rect->axis(QCPAxis::atLeft);
    const QPen pen(QColor(255, 255, 255, 170), 0.8);
    for (Index k : cuts) {
        for (int dir = 0; dir < 2; ++dir) {
            auto* line = new QCPItemLine(m_plot);
            line->setClipAxisRect(p.rect);
            line->start->setAxes(x, y);
            line->end->setAxes(x, y);
            line->setPen(pen);
            const double c = static_cast<double>(k) - 0.5;
            if (dir == 0) {
                line->start->setCoords(c, -0.5);
                line->end->setCoords(c, static_cast<double>(N) - 0.5);
            } else {
                line->start->setCoords(-0.5, c);
                line->end->setCoords(static_cast<double>(N) - 0.5, c);
            }
        }
    }
    m_blockLines = static_cast<int>(cuts.size());
}

bool MapPanels::applyScale(ColorMap cmap, bool logRequested, analysis::Reduce how)
{
    if (!m_scale || m_panels.empty())
        return false;
    double lo = 0, hi = 0, minPos = std::numeric_limits<double>::infinity();
    bool negative = false;
    QString label;
    bool log = false;
    if (difference()) {
        double m = 0;
        for (const Panel& p : m_panels)
            m = std::max(m, diffAbsMax(p));
        if (m <= 0)
            m = 1e-12;
        lo = -m, hi = m;
        cmap = ColorMap::diverging;
        label = tr("difference of attention weights (red: panel's mechanism larger)");
    } else {
        for (const Panel& p : m_panels) {
            if (!outcome(p.outcome).matrix)
                continue;
            const MatrixStats& s = m_stats[static_cast<std::size_t>(p.outcome)];
            hi = std::max(hi, s.max);
            lo = std::min(lo, s.min);
            minPos = std::min(minPos, s.min_positive);
            negative = negative || s.min < 0;
        }
        if (hi <= lo)
            hi = lo + 1;
        label = tr("attention weight A[t,j]");
        if (negative) {
            // Identity feature maps give signed scores: a diverging symmetric scale around 0.
            const double m = std::max(std::abs(lo), std::abs(hi));
            lo = -m, hi = m;
            cmap = ColorMap::diverging;
            label = tr("attention score A[t,j] (signed");
            label += logRequested ? tr(": log scale unavailable)") : QStringLiteral(")");
        } else if (logRequested) {
            log = true;
            lo = std::max(std::isfinite(minPos) ? minPos : hi * 1e-5, hi * 1e-5);
            label = tr("attention weight A[t,j] (log)");
        }
    }
    m_scaleLabel = label;
    m_scale->setDataScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
    if (log) {
        setLogScale(m_scale->axis());
        setPowerLabels(m_scale->axis());
    } else {
        m_scale->axis()->setTicker(QSharedPointer<QCPAxisTicker>::create());
        m_scale->axis()->setNumberFormat("gb");
        m_scale->axis()->setNumberPrecision(3);
    }
    m_scale->setGradient(colorGradient(cmap));
    m_scale->setDataRange(QCPRange(lo, hi));
    updateScaleLabel(how);
    return true;
}

double MapPanels::diffAbsMax(const Panel& p)
{
    if (p.minus < 0)
        return 0;
    const auto key = std::make_pair(p.outcome, p.minus);
    auto it = m_diffAbsMax.find(key);
    if (it != m_diffAbsMax.end())
        return it->second;
    const auto& A = outcome(p.outcome).matrix;
    const auto& B = outcome(p.minus).matrix;
    const double m = (A && B) ? (A->array() - B->array()).abs().maxCoeff() : 0.0;
    m_diffAbsMax[key] = m;
    return m;
}

void MapPanels::updateScaleLabel(analysis::Reduce how)
{
    if (!m_scale)
        return;
    QString label = m_scaleLabel;
    if (m_reducedFactor > 1.0)
        label += tr("\n%1 of %2\u00d7%2 entries per cell")
                     .arg(how == analysis::Reduce::mean ? tr("mean") : tr("max"))
                     .arg(fmtNum(m_reducedFactor, 2));
    m_scale->axis()->setLabel(label);
}

bool MapPanels::refreshImages(Index capRows, Index capCols, analysis::Reduce how)
{
    if (!m_result || m_panels.empty() || !m_panels.front().rect)
        return false;
    const Index N = n();
    auto visible = [N](const QCPRange& range, Index& a, Index& b) {
        double lo = range.lower, hi = range.upper;
        if (lo > hi)
            std::swap(lo, hi);
        a = std::clamp<Index>(static_cast<Index>(std::floor(lo + 0.5)), 0, N);
        b = std::clamp<Index>(static_cast<Index>(std::ceil(hi + 0.5)), 0, N);
        // At least two cells per axis (QCPColorMapData needs a non-degenerate range).
        while (b - a < 2 && (a > 0 || b < N)) {
            if (b < N)
                ++b;
            else
                --a;
        }
    };
    Index r0, r1, c0, c1;
    const QCPAxisRect* rect = m_panels.front().rect;
    visible(rect->axis(QCPAxis::atLeft)->range(), r0, r1);
    visible(rect->axis(QCPAxis::atBottom)->range(), c0, c1);
    if (r1 <= r0 || c1 <= c0)
        return false;
    m_reducedFactor = 1.0;
    for (Panel& p : m_panels) {
        if (!p.map)
            continue;
        const auto& o = outcome(p.outcome);
        const analysis::MechanismOutcome* minus = p.minus >= 0 ? &outcome(p.minus) : nullptr;
        // Both sides of a difference from the same kind of source, so that their cells coincide.
        const bool pyramids = o.pyramid && (!minus || minus->pyramid);
        analysis::ReducedImage img = analysis::reduce_region(*o.matrix, r0, r1, c0, c1, capRows, capCols, how,
                                                             pyramids ? o.pyramid.get() : nullptr);
        if (img.values.empty())
            continue;
        if (minus) {
            const analysis::ReducedImage other = analysis::reduce_region(*minus->matrix, r0, r1, c0, c1, capRows, capCols, how,
                                                                         pyramids ? minus->pyramid.get() : nullptr);
            for (std::size_t i = 0; i < img.values.size() && i < other.values.size(); ++i)
                img.values[i] -= other.values[i];
        }
        const double h = static_cast<double>(img.r1 - img.r0), w = static_cast<double>(img.c1 - img.c0);
        m_reducedFactor = std::max({m_reducedFactor, h / static_cast<double>(img.rows), w / static_cast<double>(img.cols)});
        // Cell centres in token coordinates (token k covers [k - 0.5, k + 0.5]).
        const double rowStep = h / static_cast<double>(img.rows), colStep = w / static_cast<double>(img.cols);
        auto* data = p.map->data();
        data->setSize(static_cast<int>(img.cols), static_cast<int>(img.rows));
        data->setRange(QCPRange(img.c0 - 0.5 + colStep / 2, img.c1 - 0.5 - colStep / 2),
                       QCPRange(img.r0 - 0.5 + rowStep / 2, img.r1 - 0.5 - rowStep / 2));
        for (Index i = 0; i < img.rows; ++i)
            for (Index j = 0; j < img.cols; ++j)
                data->setCell(static_cast<int>(j), static_cast<int>(i), img.values[static_cast<std::size_t>(i * img.cols + j)]);
    }
    updateScaleLabel(how);
    return true;
}

void MapPanels::setQuery(int query)
{
    for (Panel& p : m_panels) {
        if (!p.queryLine)
            continue;
        p.queryLine->setVisible(query >= 0);
        p.queryLine->point1->setCoords(-1e9, query);
        p.queryLine->point2->setCoords(1e9, query);
    }
}

// The outer layout's margins take what is left over, so that the panels' inner rects are side x side and
// centred. Width excess is taken out by horizontal margins (k panels shrink), height excess by vertical
// ones; later passes only correct the residual (tick labels change with the layout).
void MapPanels::makeSquare(const QSize& size, const std::function<void(const QSize&)>& layoutAt)
{
    auto* top = m_plot->plotLayout();
    top->setAutoMargins(QCP::msNone);
    top->setMargins(QMargins(0, 0, 0, 0));
    if (m_panels.empty() || !m_panels.front().rect)
        return;
    const int k = static_cast<int>(m_panels.size());
    int extraX = 0, extraY = 0;
    layoutAt(size);
    auto diff = [this] {
        const QRect r = m_panels.front().rect->rect();
        return r.width() < 8 || r.height() < 8 ? 0 : r.width() - r.height();
    };
    const bool wide = diff() > 0;
    auto settle = [&](int passes) {
        for (int pass = 0; pass < passes; ++pass) {
            const int d = diff();
            if (d == 0)
                break;
            if (wide)
                extraX = std::clamp(extraX + k * d, 0, std::max(0, size.width() - 60));
            else
                extraY = std::clamp(extraY - d, 0, std::max(0, size.height() - 60));
            top->setMargins(QMargins(extraX / 2, extraY / 2, extraX - extraX / 2, extraY - extraY / 2));
            layoutAt(size);
        }
    };
    settle(4);
    // Titles centred over the image rather than the column (which includes the tick labels): a left
    // margin of (left - right) margin, when every title still fits its column (else titles could widen
    // the columns and break the squares).
    const QMargins m = m_panels.front().rect->margins();
    const int shift = std::max(0, m.left() - m.right());
    bool fit = true;
    for (const Panel& p : m_panels)
        if (p.title)
            fit = fit && QFontMetrics(p.title->font()).horizontalAdvance(p.title->text()) + shift + 8 <= p.rect->outerRect().width();
    for (Panel& p : m_panels)
        if (p.title) {
            p.title->setAutoMargins(QCP::msNone);
            p.title->setMargins(QMargins(fit ? shift : 0, 0, 0, 0));
        }
    layoutAt(size);
    settle(2);
}

const MapPanels::Panel* MapPanels::panelAt(const QPoint& pos, Index& t, Index& j) const
{
    for (const Panel& p : m_panels) {
        if (!p.rect || !p.rect->rect().contains(pos))
            continue;
        const double x = p.rect->axis(QCPAxis::atBottom)->pixelToCoord(pos.x());
        const double y = p.rect->axis(QCPAxis::atLeft)->pixelToCoord(pos.y());
        j = static_cast<Index>(std::lround(x));
        t = static_cast<Index>(std::lround(y));
        if (t < 0 || j < 0 || t >= n() || j >= n())
            return nullptr;
        return &p;
    }
    return nullptr;
}

}  // namespace attnscope::widgets
