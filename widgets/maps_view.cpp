// MapsView: the attention matrices side by side in one QCustomPlot (one axis rect per mechanism, one
// shared colour scale), linked zoom/pan, reduced images when zoomed out, difference mode, hover read-out.
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QTimer>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "plot_style.h"
#include "views.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using attention::Mechanism;
using Eigen::Index;

// Cells of the drawn image per axis: at most one per device pixel of a panel on screen (at least kMinCells),
// kMaxCells for exports and hidden views. Beyond that the image is reduced (core reduce_region, from the
// result's pyramid for large N, so that a repaint reads about as many values as it draws).
constexpr Index kMaxCells = 1024;
constexpr Index kMinCells = 256;

struct MatrixStats {
    double max = 0, min = 0, min_positive = std::numeric_limits<double>::infinity();
};

MatrixStats statsOf(const analysis::MechanismOutcome& o)
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

class MapsView : public PlotView {
public:
    explicit MapsView(QWidget* parent) : PlotView(parent)
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Colour map"), this));
        m_cmapBox = new QComboBox(this);
        for (ColorMap c : {ColorMap::viridis, ColorMap::magma, ColorMap::cividis})
            m_cmapBox->addItem(colorMapName(c));
        tools->addWidget(m_cmapBox);
        m_logBox = new QCheckBox(tr("Log colour scale"), this);
        tools->addWidget(m_logBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Show"), this));
        m_diffBox = new QComboBox(this);
        m_diffBox->addItem(tr("matrices"), -1);
        m_diffBox->addItem(tr("difference to softmax"), int(Mechanism::softmax));
        m_diffBox->addItem(tr("difference to linear"), int(Mechanism::linear));
        m_diffBox->addItem(tr("difference to MHLA"), int(Mechanism::mhla));
        tools->addWidget(m_diffBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Zoomed out, each pixel shows the"), this));
        m_reduceBox = new QComboBox(this);
        m_reduceBox->addItem(tr("max"));
        m_reduceBox->addItem(tr("mean"));
        m_reduceBox->setToolTip(tr("Large matrices are drawn reduced when zoomed out: each image cell shows the\n"
                                   "maximum (peaks stay visible) or mean of the entries it covers.\n"
                                   "Difference mode always uses the mean (the mean of a difference is exact)."));
        tools->addWidget(m_reduceBox);
        auto* reset = new QPushButton(tr("Reset zoom"), this);
        tools->addWidget(reset);
        tools->addStretch(1);

        connect(m_cmapBox, &QComboBox::currentIndexChanged, this, [this](int) { applyScale(); });
        connect(m_logBox, &QCheckBox::toggled, this, [this](bool) { applyScale(); });
        connect(m_diffBox, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_reduceBox, &QComboBox::currentIndexChanged, this, [this](int) { refreshImages(); });
        connect(reset, &QPushButton::clicked, this, [this] { resetZoom(); });

        m_refresh.setSingleShot(true);
        m_refresh.setInterval(15);
        connect(&m_refresh, &QTimer::timeout, this, [this] { refreshImages(); });

        m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { m_pressPos = e->pos(); });
        connect(m_plot, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
            if ((e->pos() - m_pressPos).manhattanLength() <= 3 && e->button() == Qt::LeftButton)
                click(e->pos());
        });
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("maps"); }
    QString viewTitle() const override { return tr("Attention maps"); }
    QSize preferredExportSize() const override
    {
        const int k = std::max<int>(1, static_cast<int>(m_panels.size()));
        return {std::max(600, 60 + 430 * k + 110), 540};
    }

    void setResult(std::shared_ptr<const ExploreResult> result) override
    {
        m_result = std::move(result);
        m_stats.clear();
        m_diffAbsMax.clear();
        m_haveRange = false;
        if (m_result)
            for (const auto& o : m_result->outcomes)
                m_stats.push_back(o.matrix ? statsOf(o) : MatrixStats{});
        if (m_query >= (m_result ? m_result->n : 0))
            m_query = -1;
        rebuild();
    }

    void setQuery(int token) override
    {
        m_query = token;
        updateQueryLines();
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    void renderTo(QPainter* painter, const QSize& size, double font_scale) override
    {
        // Exports get up to kMaxCells cells per axis whatever the panels' size on screen.
        m_refresh.stop();
        m_exporting = true;
        refreshImages();
        m_exporting = false;
        PlotView::renderTo(painter, size, font_scale);
        if (isVisible())
            m_refresh.start();   // back to screen resolution
    }

protected:
    // The image's cell count follows the panels' size on screen.
    void resizeEvent(QResizeEvent* event) override
    {
        PlotView::resizeEvent(event);
        m_refresh.start();
    }
    void showEvent(QShowEvent* event) override
    {
        PlotView::showEvent(event);
        m_refresh.start();
    }

    // Square panels (equal aspect, like imshow): the outer layout's margins take what is left over so the
    // panels' inner rects are side x side, centred.
    void adjustLayout(const QSize& size) override
    {
        auto* top = m_plot->plotLayout();
        top->setAutoMargins(QCP::msNone);
        top->setMargins(QMargins(0, 0, 0, 0));
        if (m_panels.empty() || !m_panels.front().rect)
            return;
        const int k = static_cast<int>(m_panels.size());
        // Width excess is taken out by horizontal margins (k panels shrink), height excess by vertical ones;
        // later passes only correct the residual (tick labels change with the layout).
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

public:
    QJsonObject saveState() const override
    {
        QJsonObject s;
        s["colormap"] = m_cmapBox->currentText();
        s["log"] = m_logBox->isChecked();
        const int ref = m_diffBox->currentData().toInt();
        s["difference"] = ref < 0 ? QStringLiteral("off") : mechanismLabel(Mechanism(ref));
        s["reduce"] = m_reduceBox->currentText();
        if (m_haveRange) {
            s["x_range"] = rangeToJson(m_x0, m_x1);
            s["y_range"] = rangeToJson(m_y0, m_y1);
        }
        return s;
    }

    void restoreState(const QJsonObject& s) override
    {
        const QSignalBlocker b1(m_cmapBox), b2(m_logBox), b3(m_diffBox), b4(m_reduceBox);
        if (s.contains("colormap")) {
            const int i = m_cmapBox->findText(s["colormap"].toString());
            if (i >= 0)
                m_cmapBox->setCurrentIndex(i);
        }
        if (s.contains("log"))
            m_logBox->setChecked(s["log"].toBool());
        if (s.contains("difference")) {
            const QString d = s["difference"].toString();
            int idx = 0;
            for (int i = 1; i < m_diffBox->count(); ++i)
                if (mechanismLabel(Mechanism(m_diffBox->itemData(i).toInt())) == d)
                    idx = i;
            m_diffBox->setCurrentIndex(idx);
        }
        if (s.contains("reduce")) {
            const int i = m_reduceBox->findText(s["reduce"].toString());
            if (i >= 0)
                m_reduceBox->setCurrentIndex(i);
        }
        double x0, x1, y0, y1;
        const bool ranges = rangeFromJson(s["x_range"], x0, x1) && rangeFromJson(s["y_range"], y0, y1);
        rebuild();
        if (ranges && !m_panels.empty()) {
            m_x0 = x0, m_x1 = x1, m_y0 = y0, m_y1 = y1;
            m_haveRange = true;
            applyRanges();
            refreshImages();
        }
    }

private:
    struct Panel {
        int outcome = -1;          // index into result->outcomes
        int minus = -1;            // difference mode: outcome subtracted
        QCPAxisRect* rect = nullptr;
        QCPColorMap* map = nullptr;   // null when the mechanism failed
        QCPItemStraightLine* queryLine = nullptr;
        QCPTextElement* title = nullptr;
    };

    Index n() const { return m_result ? m_result->n : 0; }

    int outcomeIndex(Mechanism m) const
    {
        if (!m_result)
            return -1;
        for (std::size_t i = 0; i < m_result->outcomes.size(); ++i)
            if (m_result->outcomes[i].result.mechanism == m)
                return static_cast<int>(i);
        return -1;
    }

    // Difference reference outcome, or -1 when showing the matrices (or the reference failed / is absent).
    int diffRef() const
    {
        const int ref = m_diffBox->currentData().toInt();
        if (ref < 0)
            return -1;
        const int i = outcomeIndex(Mechanism(ref));
        return (i >= 0 && m_result->outcomes[static_cast<std::size_t>(i)].matrix) ? i : -1;
    }

    void rebuild()
    {
        m_panels.clear();
        m_scale = nullptr;
        m_blockLines = 0;
        m_logBox->setEnabled(m_diffBox->currentData().toInt() < 0);
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see the attention maps."));
            return;
        }
        if (m_result->outcomes.empty()) {
            showPlotMessage(m_plot, tr("No mechanism was computed."));
            return;
        }
        m_plot->clearItems();
        m_plot->clearPlottables();
        m_plot->plotLayout()->clear();
        m_plot->legend = nullptr;

        const int ref = diffRef();
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
            return;
        }

        auto* layout = new QCPLayoutGrid;   // panels; a footnote row goes below it in the plot layout
        m_plot->plotLayout()->addElement(0, 0, layout);
        auto* group = new QCPMarginGroup(m_plot);
        const double N = static_cast<double>(n());
        int col = 0;
        for (Panel& p : m_panels) {
            const auto& o = m_result->outcomes[static_cast<std::size_t>(p.outcome)];
            auto* title = new QCPTextElement(m_plot, panelTitle(p), plotFont(kTitlePt, true));
            layout->addElement(0, col, title);
            auto* rect = new QCPAxisRect(m_plot, true);
            layout->addElement(1, col, rect);
            styleAxisRect(rect);
            rect->setMarginGroup(QCP::msLeft | QCP::msTop | QCP::msBottom | QCP::msRight, group);
            rect->setRangeDrag(Qt::Horizontal | Qt::Vertical);
            rect->setRangeZoom(Qt::Horizontal | Qt::Vertical);
            auto* x = rect->axis(QCPAxis::atBottom);
            auto* y = rect->axis(QCPAxis::atLeft);
            for (QCPAxis* ax : {x, y}) {
                ax->grid()->setVisible(false);
                ax->setRange(-0.5, N - 0.5);
                setIntegerTicks(ax);
                ax->ticker()->setTickCount(5);
            }
            y->setRangeReversed(true);   // query 0 at the top, as a matrix is printed
            x->setLabel(tr("key j"));
            if (col == 0)
                y->setLabel(tr("query t"));
            else
                y->setTickLabels(false);
            p.rect = rect;
            p.title = title;
            if (o.matrix) {
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
            } else {
                auto* text = new QCPItemText(m_plot);
                text->setClipAxisRect(rect);
                text->position->setType(QCPItemPosition::ptAxisRectRatio);
                text->position->setAxisRect(rect);
                text->position->setCoords(0.5, 0.5);
                text->setFont(plotFont(kLabelPt));
                text->setColor(QColor(170, 20, 20));
                text->setText(wrapText(tr("%1 could not be computed:").arg(mechanismLabel(o.result.mechanism)) + " " +
                                           QString::fromStdString(o.error.empty() ? "no matrix" : o.error),
                                       42));
            }
            connect(x, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                    [this, x](const QCPRange& r) { rangeChanged(x, r, true); });
            connect(y, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
                    [this, y](const QCPRange& r) { rangeChanged(y, r, false); });
            ++col;
        }
        m_scale = new QCPColorScale(m_plot);
        layout->addElement(1, col, m_scale);
        m_scale->setType(QCPAxis::atRight);
        m_scale->setBarWidth(14);
        m_scale->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        m_scale->axis()->setLabelFont(plotFont(kLabelPt));
        m_scale->axis()->setTickLabelFont(plotFont(kTickPt));
        m_scale->axis()->setLabelPadding(6);
        for (Panel& p : m_panels)
            if (p.map)
                p.map->setColorScale(m_scale);
        layout->setRowStretchFactor(0, 0.01);
        layout->setColumnStretchFactor(col, 0.01);
        if (m_blockLines > 0) {
            QString foot = tr("White lines: MHLA block boundaries");
            if (m_result->blocks && m_result->blocks->block_grid.size() > 1 && m_result->token_order == attention::TokenOrder::raster)
                foot = tr("White lines: MHLA block boundaries (raster grids: block rows only)");
            auto* note = new QCPTextElement(m_plot, foot, plotFont(kTickPt));
            note->setTextColor(QColor(80, 80, 80));
            // (raster order: the blocks of one block row interleave along each grid row, so only the boundaries
            // between block rows are contiguous in token index)
            m_plot->plotLayout()->addElement(1, 0, note);
            m_plot->plotLayout()->setRowStretchFactor(1, 0.01);
        }
        layout->setColumnSpacing(6);
        layout->setRowSpacing(2);

        if (m_haveRange)
            applyRanges();
        else
            storeRange(m_panels.front().rect);
        applyScale(false);
        updateQueryLines();
        refreshImages();
    }

    QString panelTitle(const Panel& p) const
    {
        const auto& o = m_result->outcomes[static_cast<std::size_t>(p.outcome)];
        QString t = mechanismLabel(o.result.mechanism);
        if (p.minus >= 0)
            return t + QStringLiteral(" \u2212 ") +
                   mechanismLabel(m_result->outcomes[static_cast<std::size_t>(p.minus)].result.mechanism);
        if (!o.matrix)
            return t + tr(": failed");
        if (o.result.spectrum)
            t += tr("  (rank %1 / %2)").arg(o.result.spectrum->rank).arg(m_result->n);
        if (o.result.mechanism == Mechanism::mhla && m_result->blocks)
            t += tr(", M = %1").arg(m_result->blocks->num_blocks);
        return t;
    }

    // Lines between groups of whole blocks that are contiguous in token order: every block boundary for
    // 1-D blocks and blocked grid order; for a grid in raster order the blocks interleave along a row of
    // the grid, so only the boundaries between block rows are contiguous token ranges and drawn.
    void addBlockLines(Panel& p)
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

    // Colour scale: gradient, range and type from the shown data.
    void applyScale(bool replot = true)
    {
        if (!m_scale || m_panels.empty())
            return;
        const bool diff = m_panels.front().minus >= 0;
        double lo = 0, hi = 0, minPos = std::numeric_limits<double>::infinity();
        bool negative = false;
        QString label;
        ColorMap cmap = colorMapFromName(m_cmapBox->currentText());
        bool log = false;
        if (diff) {
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
                if (!m_result->outcomes[static_cast<std::size_t>(p.outcome)].matrix)
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
                label += m_logBox->isChecked() ? tr(": log scale unavailable)") : QStringLiteral(")");
            } else if (m_logBox->isChecked()) {
                log = true;
                lo = std::max(std::isfinite(minPos) ? minPos : hi * 1e-5, hi * 1e-5);
                label = tr("attention weight A[t,j] (log)");
            }
        }
        m_scaleLabel = label;
        m_scale->setDataScaleType(log ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
        if (log) {
            auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
            ticker->setLogBase(10);
            ticker->setSubTickCount(8);
            m_scale->axis()->setTicker(ticker);
            m_scale->axis()->setNumberFormat("eb");
            m_scale->axis()->setNumberPrecision(0);
        } else {
            m_scale->axis()->setTicker(QSharedPointer<QCPAxisTicker>::create());
            m_scale->axis()->setNumberFormat("gb");
            m_scale->axis()->setNumberPrecision(3);
        }
        m_scale->setGradient(colorGradient(cmap));
        m_scale->setDataRange(QCPRange(lo, hi));
        updateScaleLabel();
        if (replot)
            m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    double diffAbsMax(const Panel& p)
    {
        if (p.minus < 0)
            return 0;
        const auto key = std::make_pair(p.outcome, p.minus);
        auto it = m_diffAbsMax.find(key);
        if (it != m_diffAbsMax.end())
            return it->second;
        const auto& A = m_result->outcomes[static_cast<std::size_t>(p.outcome)].matrix;
        const auto& B = m_result->outcomes[static_cast<std::size_t>(p.minus)].matrix;
        const double m = (A && B) ? (A->array() - B->array()).abs().maxCoeff() : 0.0;
        m_diffAbsMax[key] = m;
        return m;
    }

    void updateScaleLabel()
    {
        if (!m_scale)
            return;
        QString label = m_scaleLabel;
        if (m_reducedFactor > 1.0)
            label += tr("\n%1 of %2\u00d7%2 entries per cell")
                         .arg(m_panels.front().minus >= 0 || m_reduceBox->currentIndex() == 1 ? tr("mean") : tr("max"))
                         .arg(fmtNum(m_reducedFactor, 2));
        m_scale->axis()->setLabel(label);
    }

    void storeRange(QCPAxisRect* rect)
    {
        const QCPRange x = rect->axis(QCPAxis::atBottom)->range(), y = rect->axis(QCPAxis::atLeft)->range();
        m_x0 = x.lower, m_x1 = x.upper, m_y0 = y.lower, m_y1 = y.upper;
    }

    void applyRanges()
    {
        m_syncing = true;
        for (Panel& p : m_panels) {
            p.rect->axis(QCPAxis::atBottom)->setRange(m_x0, m_x1);
            p.rect->axis(QCPAxis::atLeft)->setRange(m_y0, m_y1);
        }
        m_syncing = false;
    }

    void rangeChanged(QCPAxis* axis, const QCPRange& r, bool isX)
    {
        if (m_syncing)
            return;
        m_syncing = true;
        for (Panel& p : m_panels) {
            QCPAxis* other = p.rect->axis(isX ? QCPAxis::atBottom : QCPAxis::atLeft);
            if (other != axis)
                other->setRange(r);
        }
        m_syncing = false;
        if (isX)
            m_x0 = r.lower, m_x1 = r.upper;
        else
            m_y0 = r.lower, m_y1 = r.upper;
        m_haveRange = true;
        m_refresh.start();
    }

    void resetZoom()
    {
        m_haveRange = false;
        const double N = static_cast<double>(n());
        m_x0 = m_y0 = -0.5;
        m_x1 = m_y1 = N - 0.5;
        applyRanges();
        refreshImages();
    }

    // Cells per axis for the current panel size (see kMaxCells).
    Index cellCap(bool vertical) const
    {
        if (m_exporting || !isVisible() || m_panels.empty() || !m_panels.front().rect)
            return kMaxCells;
        const QRect r = m_panels.front().rect->rect();
        const double px = (vertical ? r.height() : r.width()) * devicePixelRatioF();
        return std::clamp<Index>(static_cast<Index>(std::ceil(px)), kMinCells, kMaxCells);
    }

    // Recomputes the colour-map data of the visible region: full resolution when it has at most
    // cellCap() rows/columns, otherwise a reduced image (core reduce_region).
    void refreshImages()
    {
        if (!m_result || m_panels.empty() || !m_panels.front().rect)
            return;
        const Index N = n();
        auto visible = [N](double lo, double hi, Index& a, Index& b) {
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
        visible(rect->axis(QCPAxis::atLeft)->range().lower, rect->axis(QCPAxis::atLeft)->range().upper, r0, r1);
        visible(rect->axis(QCPAxis::atBottom)->range().lower, rect->axis(QCPAxis::atBottom)->range().upper, c0, c1);
        if (r1 <= r0 || c1 <= c0)
            return;
        const bool diff = m_panels.front().minus >= 0;
        const auto how = (diff || m_reduceBox->currentIndex() == 1) ? analysis::Reduce::mean : analysis::Reduce::max;
        const Index capRows = cellCap(true), capCols = cellCap(false);
        m_reducedFactor = 1.0;
        for (Panel& p : m_panels) {
            if (!p.map)
                continue;
            const auto& o = m_result->outcomes[static_cast<std::size_t>(p.outcome)];
            const analysis::MechanismOutcome* minus =
                p.minus >= 0 ? &m_result->outcomes[static_cast<std::size_t>(p.minus)] : nullptr;
            // Both sides of a difference from the same kind of source, so that their cells coincide.
            const bool pyramids = o.pyramid && (!minus || minus->pyramid);
            analysis::ReducedImage img = analysis::reduce_region(*o.matrix, r0, r1, c0, c1, capRows, capCols, how,
                                                                 pyramids ? o.pyramid.get() : nullptr);
            if (img.values.empty())
                continue;
            if (minus) {
                const analysis::ReducedImage other = analysis::reduce_region(
                    *minus->matrix, r0, r1, c0, c1, capRows, capCols, how, pyramids ? minus->pyramid.get() : nullptr);
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
                    data->setCell(static_cast<int>(j), static_cast<int>(i),
                                  img.values[static_cast<std::size_t>(i * img.cols + j)]);
        }
        updateScaleLabel();
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    void updateQueryLines()
    {
        for (Panel& p : m_panels) {
            if (!p.queryLine)
                continue;
            p.queryLine->setVisible(m_query >= 0);
            p.queryLine->point1->setCoords(-1e9, m_query);
            p.queryLine->point2->setCoords(1e9, m_query);
        }
    }

    const Panel* panelAt(const QPoint& pos, Index& t, Index& j) const
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

    QString coords(Index t) const
    {
        const auto c = m_result->grid_coords(t);
        if (c.empty())
            return {};
        QStringList parts;
        for (Index v : c)
            parts << QString::number(v);
        return QStringLiteral(" (") + parts.join(", ") + QStringLiteral(")");
    }

    void hover(const QPoint& pos)
    {
        if (!m_result)
            return;
        Index t, j;
        const Panel* p = panelAt(pos, t, j);
        if (!p)
            return;
        const auto& o = m_result->outcomes[static_cast<std::size_t>(p->outcome)];
        if (!o.matrix) {
            emit statusMessage(tr("%1 failed: %2").arg(mechanismLabel(o.result.mechanism), QString::fromStdString(o.error)));
            return;
        }
        double v = (*o.matrix)(t, j);
        QString what = mechanismLabel(o.result.mechanism);
        if (p->minus >= 0) {
            const auto& B = m_result->outcomes[static_cast<std::size_t>(p->minus)];
            v -= (*B.matrix)(t, j);
            what += QStringLiteral(" \u2212 ") + mechanismLabel(B.result.mechanism);
        }
        QString msg = tr("%1   query t = %2%3   key j = %4%5   A = %6")
                          .arg(what)
                          .arg(t)
                          .arg(coords(t))
                          .arg(j)
                          .arg(coords(j))
                          .arg(QString::number(v, 'g', 6));
        if (m_result->blocks && o.result.mechanism == Mechanism::mhla)
            msg += tr("   blocks %1 \u2192 %2")
                       .arg(m_result->blocks->block_of_token[static_cast<std::size_t>(t)])
                       .arg(m_result->blocks->block_of_token[static_cast<std::size_t>(j)]);
        emit statusMessage(msg);
    }

    void click(const QPoint& pos)
    {
        Index t, j;
        if (!panelAt(pos, t, j))
            return;
        setQuery(static_cast<int>(t));
        emit querySelected(static_cast<int>(t));
    }

    std::shared_ptr<const ExploreResult> m_result;
    std::vector<MatrixStats> m_stats;
    std::map<std::pair<int, int>, double> m_diffAbsMax;
    std::vector<Panel> m_panels;
    QCPColorScale* m_scale = nullptr;
    QString m_scaleLabel;
    double m_reducedFactor = 1.0;
    int m_blockLines = 0;
    QComboBox *m_cmapBox, *m_diffBox, *m_reduceBox;
    QCheckBox* m_logBox;
    QTimer m_refresh;
    QPoint m_pressPos;
    int m_query = -1;
    bool m_syncing = false, m_haveRange = false, m_exporting = false;
    double m_x0 = 0, m_x1 = 1, m_y0 = 0, m_y1 = 1;
};

}  // namespace

ResultView* createMapsView(QWidget* parent) { return new MapsView(parent); }

}  // namespace attnscope::widgets
