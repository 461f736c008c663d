// Shared look of the result views; see plot_style.h.
#include "plot_style.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QSet>
#include <QStyle>
#include <QVBoxLayout>
#include <QWidget>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "analysis/sweep.h"
#include "plot_util.h"

namespace attnscope::widgets {

MechanismStyle mechanismStyle(attention::Mechanism m)
{
    // Linear is drawn wider underneath MHLA so that nearly equal curves stay visible.
    static const MechanismStyle styles[] = {
        {QColor(0x00, 0x72, 0xB2), 1.5, 1.7, QCPScatterStyle::ssCircle, true, 7},            // blue
        {QColor(0xE6, 0x9F, 0x00), 2.8, 2.4, QCPScatterStyle::ssSquare, false, 7},           // orange
        {QColor(0x00, 0x9E, 0x73), 1.2, 1.7, QCPScatterStyle::ssTriangle, false, 8},         // bluish green
        {QColor(0xD5, 0x5E, 0x00), 1.5, 1.7, QCPScatterStyle::ssDiamond, false, 8},          // vermillion
        {QColor(0xCC, 0x79, 0xA7), 1.5, 1.7, QCPScatterStyle::ssTriangleInverted, false, 8}, // reddish purple
        {QColor(0x56, 0xB4, 0xE9), 1.5, 1.7, QCPScatterStyle::ssCrossCircle, true, 9},       // sky blue
        {QColor(0x00, 0x00, 0x00), 1.5, 1.7, QCPScatterStyle::ssStar, false, 8},             // black
    };
    constexpr int count = static_cast<int>(sizeof styles / sizeof styles[0]);
    const int slot = attention::mechanism_info(m).style_slot;
    return styles[slot >= 0 && slot < count ? slot : count - 1];
}

QColor mechanismColor(attention::Mechanism m) { return mechanismStyle(m).color; }

QPen mechanismPen(attention::Mechanism m, double scale)
{
    const MechanismStyle style = mechanismStyle(m);
    return QPen(style.color, style.pen_width * scale);
}

QString mechanismLabel(attention::Mechanism m)
{
    const std::string_view label = attention::mechanism_info(m).label;
    return QString::fromUtf8(label.data(), static_cast<qsizetype>(label.size()));
}

QString colorMapName(ColorMap m)
{
    switch (m) {
    case ColorMap::viridis: return QStringLiteral("viridis");
    case ColorMap::magma: return QStringLiteral("magma");
    case ColorMap::cividis: return QStringLiteral("cividis");
    case ColorMap::diverging: return QStringLiteral("diverging");
    }
    return {};
}

ColorMap colorMapFromName(const QString& name, ColorMap fallback)
{
    for (ColorMap m : {ColorMap::viridis, ColorMap::magma, ColorMap::cividis, ColorMap::diverging})
        if (colorMapName(m) == name)
            return m;
    return fallback;
}

QComboBox* colorMapBox(QWidget* parent)
{
    auto* box = new QComboBox(parent);
    for (ColorMap c : {ColorMap::viridis, ColorMap::magma, ColorMap::cividis})
        box->addItem(colorMapName(c));
    return box;
}

QCPColorGradient colorGradient(ColorMap m)
{
    // Nine stops at 0, 1/8, ..., 1 of matplotlib's colour maps; QCustomPlot interpolates in RGB between them.
    static const char* viridis[] = {"#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
                                    "#28ae80", "#5ec962", "#addc30", "#fde725"};
    static const char* magma[] = {"#000004", "#1c1044", "#4f127b", "#812581", "#b5367a",
                                  "#e55064", "#fb8761", "#fec287", "#fcfdbf"};
    static const char* cividis[] = {"#00224e", "#123570", "#3b496c", "#575d6d", "#707173",
                                    "#8a8678", "#a59c74", "#c3b369", "#fee838"};
    static const char* rdbu_r[] = {"#053061", "#2166ac", "#4393c3", "#92c5de", "#f7f7f7",
                                   "#f4a582", "#d6604d", "#b2182b", "#67001f"};
    const char** stops = viridis;
    switch (m) {
    case ColorMap::viridis: stops = viridis; break;
    case ColorMap::magma: stops = magma; break;
    case ColorMap::cividis: stops = cividis; break;
    case ColorMap::diverging: stops = rdbu_r; break;
    }
    QCPColorGradient g;
    g.clearColorStops();
    for (int i = 0; i < 9; ++i)
        g.setColorStopAt(i / 8.0, QColor(stops[i]));
    g.setColorInterpolation(QCPColorGradient::ciRGB);
    g.setLevelCount(256);
    g.setNanHandling(QCPColorGradient::nhLowestColor);
    return g;
}

QString fmtNum(double v, int digits)
{
    if (!std::isfinite(v))
        return QStringLiteral("n/a");
    return QString::number(v, 'g', digits);
}

GridTokens gridTokens(const analysis::ExploreResult& result)
{
    GridTokens g;
    const auto& tg = result.token_grid;
    if (tg.size() < 2 || tg.size() > 3)
        return g;
    Eigen::Index total = 1;
    for (Eigen::Index v : tg)
        total *= v;
    if (total != result.n || total <= 0)
        return g;
    g.frames = tg.size() == 3 ? tg[0] : 1;
    g.h = tg[tg.size() - 2];
    g.w = tg[tg.size() - 1];
    g.token.assign(static_cast<std::size_t>(total), -1);
    for (Eigen::Index t = 0; t < result.n; ++t) {
        const auto c = result.grid_coords(t);
        if (c.size() != tg.size())
            return GridTokens{};
        const Eigen::Index f = tg.size() == 3 ? c[0] : 0;
        g.token[static_cast<std::size_t>((f * g.h + c[c.size() - 2]) * g.w + c[c.size() - 1])] = t;
    }
    return g;
}

namespace {
QSet<const QPainter*>& qcpPainters()
{
    static QSet<const QPainter*> set;
    return set;
}
}  // namespace

void registerQcpPainter(QCPPainter* painter, bool active)
{
    if (active)
        qcpPainters().insert(painter);
    else
        qcpPainters().remove(painter);
}

QCPPainter* asQcpPainter(QPainter* painter)
{
    return qcpPainters().contains(painter) ? static_cast<QCPPainter*>(painter) : nullptr;
}

QStringList sweepMetricKeys()
{
    QStringList keys;
    for (const std::string& k : analysis::sweep_metric_names())
        keys << QString::fromStdString(k);
    return keys;
}

QString sweepMetricLabel(const QString& key)
{
    return QString::fromStdString(analysis::sweep_metric_title(key.toStdString()));
}

double sweepMetricValue(const analysis::SweepRecord& r, const QString& key)
{
    return analysis::sweep_metric_value(r, key.toStdString());
}

bool mechanismFromName(const std::string& name, attention::Mechanism& out)
{
    for (const attention::Mechanism m : attention::all_mechanisms())
        if (attention::to_string(m) == name) {
            out = m;
            return true;
        }
    return false;
}

QJsonArray rangeToJson(double lo, double hi) { return QJsonArray{lo, hi}; }

bool rangeFromJson(const QJsonValue& v, double& lo, double& hi)
{
    const QJsonArray a = v.toArray();
    if (a.size() != 2 || !a[0].isDouble() || !a[1].isDouble())
        return false;
    lo = a[0].toDouble();
    hi = a[1].toDouble();
    return std::isfinite(lo) && std::isfinite(hi) && hi > lo;
}

namespace {

// The tool row of a plot view. Views fill it like any QHBoxLayout (widgets, spacing, a stretch at the end),
// but it wraps onto further lines when the view is narrower than the row, so no control is cut off on a
// small screen (docs/gui.md "Screen sizes"): items keep their size hints, fixed spacing separates them
// within a line and is dropped at a line's start, stretch items are ignored. Its minimum width is its
// widest item; its height follows its width (heightForWidth), which the view's vertical layout honours.
class FlowRow : public QHBoxLayout {
public:
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int width) const override { return arrange(QRect(0, 0, width, 0), false); }
    int minimumHeightForWidth(int width) const override { return heightForWidth(width); }
    Qt::Orientations expandingDirections() const override { return Qt::Horizontal; }
    QSize maximumSize() const override { return {QWIDGETSIZE_MAX, QWIDGETSIZE_MAX}; }
    QSize sizeHint() const override
    {
        const QMargins m = contentsMargins();
        return {arrangedWidth() + m.left() + m.right(), arrange(QRect(0, 0, QWIDGETSIZE_MAX, 0), false)};
    }
    QSize minimumSize() const override
    {
        const QMargins m = contentsMargins();
        int w = 0, h = 0;
        for (int i = 0; i < count(); ++i)
            if (QLayoutItem* it = itemAt(i); it && !it->isEmpty() && !it->spacerItem()) {
                w = std::max(w, it->minimumSize().width());
                h = std::max(h, it->sizeHint().height());
            }
        return {w + m.left() + m.right(), h + m.top() + m.bottom()};
    }
    void setGeometry(const QRect& rect) override
    {
        QLayout::setGeometry(rect);   // not QBoxLayout's: this layout places its items itself
        arrange(rect, true);
    }

private:
    int gap() const
    {
        if (spacing() >= 0)
            return spacing();
        const QWidget* w = parentWidget();
        return w ? std::max(0, w->style()->pixelMetric(QStyle::PM_LayoutHorizontalSpacing)) : 6;
    }
    // An item's width in the row (0 for stretch items, the width of fixed spacing otherwise).
    static int itemWidth(QLayoutItem* it)
    {
        if (QSpacerItem* sp = it->spacerItem())
            return sp->expandingDirections() & Qt::Horizontal ? 0 : sp->sizeHint().width();
        return std::max(it->sizeHint().width(), it->minimumSize().width());
    }
    int arrangedWidth() const
    {
        int w = 0;
        for (int i = 0; i < count(); ++i)
            if (QLayoutItem* it = itemAt(i); it && !it->isEmpty())
                w += itemWidth(it) + (it->spacerItem() ? 0 : gap());
        return std::max(0, w - gap());
    }
    // Places the items line by line inside `rect` (when `apply`); returns the height used.
    int arrange(const QRect& rect, bool apply) const
    {
        const QMargins m = contentsMargins();
        const QRect area = rect.marginsRemoved(m);
        struct Line {
            std::vector<std::pair<QLayoutItem*, int>> items;   // item, x
            int height = 0;
        };
        std::vector<Line> lines(1);
        int x = 0;
        for (int i = 0; i < count(); ++i) {
            QLayoutItem* it = itemAt(i);
            if (!it || it->isEmpty())
                continue;
            const int w = itemWidth(it);
            if (it->spacerItem()) {
                if (x > 0)
                    x += w;   // fixed spacing within a line; none at a line's start
                continue;
            }
            if (x > 0 && x + w > area.width()) {
                lines.emplace_back();
                x = 0;
            }
            lines.back().items.emplace_back(it, x);
            lines.back().height = std::max(lines.back().height, it->sizeHint().height());
            x += w + gap();
        }
        int y = 0;
        for (const Line& line : lines) {
            if (line.items.empty())
                continue;
            for (const auto& [it, ix] : line.items)
                if (apply) {
                    const QSize hint(std::min(itemWidth(it), area.width()), it->sizeHint().height());
                    it->setGeometry(QRect(QPoint(area.left() + ix, area.top() + y + (line.height - hint.height()) / 2), hint));
                }
            y += line.height + gap();
        }
        return std::max(0, y - gap()) + m.top() + m.bottom();
    }
};

}  // namespace

PlotPane::PlotPane(QWidget* owner, std::function<void(const QSize&)> adjust) : m_adjust(std::move(adjust))
{
    auto* v = new QVBoxLayout(owner);
    v->setContentsMargins(2, 2, 2, 2);
    v->setSpacing(2);
    m_tools = new FlowRow;
    m_tools->setContentsMargins(4, 0, 4, 0);
    v->addLayout(m_tools);
    m_plot = new QCustomPlot(owner);
    m_plot->setBackground(Qt::white);
    m_plot->setNoAntialiasingOnDrag(true);
    v->addWidget(m_plot, 1);
    QObject::connect(m_plot, &QCustomPlot::beforeReplot, m_plot, [this] { runAdjust(m_plot->viewport().size()); });
    // A title shortened to its column shows the whole text as the plot's tool tip while hovered.
    QObject::connect(m_plot, &QCustomPlot::mouseMove, m_plot, [this](QMouseEvent* e) {
        m_plot->setToolTip(elidedTitleText(qobject_cast<QCPTextElement*>(m_plot->layoutElementAt(e->pos()))));
    });
}

void PlotPane::layoutAt(const QSize& size)
{
    m_plot->setViewport(QRect(QPoint(0, 0), size));
    auto* layout = m_plot->plotLayout();
    layout->update(QCPLayoutElement::upPreparation);
    layout->update(QCPLayoutElement::upMargins);
    layout->update(QCPLayoutElement::upLayout);
}

// Titles whole, tick density (from a layout at this size, and again from the view's), the view's own layout (square cells), titles too
// wide for their column in two lines (and the layout again), then what still does not fit elided.
void PlotPane::runAdjust(const QSize& size)
{
    if (m_adjusting || size.width() < 2 || size.height() < 2)
        return;
    m_adjusting = true;
    const QRect old = m_plot->viewport();
    restoreTitles(m_plot);
    padLegendItems(m_plot);
    layoutAt(size);
    adaptTickDensity(m_plot);
    if (m_adjust) {
        m_adjust(size);
        // Again for the axes' lengths as the view laid them out (a legend moved under a plot, panels
        // stacked): the free layout's lengths can be twice those, and their ticks overlap.
        adaptTickDensity(m_plot);
        m_adjust(size);
    }
    if (wrapTitles(m_plot)) {
        layoutAt(size);
        if (m_adjust)
            m_adjust(size);
    }
    elideTitles(m_plot);
    if (m_plot->viewport() != old)
        m_plot->setViewport(old);
    m_adjusting = false;
}

namespace {

// Multiplies every font of the plot by a factor and restores them on destruction.
class FontScaler {
public:
    FontScaler(QCustomPlot* plot, double s)
    {
        if (std::abs(s - 1.0) < 1e-9)
            return;
        auto scaled = [s](QFont f) {
            f.setPointSizeF(f.pointSizeF() * s);
            return f;
        };
        auto scaleAxis = [&](QCPAxis* ax) {
            const QFont lf = ax->labelFont(), tf = ax->tickLabelFont();
            ax->setLabelFont(scaled(lf));
            ax->setTickLabelFont(scaled(tf));
            const int pad = ax->labelPadding(), tpad = ax->tickLabelPadding();
            m_restore.push_back([ax, lf, tf, pad, tpad] {
                ax->setLabelFont(lf);
                ax->setTickLabelFont(tf);
                ax->setLabelPadding(pad);
                ax->setTickLabelPadding(tpad);
            });
        };
        std::function<void(QCPLayoutElement*)> walk = [&](QCPLayoutElement* e) {
            if (!e)
                return;
            if (auto* t = qobject_cast<QCPTextElement*>(e)) {
                const QFont f = t->font();
                t->setFont(scaled(f));
                m_restore.push_back([t, f] { t->setFont(f); });
            } else if (auto* lg = qobject_cast<QCPLegend*>(e)) {
                // QCPLegend::setFont also sets every item's font: the items' own fonts are read before it,
                // else they were scaled twice (a slide's legend at 2.7x instead of 1.65x the screen's).
                std::vector<std::pair<QCPAbstractLegendItem*, QFont>> items;
                for (int i = 0; i < lg->itemCount(); ++i)
                    if (QCPAbstractLegendItem* li = lg->item(i))
                        items.emplace_back(li, li->font());
                const QFont f = lg->font();
                lg->setFont(scaled(f));
                for (const auto& [li, fi] : items) {
                    li->setFont(scaled(fi));
                    m_restore.push_back([li = li, fi = fi] { li->setFont(fi); });
                }
                m_restore.push_back([lg, f] { lg->setFont(f); });
                return;
            } else if (auto* r = qobject_cast<QCPAxisRect*>(e)) {
                for (QCPAxis* ax : r->axes())
                    scaleAxis(ax);
                walk(r->insetLayout());
                return;
            } else if (auto* cs = qobject_cast<QCPColorScale*>(e)) {
                scaleAxis(cs->axis());
                const int w = cs->barWidth();
                cs->setBarWidth(static_cast<int>(std::lround(w * s)));
                m_restore.push_back([cs, w] { cs->setBarWidth(w); });
            } else if (!qobject_cast<QCPLayout*>(e)) {
                // Elements that draw their own text (the query view's token strip) read the factor here.
                e->setProperty(kFontScaleProperty, s);
                m_restore.push_back([e] { e->setProperty(kFontScaleProperty, QVariant()); });
            }
            if (auto* l = qobject_cast<QCPLayout*>(e))
                for (int i = 0; i < l->elementCount(); ++i)
                    walk(l->elementAt(i));
        };
        walk(plot->plotLayout());
        for (int i = 0; i < plot->itemCount(); ++i)
            if (auto* t = qobject_cast<QCPItemText*>(plot->item(i))) {
                const QFont f = t->font();
                t->setFont(scaled(f));
                m_restore.push_back([t, f] { t->setFont(f); });
            }
    }
    ~FontScaler()
    {
        for (auto it = m_restore.rbegin(); it != m_restore.rend(); ++it)
            (*it)();
    }

private:
    std::vector<std::function<void()>> m_restore;
};

}  // namespace

void PlotPane::renderTo(QPainter* painter, const QSize& size, double font_scale)
{
    {
        FontScaler scaler(m_plot, font_scale);
        m_fontScale = font_scale;
        runAdjust(size);
        if (QCPPainter* qcp = asQcpPainter(painter)) {
            m_plot->toPainter(qcp, size.width(), size.height());
        } else {
            // A plain QPainter: record through a QCPPainter into a picture (vector) and replay it.
            QPicture picture;
            QCPPainter p(&picture);
            p.setMode(QCPPainter::pmVectorized);
            m_plot->toPainter(&p, size.width(), size.height());
            p.end();
            painter->drawPicture(0, 0, picture);
        }
        m_fontScale = 1.0;
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

int PlotPane::measureAt(const QSize& size, double font_scale, const std::function<int()>& read)
{
    int value = 0;
    {
        FontScaler scaler(m_plot, font_scale);
        m_fontScale = font_scale;
        runAdjust(size);
        value = read();
        m_fontScale = 1.0;
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
    return value;
}

}  // namespace attnscope::widgets
