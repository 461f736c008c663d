// MapsView: the attention matrices side by side (drawn by MapPanels, maps_panels.h) with the view's
// controls (colour map, colour ranges per panel or shared, percentile clipping, log scale, difference mode,
// one enlarged panel, block boundaries, reduction), linked zoom and pan of all panels, the hover read-out
// (with the tokens' strings), query selection by click, enlarging by double-click, and the saved state.
#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <QTimer>
#include <vector>
#include <QVBoxLayout>
#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <optional>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "maps_panels.h"
#include "plot_util.h"
#include "view_base.h"
#include "views.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using attention::Mechanism;
using Eigen::Index;

// Cells of the drawn image per axis: at most one per device pixel of a panel on screen, so that no entry's
// cell is dropped when the image is drawn; kMaxCells for exports and hidden views.
constexpr Index kMaxCells = 1024;
constexpr Index kMinCells = 2;

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
        connect(m_plot, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent* e) {
            if (e->button() == Qt::LeftButton)
                toggleEnlarged(e->pos());
        });
        rebuild();
    }

    QSize preferredExportSize() const override
    {
        const int k = std::max<int>(1, static_cast<int>(m_maps.panels().size()));
        return {std::max(600, 60 + 500 * k), 560};
    }

    // A narrow printed column leaves three panels side by side almost no room (each carries its colour
    // scale and labels): the height that gives the panels their room, up to a printed page's column (9 in),
    // when that makes them at least 15 % larger; the smallest such height within 8 % of the best side.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        if (m_maps.panels().empty() || width < 16 || fallback < 16)
            return fallback;
        const int cap = std::max(fallback, std::min(width * 26 / 10, kMaxExportHeight));
        m_exporting = true;
        auto sideAt = [&](int h) {
            return measureAt(QSize(width, h), font_scale, [this] {
                const QRect r = m_maps.panels().front().rect->rect();
                return std::min(r.width(), r.height());
            });
        };
        const int side0 = sideAt(fallback);
        std::vector<std::pair<int, int>> tried;   // (height, side)
        int best = side0;
        for (int h = fallback; h <= cap; h += std::max(8, h / 16)) {
            tried.emplace_back(h, sideAt(h));
            best = std::max(best, tried.back().second);
        }
        m_exporting = false;
        if (best < side0 * 115 / 100)
            return fallback;
        for (const auto& [h, side] : tried)
            if (side >= best * 92 / 100)
                return h;
        return fallback;
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
        const QString show = m_diffBox->currentData().toString();
        s["difference"] = show.startsWith("d:") ? mechanismLabel(Mechanism(show.mid(2).toInt())) : QStringLiteral("off");
        s["difference_panel"] = show.startsWith("x:") ? extraName(show) : QStringLiteral("none");
        s["panels"] = m_only.isEmpty() ? QStringLiteral("all") : m_only;
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
        const QString d = s["difference"].toString(), extra = s["difference_panel"].toString();
        auto pick = [this](const std::function<bool(const QString&)>& matches) {
            for (int i = 0; i < m_diffBox->count(); ++i)
                if (matches(m_diffBox->itemData(i).toString()))
                    m_diffBox->setCurrentIndex(i);
        };
        if (!d.isEmpty() && d != "off")
            pick([&](const QString& code) { return code.startsWith("d:") && mechanismLabel(Mechanism(code.mid(2).toInt())) == d; });
        else if (!extra.isEmpty() && extra != "none")
            pick([&](const QString& code) { return code.startsWith("x:") && extraName(code) == extra; });
        else if (d == "off" || extra == "none")
            pick([](const QString& code) { return code.isEmpty(); });
        if (s.contains("panels"))
            m_only = s["panels"].toString() == "all" ? QString() : s["panels"].toString();
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
        m_maps.layOut(size, [this](const QSize& s) { layoutAt(s); });
        // Panels of another size on screen: images of their new pixel count (after this replot).
        if (!m_exporting && isVisible() && (cellCap(true) != m_cap[0] || cellCap(false) != m_cap[1]))
            m_refresh.start();
    }

private:
    // "matrices"; the matrices with one difference panel (each mechanism with mixing minus each other); each
    // matrix minus one of them. Data "x:A:B" and "d:B" (Mechanism values).
    QList<std::pair<QString, QVariant>> differenceChoices() const
    {
        QList<std::pair<QString, QVariant>> items{{tr("matrices"), QString()}};
        for (const attention::MechanismInfo& a : attention::mechanism_table()) {
            if (!a.has_mixing())
                continue;
            for (const attention::MechanismInfo& b : attention::mechanism_table())
                if (b.id != a.id && b.default_set)
                    items.push_back({tr("matrices + %1 \u2212 %2").arg(mechanismLabel(a.id), mechanismLabel(b.id)),
                                     QStringLiteral("x:%1:%2").arg(int(a.id)).arg(int(b.id))});
        }
        for (const attention::MechanismInfo& b : attention::mechanism_table())
            items.push_back({tr("difference to %1").arg(mechanismLabel(b.id)), QStringLiteral("d:%1").arg(int(b.id))});
        return items;
    }

    void buildTools()
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Colour map"), this));
        m_cmapBox = colorMapBox(this);
        tools->addWidget(m_cmapBox);
        tools->addSpacing(8);
        tools->addWidget(new QLabel(tr("Range"), this));
        m_scaleBox = comboBox(this, {{tr("auto"), QVariant()}, {tr("per panel"), QVariant()}, {tr("shared"), QVariant()}},
                              tr("Colour range of the panels. auto: each panel its own range for attention matrices\n"
                                 "(their peaks differ by orders of magnitude), one shared range for differences\n"
                                 "(the same units, symmetric around 0)."));
        tools->addWidget(m_scaleBox);
        tools->addSpacing(8);
        tools->addWidget(new QLabel(tr("Top colour at"), this));
        m_clipBox = comboBox(this, {{tr("largest entry"), 100.0}, {tr("99.9th percentile"), 99.9}, {tr("99th percentile"), 99.0},
                                    {tr("95th percentile"), 95.0}},
                             tr("The top of each colour range: the largest entry, or a percentile of the panel's entries\n"
                                "(cells of the zoomed-out matrix beyond 1024 tokens) so that a few peaks, such as the\n"
                                "first row of a causal map, do not turn the rest into one dark field. Larger values\n"
                                "get the top colour."));
        m_clipBox->setCurrentIndex(2);
        tools->addWidget(m_clipBox);
        m_logBox = new QCheckBox(tr("Log"), this);
        m_logBox->setToolTip(tr("Logarithmic colour scale (attention weights only, not differences or signed scores)"));
        tools->addWidget(m_logBox);
        tools->addSpacing(8);
        auto* reset = new QPushButton(tr("Reset zoom"), this);
        tools->addWidget(reset);
        tools->addStretch(1);

        auto* row = new QHBoxLayout;   // a second row: the view stays narrow enough for small windows
        row->setContentsMargins(4, 0, 4, 0);
        if (auto* v = qobject_cast<QVBoxLayout*>(layout()))
            v->insertLayout(1, row);
        row->addWidget(new QLabel(tr("Show"), this));
        m_diffBox = comboBox(this, differenceChoices(),
                             tr("The matrices; the matrices and one difference panel; or each matrix minus one of them"));
        row->addWidget(m_diffBox);
        row->addSpacing(8);
        row->addWidget(new QLabel(tr("Panels"), this));
        m_onlyBox = comboBox(this, {{tr("all"), QVariant()}},
                             tr("One panel enlarged, or all. Double-click a panel to enlarge it, and again to see all."));
        m_onlyBox->setSizeAdjustPolicy(QComboBox::AdjustToContents);
        row->addWidget(m_onlyBox);
        row->addSpacing(8);
        m_blocksBox = new QCheckBox(tr("Block boundaries"), this);
        m_blocksBox->setChecked(true);
        m_blocksBox->setToolTip(tr("MHLA's block boundaries: lines, or ticks beside the map where lines would cover it"));
        row->addWidget(m_blocksBox);
        row->addSpacing(8);
        row->addWidget(new QLabel(tr("Zoomed out"), this));
        m_reduceBox = comboBox(this, {{tr("max"), QVariant()}, {tr("mean"), QVariant()}},
                               tr("Zoomed out, each pixel shows the maximum (peaks stay visible) or the mean of the\n"
                                  "entries it covers. Difference panels always show the mean (the mean of a\n"
                                  "difference is exact)."));
        row->addWidget(m_reduceBox);
        row->addStretch(1);

        connect(m_cmapBox, &QComboBox::currentIndexChanged, this, [this](int) { applyScale(); });
        connect(m_clipBox, &QComboBox::currentIndexChanged, this, [this](int) { applyScale(); });
        connect(m_logBox, &QCheckBox::toggled, this, [this](bool) { applyScale(); });
        for (QComboBox* box : {m_scaleBox, m_diffBox})
            connect(box, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_onlyBox, &QComboBox::currentIndexChanged, this, [this](int i) {
            m_only = i <= 0 ? QString() : m_onlyBox->itemText(i);
            rebuild();
        });
        connect(m_blocksBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_reduceBox, &QComboBox::currentIndexChanged, this, [this](int) {
            applyScale(false);
            refreshImages();
        });
        connect(reset, &QPushButton::clicked, this, [this] { resetZoom(); });
        m_saved.addByText("colormap", m_cmapBox);
        m_saved.add("log", m_logBox);
        m_saved.addByText("reduce", m_reduceBox);
        m_saved.addByText("scale", m_scaleBox);
        m_saved.addByText("clip", m_clipBox);
        m_saved.add("block_boundaries", m_blocksBox);
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
        const QString show = m_diffBox->currentData().toString();
        MapPanels::Layout layout;
        layout.reference = show.startsWith("d:") ? show.mid(2).toInt() : -1;
        if (show.startsWith("x:"))
            layout.extra = {show.section(':', 1, 1).toInt(), show.section(':', 2, 2).toInt()};
        m_logBox->setEnabled(layout.reference < 0);
        layout.perPanelScale = m_scaleBox->currentIndex() == 0 ? layout.reference < 0 : m_scaleBox->currentIndex() == 1;
        layout.blockBoundaries = m_blocksBox->isChecked();
        layout.only = showOnly(layout);
        if (!m_maps.build(layout))
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
        if (isVisible())
            adjustLayout(m_plot->viewport().size());   // the panels' size on screen, for the images' cell count
        refreshImages();
    }

    // Reduced cells show the max, or the mean: always for differences (the mean of a difference is exact).
    analysis::Reduce reduction() const
    {
        return (m_maps.difference() || m_reduceBox->currentIndex() == 1) ? analysis::Reduce::mean : analysis::Reduce::max;
    }

    void applyScale(bool replot = true)
    {
        MapPanels::Look look;
        look.cmap = colorMapFromName(m_cmapBox->currentText());
        look.log = m_logBox->isChecked();
        look.clipPercentile = m_clipBox->currentData().toDouble();
        look.how = reduction();
        if (m_maps.applyScale(look) && replot)
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
        m_cap = {cellCap(true), cellCap(false)};
        if (m_maps.refreshImages(m_cap[0], m_cap[1], reduction()))
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

    // " 'e'" (the token's string, when the file has them) and " (r, c)" (grid coordinates) of token t.
    QString describe(Index t) const
    {
        QString out;
        const QString token = m_maps.token(t);
        if (!token.isEmpty())
            out += QStringLiteral(" \u2018") + token + QStringLiteral("\u2019");
        const auto c = m_result->grid_coords(t);
        if (c.empty())
            return out;
        QStringList parts;
        for (Index v : c)
            parts << QString::number(v);
        return out + QStringLiteral(" (") + parts.join(", ") + QStringLiteral(")");
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
        bool allowed = p->mask.allowed(t, j);
        if (p->minus >= 0) {
            const auto& B = m_result->outcomes[static_cast<std::size_t>(p->minus)];
            v -= (*B.matrix)(t, j);
            what += QStringLiteral(" \u2212 ") + mechanismLabel(B.result.mechanism);
            allowed = allowed || p->minusMask.allowed(t, j);
        }
        QString msg = tr("%1   query t = %2%3   key j = %4%5   A = %6")
                          .arg(what)
                          .arg(t)
                          .arg(describe(t))
                          .arg(j)
                          .arg(describe(j))
                          .arg(QString::number(v, 'g', 6));
        if (!allowed)
            msg += tr(" (not allowed: causal)");
        if (m_result->blocks && attention::mechanism_info(o.result.mechanism).has_blocks())
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

    // A double-click on a panel shows it alone; on the one panel shown, all of them again.
    void toggleEnlarged(const QPoint& pos)
    {
        Index t, j;
        const MapPanels::Panel* p = m_maps.panelAt(pos, t, j);
        if (!p)
            return;
        m_only = m_only.isEmpty() && m_maps.panels().size() > 1 ? m_maps.name(*p) : QString();
        rebuild();
    }

    // "MHLA − softmax" for the code of an extra difference panel ("x:a:b").
    static QString extraName(const QString& code)
    {
        return mechanismLabel(Mechanism(code.section(':', 1, 1).toInt())) + QStringLiteral(" \u2212 ") +
               mechanismLabel(Mechanism(code.section(':', 2, 2).toInt()));
    }

    // The Panels box lists the panels `layout` shows; the one to enlarge when it is among them (a name
    // of another result's panels is forgotten; kept while there is no result, as a session restores it).
    QString showOnly(const MapPanels::Layout& layout)
    {
        const QStringList names = m_maps.panelNames(layout);
        if (m_result && !names.isEmpty() && !names.contains(m_only))
            m_only.clear();
        const QSignalBlocker blocker(m_onlyBox);
        m_onlyBox->clear();
        m_onlyBox->addItem(tr("all"));
        m_onlyBox->addItems(names);
        m_onlyBox->setCurrentIndex(std::max(0, m_onlyBox->findText(m_only)));
        return m_only;
    }

    MapPanels m_maps;
    QComboBox *m_cmapBox, *m_scaleBox, *m_clipBox, *m_diffBox, *m_onlyBox, *m_reduceBox;
    QCheckBox *m_logBox, *m_blocksBox;
    QString m_only;   // the panel shown alone (MapPanels::name), empty: all
    QTimer m_refresh;
    QPoint m_pressPos;
    int m_query = -1;
    bool m_syncing = false, m_haveRange = false, m_exporting = false;
    double m_x0 = 0, m_x1 = 1, m_y0 = 0, m_y1 = 1;   // the shown region (all panels)
    std::array<Index, 2> m_cap = {0, 0};   // cells per axis (rows, columns) of the last images
    std::optional<std::array<double, 4>> m_pendingRange;   // x0, x1, y0, y1 restored while there was no result
};

}  // namespace

ResultView* createMapsView(QWidget* parent) { return new MapsView(parent); }

}  // namespace attnscope::widgets
