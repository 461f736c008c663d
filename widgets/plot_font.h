#pragma once
// The font of the plots (private to widgets/), apart from the rest of plot_style.h so that the plots'
// building blocks (plot_util.h) can use it while plot_style's PlotPane uses them: plot_style depends on
// plot_util, never the reverse. plot_style.h includes this header.
#include <QFont>

namespace attnscope::widgets {

// The font of every plot text ("DejaVu Sans": SVG export names it explicitly). Sizes in points.
QFont plotFont(double point_size, bool bold = false);
constexpr double kTickPt = 8.5, kLabelPt = 9.5, kTitlePt = 10.5;
// A layout element that draws its own text (not a QCustomPlot text element, axis or legend) finds the
// factor an export multiplies every font by in this dynamic property (unset: 1).
inline constexpr char kFontScaleProperty[] = "attnscopeFontScale";

}  // namespace attnscope::widgets
