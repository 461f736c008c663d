#pragma once
// Building blocks of the QCustomPlot views (private to widgets/): styled axis rects, heatmap axes and
// cells, labelled colour scales, logarithmic axes, reference lines, notes and legends, in the look of
// plot_style.h. qcustomplot.h stays out of this header (it is slow to compile).
#include <QPen>
#include <QString>
#include <Qt>

class QCustomPlot;
class QCPAxis;
class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QCPItemStraightLine;
class QCPItemText;
class QCPLayoutGrid;
class QCPLegend;
class QCPMarginGroup;

namespace attnscope::widgets {

// Publication style of an axis rect: ticks outside, no grid clutter, fonts, thin black axes.
void styleAxisRect(QCPAxisRect* rect);
// A styled axis rect (with axes on all four sides, the default ones shown) put at (row, col) of `layout`.
QCPAxisRect* addAxisRect(QCustomPlot* plot, QCPLayoutGrid* layout, int row, int col);
// Removes every element, item and plottable (the plot's default legend pointer is reset too).
void clearPlot(QCustomPlot* plot);
// Replaces the whole plot by a centred message (empty state, errors).
void showPlotMessage(QCustomPlot* plot, const QString& text);
// A framed legend inside `rect` at `align`; plottables are added to it explicitly.
QCPLegend* addLegend(QCPAxisRect* rect, Qt::Alignment align);

// Ticks at integers only (token, grid and block indices), nice steps otherwise.
void setIntegerTicks(QCPAxis* axis);
// A logarithmic axis: log ticker of `base` with `subTicks` sub ticks.
void setLogScale(QCPAxis* axis, double base = 10, int subTicks = 8);
// Tick labels written as powers of ten.
void setPowerLabels(QCPAxis* axis);

// Axes of a heatmap of cols x rows cells: cell centres at integers, row 0 at the top (as a matrix is
// printed), integer ticks, no grid.
void setHeatmapAxes(QCPAxisRect* rect, double cols, double rows, const QString& xLabel, const QString& yLabel);
// A colour map of cols x rows cells on the rect's bottom and left axes, cell (0, 0) centred at (0, 0).
QCPColorMap* addHeatmap(QCPAxisRect* rect, int cols, int rows);
// A colour scale in the plot fonts with `label` on its axis, lined up with the panels of `group`: a
// vertical bar (axis on the right) beside them, or a horizontal one (axis at the bottom) below them.
QCPColorScale* addColorScale(QCustomPlot* plot, const QString& label, int barWidth, QCPMarginGroup* group,
                             Qt::Orientation orientation = Qt::Vertical);

// Lines across `rect` at x (vertical) or y (horizontal) in its axes' coordinates.
QCPItemStraightLine* addVLine(QCustomPlot* plot, QCPAxisRect* rect, double x, const QPen& pen);
QCPItemStraightLine* addHLine(QCustomPlot* plot, QCPAxisRect* rect, double y, const QPen& pen);
// Red lines of text for failures and missing values inside `rect`: its `anchor` corner at (x, y) in
// fractions of the rect (0, 0: top left), lines aligned left.
QCPItemText* addNote(QCustomPlot* plot, QCPAxisRect* rect, const QString& text, double x, double y, Qt::Alignment anchor);
// A panel's failure, centred in `rect`.
QCPItemText* addPanelMessage(QCustomPlot* plot, QCPAxisRect* rect, const QString& text);

}  // namespace attnscope::widgets
