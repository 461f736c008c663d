#pragma once
// Shared look of the result views (private to widgets/): mechanism colours and names, perceptual colour
// maps, publication fonts, the empty state, and PlotView, the base of every QCustomPlot-backed view
// (export rendering with scaled fonts). qcustomplot.h stays out of this header (it is slow to compile).
#include <QColor>
#include <QFont>
#include <QPen>
#include <QJsonArray>
#include <QString>
#include <functional>
#include <memory>
#include <vector>

#include <Eigen/Core>

#include "attention/options.h"
#include "result_view.h"

class QCustomPlot;
class QCPLegend;
class QCPPainter;
class QHBoxLayout;
class QCPColorGradient;
class QCPAxis;
class QCPAxisRect;
class QCPRange;

namespace attnscope::analysis {
struct ExploreResult;
struct MechanismOutcome;
}

namespace attnscope::widgets {

// One colour per mechanism, used by every view (Okabe-Ito: distinguishable with colour-vision deficiency).
QColor mechanismColor(attention::Mechanism m);
// Line pen of a mechanism: linear is drawn wider underneath MHLA so nearly equal curves stay visible.
QPen mechanismPen(attention::Mechanism m, double scale = 1.0);
// "softmax", "linear", "MHLA".
QString mechanismLabel(attention::Mechanism m);

enum class ColorMap { viridis, magma, cividis, diverging };
QString colorMapName(ColorMap m);
ColorMap colorMapFromName(const QString& name, ColorMap fallback = ColorMap::viridis);
// Colour stops sampled from matplotlib's maps (diverging: RdBu_r, white at the centre).
QCPColorGradient colorGradient(ColorMap m);

// The font of every plot text ("DejaVu Sans": SVG export names it explicitly). Sizes in points.
QFont plotFont(double point_size, bool bold = false);
constexpr double kTickPt = 8.5, kLabelPt = 9.5, kTitlePt = 10.5;

// Publication style of an axis rect: ticks outside, no grid clutter, fonts, thin black axes.
void styleAxisRect(QCPAxisRect* rect);
// Removes every element, item and plottable (the plot's default legend pointer is reset too).
void clearPlot(QCustomPlot* plot);
// A framed legend inside `rect` at `align`; plottables are added to it explicitly.
QCPLegend* addLegend(QCPAxisRect* rect, Qt::Alignment align);
// Ticks at integers only (token, grid and block indices), nice steps otherwise.
void setIntegerTicks(QCPAxis* axis);
// Replaces the whole plot by a centred message (empty state, errors).
void showPlotMessage(QCustomPlot* plot, const QString& text);
// Human number: 3 significant digits, no trailing zeros.
QString fmtNum(double v, int digits = 3);

// Base of the QCustomPlot-backed views: owns the plot and a tool row above it; renderTo draws the plot
// at any size with every font multiplied by font_scale (the on-screen fonts are restored afterwards).
class PlotView : public ResultView {
public:
    explicit PlotView(QWidget* parent);
    void renderTo(QPainter* painter, const QSize& size, double font_scale) override;
    QCustomPlot* plot() const { return m_plot; }

protected:
    QHBoxLayout* toolRow() const { return m_tools; }
    QCustomPlot* m_plot = nullptr;

private:
    QHBoxLayout* m_tools = nullptr;
};

// Tokens on the display grid (token_grid of 2 or 3 axes, either token order): token[(f * h + r) * w + c].
// h = 0 for 1-D data (or a grid whose size is not N).
struct GridTokens {
    Eigen::Index frames = 1, h = 0, w = 0;
    std::vector<Eigen::Index> token;
    bool valid() const { return h > 0; }
    Eigen::Index at(Eigen::Index f, Eigen::Index r, Eigen::Index c) const { return token[static_cast<std::size_t>((f * h + r) * w + c)]; }
};
GridTokens gridTokens(const analysis::ExploreResult& result);

// Painters that are QCPPainters (QPainter is not polymorphic): export registers the one it passes to
// renderTo so plot views draw with it directly; any other painter gets a recorded QPicture.
void registerQcpPainter(QCPPainter* painter, bool active);
QCPPainter* asQcpPainter(QPainter* painter);

// QJson helpers for ranges in saved state.
QJsonArray rangeToJson(double lo, double hi);
bool rangeFromJson(const QJsonValue& v, double& lo, double& hi);

}  // namespace attnscope::widgets
