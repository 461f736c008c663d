// Building blocks of the QCustomPlot views; see plot_util.h.
#include "plot_util.h"

#include <cmath>
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

QCPLegend* addLegend(QCPAxisRect* rect, Qt::Alignment align)
{
    auto* legend = new QCPLegend;
    rect->insetLayout()->addElement(legend, align);
    legend->setLayer(QStringLiteral("legend"));
    legend->setFont(plotFont(kTickPt));
    legend->setBrush(QColor(255, 255, 255, 225));
    legend->setBorderPen(QPen(QColor(160, 160, 160), 0.8));
    legend->setIconSize(22, 10);
    legend->setRowSpacing(0);
    legend->setMargins(QMargins(6, 3, 6, 3));
    return legend;
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

void setPowerLabels(QCPAxis* axis)
{
    axis->setNumberFormat("eb");
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

QCPColorMap* addHeatmap(QCPAxisRect* rect, int cols, int rows)
{
    auto* map = new QCPColorMap(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    map->setInterpolate(false);
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

}  // namespace attnscope::widgets
