// Building blocks of the QCustomPlot views; see plot_util.h.
#include "plot_util.h"

#include <algorithm>
#include <cmath>
#include <QFontMetricsF>
#include <qcustomplot.h>

#include "plot_font.h"

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

void padLegendItems(QCustomPlot* plot)
{
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* legend = qobject_cast<QCPLegend*>(e))
            for (int i = 0; i < legend->itemCount(); ++i)
                if (QCPAbstractLegendItem* item = legend->item(i)) {
                    const int pad = std::max(2, (QFontMetrics(item->font()).descent() + 1) / 2);
                    if (item->margins().bottom() != pad)
                        item->setMargins(QMargins(0, 0, 0, pad));
                }
}

bool isNarrow(int width, double fontScale)
{
    return width < std::lround(560 * std::max(0.5, fontScale));
}

bool rowsBeatColumns(const QSize& size, int mechanisms, bool image, double fontScale)
{
    const double line = QFontMetricsF(plotFont(kTickPt)).height() * std::max(0.5, fontScale);
    const double axes = 4.5 * line, below = 5.5 * line, scale = 4 * line, title = 3 * line;
    const double n = std::max(1, mechanisms), perRow = image ? 2 : 1, W = size.width(), H = size.height();
    const double rows = std::min((W - perRow * axes - scale) / perRow, (H - title) / n - below);
    const double columns = std::min((W - n * (axes + scale)) / n, (H - title) / (image ? 2 : 1) - below);
    return rows >= columns;
}

int narrowExportHeight(int width, double fontScale, int fallback, double aspect)
{
    if (!isNarrow(width, fontScale))
        return fallback;
    return std::max(fallback, std::min(static_cast<int>(std::lround(width * aspect)), kMaxExportHeight));
}

int heightForLargestPanels(int from, int cap, const std::function<std::pair<double, bool>(int)>& measure)
{
    struct Tried {
        int height;
        double side;
        bool enough;
    };
    std::vector<Tried> tried;
    double best = 0;
    for (int h = from; h <= std::max(from, cap); h += std::max(8, h / 16)) {
        const auto [side, enough] = measure(h);
        tried.push_back({h, side, enough});
        best = std::max(best, side);
    }
    for (const Tried& t : tried)
        if (t.side >= 0.95 * best && t.enough)
            return t.height;
    return tried.back().height;
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

void placeSidePlot(QCPLayoutGrid* layout, QCPLayoutElement* title, QCPAxisRect* side, QCPAxisRect* main, int column,
                   bool stacked, StackedMargins stackedMargins, QCPMarginGroup* group)
{
    const QCP::MarginSides stackedSides =
        stackedMargins == StackedMargins::left ? QCP::MarginSides(QCP::msLeft) : (QCP::msLeft | QCP::msRight);
    moveElements(layout, {{title, stacked ? 2 : 0, stacked ? 0 : column}, {side, stacked ? 3 : 1, stacked ? 0 : column}});
    const QCP::MarginSides all = QCP::msTop | QCP::msBottom | QCP::msLeft | QCP::msRight;
    main->setMarginGroup(all, nullptr);
    side->setMarginGroup(all, nullptr);
    const QCP::MarginSides sides = stacked ? stackedSides : (QCP::msTop | QCP::msBottom);
    main->setMarginGroup(sides, group);
    side->setMarginGroup(sides, group);
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
        // Premultiplied ARGB, the format QCPColorGradient::colorize writes: a gradient with transparent
        // stops (an attention overlay over the input image) or transparent NaN cells keeps its alpha; in
        // RGB32 those cells came out black and hid whatever the map was drawn over.
        QImage image(kn, vn, QImage::Format_ARGB32_Premultiplied);
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

// y = f(x) sampled densely (straight on any combination of linear and log axes).
QCPGraph* addFunction(QCustomPlot* plot, QCPAxis* x, QCPAxis* y, double x0, double x1, bool logx,
                      const std::function<double(double)>& f, const QPen& pen)
{
    QVector<double> xs, ys;
    const int n = 200;
    for (int i = 0; i <= n; ++i) {
        const double t = static_cast<double>(i) / n;
        const double v = logx ? x0 * std::pow(x1 / x0, t) : x0 + (x1 - x0) * t;
        xs << v;
        ys << f(v);
    }
    auto* g = plot->addGraph(x, y);
    g->setData(xs, ys, true);
    g->setPen(pen);
    g->setSelectable(QCP::stNone);
    return g;
}

// Inserts line breaks so a long error message fits a panel.
QString wrapToPixels(const QStringList& sentences, const QFont& font, double width, bool sentencePerLine)
{
    const QFontMetricsF fm(font);
    QStringList lines;
    QString line;
    for (const QString& sentence : sentences) {
        for (const QString& word : sentence.split(QLatin1Char(' '), Qt::SkipEmptyParts)) {
            const QString longer = line.isEmpty() ? word : line + QLatin1Char(' ') + word;
            if (!line.isEmpty() && fm.horizontalAdvance(longer) > width) {
                lines << line;
                line = word;
            } else {
                line = longer;
            }
        }
        if (sentencePerLine && !line.isEmpty()) {
            lines << line;
            line.clear();
        }
    }
    if (!line.isEmpty())
        lines << line;
    return lines.join(QLatin1Char('\n'));
}

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

}  // namespace attnscope::widgets
