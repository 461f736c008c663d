// EntropyView: row-entropy histograms per mechanism (step outlines with light fills, ln N and the means
// marked) and the entropy of every query: a line over t for 1-D data, heatmaps of square cells over the grid
// otherwise (the histogram takes the width they leave), with labelled colour bars.
#include <QCheckBox>
#include <QFontMetricsF>
#include <QHBoxLayout>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "plot_util.h"
#include "view_base.h"
#include "views.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using Eigen::Index;

constexpr int kBins = 40;

// The row entropies of a mechanism, null when it has none (failed, or negative entries).
const std::vector<double>* entropyRows(const analysis::MechanismOutcome& o)
{
    return o.result.entropy && !o.result.entropy->rows.empty() ? &o.result.entropy->rows : nullptr;
}

class EntropyView : public PlotView {
public:
    explicit EntropyView(QWidget* parent) : PlotView(parent, QStringLiteral("entropy"), tr("Row entropy"))
    {
        m_perPanelBox = new QCheckBox(tr("Per-panel colour scales"), this);
        m_perPanelBox->setToolTip(tr("Grid data: one colour scale per mechanism, so nearly uniform maps (linear, MHLA)\n"
                                     "show their structure instead of one flat colour on the shared scale"));
        toolRow()->addWidget(m_perPanelBox);
        toolRow()->addStretch(1);
        connect(m_perPanelBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        m_saved.add("per_panel_scale", m_perPanelBox);
        rebuild();
    }

    QSize preferredExportSize() const override
    {
        if (m_result && gridTokens(*m_result).valid())
            return {std::max<int>(900, 420 + 330 * static_cast<int>(m_result->outcomes.size())), 440};
        return {1200, 480};
    }

    // A narrow printed figure stacks the plots (adjustLayout): give it the height for that. Over the grid:
    // the lowest height at which the maps (a row under the histogram) reach their largest cells and the
    // histogram keeps at least 0.4 of the width.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        if (!m_result)
            return fallback;
        if (!gridTokens(*m_result).valid())
            return narrowExportHeight(width, font_scale, fallback, 1.5);
        if (m_gridRects.empty() || !isNarrow(width, font_scale))
            return fallback;
        return heightForLargestPanels(fallback, kMaxExportHeight, [&](int h) {
            double cell = 0;
            int hist = 0;
            measureAt(QSize(width, h), font_scale, [&] {
                cell = cellPixels(m_gridRects.front().rect).width();
                hist = m_histRect ? m_histRect->height() : 0;
                return 0;
            });
            return std::pair{cell, hist >= 0.4 * width};
        });
    }

    void setQuery(int token) override
    {
        // 3-D grids show the selected query's frame.
        if (m_result && gridTokens(*m_result).frames > 1 && token != m_query) {
            m_query = token;
            rebuild();
        }
        m_query = token;
    }

protected:
    // Grid maps beside the histogram, or below it when the plot is tall enough that this makes their cells
    // clearly larger (a narrow window, a single-column figure).
    // A narrow figure (a journal's column) always stacks them: side by side, its maps and histogram would
    // each get a third of 3.5 in. Then the histogram's legend keeps clear of its bars (fitHistogram).
    void adjustLayout(const QSize& size) override
    {
        placeHistLegend(LegendPlace::inside);
        if (m_lineRect) {   // 1-D: the two plots one above the other on a tall, narrow canvas
            arrangeLine(isNarrow(size.width(), fontScale()) && size.height() > size.width());
            fitHistogram(size, false);
            return;
        }
        if (m_gridRects.empty())
            return;
        // The cell side of an arrangement; its shorter side where there was no room for square cells (fitSquareCells
        // then leaves the free layout: stacked per-panel maps on the double column were strips of 208 x 6 px).
        auto fit = [&](bool stacked) {
            arrange(stacked);
            fitSquareCells(m_plot, m_gridRects, size, [this](const QSize& s) { layoutAt(s); });
            const QSizeF cell = cellPixels(m_gridRects.front().rect);
            return std::min(cell.width(), cell.height());
        };
        bool stacked = true;
        if (isNarrow(size.width(), fontScale())) {
            fit(true);
        } else {
            const double beside = fit(false);
            stacked = fit(true) >= 1.25 * beside;
            if (!stacked)
                fit(false);
        }
        fitHistogram(size, stacked);
    }

private:
    // The histogram's legend over its top left corner with the y axis raised so that no bar reaches it.
    // Over a grid, when that would leave the bars less than 60 % of the height or the legend is wider than
    // the plot, the legend goes outside it: right of a histogram that spans the figure (`wide`), else
    // under it. The ln N label is shortened to "ln N" when the plot is too low for the whole text.
    void fitHistogram(const QSize& size, bool wide)
    {
        if (!m_histRect || !m_legend)
            return;
        constexpr double kGap = 6;
        const double legendHeight = m_legend->outerRect().height();
        if (m_histBlock && (legendHeight + kGap > 0.4 * m_histRect->height() || m_legend->outerRect().width() + kGap > m_histRect->width())) {
            placeHistLegend(wide ? LegendPlace::right : LegendPlace::below);
            layoutAt(size);
        }
        // Read where the legend now is: under the plot it took its height (the ln N label, sized for the height
        // before, ran out of the plot and was cut: "N = 4.16 (uniform)" on the digit ViT's slide).
        const double height = m_histRect->height();
        const bool inside = m_legend->layout() == m_histRect->insetLayout();
        const double room = inside ? std::max(height - legendHeight - kGap, 0.4 * height) : height;
        m_histRect->axis(QCPAxis::atLeft)->setRange(0, m_maxCount * std::max(1.08, height / std::max(1.0, room)));
        if (m_lnLabel) {
            // The label hangs from 3% below the top, with its padding; a PDF's text runs up to ~10% wider than the
            // screen's metrics say (no hinting at the printer's resolution): the whole label only with that room.
            const QFontMetricsF fm(m_lnLabel->font());
            m_lnLabel->setText(1.12 * fm.horizontalAdvance(m_lnText) + 0.03 * height + 10 <= height ? m_lnText : QStringLiteral("ln N"));
        }
        layoutAt(size);
    }

    // The legend inside the histogram (top left), or right of it or under it in the histogram's block.
    enum class LegendPlace { inside, right, below };
    void placeHistLegend(LegendPlace place)
    {
        if (!m_legend || !m_histRect || (place != LegendPlace::inside && !m_histBlock))
            return;
        if (m_histBlock && m_legend->layout() == m_histBlock) {
            m_histBlock->take(m_legend);
            m_histBlock->simplify();
        } else if (place != LegendPlace::inside) {
            m_histRect->insetLayout()->take(m_legend);
        } else {
            return;   // inside already
        }
        if (place == LegendPlace::inside) {
            m_histRect->insetLayout()->addElement(m_legend, Qt::AlignTop | Qt::AlignLeft);
            m_legend->setBorderPen(QPen(QColor(160, 160, 160), 0.8));
            return;
        }
        const bool right = place == LegendPlace::right;
        m_histBlock->addElement(right ? 1 : 2, right ? 1 : 0, m_legend);
        if (right)
            m_histBlock->setColumnStretchFactor(1, 0.01);
        else
            m_histBlock->setRowStretchFactor(2, 0.01);
        m_legend->setBorderPen(Qt::NoPen);
    }

    void rebuild() override
    {
        m_gridRects.clear();
        m_histBlock = m_mapBlock = nullptr;
        m_lineTitle = nullptr;
        m_lineRect = nullptr;
        m_lineStacked = false;
        m_histRect = nullptr;
        m_legend = nullptr;
        m_lnLabel = nullptr;
        m_group = nullptr;
        m_perPanelBox->setEnabled(m_result && gridTokens(*m_result).valid());
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see the row entropies."));
            return;
        }
        clearPlot(m_plot);
        const GridTokens g = gridTokens(*m_result);
        const double lnN = std::log(static_cast<double>(std::max<Index>(1, m_result->n)));
        auto* group = new QCPMarginGroup(m_plot);
        if (g.valid()) {
            m_histBlock = new QCPLayoutGrid;
            m_mapBlock = new QCPLayoutGrid;
            m_plot->plotLayout()->addElement(0, 0, m_histBlock);
            m_plot->plotLayout()->addElement(0, 1, m_mapBlock);
            buildHistogram(m_histBlock, group, lnN);
            buildGridMaps(m_mapBlock, g, group, lnN);
            arrange(false);
        } else {
            buildHistogram(m_plot->plotLayout(), group, lnN);
            buildLine(group, lnN);
            m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        }
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // The histogram block and the grid maps' block side by side, or the maps below.
    void arrange(bool stacked)
    {
        auto* top = m_plot->plotLayout();
        top->take(m_histBlock);
        top->take(m_mapBlock);
        top->simplify();
        top->addElement(0, 0, m_histBlock);
        top->addElement(stacked ? 1 : 0, stacked ? 0 : 1, m_mapBlock);
        // Side by side the histogram lines up with the maps; above them it keeps its own margins.
        m_histRect->setMarginGroup(QCP::msTop | QCP::msBottom, stacked ? nullptr : m_group);
        if (stacked)
            top->setRowStretchFactors({1.0, 1.6});
        else
            top->setColumnStretchFactors({1.3, static_cast<double>(std::max<std::size_t>(1, m_gridRects.size()))});
    }

    // 1-D data: "Entropy per query" right of the histogram (row 0 titles, row 1 plots), or below it.
    void arrangeLine(bool stacked)
    {
        if (stacked == m_lineStacked || !m_lineRect || !m_lineTitle)
            return;
        // Stacked, the two share left and right margins (aligned axes) instead of top and bottom.
        placeSidePlot(m_plot->plotLayout(), m_lineTitle, m_lineRect, m_histRect, 1, stacked, StackedMargins::leftAndRight,
                      m_group);
        m_plot->plotLayout()->setRowStretchFactors(stacked ? QList<double>{0.01, 1.0, 0.01, 1.0} : QList<double>{0.01, 1.0});
        m_lineStacked = stacked;
        layoutAt(m_plot->viewport().size());
    }

    // Column 0 of `layout`: the histograms over common bins from the lowest entropy to ln N (the uniform row's).
    void buildHistogram(QCPLayoutGrid* layout, QCPMarginGroup* group, double lnN)
    {
        layout->addElement(0, 0, addTitle(m_plot, tr("Row-entropy histogram"), plotFont(kTitlePt, true)));
        layout->setRowStretchFactor(0, 0.01);
        auto* hist = addAxisRect(m_plot, layout, 1, 0);
        hist->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        m_histRect = hist;
        m_group = group;
        hist->axis(QCPAxis::atBottom)->setLabel(tr("row entropy H(t) (nats)"));
        hist->axis(QCPAxis::atLeft)->setLabel(tr("queries"));
        auto* legend = addLegend(hist, Qt::AlignTop | Qt::AlignLeft);
        m_legend = legend;
        double lo = lnN, hi = 0;
        QStringList missing;
        for (const auto& o : m_result->outcomes) {
            if (entropyRows(o)) {
                lo = std::min(lo, o.result.entropy->min);
                hi = std::max(hi, o.result.entropy->max);
            } else {
                QString why = !o.error.empty() ? tr("failed") : tr("entropy undefined (negative entries)");
                missing << tr("%1: %2").arg(mechanismLabel(o.result.mechanism), why);
            }
        }
        const double top = std::max(hi, lnN);
        if (lo > top)
            lo = 0;
        const double span = std::max(top - lo, 1e-6);
        const double binLo = std::max(0.0, lo - 0.02 * span), binHi = top + 0.02 * span;
        double maxCount = 1;
        for (const auto& o : m_result->outcomes)
            if (entropyRows(o))
                maxCount = std::max(maxCount, addHistogram(hist, legend, o, binLo, (binHi - binLo) / kBins));
        hist->axis(QCPAxis::atBottom)->setRange(binLo, binHi + 0.1 * span);
        hist->axis(QCPAxis::atLeft)->setRange(0, maxCount * 1.35);
        m_maxCount = maxCount;
        addVLine(m_plot, hist, lnN, QPen(Qt::black, 1.2, Qt::DashLine));
        auto* lnLabel = new QCPItemText(m_plot);
        lnLabel->setClipAxisRect(hist);
        lnLabel->position->setAxes(hist->axis(QCPAxis::atBottom), hist->axis(QCPAxis::atLeft));
        lnLabel->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        lnLabel->position->setAxisRect(hist);
        lnLabel->position->setCoords(lnN, 0.03);
        lnLabel->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
        lnLabel->setRotation(-90);
        m_lnText = tr("ln N = %1 (uniform)").arg(fmtNum(lnN));
        lnLabel->setText(m_lnText);
        m_lnLabel = lnLabel;
        lnLabel->setFont(plotFont(kTickPt));
        lnLabel->setPadding(QMargins(0, 0, 0, 3));
        if (!missing.isEmpty())
            addNote(m_plot, hist, missing.join('\n'), 0.02, 0.97, Qt::AlignLeft | Qt::AlignBottom);
    }

    // One mechanism's histogram (a filled step outline) and its mean; returns the largest count.
    double addHistogram(QCPAxisRect* hist, QCPLegend* legend, const analysis::MechanismOutcome& o, double binLo, double width)
    {
        // Counting rows per bin of the core's entropies (display only).
        QVector<double> counts(kBins + 2, 0.0), centres(kBins + 2);
        for (int b = 0; b < kBins + 2; ++b)
            centres[b] = binLo + (b - 0.5) * width;
        for (double h : o.result.entropy->rows) {
            const int b = std::clamp(static_cast<int>(std::floor((h - binLo) / width)), 0, kBins - 1);
            counts[b + 1] += 1;
        }
        double maxCount = 0;
        for (double c : counts)
            maxCount = std::max(maxCount, c);
        auto* graph = m_plot->addGraph(hist->axis(QCPAxis::atBottom), hist->axis(QCPAxis::atLeft));
        const QColor color = mechanismColor(o.result.mechanism);
        graph->setLineStyle(QCPGraph::lsStepCenter);
        graph->setPen(QPen(color, 1.5));
        QColor fill = color;
        fill.setAlpha(50);
        graph->setBrush(fill);
        graph->setData(centres, counts, true);
        graph->setName(tr("%1: mean %2 nats").arg(mechanismLabel(o.result.mechanism), fmtNum(o.result.entropy->mean)));
        graph->addToLegend(legend);
        addVLine(m_plot, hist, o.result.entropy->mean, QPen(color, 1.3, Qt::DotLine));
        return maxCount;
    }

    // The largest entropy row t can have, ln n_t (docs/maths.md 2: uniform over the n_t keys it may see): ln(t+1)
    // for causal rows, ln N otherwise. From the first computed mechanism's n_t; empty when there is none.
    std::vector<double> uniformEntropy() const
    {
        for (const auto& o : m_result->outcomes)
            if (entropyRows(o) && static_cast<Index>(o.allowed_keys.size()) == m_result->n) {
                std::vector<double> top(o.allowed_keys.size());
                for (std::size_t t = 0; t < top.size(); ++t)
                    top[t] = std::log(static_cast<double>(std::max<Index>(1, o.allowed_keys[t])));
                return top;
            }
        return {};
    }

    // The reference of the entropy per query: ln(t+1) dashed with its legend entry when some row sees fewer
    // than N keys (causal), else the flat ln N.
    void addUniformReference(QCPAxisRect* rect, double lnN)
    {
        const std::vector<double> top = uniformEntropy();
        const bool causal = std::any_of(top.begin(), top.end(), [lnN](double v) { return v < lnN - 1e-12; });
        if (!causal) {
            addHLine(m_plot, rect, lnN, QPen(Qt::black, 1.2, Qt::DashLine));
            return;
        }
        QVector<double> xs(static_cast<int>(top.size())), ys(static_cast<int>(top.size()));
        for (std::size_t t = 0; t < top.size(); ++t) {
            xs[static_cast<int>(t)] = static_cast<double>(t);
            ys[static_cast<int>(t)] = top[t];
        }
        auto* graph = m_plot->addGraph(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
        graph->setData(xs, ys, true);
        graph->setPen(QPen(Qt::black, 1.2, Qt::DashLine));
        graph->setName(tr("ln(t+1): uniform"));   // short: on a slide a longer entry outgrew the plot
        auto* legend = addLegend(rect, Qt::AlignBottom | Qt::AlignRight);
        graph->addToLegend(legend);
    }

    // Column 1 for 1-D data: H(t) against t per mechanism, the largest possible (ln(t+1) or ln N) dashed.
    void buildLine(QCPMarginGroup* group, double lnN)
    {
        auto* layout = m_plot->plotLayout();
        m_lineTitle = addTitle(m_plot, tr("Entropy per query"), plotFont(kTitlePt, true));
        layout->addElement(0, 1, m_lineTitle);
        auto* rect = addAxisRect(m_plot, layout, 1, 1);
        m_lineRect = rect;
        rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("query t"));
        y->setLabel(tr("H(t) (nats)"));
        double lo = lnN;
        for (const auto& o : m_result->outcomes) {
            const std::vector<double>* rows = entropyRows(o);
            if (!rows)
                continue;
            QVector<double> xs(static_cast<int>(rows->size())), ys(static_cast<int>(rows->size()));
            for (std::size_t t = 0; t < rows->size(); ++t) {
                xs[static_cast<int>(t)] = static_cast<double>(t);
                ys[static_cast<int>(t)] = (*rows)[t];
                lo = std::min(lo, (*rows)[t]);
            }
            auto* graph = m_plot->addGraph(x, y);
            graph->setData(xs, ys, true);
            graph->setPen(mechanismPen(o.result.mechanism, 0.9));
        }
        addUniformReference(rect, lnN);
        x->setRange(-0.5, static_cast<double>(m_result->n) - 0.5);
        y->setRange(std::max(0.0, lo - 0.08 * (lnN - lo + 1e-9)), lnN + 0.08 * (lnN - lo + 1e-9) + 0.05);
    }

    // Grid data, in a block of their own under one heading: H_t over the grid per mechanism (the selected
    // query's frame for 3-D grids), each panel titled by its mechanism, on one shared colour scale (last
    // column) or one scale under each panel. The panels share their grid rows: only the first labels them.
    void buildGridMaps(QCPLayoutGrid* block, const GridTokens& g, QCPMarginGroup* group, double lnN)
    {
        Index frame = 0;
        if (g.frames > 1 && m_query >= 0) {
            const auto c = m_result->grid_coords(m_query);
            if (c.size() == 3)
                frame = c[0];
        }
        QString heading = tr("Entropy per query");
        if (g.frames > 1)
            heading += tr(" (frame %1)").arg(frame);
        block->addElement(0, 0, addTitle(m_plot, heading, plotFont(kTitlePt, true)));
        block->setRowStretchFactor(0, 0.01);
        auto* layout = new QCPLayoutGrid;
        block->addElement(1, 0, layout);
        const bool perPanel = m_perPanelBox->isChecked();
        QCPColorScale* shared = perPanel ? nullptr : addEntropyScale(group, Qt::Vertical);
        double lo = lnN, hi = 0;
        int col = 0;
        for (const auto& o : m_result->outcomes) {
            auto* title = addTitle(m_plot, mechanismLabel(o.result.mechanism), plotFont(kLabelPt, true));
            title->setTextColor(mechanismColor(o.result.mechanism).darker(130));
            layout->addElement(0, col, title);
            auto* rect = addAxisRect(m_plot, layout, 1, col);
            rect->setMinimumMargins(QMargins(4, 4, 4, 4));   // not QCPAxisRect's 15 px: a column has 3.5 in for every map
            m_gridRects.push_back({rect, static_cast<double>(g.w), static_cast<double>(g.h)});
            ++col;
            rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            // Each panel lines up with its own scale below it (not with the others: only the first has row labels).
            QCPMarginGroup* column = perPanel ? new QCPMarginGroup(m_plot) : nullptr;
            if (column)
                rect->setMarginGroup(QCP::msLeft | QCP::msRight, column);
            setHeatmapAxes(rect, static_cast<double>(g.w), static_cast<double>(g.h), tr("grid column"),
                           m_gridRects.size() == 1 ? tr("grid row") : QString());
            rect->axis(QCPAxis::atLeft)->setTickLabels(m_gridRects.size() == 1);
            const std::vector<double>* rows = entropyRows(o);
            if (!rows) {
                addPanelMessage(m_plot, rect, !o.error.empty() ? tr("failed") : tr("entropy undefined\n(negative entries)"));
                continue;
            }
            double plo = lnN, phi = 0;
            QCPColorMap* map = addGridMap(rect, g, frame, *rows, plo, phi);
            lo = std::min(lo, plo);
            hi = std::max(hi, phi);
            if (perPanel)
                map->setColorScale(addPanelScale(layout, col - 1, column, plo, phi));
            else
                map->setColorScale(shared);
        }
        if (shared) {
            layout->addElement(1, col, shared);
            if (hi <= lo)
                hi = lo + 1e-6;
            shared->setDataRange(QCPRange(lo, hi));
            layout->setColumnStretchFactor(col, 0.01);
        } else {
            layout->setRowStretchFactor(2, 0.01);
        }
        layout->setRowStretchFactor(0, 0.01);
    }

    // The entropies at their grid positions in `frame`; plo / phi get their extent.
    QCPColorMap* addGridMap(QCPAxisRect* rect, const GridTokens& g, Index frame, const std::vector<double>& rows, double& plo,
                            double& phi)
    {
        auto* map = addHeatmap(rect, static_cast<int>(g.w), static_cast<int>(g.h));
        for (Index r = 0; r < g.h; ++r)
            for (Index c = 0; c < g.w; ++c) {
                const Index tok = g.at(frame, r, c);
                const double v = tok >= 0 && static_cast<std::size_t>(tok) < rows.size() ? rows[static_cast<std::size_t>(tok)]
                                                                                         : std::numeric_limits<double>::quiet_NaN();
                if (std::isfinite(v))
                    plo = std::min(plo, v), phi = std::max(phi, v);
                map->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
            }
        return map;
    }

    QCPColorScale* addEntropyScale(QCPMarginGroup* group, Qt::Orientation orientation)
    {
        auto* scale = addColorScale(m_plot, tr("H(t) (nats)"), orientation == Qt::Horizontal ? 9 : 12, group, orientation);
        scale->setGradient(colorGradient(ColorMap::viridis));
        if (orientation == Qt::Horizontal)
            scale->axis()->ticker()->setTickCount(4);
        return scale;
    }

    // A panel's own scale under it; a nearly constant map gets a small symmetric range around its value.
    QCPColorScale* addPanelScale(QCPLayoutGrid* layout, int col, QCPMarginGroup* group, double plo, double phi)
    {
        auto* scale = addEntropyScale(group, Qt::Horizontal);
        layout->addElement(2, col, scale);
        if (phi <= plo) {
            plo -= 1e-6;
            phi += 1e-6;
        }
        scale->setDataRange(QCPRange(plo, phi));
        scale->axis()->setNumberFormat("gb");
        scale->axis()->setNumberPrecision(4);
        return scale;
    }

    QCheckBox* m_perPanelBox = nullptr;
    QCPLayoutGrid* m_histBlock = nullptr;   // grid data: the histogram and its title
    QCPAxisRect* m_histRect = nullptr;
    QCPLegend* m_legend = nullptr;           // the histogram's
    double m_maxCount = 1;                  // its highest bar
    QCPItemText* m_lnLabel = nullptr;       // "ln N = ... (uniform)" at the uniform row's entropy
    QString m_lnText;
    QCPTextElement* m_lineTitle = nullptr;  // 1-D data: "Entropy per query" and its plot
    QCPAxisRect* m_lineRect = nullptr;
    bool m_lineStacked = false;
    QCPMarginGroup* m_group = nullptr;       // the histogram's and the maps' top and bottom margins
    QCPLayoutGrid* m_mapBlock = nullptr;    // grid data: the maps, their titles and colour scales
    int m_query = -1;
    std::vector<CellRect> m_gridRects;   // the grid maps (square cells), empty for 1-D data
};

}  // namespace

ResultView* createEntropyView(QWidget* parent) { return new EntropyView(parent); }

}  // namespace attnscope::widgets
