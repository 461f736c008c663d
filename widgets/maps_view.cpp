// MapsView: the attention matrices side by side (drawn by MapPanels, maps_panels.h) with the view's
// controls (colour map, log scale, difference mode, reduction), linked zoom and pan of all panels, the
// hover read-out, query selection by click, and the saved state.
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QTimer>
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "maps_panels.h"
#include "view_base.h"
#include "views.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using attention::Mechanism;
using Eigen::Index;

// Cells of the drawn image per axis: at most one per device pixel of a panel on screen (at least kMinCells),
// kMaxCells for exports and hidden views.
constexpr Index kMaxCells = 1024;
constexpr Index kMinCells = 256;

class MapsView : public PlotView {
public:
    explicit MapsView(QWidget* parent) : PlotView(parent, QStringLiteral("maps"), tr("Attention maps")), m_maps(m_plot)
    {
        buildTools();
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

    QSize preferredExportSize() const override
    {
        const int k = std::max<int>(1, static_cast<int>(m_maps.panels().size()));
        return {std::max(600, 60 + 430 * k + 110), 540};
    }

    void setQuery(int token) override
    {
        m_query = token;
        m_maps.setQuery(m_query);
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

    QJsonObject saveState() const override
    {
        QJsonObject s = m_saved.save();
        const int ref = m_diffBox->currentData().toInt();
        s["difference"] = ref < 0 ? QStringLiteral("off") : mechanismLabel(Mechanism(ref));
        if (m_haveRange) {
            s["x_range"] = rangeToJson(m_x0, m_x1);
            s["y_range"] = rangeToJson(m_y0, m_y1);
        } else if (m_pendingRange) {
            s["x_range"] = rangeToJson((*m_pendingRange)[0], (*m_pendingRange)[1]);
            s["y_range"] = rangeToJson((*m_pendingRange)[2], (*m_pendingRange)[3]);
        }
        return s;
    }

    void restoreState(const QJsonObject& s) override
    {
        m_saved.restore(s);
        const QSignalBlocker blocker(m_diffBox);
        if (s.contains("difference")) {
            const QString d = s["difference"].toString();
            int idx = 0;
            for (int i = 1; i < m_diffBox->count(); ++i)
                if (mechanismLabel(Mechanism(m_diffBox->itemData(i).toInt())) == d)
                    idx = i;
            m_diffBox->setCurrentIndex(idx);
        }
        double x0, x1, y0, y1;
        const bool ranges = rangeFromJson(s["x_range"], x0, x1) && rangeFromJson(s["y_range"], y0, y1);
        m_pendingRange.reset();
        rebuild();
        if (ranges && !m_maps.panels().empty()) {
            m_x0 = x0, m_x1 = x1, m_y0 = y0, m_y1 = y1;
            m_haveRange = true;
            applyRanges();
            refreshImages();
        } else if (ranges) {
            m_pendingRange = std::array<double, 4>{x0, x1, y0, y1};   // a session's zoom: for the result that follows
        }
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

    void adjustLayout(const QSize& size) override
    {
        m_maps.makeSquare(size, [this](const QSize& s) { layoutAt(s); });
    }

private:
    void buildTools()
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Colour map"), this));
        m_cmapBox = colorMapBox(this);
        tools->addWidget(m_cmapBox);
        m_logBox = new QCheckBox(tr("Log colour scale"), this);
        tools->addWidget(m_logBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Show"), this));
        m_diffBox = comboBox(this, {{tr("matrices"), -1},
                                    {tr("difference to softmax"), int(Mechanism::softmax)},
                                    {tr("difference to linear"), int(Mechanism::linear)},
                                    {tr("difference to MHLA"), int(Mechanism::mhla)}});
        tools->addWidget(m_diffBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Zoomed out, each pixel shows the"), this));
        m_reduceBox = comboBox(this, {{tr("max"), QVariant()}, {tr("mean"), QVariant()}},
                               tr("Large matrices are drawn reduced when zoomed out: each image cell shows the\n"
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
        m_saved.addByText("colormap", m_cmapBox);
        m_saved.add("log", m_logBox);
        m_saved.addByText("reduce", m_reduceBox);
    }

    Index n() const { return m_result ? m_result->n : 0; }

    void resultChanged() override
    {
        m_maps.setResult(m_result);
        m_haveRange = false;
        if (m_pendingRange && m_result) {   // restored before its result arrived (sessions)
            m_x0 = (*m_pendingRange)[0], m_x1 = (*m_pendingRange)[1], m_y0 = (*m_pendingRange)[2], m_y1 = (*m_pendingRange)[3];
            m_haveRange = true;
            m_pendingRange.reset();
        }
        if (m_query >= (m_result ? m_result->n : 0))
            m_query = -1;
        rebuild();
    }

    void rebuild() override
    {
        m_logBox->setEnabled(m_diffBox->currentData().toInt() < 0);
        if (!m_maps.build(m_diffBox->currentData().toInt()))
            return;
        for (const auto& p : m_maps.panels()) {
            auto* x = p.rect->axis(QCPAxis::atBottom);
            auto* y = p.rect->axis(QCPAxis::atLeft);
            connect(x, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this, x](const QCPRange& r) { rangeChanged(x, r, true); });
            connect(y, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this, [this, y](const QCPRange& r) { rangeChanged(y, r, false); });
        }
        if (m_haveRange)
            applyRanges();
        else
            storeRange(m_maps.panels().front().rect);
        applyScale(false);
        m_maps.setQuery(m_query);
        refreshImages();
    }

    // Reduced cells show the max, or the mean: always for differences (the mean of a difference is exact).
    analysis::Reduce reduction() const
    {
        return (m_maps.difference() || m_reduceBox->currentIndex() == 1) ? analysis::Reduce::mean : analysis::Reduce::max;
    }

    void applyScale(bool replot = true)
    {
        if (m_maps.applyScale(colorMapFromName(m_cmapBox->currentText()), m_logBox->isChecked(), reduction()) && replot)
            m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // Cells per axis for the current panel size (see kMaxCells).
    Index cellCap(bool vertical) const
    {
        const auto& panels = m_maps.panels();
        if (m_exporting || !isVisible() || panels.empty() || !panels.front().rect)
            return kMaxCells;
        const QRect r = panels.front().rect->rect();
        const double px = (vertical ? r.height() : r.width()) * devicePixelRatioF();
        return std::clamp<Index>(static_cast<Index>(std::ceil(px)), kMinCells, kMaxCells);
    }

    void refreshImages()
    {
        if (m_maps.refreshImages(cellCap(true), cellCap(false), reduction()))
            m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    void storeRange(QCPAxisRect* rect)
    {
        const QCPRange x = rect->axis(QCPAxis::atBottom)->range(), y = rect->axis(QCPAxis::atLeft)->range();
        m_x0 = x.lower, m_x1 = x.upper, m_y0 = y.lower, m_y1 = y.upper;
    }

    void applyRanges()
    {
        m_syncing = true;
        for (const auto& p : m_maps.panels()) {
            p.rect->axis(QCPAxis::atBottom)->setRange(m_x0, m_x1);
            p.rect->axis(QCPAxis::atLeft)->setRange(m_y0, m_y1);
        }
        m_syncing = false;
    }

    // Zoom and pan in one panel move all of them.
    void rangeChanged(QCPAxis* axis, const QCPRange& r, bool isX)
    {
        if (m_syncing)
            return;
        m_syncing = true;
        for (const auto& p : m_maps.panels()) {
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
        const MapPanels::Panel* p = m_maps.panelAt(pos, t, j);
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
        if (!m_maps.panelAt(pos, t, j))
            return;
        setQuery(static_cast<int>(t));
        emit querySelected(static_cast<int>(t));
    }

    MapPanels m_maps;
    QComboBox *m_cmapBox, *m_diffBox, *m_reduceBox;
    QCheckBox* m_logBox;
    QTimer m_refresh;
    QPoint m_pressPos;
    int m_query = -1;
    bool m_syncing = false, m_haveRange = false, m_exporting = false;
    double m_x0 = 0, m_x1 = 1, m_y0 = 0, m_y1 = 1;   // the shown region (all panels)
    std::optional<std::array<double, 4>> m_pendingRange;   // x0, x1, y0, y1 restored while there was no result
};

}  // namespace

ResultView* createMapsView(QWidget* parent) { return new MapsView(parent); }

}  // namespace attnscope::widgets
