// OverviewView: the layers x heads grid of one model per mechanism (records of an overview sweep), coloured
// by a metric on one shared, labelled scale, in square cells, with the values written in the cells when
// they fit. Layer and head keep
// the file's order (layer 0 at the top), so a row or column that collapses stands out where it is. A click
// on a cell emits cellActivated(layer, head).
#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <qcustomplot.h>

#include "analysis/sweep.h"
#include "curves.h"
#include "plot_util.h"
#include "view_base.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::SweepResult;
using attention::Mechanism;
using Eigen::Index;

constexpr int kMaxCellLabels = 2500;   // text items per view; larger grids show colours only

class OverviewView : public SweepPlotView {
public:
    explicit OverviewView(QWidget* parent) : SweepPlotView(parent, QStringLiteral("overview"), tr("Model overview"))
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Colour map"), this));
        m_cmapBox = colorMapBox(this);
        tools->addWidget(m_cmapBox);
        tools->addStretch(1);
        connect(m_cmapBox, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { m_pressPos = e->pos(); });
        connect(m_plot, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
            if ((e->pos() - m_pressPos).manhattanLength() <= 3 && e->button() == Qt::LeftButton)
                click(e->pos());
        });
        m_saved.addByText("colormap", m_cmapBox);
        // Effective rank first: it separates heads that the numerical rank (full in nearly every head) does not.
        setMetric(QStringLiteral("effective_rank"));
        rebuild();
    }

    void setNote(const QString& note) override
    {
        m_note = note;
        rebuild();
    }

    // The last run, with what the window knows of it: whether it still matches the current inputs and the
    // layer of per-layer datasets its queries are.
    void setCurveSets(const QList<CurveSet>& sets) override
    {
        m_stale = sets.isEmpty() ? QString() : sets.back().stale;
        m_datasetLayer = sets.isEmpty() ? -1 : sets.back().datasetLayer;
        setSweep(sets.isEmpty() ? nullptr : sets.back().sweep);
    }

    QSize preferredExportSize() const override
    {
        const int k = std::max<int>(1, static_cast<int>(m_panels.size()));
        const double cols = std::max<double>(1, static_cast<double>(m_heads.size())), rows = std::max<double>(1, static_cast<double>(m_layers.size()));
        // Square cells of about 40 px (values readable), panels up to 420 x 520 px.
        const double cell = std::clamp(std::min(420 / cols, 520 / rows), 8.0, 40.0);
        const int pw = static_cast<int>(std::max(60.0, cell * cols)), ph = static_cast<int>(std::max(24.0, cell * rows));
        return {90 + k * (pw + 16) + 110, 130 + ph};
    }

    // A narrow printed figure stacks the panels (adjustLayout): the height that gives them the width.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        if (m_panels.size() < 2 || !isNarrow(width, font_scale))
            return fallback;
        const double f = std::max(0.5, font_scale);
        const double L = std::max<double>(1, static_cast<double>(m_layers.size())), H = std::max<double>(1, static_cast<double>(m_heads.size()));
        const double panel = std::max(40.0, width - 150 * f) * L / H + 75 * f;   // heatmap, title, head labels
        const int want = static_cast<int>(std::lround(45 * f + static_cast<double>(m_panels.size()) * panel));
        return std::max(fallback, std::min(want, kMaxExportHeight));
    }

protected:
    // Square cells; cell values are written when the widest label fits its cell at the drawn size.
    void adjustLayout(const QSize& size) override
    {
        if (m_panels.empty())
            return;
        if (m_grid && m_scale)
            arrange(m_panels.size() > 1 && isNarrow(size.width(), fontScale()) && size.height() > size.width());
        std::vector<CellRect> cells;
        for (const Panel& p : m_panels)
            cells.push_back({p.rect, static_cast<double>(m_heads.size()), static_cast<double>(m_layers.size())});
        fitSquareCells(m_plot, cells, size, [this](const QSize& s) { layoutAt(s); });
        // Titles centred over the heatmap, not over its column (which includes the first panel's layer labels).
        const QMargins m = m_panels.front().rect->margins();
        for (Panel& p : m_panels) {
            p.title->setAutoMargins(QCP::msNone);
            p.title->setMargins(QMargins(std::max(0, m.left() - m.right()), 0, 0, 0));
        }
        layoutAt(size);
        if (m_labels.empty())
            return;
        bool fits = true;
        for (const Panel& p : m_panels) {
            const double cw = static_cast<double>(p.rect->width()) / std::max<std::size_t>(1, m_heads.size());
            const double ch = static_cast<double>(p.rect->height()) / std::max<std::size_t>(1, m_layers.size());
            const QFontMetricsF fm(m_labels.front()->font());
            fits = fits && fm.horizontalAdvance(m_widestLabel) + 4 <= cw && fm.height() + 1 <= ch;
        }
        for (QCPItemText* t : m_labels)
            t->setVisible(fits);
    }

private:
    struct Panel {
        Mechanism mechanism{};
        QCPAxisRect* rect = nullptr;
        QCPTextElement* title = nullptr;
        QCPColorMap* map = nullptr;
        std::vector<double> values;   // row-major layers x heads; NaN where missing
    };

    // The colour range of all panels; integral: every value is a whole number (written without decimals).
    struct Range {
        double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
        bool integral = true;
    };

    double value(const Panel& p, std::size_t row, std::size_t col) const { return p.values[row * m_heads.size() + col]; }

    void rebuild() override
    {
        m_grid = nullptr;   // the old plot's elements go with it
        m_scale = nullptr;
        m_stacked = false;
        m_panels.clear();
        m_labels.clear();
        m_widestLabel.clear();
        m_layers.clear();
        m_heads.clear();
        if (!m_sweep || m_sweep->records.empty()) {
            showPlotMessage(m_plot, !m_note.isEmpty() ? m_note
                                                      : tr("No model overview yet.\nRun an overview of a file with several layers or heads to see every layer and head per mechanism."));
            return;
        }
        const QString key = metric();
        // One N: the largest in the records (an overview sweep has exactly one).
        Index n = 0;
        for (const auto& r : m_sweep->records)
            n = std::max(n, r.n);
        Range range = collectPanels(key, n);
        if (!std::isfinite(range.lo)) {
            m_panels.clear();
            showPlotMessage(m_plot, tr("The overview has no values of %1.").arg(sweepMetricLabel(key)));
            return;
        }
        // The colours start at 0 for a metric that cannot be negative, not at the smallest value: a min-max
        // scale turns ranks 509 and 512 of 512 into the two ends of the colour map, which reads as collapse.
        const double dataLo = range.lo, dataHi = range.hi;
        if (range.lo > 0)
            range.lo = 0;
        if (range.hi <= range.lo) {
            const double pad = range.lo == 0 ? 0.5 : std::abs(range.lo) * 0.05;
            range.lo -= pad;
            range.hi += pad;
        }
        clearPlot(m_plot);

        QString source;
        if (!m_sweep->spec.inputs.empty())
            source = QFileInfo(QString::fromStdString(m_sweep->spec.inputs.front().q_ref.file)).fileName() + QStringLiteral(", ");
        QString title = tr("%1 per layer and head (%2N = %3)").arg(sweepMetricLabel(key), source).arg(n);
        title[0] = title[0].toUpper();
        m_plot->plotLayout()->addElement(0, 0, addTitle(m_plot, title, plotFont(kTitlePt, true)));
        // What it was computed with, and (marked) when the current inputs or options are others.
        auto* details = addTitle(m_plot, runDetails(*m_sweep, m_datasetLayer), plotFont(kTickPt));
        details->setTextColor(QColor(60, 60, 60));
        m_plot->plotLayout()->addElement(1, 0, details);
        if (!m_stale.isEmpty()) {
            auto* stale = addTitle(m_plot, tr("Not the current inputs or options \u2014 %1").arg(m_stale), plotFont(kTickPt, true));
            stale->setTextColor(QColor(0xa0, 0x50, 0x00));
            m_plot->plotLayout()->addElement(2, 0, stale);
        }
        auto* grid = new QCPLayoutGrid;
        const int gridRow = m_plot->plotLayout()->rowCount();
        m_plot->plotLayout()->addElement(gridRow, 0, grid);
        for (int r = 0; r < gridRow; ++r)
            m_plot->plotLayout()->setRowStretchFactor(r, 0.01);
        auto* group = new QCPMarginGroup(m_plot);
        auto* scale = addColorScale(m_plot, sweepMetricLabel(key), 14, group);
        scale->setGradient(colorGradient(colorMapFromName(m_cmapBox->currentText())));
        scale->setDataRange(QCPRange(range.lo, range.hi));
        scale->axis()->setLabelPadding(6);

        const bool labels = m_layers.size() * m_heads.size() * m_panels.size() <= static_cast<std::size_t>(kMaxCellLabels);
        int col = 0;
        for (Panel& p : m_panels) {
            addPanel(p, grid, col, group);
            p.map->setColorScale(scale);
            if (labels)
                addCellLabels(p, range, scale->gradient());
            ++col;
        }
        grid->addElement(1, col, scale);
        // The scale in words under the panels: where the colours start and what the values span.
        const QString from = range.lo == 0 ? tr("Colours from 0")
                             : dataLo < 0  ? tr("Colours from the smallest value %1").arg(fmtNum(range.lo, 4))
                                           : tr("Colours from %1").arg(fmtNum(range.lo, 4));
        auto* scaleNote = addTitle(m_plot, tr("%1 to %2; the values span %3 \u2013 %4.").arg(from, fmtNum(range.hi, 4), fmtNum(dataLo, 4), fmtNum(dataHi, 4)),
                                   plotFont(kTickPt));
        scaleNote->setObjectName(QStringLiteral("scaleNote"));
        scaleNote->setTextColor(QColor(60, 60, 60));
        m_plot->plotLayout()->addElement(gridRow + 1, 0, scaleNote);
        m_plot->plotLayout()->setRowStretchFactor(gridRow + 1, 0.01);
        grid->setRowStretchFactor(0, 0.01);
        grid->setColumnStretchFactor(col, 0.01);
        m_grid = grid;
        m_scale = scale;
        grid->setColumnSpacing(14);
        grid->setRowSpacing(2);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // The panels side by side (titles in row 0, heatmaps in row 1, the shared scale last), or one above
    // the other (the scale beside the first); stacked, every panel shows its layer labels.
    void arrange(bool stacked)
    {
        if (stacked == m_stacked)
            return;
        const int k = static_cast<int>(m_panels.size());
        std::vector<GridCell> cells;
        for (int i = 0; i < k; ++i) {
            Panel& p = m_panels[static_cast<std::size_t>(i)];
            cells.push_back({p.title, stacked ? 2 * i : 0, stacked ? 0 : i});
            cells.push_back({p.rect, stacked ? 2 * i + 1 : 1, stacked ? 0 : i});
            if (i > 0) {
                QCPAxis* y = p.rect->axis(QCPAxis::atLeft);
                y->setTickLabels(stacked);
                y->setLabel(stacked ? m_panels.front().rect->axis(QCPAxis::atLeft)->label() : QString());
            }
        }
        cells.push_back({m_scale, 1, stacked ? 1 : k});
        moveElements(m_grid, cells);
        for (int r = 0; r < m_grid->rowCount(); ++r)
            m_grid->setRowStretchFactor(r, r % 2 == 0 ? 0.01 : 1.0);
        for (int c = 0; c < m_grid->columnCount(); ++c)
            m_grid->setColumnStretchFactor(c, c == m_grid->columnCount() - 1 ? 0.01 : 1.0);
        m_stacked = stacked;
        layoutAt(m_plot->viewport().size());
    }

    // m_layers, m_heads (in the file's order) and one panel per mechanism of the records at N = n: the mean
    // of the records of each cell (draws, or repeated inputs; usually exactly one).
    Range collectPanels(const QString& key, Index n)
    {
        std::set<Index> layers, heads;
        std::vector<Mechanism> order;
        for (const auto& r : m_sweep->records) {
            Mechanism m;
            if (r.n != n || !mechanismFromName(r.mechanism, m))
                continue;
            layers.insert(r.layer.value_or(-1));
            heads.insert(r.head.value_or(-1));
            if (std::find(order.begin(), order.end(), m) == order.end())
                order.push_back(m);
        }
        m_layers.assign(layers.begin(), layers.end());
        m_heads.assign(heads.begin(), heads.end());
        const std::size_t L = m_layers.size(), H = m_heads.size();
        Range range;
        for (Mechanism m : order) {
            Panel p;
            p.mechanism = m;
            std::vector<double> sum(L * H, 0.0), cnt(L * H, 0.0);
            for (const auto& r : m_sweep->records) {
                Mechanism rm;
                if (r.n != n || !mechanismFromName(r.mechanism, rm) || rm != m)
                    continue;
                const double v = sweepMetricValue(r, key);
                if (!std::isfinite(v))
                    continue;
                const auto row = static_cast<std::size_t>(std::lower_bound(m_layers.begin(), m_layers.end(), r.layer.value_or(-1)) - m_layers.begin());
                const auto col = static_cast<std::size_t>(std::lower_bound(m_heads.begin(), m_heads.end(), r.head.value_or(-1)) - m_heads.begin());
                sum[row * H + col] += v;
                cnt[row * H + col] += 1;
            }
            p.values.assign(L * H, std::numeric_limits<double>::quiet_NaN());
            for (std::size_t i = 0; i < L * H; ++i)
                if (cnt[i] > 0) {
                    p.values[i] = sum[i] / cnt[i];
                    range.lo = std::min(range.lo, p.values[i]);
                    range.hi = std::max(range.hi, p.values[i]);
                    range.integral = range.integral && p.values[i] == std::round(p.values[i]);
                }
            m_panels.push_back(std::move(p));
        }
        return range;
    }

    // A panel's title, axes (heads across, layers down, labelled on the first panel only) and heatmap.
    void addPanel(Panel& p, QCPLayoutGrid* grid, int col, QCPMarginGroup* group)
    {
        const std::size_t L = m_layers.size(), H = m_heads.size();
        const bool noLayer = L == 1 && m_layers.front() < 0, noHead = H == 1 && m_heads.front() < 0;
        p.title = addTitle(m_plot, mechanismLabel(p.mechanism), plotFont(kLabelPt, true));
        grid->addElement(0, col, p.title);
        auto* rect = addAxisRect(m_plot, grid, 1, col);
        rect->setMarginGroup(QCP::msLeft | QCP::msRight | QCP::msTop | QCP::msBottom, group);
        rect->setupFullAxesBox(false);
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        rect->axis(QCPAxis::atTop)->setTicks(false);
        rect->axis(QCPAxis::atRight)->setTicks(false);
        for (QCPAxis* ax : {x, y}) {
            ax->grid()->setVisible(false);
            ax->setSubTicks(false);
        }
        setIndexTicks(x, m_heads);
        setIndexTicks(y, m_layers);
        x->setRange(-0.5, static_cast<double>(H) - 0.5);
        y->setRange(-0.5, static_cast<double>(L) - 0.5);
        y->setRangeReversed(true);   // layer 0 at the top
        x->setLabel(noHead ? tr("(no head axis)") : tr("head"));
        if (col == 0)
            y->setLabel(noLayer ? tr("(no layer axis)") : tr("layer"));
        else
            y->setTickLabels(false);
        p.rect = rect;
        p.map = new QCPColorMap(x, y);
        p.map->setInterpolate(false);
        p.map->setTightBoundary(false);
        // QCPColorMap derives a cell's extent from range / (size - 1): an axis with one cell (a file
        // without a layer or head axis) is drawn as two identical cells spanning -0.5..0.5.
        const int kc = H == 1 ? 2 : static_cast<int>(H), vr = L == 1 ? 2 : static_cast<int>(L);
        p.map->data()->setSize(kc, vr);
        p.map->data()->setRange(H == 1 ? QCPRange(-0.25, 0.25) : QCPRange(0, static_cast<double>(H) - 1),
                                L == 1 ? QCPRange(-0.25, 0.25) : QCPRange(0, static_cast<double>(L) - 1));
        for (int r = 0; r < vr; ++r)
            for (int c = 0; c < kc; ++c)
                p.map->data()->setCell(c, r, value(p, L == 1 ? 0 : static_cast<std::size_t>(r), H == 1 ? 0 : static_cast<std::size_t>(c)));
    }

    // Layer or head numbers as tick labels (a dash where the records have no such axis); integer ticks for
    // more than 16.
    static void setIndexTicks(QCPAxis* ax, const std::vector<Index>& idx)
    {
        if (idx.size() <= 16) {
            auto t = QSharedPointer<QCPAxisTickerText>::create();
            for (std::size_t i = 0; i < idx.size(); ++i)
                t->addTick(static_cast<double>(i), idx[i] < 0 ? QStringLiteral("\u2013") : QString::number(idx[i]));
            ax->setTicker(t);
        } else {
            setIntegerTicks(ax);
        }
    }

    // The value written in every cell, black or white by the lightness of the cell's colour.
    void addCellLabels(const Panel& p, const Range& range, QCPColorGradient gradient)
    {
        auto* x = p.rect->axis(QCPAxis::atBottom);
        auto* y = p.rect->axis(QCPAxis::atLeft);
        for (std::size_t r = 0; r < m_layers.size(); ++r)
            for (std::size_t c = 0; c < m_heads.size(); ++c) {
                const double v = value(p, r, c);
                if (!std::isfinite(v))
                    continue;
                const QString text = range.integral ? QString::number(static_cast<long long>(v)) : fmtNum(v, 3);
                if (text.size() > m_widestLabel.size())
                    m_widestLabel = text;
                auto* t = new QCPItemText(m_plot);
                t->setClipAxisRect(p.rect);
                t->position->setAxes(x, y);
                t->position->setCoords(static_cast<double>(c), static_cast<double>(r));
                t->setPositionAlignment(Qt::AlignCenter);
                t->setText(text);
                t->setFont(plotFont(kTickPt));   // never below the tick labels: exports size fonts by them
                const QColor bg = QColor::fromRgb(gradient.color(v, QCPRange(range.lo, range.hi)));
                t->setColor(bg.lightnessF() > 0.55 ? Qt::black : Qt::white);
                m_labels.push_back(t);
            }
    }

    // The panel and cell (row = layer position, column = head position) under `pos`; null when none.
    const Panel* cellAt(const QPoint& pos, std::size_t& row, std::size_t& col) const
    {
        for (const Panel& p : m_panels) {
            if (!p.rect || !p.rect->rect().contains(pos))
                continue;
            const auto c = std::lround(p.rect->axis(QCPAxis::atBottom)->pixelToCoord(pos.x()));
            const auto r = std::lround(p.rect->axis(QCPAxis::atLeft)->pixelToCoord(pos.y()));
            if (r < 0 || c < 0 || r >= static_cast<long>(m_layers.size()) || c >= static_cast<long>(m_heads.size()))
                return nullptr;
            row = static_cast<std::size_t>(r);
            col = static_cast<std::size_t>(c);
            return &p;
        }
        return nullptr;
    }

    void hover(const QPoint& pos)
    {
        std::size_t r = 0, c = 0;
        const Panel* p = cellAt(pos, r, c);
        if (!p)
            return;
        const auto layer = m_layers[r], head = m_heads[c];
        emit statusMessage(tr("%1   layer %2   head %3   %4 = %5")
                               .arg(mechanismLabel(p->mechanism))
                               .arg(layer < 0 ? QStringLiteral("\u2013") : QString::number(layer))
                               .arg(head < 0 ? QStringLiteral("\u2013") : QString::number(head))
                               .arg(sweepMetricLabel(metric()))
                               .arg(fmtNum(value(*p, r, c), 6)));
    }

    // A click on a cell names its layer and head (-1 where the records have no such axis).
    void click(const QPoint& pos)
    {
        std::size_t r = 0, c = 0;
        if (!cellAt(pos, r, c))
            return;
        emit cellActivated(static_cast<int>(m_layers[r]), static_cast<int>(m_heads[c]));
    }

    std::vector<Panel> m_panels;
    QCPLayoutGrid* m_grid = nullptr;      // the panels and the scale
    QCPColorScale* m_scale = nullptr;
    bool m_stacked = false;               // panels one above the other (a narrow, tall canvas)
    std::vector<Index> m_layers, m_heads;   // -1: the records have no such axis
    std::vector<QCPItemText*> m_labels;
    QString m_widestLabel;
    QString m_note;   // shown instead of the usual hint while there is no sweep
    QString m_stale;  // why the overview no longer matches the current inputs ("": it does)
    int m_datasetLayer = -1;
    QPoint m_pressPos;
    QComboBox* m_cmapBox;
};

}  // namespace

SweepView* createOverviewView(QWidget* parent) { return new OverviewView(parent); }

}  // namespace attnscope::widgets
