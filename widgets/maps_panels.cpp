// MapPanels: the attention matrices drawn side by side; see maps_panels.h.
#include "maps_panels.h"

#include <QFontMetrics>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "maps_marks.h"
#include "plot_util.h"

namespace attnscope::widgets {
namespace {

using attention::Mechanism;
using Eigen::Index;

}  // namespace

QColor maskColour() { return QColor(208, 208, 208); }

void MapPanels::setResult(std::shared_ptr<const analysis::ExploreResult> result)
{
    m_result = std::move(result);
    m_values.clear();
    m_tokens = m_result && !m_result->tokens.empty() ? std::make_shared<const std::vector<QString>>(displayTokens(*m_result))
                                                     : nullptr;
}

QString MapPanels::token(Index t) const
{
    if (!m_tokens || t < 0 || t >= static_cast<Index>(m_tokens->size()))
        return {};
    return (*m_tokens)[static_cast<std::size_t>(t)];
}

// The outcome of `mechanism` when its matrix exists, else -1.
int MapPanels::outcomeOf(int mechanism) const
{
    if (mechanism < 0 || !m_result)
        return -1;
    for (std::size_t i = 0; i < m_result->outcomes.size(); ++i)
        if (m_result->outcomes[i].result.mechanism == Mechanism(mechanism))
            return m_result->outcomes[i].matrix ? static_cast<int>(i) : -1;
    return -1;
}

QString MapPanels::name(const Panel& p) const
{
    const QString a = mechanismLabel(outcome(p.outcome).result.mechanism);
    return p.minus < 0 ? a : a + QStringLiteral(" \u2212 ") + mechanismLabel(outcome(p.minus).result.mechanism);
}

// The panels of `layout`: every outcome but the reference (minus it in difference mode), the extra
// difference, then `only` when it names one of them.
std::vector<MapPanels::Panel> MapPanels::choosePanels(const Layout& layout) const
{
    std::vector<Panel> out;
    const int ref = outcomeOf(layout.reference);
    for (std::size_t i = 0; i < m_result->outcomes.size(); ++i) {
        if (static_cast<int>(i) == ref)
            continue;
        Panel p;
        p.outcome = static_cast<int>(i);
        p.minus = ref;
        out.push_back(std::move(p));
    }
    const int a = outcomeOf(layout.extra.first), b = outcomeOf(layout.extra.second);
    if (ref < 0 && a >= 0 && b >= 0 && a != b) {
        Panel p;
        p.outcome = a;
        p.minus = b;
        out.push_back(std::move(p));
    }
    for (const Panel& p : out)
        if (!layout.only.isEmpty() && name(p) == layout.only)
            return {p};
    return out;
}

QStringList MapPanels::panelNames(Layout layout) const
{
    QStringList out;
    if (!m_result)
        return out;
    layout.only.clear();
    for (const Panel& p : choosePanels(layout))
        out << name(p);
    return out;
}

bool MapPanels::build(const Layout& layout)
{
    m_panels.clear();
    m_grid.reset();
    m_sharedScale = nullptr;
    m_footnote = nullptr;
    m_anyMask = m_blockLines = false;
    auto dropGroup = [this] {
        delete m_group;   // after the elements that used it
        m_group = nullptr;
    };
    if (!m_result || m_result->outcomes.empty()) {
        showPlotMessage(m_plot, !m_result ? tr("No result yet.\nOpen activation files and assign Q and K to see the attention maps.")
                                          : tr("No mechanism was computed."));
        dropGroup();
        return false;
    }
    clearPlot(m_plot);
    dropGroup();
    m_panels = choosePanels(layout);
    if (m_panels.empty()) {
        showPlotMessage(m_plot, tr("Nothing to compare: only one mechanism was computed."));
        return false;
    }
    for (Panel& p : m_panels) {
        p.mask = analysis::CausalMask::of(*m_result, outcome(p.outcome));
        if (p.minus >= 0)
            p.minusMask = analysis::CausalMask::of(*m_result, outcome(p.minus));
        m_anyMask = m_anyMask || p.mask.active();
    }

    auto* grid = new QCPLayoutGrid;   // panels; the footnote goes below it in the plot layout
    m_plot->plotLayout()->addElement(0, 0, grid);
    m_group = new QCPMarginGroup(m_plot);
    m_perPanel = layout.perPanelScale;
    const bool mixed = !difference() && m_panels.back().minus >= 0;   // matrices and a difference panel
    std::vector<PanelGrid::Cell> cells;
    for (std::size_t i = 0; i < m_panels.size(); ++i) {
        Panel& p = m_panels[i];
        const bool own = m_perPanel || (mixed && p.minus >= 0);
        addPanel(p, grid, m_group, static_cast<int>(i), own, layout.blockBoundaries);
        cells.push_back({p.title, p.rect, own ? p.scale : nullptr});
    }
    if (!m_perPanel) {
        m_sharedScale = addColorScale(m_plot, QString(), 14, m_group);
        grid->addElement(1, 2 * static_cast<int>(m_panels.size()), m_sharedScale);
        m_sharedScale->axis()->setLabelPadding(6);
        for (Panel& p : m_panels)
            if (p.map && !p.scale) {
                p.map->setColorScale(m_sharedScale);
                p.scale = m_sharedScale;
            }
    }
    grid->setColumnSpacing(6);
    grid->setRowSpacing(2);
    m_grid.emplace(m_plot, grid, std::move(cells), m_sharedScale);
    addFootnote();
    return true;
}

// Title above, and an axis rect over all N x N entries (drag and zoom on both axes, token labels) holding
// the colour map, or the reason the mechanism failed; its own colour scale right of it when `ownScale`.
void MapPanels::addPanel(Panel& p, QCPLayoutGrid* layout, QCPMarginGroup* group, int index, bool ownScale, bool blockLines)
{
    const auto& o = outcome(p.outcome);
    const double N = static_cast<double>(n());
    p.titleText = panelTitle(p);
    p.title = new QCPTextElement(m_plot, p.titleText, plotFont(kTitlePt, true));
    p.title->setMinimumSize(1, 0);   // a title never widens its column (fitTitles breaks it instead)
    layout->addElement(0, 2 * index, p.title);
    p.rect = addAxisRect(m_plot, layout, 1, 2 * index);
    p.rect->setMarginGroup(QCP::msLeft | QCP::msTop | QCP::msBottom | QCP::msRight, group);
    p.rect->setRangeDrag(Qt::Horizontal | Qt::Vertical);
    p.rect->setRangeZoom(Qt::Horizontal | Qt::Vertical);
    setHeatmapAxes(p.rect, N, N, tr("key j"), tr("query t"));
    auto* x = p.rect->axis(QCPAxis::atBottom);
    auto* y = p.rect->axis(QCPAxis::atLeft);
    x->setTicker(QSharedPointer<TokenTicker>::create(m_tokens, true));
    y->setTicker(QSharedPointer<TokenTicker>::create(m_tokens, false));
    if (!o.matrix) {
        addPanelMessage(m_plot, p.rect,
                        wrapText(tr("%1 could not be computed:").arg(mechanismLabel(o.result.mechanism)) + " " +
                                     QString::fromStdString(o.error.empty() ? "no matrix" : o.error),
                                 18));   // narrow enough for small panels (five or six mechanisms, small windows)
        return;
    }
    p.map = new QCPColorMap(x, y);
    p.map->setInterpolate(false);
    p.map->setTightBoundary(false);
    if (ownScale) {
        p.scale = addColorScale(m_plot, QString(), 10, group);
        layout->addElement(1, 2 * index + 1, p.scale);
        p.scale->axis()->setLabelPadding(4);
        p.scale->axis()->ticker()->setTickCount(4);
        p.map->setColorScale(p.scale);
    }
    if (attention::mechanism_info(o.result.mechanism).has_blocks() && blockLines) {
        std::vector<Index> cuts = blockCuts();
        if (!cuts.empty()) {
            p.blocks = new BlockBoundaries(m_plot, p.rect, std::move(cuts));
            m_blockLines = true;
        }
    }
    p.queryLine = new QCPItemStraightLine(m_plot);
    p.queryLine->setClipAxisRect(p.rect);
    for (auto* pos : {p.queryLine->point1, p.queryLine->point2})
        pos->setAxes(x, y);
    p.queryLine->setPen(QPen(QColor(255, 60, 60), 1.4, Qt::DashLine));
}

// Below the panels: what the colours, the grey and the block boundaries mean (updateLabels fills it).
void MapPanels::addFootnote()
{
    m_footnote = new QCPTextElement(m_plot, QString(), plotFont(kTickPt));
    m_footnote->setTextColor(QColor(80, 80, 80));
    m_plot->plotLayout()->addElement(1, 0, m_footnote);
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
    // The block count with the name (the first line of a broken title), then rank and normalised entropy
    // side by side, as the MHLA paper's Figure 3 pairs them (docs/maths.md 2).
    if (attention::mechanism_info(o.result.mechanism).has_blocks() && m_result->blocks)
        t += tr(", M = %1").arg(m_result->blocks->num_blocks);
    QStringList numbers;
    // Causal: the full rank is near N for every mechanism (the triangle alone gives it: 510 / 512 on the trained
    // LM for softmax, linear and MHLA alike), so it says nothing; what shows the collapse is the past block
    // A[h:N, :h], whose rank linear attention keeps at most its feature dimension (d for relu and identity
    // features: docs/maths.md 2.1). Its rank takes the full rank's place, with d beside it; the full rank stays in
    // the Metrics view and the read-out.
    if (const auto& pb = o.result.past_block; pb && pb->spectrum)
        numbers << tr("past %1/%2").arg(pb->spectrum->rank).arg(std::min(pb->rows, pb->cols));
    else if (o.result.spectrum)
        numbers << tr("rank %1 / %2").arg(o.result.spectrum->rank).arg(m_result->n);
    if (o.result.entropy && std::isfinite(o.result.entropy->normalized_mean))
        numbers << tr("entropy %1").arg(o.result.entropy->normalized_mean, 0, 'f', 2);
    if (!numbers.isEmpty())
        t += QStringLiteral("  (") + numbers.join(QStringLiteral(", ")) + QLatin1Char(')');
    if (o.result.same_as_linear)
        t += tr(" = linear by construction");
    else if (o.result.rank_cap)   // the mixing matrix, not the data, caps the rank (docs/maths.md 1.6)
        t += tr(", rank \u2264 %1 by its mixing").arg(*o.result.rank_cap);
    return t;
}

// Boundaries between groups of whole blocks that are contiguous in token order: every block boundary for
// 1-D blocks and blocked grid order; for a grid in raster order the blocks interleave along a row of the
// grid, so only the boundaries between block rows are contiguous token ranges.
std::vector<Index> MapPanels::blockCuts() const
{
    std::vector<Index> cuts;
    if (!m_result->blocks)
        return cuts;
    const Index N = n();
    std::vector<char> open(static_cast<std::size_t>(N + 1), 0);   // blocks spanning the cut before token k
    for (const auto& toks : m_result->blocks->tokens)
        if (!toks.empty())
            for (Index k = toks.front() + 1; k <= toks.back(); ++k)
                open[static_cast<std::size_t>(k)] = 1;
    for (Index k = 1; k < N; ++k)
        if (!open[static_cast<std::size_t>(k)])
            cuts.push_back(k);
    return cuts;
}

const analysis::MapValues& MapPanels::valuesOf(const Panel& p, analysis::Reduce how)
{
    if (p.minus >= 0)
        how = analysis::Reduce::mean;
    const auto key = std::make_tuple(p.outcome, p.minus, static_cast<int>(how));
    auto it = m_values.find(key);
    if (it == m_values.end())
        it = m_values.emplace(key, analysis::map_values(outcome(p.outcome), p.mask, p.minus >= 0 ? &outcome(p.minus) : nullptr,
                                               p.minus >= 0 ? &p.minusMask : nullptr, n(), how))
                 .first;
    return it->second;
}

bool MapPanels::applyScale(const Look& look)
{
    m_look = look;
    if (m_panels.empty())
        return false;
    std::vector<const analysis::MapValues*> all;   // of the panels on the shared scale
    for (const Panel& p : m_panels)
        if (p.map && p.scale && p.scale == m_sharedScale)
            all.push_back(&valuesOf(p, look.how));
    const analysis::ColourRange shared = all.empty() ? analysis::ColourRange{} : analysis::colour_range(all, look.clipPercentile, look.log);
    std::vector<QCPColorScale*> done;
    for (Panel& p : m_panels) {
        if (!p.map || !p.scale)
            continue;
        p.range = p.scale == m_sharedScale ? shared : analysis::colour_range({&valuesOf(p, look.how)}, look.clipPercentile, look.log);
        if (std::find(done.begin(), done.end(), p.scale) != done.end())
            continue;
        done.push_back(p.scale);
        QCPColorScale* s = p.scale;
        s->setDataScaleType(p.range.log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
        if (p.range.log) {
            setLogScale(s->axis());
            setPowerLabels(s->axis());
        } else {
            s->axis()->setTicker(QSharedPointer<QCPAxisTicker>::create());
            s->axis()->ticker()->setTickCount(m_perPanel ? 4 : 5);
            s->axis()->setNumberFormat("gb");
            s->axis()->setNumberPrecision(3);
        }
        QCPColorGradient gradient = colorGradient(p.range.diverging ? ColorMap::diverging : look.cmap);
        gradient.setNanHandling(QCPColorGradient::nhNanColor);
        gradient.setNanColor(maskColour());
        s->setGradient(gradient);
        s->setDataRange(QCPRange(p.range.lo, p.range.hi));
    }
    updateLabels();
    if (m_grid)
        m_grid->invalidate();   // the scales' labels changed the columns' widths
    return true;
}

QString MapPanels::scaleLabel(const Panel* p, const analysis::ColourRange& range) const
{
    const bool reduced = m_reducedFactor > 1.0;
    const bool mean = m_look.how == analysis::Reduce::mean || (p && p->minus >= 0);
    const QString how = mean ? tr("mean") : tr("max");
    const bool own = !p || p->scale != m_sharedScale;   // a short label on a panel's own bar
    QString label;
    if (p && p->minus >= 0)
        label = own ? tr("difference (red: %1 larger)").arg(mechanismLabel(outcome(p->outcome).result.mechanism))
                    : tr("difference of attention weights (red: panel's mechanism larger)");
    else if (range.diverging)
        label = (own ? tr("A[t,j] (signed") : tr("attention score A[t,j] (signed")) +
                (m_look.log ? tr(": log scale unavailable)") : QStringLiteral(")"));
    else
        label = (own ? tr("A[t,j]") : tr("attention weight A[t,j]")) + (range.log ? tr(" (log)") : QString());
    if (reduced) {
        // Cells of uneven size (reduce_region's partition) when the factor is not whole: "up to".
        const double whole = std::ceil(m_reducedFactor - 1e-9);
        const QString size = whole - m_reducedFactor > 1e-6 ? tr("up to %1").arg(whole) : fmtNum(m_reducedFactor, 4);
        label += (own ? tr("\n%1 of %2\u00d7%3 per cell") : tr("\n%1 of %2\u00d7%3 entries per cell"))
                     .arg(how, size, QString::number(whole));
    }
    return label;
}

// The colour scales' labels and the footnote: what the colours, the grey and the block boundaries mean.
void MapPanels::updateLabels()
{
    bool signedMatrix = false, matrix = false, difference = false;
    for (const Panel& p : m_panels)
        if (p.map && p.scale) {
            p.scale->axis()->setLabel(scaleLabel(&p, p.range));
            (p.minus >= 0 ? difference : matrix) = true;
            signedMatrix = signedMatrix || (p.minus < 0 && p.range.diverging);
        }
    if (!m_footnote)
        return;
    const bool clipped = m_look.clipPercentile < 100;
    const QString pct = fmtNum(m_look.clipPercentile, 4);
    QString range = m_perPanel ? tr("Colours: each panel its own range")
                    : matrix && difference ? tr("Colours: one range for the matrices")   // the difference keeps its own
                                           : tr("Colours: one range for all panels");
    if (matrix) {
        if (signedMatrix)
            range += clipped ? tr(", symmetric around 0 up to the %1th percentile of |entries|").arg(pct) : tr(", symmetric around 0 up to the largest |entry|");
        else
            range += clipped ? tr(", up to the %1th percentile of the entries").arg(pct) : tr(", up to the largest entry");
        if (difference)
            range += tr("; differences");
    }
    if (difference)
        range += clipped ? tr(", symmetric around 0 up to the %1th percentile of |differences|").arg(pct)
                         : tr(", symmetric around 0 up to the largest |difference|");
    if (clipped)
        range += tr(" (values beyond it: the end colour)");
    m_footnoteLines = QStringList{range + QStringLiteral(".")};
    if (m_anyMask)
        m_footnoteLines << tr("Grey: keys a causal query does not see.");
    // The titles' "past r/k" (causal matrices): the past block's rank, with the d it is measured against.
    for (const auto& o : m_result->outcomes)
        if (o.result.past_block && o.result.past_block->spectrum) {
            m_footnoteLines << tr("Past: the rank of A[h:N, :h], h = %1; linear attention keeps it at most d = %2.")
                                   .arg(o.result.past_block->split)
                                   .arg(m_result->d);
            break;
        }
    if (m_blockLines) {
        QString b = tr("MHLA block boundaries: white lines, or ticks above and right of the map where lines would be under 6 px apart");
        if (m_result->blocks && m_result->blocks->block_grid.size() > 1 && m_result->token_order == attention::TokenOrder::raster)
            b += tr(" (raster grids: block rows only)");
        m_footnoteLines << b + QStringLiteral(".");
    }
    wrapFootnote(m_plot->viewport().width());
}

// The footnote's sentences in lines no wider than `width` pixels.
void MapPanels::wrapFootnote(int width)
{
    if (m_footnote)
        m_footnote->setText(wrapToPixels(m_footnoteLines, m_footnote->font(), width - 16, false));
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
        const analysis::Reduce cellHow = minus ? analysis::Reduce::mean : how;
        analysis::ReducedImage img = analysis::reduce_region(*o.matrix, r0, r1, c0, c1, capRows, capCols, cellHow,
                                                             pyramids ? o.pyramid.get() : nullptr);
        if (img.values.empty())
            continue;
        std::vector<char> masked = p.mask.masked_cells(img, N);
        if (minus) {
            const analysis::ReducedImage other = analysis::reduce_region(*minus->matrix, r0, r1, c0, c1, capRows, capCols, cellHow,
                                                                         pyramids ? minus->pyramid.get() : nullptr);
            for (std::size_t i = 0; i < img.values.size() && i < other.values.size(); ++i)
                img.values[i] -= other.values[i];
            const std::vector<char> maskedOther = p.minusMask.masked_cells(other, N);
            for (std::size_t i = 0; i < masked.size(); ++i)
                masked[i] = masked[i] && i < maskedOther.size() && maskedOther[i];
        }
        const double h = static_cast<double>(img.r1 - img.r0), w = static_cast<double>(img.c1 - img.c0);
        m_reducedFactor = std::max({m_reducedFactor, h / static_cast<double>(img.rows), w / static_cast<double>(img.cols)});
        // Cell centres in token coordinates (token k covers [k - 0.5, k + 0.5]).
        const double rowStep = h / static_cast<double>(img.rows), colStep = w / static_cast<double>(img.cols);
        auto* data = p.map->data();
        data->setSize(static_cast<int>(img.cols), static_cast<int>(img.rows));
        data->setRange(QCPRange(img.c0 - 0.5 + colStep / 2, img.c1 - 0.5 - colStep / 2),
                       QCPRange(img.r0 - 0.5 + rowStep / 2, img.r1 - 0.5 - rowStep / 2));
        const double nan = std::numeric_limits<double>::quiet_NaN();
        for (Index i = 0; i < img.rows; ++i)
            for (Index j = 0; j < img.cols; ++j) {
                const auto at = static_cast<std::size_t>(i * img.cols + j);
                data->setCell(static_cast<int>(j), static_cast<int>(i), !masked.empty() && masked[at] ? nan : img.values[at]);
            }
    }
    updateLabels();
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

// One tick per token on an axis where every visible token's label fits its cell, else thinned ticks
// labelled with index and token. True when a ticker changed (the layout must be redone).
bool MapPanels::updateTickers()
{
    bool changed = false;
    for (const Panel& p : m_panels) {
        for (QCPAxis* axis : {p.rect->axis(QCPAxis::atBottom), p.rect->axis(QCPAxis::atLeft)}) {
            auto ticker = qSharedPointerDynamicCast<TokenTicker>(axis->ticker());
            if (!ticker || !ticker->hasTokens())
                continue;
            const QCPRange r = axis->range();
            const double pixels = axis->orientation() == Qt::Horizontal ? p.rect->width() : p.rect->height();
            const double perToken = r.size() > 0 ? pixels / r.size() : 0;
            const bool every = ticker->fits(axis->tickLabelFont(), perToken, static_cast<Index>(std::ceil(r.lower)),
                                            static_cast<Index>(std::floor(r.upper)));
            if (every != ticker->every()) {
                ticker->setEvery(every);
                changed = true;
            }
        }
    }
    return changed;
}

// Titles wider than their panel's column in lines: the mechanism, then its numbers in as few lines as fit
// (rank and entropy on one line where they fit). True when a title changed.
bool MapPanels::fitTitles()
{
    bool changed = false;
    for (const Panel& p : m_panels) {
        const QFontMetrics fm(p.title->font());
        QString text = p.titleText;
        const int room = p.rect->outerRect().width() - 8;
        if (fm.horizontalAdvance(text) > room) {
            // The mechanism on the first line, its numbers packed into as few lines as fit (never cut off).
            const int cut = text.indexOf(QStringLiteral("  ("));
            if (cut > 0) {
                QString rest = text.mid(cut + 3);   // the numbers, without the ')' that closes them
                QString after;                      // what follows them (" = linear by construction", ...)
                if (const int close = rest.lastIndexOf(QLatin1Char(')')); close >= 0) {
                    after = rest.mid(close + 1).trimmed();
                    if (after.startsWith(QLatin1Char(',')))
                        after = after.mid(1).trimmed();
                    rest.truncate(close);
                }
                QStringList lines{text.left(cut)}, parts = rest.split(QStringLiteral(", "));
                if (!after.isEmpty())
                    parts << after;
                QString line;
                const auto flush = [&] {
                    if (!line.isEmpty())
                        lines << line;
                    line.clear();
                };
                for (const QString& part : parts) {
                    const QString longer = line.isEmpty() ? part : line + QStringLiteral(", ") + part;
                    if (fm.horizontalAdvance(longer) <= room) {
                        line = longer;
                        continue;
                    }
                    flush();
                    if (fm.horizontalAdvance(part) <= room) {
                        line = part;
                        continue;
                    }
                    for (const QString& word : part.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {   // a part too wide alone
                        const QString wider = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
                        if (!line.isEmpty() && fm.horizontalAdvance(wider) > room)
                            flush(), line = word;
                        else
                            line = wider;
                    }
                    flush();
                }
                flush();
                text = lines.join(QLatin1Char('\n'));
            }
        }
        if (text != p.title->text()) {
            p.title->setText(text);
            changed = true;
        }
    }
    return changed;
}

void MapPanels::layOut(const QSize& size, const std::function<void(const QSize&)>& layoutAt)
{
    if (!m_grid)
        return;
    wrapFootnote(size.width());
    m_grid->layOut(size, layoutAt, [this] {
        const bool ticks = updateTickers();
        return fitTitles() || ticks;
    });
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
