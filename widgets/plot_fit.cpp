// The plot fitted to its drawn size: square heatmap cells, titles that wrap and elide to their column, tick
// density that follows the axis length; declared in plot_util.h.
#include "plot_util.h"

#include <QFontMetricsF>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

namespace attnscope::widgets {

namespace {

// Every leaf element of a layout (axis rects, colour scales, text), depth first.
void forEachLeaf(QCPLayoutElement* e, const std::function<void(QCPLayoutElement*)>& f)
{
    if (!e)
        return;
    if (auto* l = qobject_cast<QCPLayout*>(e)) {
        for (int i = 0; i < l->elementCount(); ++i)
            forEachLeaf(l->elementAt(i), f);
        return;
    }
    f(e);
}

const char* const kCapSide = "attnscopeCellSide";   // the cell side a rect was capped for

void uncap(const std::vector<CellRect>& cells)
{
    for (const CellRect& c : cells)
        c.rect->setMaximumSize(QWIDGETSIZE_MAX, QWIDGETSIZE_MAX);
}

// The common side after capping is that of the free layout, where every column had its share of the width:
// a column whose rect has wide margins (the first of a row, with the row labels) held the others back. The
// largest whole side up to three times that at which every rect still gets its cap is taken.
void growCommonSide(const std::vector<CellRect>& live, const std::function<void()>& layout)
{
    const double start = live.front().rect->property(kCapSide).toDouble();
    if (start < 3)
        return;
    auto capAt = [&](double side) {
        for (const CellRect& c : live) {
            c.rect->setProperty(kCapSide, side);
            c.rect->setMaximumSize(std::max(1, static_cast<int>(std::floor(side * c.cols))), std::max(1, static_cast<int>(std::floor(side * c.rows))));
        }
        layout();
        return std::all_of(live.begin(), live.end(), [side](const CellRect& c) {
            return c.rect->width() >= static_cast<int>(std::floor(side * c.cols)) && c.rect->height() >= static_cast<int>(std::floor(side * c.rows));
        });
    };
    if (!capAt(start))
        return;   // the caps as the passes above left them
    double lo = start, hi = std::floor(3 * start) + 1;   // lo fits, hi is not known to
    while (hi - lo > 1) {
        const double mid = std::floor((lo + hi) / 2);
        (capAt(mid) ? lo : hi) = mid;
    }
    capAt(lo);
}

}  // namespace

// Two passes: the first caps every rect at the common cell side of the free layout, which changes the
// tick labels' room only slightly; the second starts from the free layout again so a side that has grown
// (fewer rows of tick labels) is taken. Capped rects leave their width to the stretchable columns of their
// layout; what is left then lies after the last column and row (QCPLayoutGrid fills from the top left), so
// outer margins of half of it on each side centre the content.
void fitSquareCells(QCustomPlot* plot, const std::vector<CellRect>& cells, const QSize& size,
                    const std::function<void(const QSize&)>& layout)
{
    // An axis rect's size hints use the margins of the previous layout (QCustomPlot updates margins while it
    // lays out), so each step lays out twice: the second with the margins of this arrangement.
    auto layoutAt = [&layout](const QSize& s) {
        layout(s);
        layout(s);
    };
    auto* top = plot->plotLayout();
    top->setAutoMargins(QCP::msNone);
    top->setMargins(QMargins());
    std::vector<CellRect> live;
    for (const CellRect& c : cells)
        if (c.rect && c.cols > 0 && c.rows > 0) {
            c.rect->setSizeConstraintRect(QCPLayoutElement::scrInnerRect);
            c.rect->setMinimumSize(8, 8);   // QCPAxisRect's own 50 x 50 would stretch small maps
            live.push_back(c);
        }
    uncap(live);
    if (live.empty())
        return;
    for (int pass = 0; pass < 2; ++pass) {
        uncap(live);
        layoutAt(size);
        double side = std::numeric_limits<double>::infinity();
        for (const CellRect& c : live)
            side = std::min({side, c.rect->width() / c.cols, c.rect->height() / c.rows});
        if (!(side > 0.1))
            return;   // no room for the maps at all: leave the free layout
        if (side >= 3)
            side = std::floor(side);   // whole pixels: every cell the same square on screen
        for (const CellRect& c : live) {
            c.rect->setProperty(kCapSide, side);
            c.rect->setMaximumSize(std::max(1, static_cast<int>(std::floor(side * c.cols))),
                                   std::max(1, static_cast<int>(std::floor(side * c.rows))));
        }
        layoutAt(size);
    }
    // The caps are on the inner rects, but a layout sizes rows and columns by the margins of the layout
    // before (a margin group can add to them once laid out), so a rect may come out a little smaller than
    // its cap: raise the cap by what is missing, then, if room is truly short, take the common smaller side.
    for (int pass = 0; pass < 4; ++pass) {
        double side = std::numeric_limits<double>::infinity(), target = side;
        for (const CellRect& c : live) {
            side = std::min({side, c.rect->width() / c.cols, c.rect->height() / c.rows});
            target = std::min({target, std::floor(c.rect->property(kCapSide).toDouble())});
        }
        bool short_ = false;
        for (const CellRect& c : live) {
            const int tw = static_cast<int>(std::floor(target * c.cols)), th = static_cast<int>(std::floor(target * c.rows));
            if (c.rect->width() < tw || c.rect->height() < th) {
                short_ = true;
                if (pass < 2)
                    c.rect->setMaximumSize(c.rect->maximumSize().width() + std::max(0, tw - c.rect->width()),
                                           c.rect->maximumSize().height() + std::max(0, th - c.rect->height()));
            }
        }
        if (!short_)
            break;
        if (pass >= 2) {   // still short: the room is not there, shrink to what every rect has
            if (side >= 3)
                side = std::floor(side);
            for (const CellRect& c : live) {
                c.rect->setProperty(kCapSide, side);
                c.rect->setMaximumSize(std::max(1, static_cast<int>(std::floor(side * c.cols))),
                                       std::max(1, static_cast<int>(std::floor(side * c.rows))));
            }
        }
        layoutAt(size);
    }
    growCommonSide(live, [&] { layoutAt(size); });
    QRect used;
    forEachLeaf(top, [&used](QCPLayoutElement* e) {
        if (e->visible())
            used |= e->outerRect();
    });
    const int extraX = std::max(0, size.width() - (used.right() + 1)), extraY = std::max(0, size.height() - (used.bottom() + 1));
    top->setMargins(QMargins(extraX / 2, extraY / 2, extraX - extraX / 2, extraY - extraY / 2));
    layoutAt(size);
}

QSizeF cellPixels(QCPAxisRect* rect)
{
    const double xr = rect->axis(QCPAxis::atBottom)->range().size(), yr = rect->axis(QCPAxis::atLeft)->range().size();
    return {xr > 0 ? rect->width() / xr : 0.0, yr > 0 ? rect->height() / yr : 0.0};
}

namespace {
const char* const kFullTitle = "attnscopeFullTitle";    // the title's whole text
const char* const kShownTitle = "attnscopeShownTitle";  // the text elideTitles set last
}  // namespace

QCPTextElement* addTitle(QCustomPlot* plot, const QString& text, const QFont& font)
{
    auto* title = new QCPTextElement(plot, text, font);
    title->setProperty(kFullTitle, text);
    title->setMinimumSize(1, 0);   // the column's width never depends on the text (0: the height's own hint)
    return title;
}

namespace {

// The titles of the plot's layout made by addTitle (never the plot messages, which must be read whole),
// each with its whole text: a text the view has set since the last elision becomes the whole text.
void forEachTitle(QCustomPlot* plot, const std::function<void(QCPTextElement*, const QString&)>& f)
{
    forEachLeaf(plot->plotLayout(), [&f](QCPLayoutElement* e) {
        auto* t = qobject_cast<QCPTextElement*>(e);
        if (!t || !t->property(kFullTitle).isValid())
            return;
        QString full = t->property(kFullTitle).toString();
        if (t->text() != full && t->text() != t->property(kShownTitle).toString()) {
            full = t->text();
            t->setProperty(kFullTitle, full);
        }
        f(t, full);
    });
}

}  // namespace

void restoreTitles(QCustomPlot* plot)
{
    forEachTitle(plot, [](QCPTextElement* t, const QString& full) {
        t->setText(full);
        t->setProperty(kShownTitle, full);
        t->setMinimumSize(1, 0);
    });
}

bool wrapTitles(QCustomPlot* plot)
{
    bool wrapped = false;
    forEachTitle(plot, [&wrapped](QCPTextElement* t, const QString& full) {
        const QFontMetricsF fm(t->font());
        const double room = t->rect().width() - 2;
        if (full.contains(QLatin1Char('\n')) || room <= 0 || fm.horizontalAdvance(full) <= room)
            return;
        // The break at a space that makes the wider line narrowest.
        qsizetype best = -1;
        double bestWidth = std::numeric_limits<double>::infinity();
        for (qsizetype i = full.indexOf(QLatin1Char(' ')); i > 0; i = full.indexOf(QLatin1Char(' '), i + 1)) {
            const double w = std::max(fm.horizontalAdvance(full.left(i)), fm.horizontalAdvance(full.mid(i + 1)));
            if (w < bestWidth) {
                bestWidth = w;
                best = i;
            }
        }
        if (best < 0)
            return;
        const QString shown = full.left(best) + QLatin1Char('\n') + full.mid(best + 1);
        t->setText(shown);
        t->setProperty(kShownTitle, shown);
        wrapped = true;
    });
    return wrapped;
}

void elideTitles(QCustomPlot* plot)
{
    forEachTitle(plot, [](QCPTextElement* t, const QString&) {
        const int room = t->rect().width() - 2;
        if (room <= 0)
            return;
        const QFontMetricsF fm(t->font());
        QStringList lines = t->text().split(QLatin1Char('\n'));
        for (QString& line : lines)
            line = fm.elidedText(line, Qt::ElideRight, room);
        const QString shown = lines.join(QLatin1Char('\n'));
        t->setText(shown);
        t->setProperty(kShownTitle, shown);
    });
}

QString elidedTitleText(QCPTextElement* element)
{
    if (!element || !element->property(kFullTitle).isValid())
        return {};
    // Line breaks (wrapTitles' or the view's own) do not shorten a title.
    const QString full = element->property(kFullTitle).toString();
    return QString(element->text()).replace(QLatin1Char('\n'), QLatin1Char(' ')) == QString(full).replace(QLatin1Char('\n'), QLatin1Char(' ')) ? QString()
                                                                                                                                       : full;
}

namespace {

const char* const kTickerId = "attnscopeTicker";       // the ticker whose design count is remembered
const char* const kDesignTicks = "attnscopeDesignTicks";

// The room one tick label needs along the axis: its width and a gap of two average characters for
// horizontal axes, its height and a gap of most of a line for vertical ones. The width is the widest of the
// last layout's labels and of the range's ends (3 digits), so it barely changes with the count it sets.
double labelRoom(QCPAxis* ax)
{
    const QFontMetricsF fm(ax->tickLabelFont());
    if (ax->orientation() == Qt::Vertical)
        return fm.height() * 1.8;
    double widest = fm.horizontalAdvance(QStringLiteral("000"));
    for (const double end : {ax->range().lower, ax->range().upper})
        widest = std::max(widest, fm.horizontalAdvance(QString::number(end, 'g', 3)));
    for (const QString& label : ax->tickVectorLabels())
        widest = std::max(widest, fm.horizontalAdvance(label));
    return widest + 2 * fm.averageCharWidth();
}

void adaptAxis(QCPAxis* ax)
{
    if (!ax || !ax->visible() || !ax->tickLabels() || !ax->axisRect())
        return;
    const QSharedPointer<QCPAxisTicker> ticker = ax->ticker();
    if (!ticker || ticker.dynamicCast<QCPAxisTickerText>())
        return;   // fixed labels
    // The count the view set up, remembered per ticker (a view that installs a new ticker sets it anew).
    const auto id = reinterpret_cast<quintptr>(ticker.data());
    if (ax->property(kTickerId).value<quintptr>() != id) {
        ax->setProperty(kTickerId, QVariant::fromValue(id));
        ax->setProperty(kDesignTicks, ticker->tickCount());
    }
    const int design = std::max(2, ax->property(kDesignTicks).toInt());
    const double length = ax->orientation() == Qt::Horizontal ? ax->axisRect()->width() : ax->axisRect()->height();
    // QCPAxisTicker rounds the step range / count to 1, 2, 2.5 or 5 times a power of ten, up to a third
    // below it, so the count asks for a third more room than one label's.
    const int fit = static_cast<int>(std::floor(0.67 * length / labelRoom(ax)));
    ticker->setTickCount(std::clamp(fit, 2, design));
}

}  // namespace

void adaptTickDensity(QCustomPlot* plot)
{
    forEachLeaf(plot->plotLayout(), [](QCPLayoutElement* e) {
        if (auto* rect = qobject_cast<QCPAxisRect*>(e)) {
            for (QCPAxis* ax : rect->axes())
                adaptAxis(ax);
        } else if (auto* scale = qobject_cast<QCPColorScale*>(e)) {
            adaptAxis(scale->axis());
        }
    });
}

}  // namespace attnscope::widgets
