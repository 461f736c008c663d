#pragma once
// Shared look of the result views (private to widgets/): mechanism colours and names, perceptual colour
// maps, publication fonts (plot_font.h, included here), the metrics of sweep records, and PlotViewOf, the
// base of every QCustomPlot-backed view (export rendering with scaled fonts). The plots' building blocks are
// in plot_util.h. qcustomplot.h stays out of this header (it is slow to compile).
#include <QColor>
#include <QFont>
#include <QPen>
#include <QJsonArray>
#include <QString>
#include <QStringList>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "attention/options.h"
#include "plot_font.h"
#include "result_view.h"

class QComboBox;
class QCustomPlot;
class QCPPainter;
class QHBoxLayout;
class QCPColorGradient;

namespace attnscope::analysis {
struct ExploreResult;
struct MechanismOutcome;
struct SweepRecord;
}

namespace attnscope::widgets {

// How a mechanism is drawn, by its table's style slot (attention/mechanisms.h): Okabe-Ito colours
// (distinguishable with colour-vision deficiency), line widths, and the marker of curves (a QCPScatterStyle
// shape; hollow markers are filled white).
struct MechanismStyle {
    QColor color;
    double pen_width = 1.5;      // maps' and spectra's lines
    double curve_width = 1.7;    // sweep curves
    int marker = 0;              // QCPScatterStyle::ScatterShape
    bool hollow = false;
    double marker_size = 7;
};
MechanismStyle mechanismStyle(attention::Mechanism m);
// One colour per mechanism, used by every view.
QColor mechanismColor(attention::Mechanism m);
// Line pen of a mechanism: linear is drawn wider underneath MHLA so nearly equal curves stay visible.
QPen mechanismPen(attention::Mechanism m, double scale = 1.0);
// The table's label: "softmax", "linear", "MHLA" ...
QString mechanismLabel(attention::Mechanism m);

enum class ColorMap { viridis, magma, cividis, diverging };
QString colorMapName(ColorMap m);
ColorMap colorMapFromName(const QString& name, ColorMap fallback = ColorMap::viridis);
// Colour stops sampled from matplotlib's maps (diverging: RdBu_r, white at the centre).
QCPColorGradient colorGradient(ColorMap m);
// A combo box of the perceptual maps (viridis, magma, cividis) by name.
QComboBox* colorMapBox(QWidget* parent);

// Human number: 3 significant digits, no trailing zeros.
QString fmtNum(double v, int digits = 3);

// Metrics of sweep records (curves and overview views), as the core names them (analysis::sweep_metric_names:
// the metric table's sweep metrics and "seconds", by their CSV column names).
QStringList sweepMetricKeys();
// Axis / colour-bar title in words ("numerical rank", "relative rank (rank / N)", ...); empty for unknown keys.
QString sweepMetricLabel(const QString& key);
// The record's value of a metric; NaN when the record lacks it (no spectrum, entropy undefined).
double sweepMetricValue(const analysis::SweepRecord& record, const QString& key);
// The mechanism a record names (a name of the mechanism table); false for anything else.
bool mechanismFromName(const std::string& name, attention::Mechanism& out);

// The plot of a QCustomPlot-backed view with a tool row above it. The tool row is a QHBoxLayout to its
// views that wraps onto further lines when the view is narrow. renderTo draws the plot at any size with
// every font multiplied by font_scale (the on-screen fonts are restored afterwards). Before every
// on-screen replot (with the plot's size) and in renderTo (at the export size, fonts scaled) the pane
// fits each axis's tick count to its length (adaptTickDensity), runs `adjust` (may be empty: layout that
// depends on the drawn size, such as square heatmaps or which cell labels fit; it may call layoutAt) and
// elides the one-line titles to their columns (plot_util.h); the viewport is restored afterwards.
class PlotPane {
public:
    PlotPane(QWidget* owner, std::function<void(const QSize&)> adjust);
    QCustomPlot* plot() const { return m_plot; }
    QHBoxLayout* toolRow() const { return m_tools; }
    void renderTo(QPainter* painter, const QSize& size, double font_scale);
    // Lays the plot out as renderTo would at `size` with fonts x font_scale and returns read() of that layout.
    int measureAt(const QSize& size, double font_scale, const std::function<int()>& read);
    // The font scale of the layout in progress: renderTo's or measureAt's, 1 on screen (for `adjust`).
    double fontScale() const { return m_fontScale; }
    // Lays the plot out at `size` now (element rects are then valid for that size).
    void layoutAt(const QSize& size);

private:
    void runAdjust(const QSize& size);
    QCustomPlot* m_plot = nullptr;
    QHBoxLayout* m_tools = nullptr;
    std::function<void(const QSize&)> m_adjust;
    bool m_adjusting = false;
    double m_fontScale = 1.0;
};

// Base of the QCustomPlot-backed result views: a PlotPane inside a view base (ExploreView, SweepView, ...),
// constructed with the arguments of that base.
template <class Base>
class PlotViewOf : public Base {
public:
    template <class... BaseArgs>
    explicit PlotViewOf(QWidget* parent, BaseArgs&&... args)
        : Base(parent, std::forward<BaseArgs>(args)...), m_pane(this, [this](const QSize& size) { adjustLayout(size); }),
          m_plot(m_pane.plot())
    {
    }
    void renderTo(QPainter* painter, const QSize& size, double font_scale) override { m_pane.renderTo(painter, size, font_scale); }
    QCustomPlot* plot() const { return m_plot; }
    int measureAt(const QSize& size, double font_scale, const std::function<int()>& read)
    {
        return m_pane.measureAt(size, font_scale, read);
    }
    double fontScale() const { return m_pane.fontScale(); }

protected:
    QHBoxLayout* toolRow() const { return m_pane.toolRow(); }
    virtual void adjustLayout(const QSize& size) { Q_UNUSED(size); }
    void layoutAt(const QSize& size) { m_pane.layoutAt(size); }

private:
    PlotPane m_pane;

protected:
    QCustomPlot* m_plot = nullptr;
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
