// Building blocks of the QCustomPlot views; see plot_util.h.
#include "plot_util.h"

#include <QFontMetricsF>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "plot_style.h"

namespace attnscope::widgets {

namespace {

class IntegerTicker : public QCPAxisTicker {
protected:
    double getTickStep(const QCPRange& range) override
    {
        const double s = QCPAxisTicker::getTickStep(range);
        if (s < 1)
            return 1;
        return std::abs(s - 2.5) < 1e-9 ? 2.0 : std::round(s);
    }
};

}  // namespace

void styleAxisRect(QCPAxisRect* rect)
{
    for (QCPAxis* ax : rect->axes()) {
        ax->setLabelFont(plotFont(kLabelPt));
        ax->setTickLabelFont(plotFont(kTickPt));
        ax->setBasePen(QPen(Qt::black, 1));
        ax->setTickPen(QPen(Qt::black, 1));
        ax->setSubTickPen(QPen(Qt::black, 1));
        ax->setTickLengthIn(0);
        ax->setTickLengthOut(4);
        ax->setSubTickLengthIn(0);
        ax->setSubTickLengthOut(2);
        ax->setLabelPadding(4);
        ax->grid()->setPen(QPen(QColor(0, 0, 0, 25), 1, Qt::SolidLine));
        ax->grid()->setSubGridVisible(false);
        ax->grid()->setZeroLinePen(Qt::NoPen);
    }
}

QCPAxisRect* addAxisRect(QCustomPlot* plot, QCPLayoutGrid* layout, int row, int col)
{
    auto* rect = new QCPAxisRect(plot, true);
    layout->addElement(row, col, rect);
    styleAxisRect(rect);
    return rect;
}

void clearPlot(QCustomPlot* plot)
{
    plot->clearItems();
    plot->clearPlottables();
    plot->plotLayout()->clear();   // deletes axis rects (and the legends in their inset layouts)
    plot->legend = nullptr;
    plot->setAutoAddPlottableToLegend(false);
}

void showPlotMessage(QCustomPlot* plot, const QString& text)
{
    clearPlot(plot);
    auto* t = new QCPTextElement(plot, text, plotFont(kTitlePt));
    t->setTextColor(QColor(90, 90, 90));
    plot->plotLayout()->addElement(0, 0, t);
    plot->replot();
}

namespace {
const QPen kLegendBorder(QColor(160, 160, 160), 0.8);
}  // namespace

QCPLegend* addLegend(QCPAxisRect* rect, Qt::Alignment align)
{
    auto* legend = new QCPLegend;
    rect->insetLayout()->addElement(legend, align);
    legend->setLayer(QStringLiteral("legend"));
    legend->setFont(plotFont(kTickPt));
    legend->setBrush(QColor(255, 255, 255, 225));
    legend->setBorderPen(kLegendBorder);
    legend->setIconSize(22, 10);
    legend->setRowSpacing(0);
    legend->setMargins(QMargins(6, 3, 6, 3));
    return legend;
}

bool isNarrow(int width, double fontScale)
{
    return width < std::lround(560 * std::max(0.5, fontScale));
}

int narrowExportHeight(int width, double fontScale, int fallback, double aspect)
{
    if (!isNarrow(width, fontScale))
        return fallback;
    return std::max(fallback, std::min(static_cast<int>(std::lround(width * aspect)), kMaxExportHeight));
}

void placeLegend(QCustomPlot* plot, QCPAxisRect* rect, QCPLegend* legend, Qt::Alignment inside, int row, bool below)
{
    auto* layout = plot->plotLayout();
    if (below == (legend->layout() == layout))
        return;
    if (below) {
        rect->insetLayout()->take(legend);
        layout->addElement(row, 0, legend);
        layout->setRowStretchFactor(row, 0.01);
        legend->setBorderPen(Qt::NoPen);
    } else {
        layout->take(legend);
        layout->simplify();
        rect->insetLayout()->addElement(legend, inside);
        legend->setBorderPen(kLegendBorder);
    }
}

void moveElements(QCPLayoutGrid* grid, const std::vector<GridCell>& cells)
{
    for (const GridCell& c : cells)
        grid->take(c.element);
    grid->simplify();
    for (const GridCell& c : cells)
        grid->addElement(c.row, c.col, c.element);
}

void setIntegerTicks(QCPAxis* axis)
{
    auto t = QSharedPointer<IntegerTicker>::create();
    t->setTickCount(6);
    axis->setTicker(t);
}

void setLogScale(QCPAxis* axis, double base, int subTicks)
{
    auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
    ticker->setLogBase(base);
    ticker->setSubTickCount(subTicks);
    axis->setScaleType(QCPAxis::stLogarithmic);
    axis->setTicker(ticker);
}

namespace {

// Powers of the log base written "10⁻¹⁰" with Unicode superscripts, in the tick labels' own font:
// QCustomPlot's beautiful powers ("eb") draw the exponent at 3/4 of the label's integer point size, 6 pt
// under 8 pt labels, below what print asks for (docs/cli.md "figure": tick labels are the smallest text).
class PowerTicker : public QCPAxisTickerLog {
protected:
    QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override
    {
        const double e = std::round(std::log(tick) / std::log(logBase()));
        // A tick between powers (a log axis spanning less than a decade): three significant digits, so
        // that neighbouring ticks never read alike ("3.16", "2.51", not "3", "3").
        if (!(tick > 0) || std::abs(tick / std::pow(logBase(), e) - 1) > 1e-9)
            return locale.toString(tick, 'g', std::max(precision, 3));
        static const char16_t digits[] = u"⁰¹²³⁴⁵⁶⁷⁸⁹";
        QString exponent;
        for (const QChar c : QString::number(static_cast<long long>(e)))
            exponent += c == QLatin1Char('-') ? QChar(u'⁻') : QChar(digits[c.digitValue()]);
        return QString::number(logBase(), 'g', 6) + exponent;
    }
};

}  // namespace

void setPowerLabels(QCPAxis* axis)
{
    if (const auto log = axis->ticker().dynamicCast<QCPAxisTickerLog>()) {
        auto power = QSharedPointer<PowerTicker>::create();
        power->setLogBase(log->logBase());
        power->setSubTickCount(log->subTickCount());
        power->setTickCount(log->tickCount());
        axis->setTicker(power);
        axis->setNumberFormat("g");
    } else {
        axis->setNumberFormat("eb");
    }
    axis->setNumberPrecision(0);
}

void setHeatmapAxes(QCPAxisRect* rect, double cols, double rows, const QString& xLabel, const QString& yLabel)
{
    auto* x = rect->axis(QCPAxis::atBottom);
    auto* y = rect->axis(QCPAxis::atLeft);
    x->setLabel(xLabel);
    y->setLabel(yLabel);
    for (QCPAxis* ax : {x, y}) {
        ax->grid()->setVisible(false);
        setIntegerTicks(ax);
    }
    y->setRangeReversed(true);
    x->setRange(-0.5, cols - 0.5);
    y->setRange(-0.5, rows - 0.5);
}

namespace {

// A colour map that vector painters (PDF, SVG) receive as one image of exactly its cells: QCPColorMap draws
// vector output through a pixmap of the whole axis rect at 3x, which the PDF writer stores as a JPEG
// unless told otherwise (ringing at cell edges) and which is never the data's own resolution. Here the
// cells are coloured by the map's own gradient and range (the colours of the screen), the image is
// placed where QCPColorMap places its own (cell centres at the data range's ends, half a cell beyond)
// and drawn without smoothing; LosslessImageRendering makes Qt's PDF writer compress it with Flate.
class CellImageMap : public QCPColorMap {
public:
    using QCPColorMap::QCPColorMap;

protected:
    void draw(QCPPainter* painter) override
    {
        QCPColorMapData* d = data();
        if (!painter->modes().testFlag(QCPPainter::pmVectorized) || interpolate() || !keyAxis() || !valueAxis() ||
            keyAxis()->orientation() != Qt::Horizontal || d->isEmpty()) {
            QCPColorMap::draw(painter);
            return;
        }
        const int kn = d->keySize(), vn = d->valueSize();
        QImage image(kn, vn, QImage::Format_RGB32);
        QCPColorGradient g = gradient();
        std::vector<double> line(static_cast<std::size_t>(kn));
        for (int v = 0; v < vn; ++v) {
            for (int k = 0; k < kn; ++k)
                line[static_cast<std::size_t>(k)] = d->cell(k, v);
            // Value index 0 at the bottom of the image, as in QCPColorMap's own.
            g.colorize(line.data(), dataRange(), reinterpret_cast<QRgb*>(image.scanLine(vn - 1 - v)), kn, 1,
                       dataScaleType() == QCPAxis::stLogarithmic);
        }
        const QRectF tight = QRectF(coordsToPixels(d->keyRange().lower, d->valueRange().lower),
                                    coordsToPixels(d->keyRange().upper, d->valueRange().upper))
                                 .normalized();
        const double hw = kn > 1 ? 0.5 * tight.width() / (kn - 1) : 0, hh = vn > 1 ? 0.5 * tight.height() / (vn - 1) : 0;
        painter->save();
        painter->setRenderHint(QPainter::SmoothPixmapTransform, false);
        painter->setRenderHint(QPainter::LosslessImageRendering, true);
        if (tightBoundary())
            painter->setClipRect(tight, Qt::IntersectClip);
        painter->drawImage(tight.adjusted(-hw, -hh, hw, hh), image.mirrored(keyAxis()->rangeReversed(), valueAxis()->rangeReversed()));
        painter->restore();
    }
};

}  // namespace

QCPColorMap* addHeatmapOn(QCPAxis* keyAxis, QCPAxis* valueAxis)
{
    auto* map = new CellImageMap(keyAxis, valueAxis);
    map->setInterpolate(false);
    return map;
}

QCPColorMap* addHeatmap(QCPAxisRect* rect, int cols, int rows)
{
    QCPColorMap* map = addHeatmapOn(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    map->data()->setSize(cols, rows);
    map->data()->setRange(QCPRange(0, cols - 1), QCPRange(0, rows - 1));
    return map;
}

QCPColorScale* addColorScale(QCustomPlot* plot, const QString& label, int barWidth, QCPMarginGroup* group, Qt::Orientation orientation)
{
    auto* scale = new QCPColorScale(plot);
    const bool horizontal = orientation == Qt::Horizontal;
    // Before the fonts: a new type moves the colour axis to another side of the bar, and only its range,
    // label and ticker come along.
    scale->setType(horizontal ? QCPAxis::atBottom : QCPAxis::atRight);
    scale->setBarWidth(barWidth);
    scale->setMarginGroup(horizontal ? QCP::msLeft | QCP::msRight : QCP::msTop | QCP::msBottom, group);
    scale->axis()->setTickLabelFont(plotFont(kTickPt));
    scale->axis()->setLabelFont(plotFont(kLabelPt));
    scale->axis()->setLabel(label);
    return scale;
}

namespace {

QCPItemStraightLine* addStraightLine(QCustomPlot* plot, QCPAxisRect* rect, QPointF a, QPointF b, const QPen& pen)
{
    auto* line = new QCPItemStraightLine(plot);
    line->setClipAxisRect(rect);
    for (auto* p : {line->point1, line->point2})
        p->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    line->point1->setCoords(a);
    line->point2->setCoords(b);
    line->setPen(pen);
    return line;
}

}  // namespace

// Through (x, 1) and (x, 2), or (1, y) and (2, y): valid points on logarithmic axes too.
QCPItemStraightLine* addVLine(QCustomPlot* plot, QCPAxisRect* rect, double x, const QPen& pen)
{
    return addStraightLine(plot, rect, QPointF(x, 1), QPointF(x, 2), pen);
}

QCPItemStraightLine* addHLine(QCustomPlot* plot, QCPAxisRect* rect, double y, const QPen& pen)
{
    return addStraightLine(plot, rect, QPointF(1, y), QPointF(2, y), pen);
}

namespace {

QCPItemText* addRectText(QCustomPlot* plot, QCPAxisRect* rect, double x, double y)
{
    auto* text = new QCPItemText(plot);
    text->setClipAxisRect(rect);
    text->position->setType(QCPItemPosition::ptAxisRectRatio);
    text->position->setAxisRect(rect);
    text->position->setCoords(x, y);
    text->setColor(QColor(170, 20, 20));
    return text;
}

}  // namespace

QCPItemText* addNote(QCustomPlot* plot, QCPAxisRect* rect, const QString& text, double x, double y, Qt::Alignment anchor)
{
    auto* note = addRectText(plot, rect, x, y);
    note->setPositionAlignment(anchor);
    note->setTextAlignment(Qt::AlignLeft);
    note->setText(text);
    note->setFont(plotFont(kTickPt));
    return note;
}

QCPItemText* addPanelMessage(QCustomPlot* plot, QCPAxisRect* rect, const QString& text)
{
    auto* message = addRectText(plot, rect, 0.5, 0.5);
    message->setText(text);
    message->setFont(plotFont(kLabelPt));
    return message;
}

// ------------------------------------------------------------------------------ square cells, titles, ticks

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
    const QString full = element->property(kFullTitle).toString();
    return QString(element->text()).replace(QLatin1Char('\n'), QLatin1Char(' ')) == full ? QString() : full;
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
