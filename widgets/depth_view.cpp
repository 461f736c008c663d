// DepthView (depth_view.h): residual to uniform and effective rank of the layers' products against depth, one
// curve per mechanism, drawn from an analysis::ExploreDepthResult.
#include "depth_view.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/depth_curves.h"
#include "curves.h"
#include "io/selection.h"
#include "plot_util.h"
#include "view_base.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using Eigen::Index;

constexpr int kMaxLabelledDepths = 16;   // more: integer ticks, the layers named in the axis title

// The marker of a mechanism's points (hollow ones filled white), as the Curves view draws them.
QCPScatterStyle depthMarker(attention::Mechanism m)
{
    const MechanismStyle style = mechanismStyle(m);
    const QColor color = mechanismColor(m);
    return QCPScatterStyle(static_cast<QCPScatterStyle::ScatterShape>(style.marker), color,
                           style.hollow ? QColor(Qt::white) : color, style.marker_size);
}

// A logarithmic axis over [lo, hi] labelled at 1, 2 and 5 times the powers of ten inside it: a range of less than a
// few decades gets labels enough, none between powers that read alike.
void setOneTwoFiveTicks(QCPAxis* axis, double lo, double hi)
{
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
        for (const double m : {1.0, 2.0, 5.0}) {
            const double t = m * std::pow(10.0, e);
            if (t >= lo && t <= hi)
                ticker->addTick(t, QString::number(t, 'g', 6));
        }
    ticker->setSubTickCount(0);
    axis->setTicker(ticker);
}

class DepthViewImpl : public PlotViewOf<DepthView> {
public:
    explicit DepthViewImpl(QWidget* parent) : PlotViewOf<DepthView>(parent)
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("\u03b1"), this));
        m_alpha = doubleSpinBox(this, 0.0, 1.0, 2, 0.5,
                                tr("Weight of the attention path: each layer contributes \u03b1 A + (1 \u2212 \u03b1) I "
                                   "(1: pure attention; 0.5: attention rollout)"));
        m_alpha->setSingleStep(0.1);
        m_alpha->setKeyboardTracking(false);   // typed values count when confirmed, not at every key
        tools->addWidget(m_alpha);
        tools->addSpacing(12);
        m_mean = new QCheckBox(tr("Mean over heads"), this);
        m_mean->setChecked(true);
        m_mean->setToolTip(tr("A_l is the mean over the layer's heads; unticked, the head selected in the Selection dock"));
        tools->addWidget(m_mean);
        tools->addSpacing(12);
        m_log = new QCheckBox(tr("Log y"), this);
        m_log->setToolTip(tr("Logarithmic y axes: collapse is exponential (or faster) in depth"));
        tools->addWidget(m_log);
        tools->addSpacing(12);
        m_status = new QLabel(this);
        tools->addWidget(m_status, 1);
        m_saved.add("head_mean", m_mean);
        m_saved.add("log_y", m_log);
        connect(m_log, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_alpha, &QDoubleSpinBox::valueChanged, this, [this](double) { settingsMoved(); });
        connect(m_mean, &QCheckBox::toggled, this, [this](bool) { settingsMoved(); });
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("depth"); }
    QString viewTitle() const override { return tr("Depth"); }
    QSize preferredExportSize() const override { return {1200, 620}; }

    // A narrow figure (a journal column) puts the effective rank under the residual.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        return narrowExportHeight(width, font_scale, fallback, 1.35);
    }

    void renderTo(QPainter* painter, const QSize& size, double font_scale) override
    {
        const bool stacked = isNarrow(size.width(), font_scale);
        const bool changed = stacked != m_stacked;
        if (changed) {
            m_stacked = stacked;
            rebuild();
        }
        PlotViewOf<DepthView>::renderTo(painter, size, font_scale);
        if (changed) {
            m_stacked = false;
            rebuild();
        }
    }

    void setResult(std::shared_ptr<const analysis::ExploreResult> result) override
    {
        // Nothing to describe any more (no data, an error): the depth of older inputs goes too.
        if (!result && m_depth) {
            m_depth.reset();
            rebuild();
        }
    }

    void setDepth(std::shared_ptr<const analysis::ExploreDepthResult> depth) override
    {
        m_depth = std::move(depth);
        rebuild();
    }
    std::shared_ptr<const analysis::ExploreDepthResult> depth() const override { return m_depth; }
    double alpha() const override { return m_alpha->value(); }
    bool headMean() const override { return m_mean->isChecked(); }

    void setProgress(double fraction, const QString& stage) override
    {
        m_status->setText(fraction < 0 ? QString() : tr("computing %1 (%2 %)").arg(stage).arg(std::lround(fraction * 100)));
    }

    QJsonObject saveState() const override
    {
        QJsonObject s = m_saved.save();
        s[QStringLiteral("alpha")] = m_alpha->value();
        return s;
    }

    void restoreState(const QJsonObject& state) override
    {
        const double alphaBefore = alpha();
        const bool meanBefore = headMean();
        m_saved.restore(state);
        if (const QJsonValue a = state.value(QStringLiteral("alpha")); a.isDouble() && std::isfinite(a.toDouble())) {
            const QSignalBlocker block(m_alpha);
            m_alpha->setValue(std::clamp(a.toDouble(), 0.0, 1.0));
        }
        if (alpha() != alphaBefore || headMean() != meanBefore)
            emit settingsChanged();
        rebuild();
    }

private:
    void settingsMoved()
    {
        rebuild();   // the title follows the depth shown; the window marks it and computes the new one
        emit settingsChanged();
    }

    QString headsText() const
    {
        if (!m_depth->head_axis)
            return tr("one head (no head axis)");
        if (m_depth->head)
            return tr("head %1").arg(*m_depth->head);
        return tr("mean over %1 heads").arg(m_depth->heads_averaged);
    }

    QString titleText() const
    {
        const QString file = QFileInfo(QString::fromStdString(m_depth->file)).fileName();
        const QString alpha = QString::number(m_depth->request.alpha, 'g', 4);
        if (m_stacked)   // a narrow figure: two short lines rather than one cut short
            return tr("Collapse with depth: %1\nN = %2, \u03b1 = %3, %4").arg(file).arg(m_depth->n).arg(alpha, headsText());
        return tr("Collapse with depth: %1 \u00b7 N = %2 \u00b7 \u03b1 = %3 \u00b7 %4 \u00b7 %5 layers")
            .arg(file)
            .arg(m_depth->n)
            .arg(alpha, headsText())
            .arg(m_depth->layers.size());
    }

    // What the product is and what it was computed with: the queries' names, the selection and the options.
    QString detailsText() const
    {
        const analysis::ExploreRequest& base = m_depth->request.base;
        QStringList parts;
        parts << tr("P_L = (\u03b1 A_L + (1\u2212\u03b1) I) \u2026 (\u03b1 A_1 + (1\u2212\u03b1) I)");
        QStringList layers;
        for (const Index l : m_depth->layers)
            layers << QString::number(l);
        parts << (layers.size() > kMaxLabelledDepths ? tr("layers %1–%2").arg(layers.front(), layers.back())
                                                     : tr("layers %1").arg(layers.join(QStringLiteral(", "))));
        for (const auto& [axis, index] : base.source.selection.at)
            if (axis != 'h' && axis != 'l')
                parts << QStringLiteral("%1=%2").arg(QChar::fromLatin1(axis)).arg(index);
        if (base.source.selection.prefix_tokens > 0)
            parts << tr("prefix tokens %1 dropped").arg(base.source.selection.prefix_tokens);
        // What the user chose applies to every layer; the rest came from each layer's own attributes (the panel shows
        // the shown layer's, which another layer may not share: its learned mixing matrix, its scale).
        const analysis::ExplicitChoices& given = m_depth->request.given;
        attention::AttentionOptions chosen = base.options;
        const attention::AttentionOptions defaults;
        QStringList fromLayers;
        if (!given.causal) {
            chosen.causal = defaults.causal;
            fromLayers << tr("causal");
        }
        if (!given.scale) {
            chosen.scale = defaults.scale;
            fromLayers << tr("scale");
        }
        if (!given.blocks) {
            chosen.blocks = defaults.blocks;
            fromLayers << tr("blocks");
        }
        if (!given.mixing) {
            chosen.mixing = defaults.mixing;
            fromLayers << tr("mixing");
        }
        if (!given.gates) {
            chosen.gates = defaults.gates;
            fromLayers << tr("gates");
        }
        const QString options = optionsText(chosen);
        if (!options.isEmpty())
            parts << options;
        if (!fromLayers.isEmpty())
            parts << tr("%1 from each layer's attributes").arg(fromLayers.join(QStringLiteral(", ")));
        return parts.join(QStringLiteral(" \u00b7 "));
    }

    // Depth d's tick: "d" over "layer l" (the layer multiplied last).
    void setDepthTicks(QCPAxis* x) const
    {
        const auto depths = static_cast<int>(m_depth->layers.size());
        if (depths > kMaxLabelledDepths) {
            setIntegerTicks(x);
        } else {
            auto ticker = QSharedPointer<QCPAxisTickerText>::create();
            for (int d = 1; d <= depths; ++d)
                ticker->addTick(d, tr("%1\nlayer %2").arg(d).arg(m_depth->layers[static_cast<std::size_t>(d - 1)]));
            x->setTicker(ticker);
        }
        x->setRange(0.5, depths + 0.5);
        x->setLabel(depths > kMaxLabelledDepths
                        ? tr("depth L (layers %1 to %2 multiplied in order)").arg(m_depth->layers.front()).arg(m_depth->layers.back())
                        : tr("depth L (under each: the last layer in P_L)"));
    }

    // One panel: `value` of each mechanism's curve against depth, its y axis from 0 to `ceiling` (at least the
    // largest value) or, logarithmic, from below the smallest positive value.
    QCPAxisRect* addPanel(QCPLayoutGrid* grid, int row, int col, const QString& title, const QString& yLabel,
                          const std::vector<double> analysis::DepthCurve::*values, double ceiling, QCPMarginGroup* group)
    {
        grid->addElement(row, col, addTitle(m_plot, title, plotFont(kLabelPt, true)));
        auto* rect = addAxisRect(m_plot, grid, row + 1, col);
        rect->setMarginGroup(m_stacked ? QCP::msLeft | QCP::msRight : QCP::msTop | QCP::msBottom, group);
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        setDepthTicks(x);
        y->setLabel(yLabel);
        double top = 0, lowest = ceiling;
        for (const analysis::DepthCurve& c : m_depth->curves) {
            QVector<double> xs, ys;
            const std::vector<double>& v = c.*values;
            for (std::size_t d = 0; d < v.size(); ++d)
                if (std::isfinite(v[d])) {
                    xs << static_cast<double>(d + 1);
                    ys << v[d];
                    top = std::max(top, v[d]);
                    if (v[d] > 0)
                        lowest = std::min(lowest, v[d]);
                }
            auto* g = m_plot->addGraph(x, y);
            g->setData(xs, ys, true);
            g->setPen(mechanismPen(c.mechanism));
            g->setScatterStyle(depthMarker(c.mechanism));
            g->setName(mechanismLabel(c.mechanism));
            g->setSelectable(QCP::stNone);
            m_graphs.push_back({g, rect, &c});
        }
        top = std::max(top, ceiling);
        if (m_log->isChecked()) {
            const double lo = lowest > 0 ? lowest / 1.5 : top / 10, hi = top * 1.25;
            setLogScale(y);
            setOneTwoFiveTicks(y, lo, hi);
            y->setRange(lo, hi);
        } else {
            y->setRange(0, top > 0 ? top * 1.06 : 1.0);
        }
        return rect;
    }

    void rebuild()
    {
        m_graphs.clear();
        m_rects.clear();
        clearPlot(m_plot);
        if (!m_depth) {
            showPlotMessage(m_plot, tr("No depth yet.\nFor a file with the layers of one model (/layers/<i>/q datasets or an "
                                       "'l' axis), this tab multiplies the layers' attention\nand shows how fast the "
                                       "product collapses to one row repeated, per mechanism."));
            return;
        }
        if (!m_depth->unavailable.empty()) {
            showPlotMessage(m_plot, tr("No depth plot for these data.\n%1").arg(QString::fromStdString(m_depth->unavailable)));
            return;
        }
        auto* layout = m_plot->plotLayout();
        layout->addElement(0, 0, addTitle(m_plot, titleText(), plotFont(kTitlePt, true)));
        auto* details = addTitle(m_plot, detailsText(), plotFont(kTickPt));
        details->setTextColor(QColor(60, 60, 60));
        layout->addElement(1, 0, details);
        auto* grid = new QCPLayoutGrid;
        layout->addElement(2, 0, grid);
        layout->setRowStretchFactor(0, 0.01);
        layout->setRowStretchFactor(1, 0.01);
        grid->setColumnSpacing(24);
        auto* group = new QCPMarginGroup(m_plot);
        const int rrow = 0, rcol = 0, erow = m_stacked ? 2 : 0, ecol = m_stacked ? 0 : 1;
        // The residual is a projection of P_L, never above 1; the effective rank at most N (dashed).
        QCPAxisRect* residual = addPanel(grid, rrow, rcol, tr("Residual to uniform (0: every row the same)"),
                                         tr("\u2016P_L \u2212 1\u03c0\u1d40\u2016_F / \u2016P_L\u2016_F"),
                                         &analysis::DepthCurve::residual_to_uniform, 1.0, group);
        const auto n = static_cast<double>(m_depth->n);
        QCPAxisRect* rank = addPanel(grid, erow, ecol, tr("Effective rank of P_L (at most N = %1, dashed)").arg(m_depth->n),
                                     tr("effective rank"), &analysis::DepthCurve::effective_rank, n, group);
        addHLine(m_plot, rank, n, QPen(QColor(90, 90, 90), 1.0, Qt::DashLine));
        m_rects = {residual, rank};
        for (int r = 0; r < grid->rowCount(); ++r)
            grid->setRowStretchFactor(r, r % 2 == 0 ? 0.01 : 1.0);
        // Bottom left: the curves start high at depth 1 and fall with depth.
        auto* legend = addLegend(residual, Qt::AlignBottom | Qt::AlignLeft);
        for (const Graph& g : m_graphs)
            if (g.rect == residual)
                g.graph->addToLegend(legend);
        QStringList warnings;
        for (const analysis::DepthCurve& c : m_depth->curves)
            if (!c.warnings.empty())
                warnings << tr("%1, %2").arg(mechanismLabel(c.mechanism), QString::fromStdString(c.warnings.front()));
        if (!warnings.isEmpty())
            addNote(m_plot, residual, warnings.join(QLatin1Char('\n')), 0.02, 0.03, Qt::AlignLeft | Qt::AlignBottom);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // The nearest point's values in the status bar.
    void hover(const QPoint& pos)
    {
        if (!m_depth || m_depth->layers.empty())
            return;
        for (QCPAxisRect* rect : m_rects) {
            if (!rect->rect().contains(pos))
                continue;
            const double x = rect->axis(QCPAxis::atBottom)->pixelToCoord(pos.x());
            const long d = std::lround(x);
            if (d < 1 || d > static_cast<long>(m_depth->layers.size()))
                return;
            const auto i = static_cast<std::size_t>(d - 1);
            QStringList parts;
            for (const analysis::DepthCurve& c : m_depth->curves)
                parts << tr("%1: residual %2, effective rank %3")
                             .arg(mechanismLabel(c.mechanism), std::isfinite(c.residual_to_uniform[i]) ? fmtNum(c.residual_to_uniform[i], 4) : QStringLiteral("\u2014"),
                                  std::isfinite(c.effective_rank[i]) ? fmtNum(c.effective_rank[i], 4) : QStringLiteral("\u2014"));
            emit statusMessage(tr("Depth %1 (layers up to %2): %3").arg(d).arg(m_depth->layers[i]).arg(parts.join(QStringLiteral("; "))));
            return;
        }
    }

    struct Graph {
        QCPGraph* graph;
        QCPAxisRect* rect;
        const analysis::DepthCurve* curve;
    };
    std::shared_ptr<const analysis::ExploreDepthResult> m_depth;
    std::vector<Graph> m_graphs;
    std::vector<QCPAxisRect*> m_rects;
    bool m_stacked = false;   // the effective rank under the residual (narrow figures)
    SavedControls m_saved;
    QDoubleSpinBox* m_alpha;
    QCheckBox* m_mean;
    QCheckBox* m_log;
    QLabel* m_status;
};

}  // namespace

DepthView* createDepthView(QWidget* parent) { return new DepthViewImpl(parent); }

}  // namespace attnscope::widgets
