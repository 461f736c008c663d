#pragma once
// MapPanels: the drawing half of the attention-maps view (maps_view.cpp holds its controls, linked zoom,
// hover read-out and saved state). In one QCustomPlot: one square panel per mechanism (an axis rect with a
// colour map), one shared colour scale, the selected query's line and MHLA's block boundaries; in
// difference mode one panel per other mechanism minus the reference. The colour maps show the region
// visible in the panels with at most a given number of cells per axis: beyond that each cell is the max or
// mean of the entries it covers (core reduce_region, from the result's pyramid for large N, so that a
// repaint reads about as many values as it draws). Private to widgets/.
#include <QCoreApplication>
#include <QString>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "analysis/explore.h"
#include "plot_style.h"

class QCustomPlot;
class QCPAxisRect;
class QCPColorMap;
class QCPColorScale;
class QCPItemStraightLine;
class QCPLayoutGrid;
class QCPMarginGroup;
class QCPTextElement;
class QPoint;
class QSize;

namespace attnscope::widgets {

class MapPanels {
    Q_DECLARE_TR_FUNCTIONS(MapPanels)
public:
    struct Panel {
        int outcome = -1;          // index into result->outcomes
        int minus = -1;            // difference mode: outcome subtracted
        QCPAxisRect* rect = nullptr;
        QCPColorMap* map = nullptr;   // null when the mechanism failed
        QCPItemStraightLine* queryLine = nullptr;
        QCPTextElement* title = nullptr;
    };

    explicit MapPanels(QCustomPlot* plot) : m_plot(plot) {}

    // The result to draw (null: none); its matrices' value ranges are taken here, once.
    void setResult(std::shared_ptr<const analysis::ExploreResult> result);
    Eigen::Index n() const { return m_result ? m_result->n : 0; }

    // Lays the plot out anew: one panel per outcome, or, when `reference` names a mechanism whose matrix
    // exists (difference mode), one per other outcome minus it. False when there is nothing to draw: the
    // plot then says why.
    bool build(int reference);
    const std::vector<Panel>& panels() const { return m_panels; }
    bool difference() const { return !m_panels.empty() && m_panels.front().minus >= 0; }

    // The colour scale for the shown data: diverging and symmetric for differences and signed scores, else
    // `cmap` from 0 (log from the smallest positive entry when `log`). False when there is no scale.
    // `how` names the reduction in the scale's label.
    bool applyScale(ColorMap cmap, bool log, analysis::Reduce how);
    // Fills the colour maps with the region visible in the first panel, at most capRows x capCols cells.
    // False when there is nothing to fill.
    bool refreshImages(Eigen::Index capRows, Eigen::Index capCols, analysis::Reduce how);
    // The query's row marked in every panel (-1: none).
    void setQuery(int query);
    // Square panels (equal aspect, like imshow) at the plot size `size`; layoutAt lays the plot out.
    void makeSquare(const QSize& size, const std::function<void(const QSize&)>& layoutAt);
    // The panel at `pos` and the query t and key j under it; null outside the matrices.
    const Panel* panelAt(const QPoint& pos, Eigen::Index& t, Eigen::Index& j) const;

private:
    struct MatrixStats {
        double max = 0, min = 0, min_positive = std::numeric_limits<double>::infinity();
    };
    static MatrixStats statsOf(const analysis::MechanismOutcome& o);

    const analysis::MechanismOutcome& outcome(int i) const { return m_result->outcomes[static_cast<std::size_t>(i)]; }
    int referenceOutcome(int mechanism) const;
    void addPanel(Panel& p, QCPLayoutGrid* layout, QCPMarginGroup* group, int col);
    void addScale(QCPLayoutGrid* layout, QCPMarginGroup* group, int col);
    void addFootnote();
    QString panelTitle(const Panel& p) const;
    void addBlockLines(Panel& p);
    double diffAbsMax(const Panel& p);
    void updateScaleLabel(analysis::Reduce how);

    QCustomPlot* m_plot;
    std::shared_ptr<const analysis::ExploreResult> m_result;
    std::vector<MatrixStats> m_stats;                     // per outcome
    std::map<std::pair<int, int>, double> m_diffAbsMax;   // max |A - B| per (outcome, minus)
    std::vector<Panel> m_panels;
    QCPColorScale* m_scale = nullptr;
    QString m_scaleLabel;
    double m_reducedFactor = 1.0;   // entries per cell along an axis in the last images
    int m_blockLines = 0;
};

}  // namespace attnscope::widgets
