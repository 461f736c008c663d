#pragma once
// Building blocks of the QCustomPlot views (private to widgets/): styled axis rects, heatmap axes and
// cells, labelled colour scales, logarithmic axes, reference lines, notes and legends, in the fonts of
// plot_font.h (plot_util.cpp); square heatmap cells, titles that elide to their column and tick density that
// follows the axis length (docs/gui.md "Screen sizes"; plot_fit.cpp). qcustomplot.h stays out of this header
// (it is slow to compile).
#include <QPen>
#include <QSize>
#include <QString>
#include <Qt>
#include <functional>
#include <utility>
#include <vector>

class QCustomPlot;
class QCPAxis;
class QCPAxisRect;
class QCPLayoutElement;
class QCPColorMap;
class QCPColorScale;
class QCPGraph;
class QCPItemStraightLine;
class QCPItemText;
class QCPLayoutGrid;
class QCPLegend;
class QCPMarginGroup;
class QCPTextElement;
class QFont;

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
// Room under every legend item's text for the glyphs that reach the font's descent: an item is clipped to its
// own rect, which QCustomPlot makes exactly one line high, and underscores ("char_lm_licenses.h5") sit on its
// last pixel row and vanished. PlotPane calls it before every layout.
void padLegendItems(QCustomPlot* plot);

// Narrow printed figures (a journal's single column, docs/cli.md): below 560 logical pixels at fonts x
// fontScale, views put their plots one above the other and their legends under the plot, and ask for the
// height that needs (ResultView::exportHeightFor), at most kMaxExportHeight.
constexpr int kMaxExportHeight = 864;   // 9 in: a printed page's column
bool isNarrow(int width, double fontScale);
// `fallback` when `width` is not narrow, else aspect x width (at least fallback, at most kMaxExportHeight).
int narrowExportHeight(int width, double fontScale, int fallback, double aspect);
// Whether, in a narrow view, a row per mechanism (each row `mechanisms` panels wide: the map, and the input image
// when `image`) gives larger maps at `size` than a column per mechanism (maps above the images), estimated from the
// tick font: a panel's axes take about 4.5 lines beside it and 5.5 below (labels, ticks, its title), a colour scale
// 4 lines, the view's title 3. Estimated, not laid out: a trial layout of one arrangement leaves wrapped titles and
// tick densities that the other would inherit. Calibrated on the digits ViT's three mechanisms (maps and images):
// 400 x 900 rows, 500 x 400 and 420 x 300 columns.
bool rowsBeatColumns(const QSize& size, int mechanisms, bool image, double fontScale);
// The height of a narrow figure whose panels take the width (a row of maps, panels one above the other):
// the lowest height from `from` up to `cap` (in steps of a sixteenth) at which the panel side that
// `measure(h)` returns is within 5 % of the largest it reaches and its condition (room left for the rest) holds;
// the highest height tried when the condition never holds.
int heightForLargestPanels(int from, int cap, const std::function<std::pair<double, bool>(int)>& measure);
// The legend in `rect`'s inset at `inside`, or (below) under the plot in row `row`, column 0 of the plot's
// layout, without its border. Does nothing when it is there already.
void placeLegend(QCustomPlot* plot, QCPAxisRect* rect, QCPLegend* legend, Qt::Alignment inside, int row, bool below);
// Rearranges elements of `grid` without rebuilding them: each is taken out, then added at its new cell.
struct GridCell {
    QCPLayoutElement* element;
    int row, col;
};
void moveElements(QCPLayoutGrid* grid, const std::vector<GridCell>& cells);
// A side plot under its title (rows 0 and 1 of `column`) moved below the main plot (rows 2 and 3 of
// column 0) when `stacked`, or back beside it. The two plots then share `group`'s margins on the left (and
// right, with StackedMargins::leftAndRight) when stacked, so their axes align; on top and bottom when side
// by side. Row and column stretch are the caller's.
enum class StackedMargins { left, leftAndRight };
void placeSidePlot(QCPLayoutGrid* layout, QCPLayoutElement* title, QCPAxisRect* side, QCPAxisRect* main, int column,
                   bool stacked, StackedMargins stackedMargins, QCPMarginGroup* group);

// Ticks at integers only (token, grid and block indices), nice steps otherwise.
void setIntegerTicks(QCPAxis* axis);
// A logarithmic axis: log ticker of `base` with `subTicks` sub ticks.
void setLogScale(QCPAxis* axis, double base = 10, int subTicks = 8);
// Tick labels written as powers of ten: on a log axis "10⁻¹⁰" with Unicode superscripts in the tick
// labels' own font (never smaller text in print), elsewhere QCustomPlot's beautiful powers.
void setPowerLabels(QCPAxis* axis);

// Axes of a heatmap of cols x rows cells: cell centres at integers, row 0 at the top (as a matrix is
// printed), integer ticks, no grid.
void setHeatmapAxes(QCPAxisRect* rect, double cols, double rows, const QString& xLabel, const QString& yLabel);
// A colour map of cols x rows cells on the rect's bottom and left axes, cell (0, 0) centred at (0, 0).
// Like every map of addHeatmapOn, it exports to PDF and SVG as one image of its cells (below).
QCPColorMap* addHeatmap(QCPAxisRect* rect, int cols, int rows);
// An empty colour map on these axes (no interpolation) that vector exports (PDF, SVG) embed as one image of
// exactly its data's cells, drawn without smoothing: QCPColorMap itself embeds a screenshot of the axis rect
// at 3x, which smears cell edges unless the painter also asks for lossless images.
QCPColorMap* addHeatmapOn(QCPAxis* keyAxis, QCPAxis* valueAxis);
// A colour scale in the plot fonts with `label` on its axis, lined up with the panels of `group`: a
// vertical bar (axis on the right) beside them, or a horizontal one (axis at the bottom) below them.
QCPColorScale* addColorScale(QCustomPlot* plot, const QString& label, int barWidth, QCPMarginGroup* group,
                             Qt::Orientation orientation = Qt::Vertical);

// A heatmap's axis rect and its size in cells (columns across, rows down).
struct CellRect {
    QCPAxisRect* rect = nullptr;
    double cols = 1, rows = 1;
};
// Square cells at any plot size: lays the plot out at `size` (through `layoutAt`, PlotPane::layoutAt) so that
// every rect in `cells` is cols x rows cells of one common side in pixels, the largest that fits all of them.
// A rect that gives up width leaves it to the other columns of its layout (a histogram or a bar chart
// beside a matrix grows); what no column takes, and any height left over, becomes outer margins that centre
// the content. Call it from a view's adjustLayout.
void fitSquareCells(QCustomPlot* plot, const std::vector<CellRect>& cells, const QSize& size,
                    const std::function<void(const QSize&)>& layoutAt);
// The side of one cell in pixels (x and y) of a heatmap rect as laid out: equal when the cells are square.
QSizeF cellPixels(QCPAxisRect* rect);

// Titles that break into two lines, then elide ("softmax: entropy per q…"), when their column is narrower
// than the text, instead of
// widening the column or running into their neighbours: every one-line text element made by addTitle
// (PlotPane calls restoreTitles before the layout and elideTitles after it; the plot's tool tip shows a
// shortened title's whole text). A title the view sets with setText is taken as the new whole text; plot
// messages (showPlotMessage) are never shortened.
QCPTextElement* addTitle(QCustomPlot* plot, const QString& text, const QFont& font);
void restoreTitles(QCustomPlot* plot);   // whole texts back, widths free of the texts
// Titles wider than their column break at the space that suits best into two lines (a narrow figure keeps
// its whole titles where it can); true when one did, which asks for a new layout (the title is taller).
bool wrapTitles(QCustomPlot* plot);
void elideTitles(QCustomPlot* plot);     // each line shortened to the width its element was given
// The whole text of an elided title element; empty for any other element or a title shown whole.
QString elidedTitleText(QCPTextElement* element);

// Tick density that follows the axis length: every axis and colour-scale axis of the plot gets at most as
// many ticks as its labels (in their current font) have room for along the axis as laid out, and never
// more than its ticker was set up with. PlotPane calls it before every replot and export.
void adaptTickDensity(QCustomPlot* plot);

// Lines across `rect` at x (vertical) or y (horizontal) in its axes' coordinates.
QCPItemStraightLine* addVLine(QCustomPlot* plot, QCPAxisRect* rect, double x, const QPen& pen);
QCPItemStraightLine* addHLine(QCustomPlot* plot, QCPAxisRect* rect, double y, const QPen& pen);
// Red lines of text for failures and missing values inside `rect`: its `anchor` corner at (x, y) in
// fractions of the rect (0, 0: top left), lines aligned left.
QCPItemText* addNote(QCustomPlot* plot, QCPAxisRect* rect, const QString& text, double x, double y, Qt::Alignment anchor);
// A panel's failure, centred in `rect`.
QCPItemText* addPanelMessage(QCustomPlot* plot, QCPAxisRect* rect, const QString& text);

// y = f(x) sampled densely over [x0, x1] (straight on any combination of linear and log axes): a reference line.
QCPGraph* addFunction(QCustomPlot* plot, QCPAxis* x, QCPAxis* y, double x0, double x1, bool logx,
                      const std::function<double(double)>& f, const QPen& pen);
// Line breaks inserted between words so a long message fits `width` characters per line.
QString wrapText(const QString& text, int width);
// The sentences' words in lines of at most `width` pixels in `font` (a word wider than that on a line of its
// own); `sentencePerLine`: each sentence starts a line, else they run on.
QString wrapToPixels(const QStringList& sentences, const QFont& font, double width, bool sentencePerLine);

}  // namespace attnscope::widgets
