#pragma once
// MapPanels: the drawing half of the attention-maps view (maps_view.cpp holds its controls, linked zoom,
// hover read-out and saved state). In one QCustomPlot: one square panel per mechanism (an axis rect with a
// colour map), arranged by PanelGrid (maps_layout.h) to fill the plot, or one enlarged panel; each panel
// with its own colour scale or one shared scale (analysis/map_scale.h: ranges clipped at a percentile, log or
// linear, causal masks), the selected query's line, MHLA's block boundaries and token labels on the axes
// (maps_marks.h); in difference mode one panel per other mechanism minus the reference. The colour maps
// show the region visible in the panels with at most a given number of cells per axis: beyond that each
// cell is the max or mean of the entries it covers (core reduce_region, from the result's pyramid for
// large N, so that a repaint reads about as many values as it draws). Private to widgets/.
#include <QCoreApplication>
#include <QString>
#include <QStringList>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "analysis/explore.h"
#include "analysis/map_scale.h"
#include "maps_layout.h"
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

class BlockBoundaries;
class TokenTicker;

// The colour of entries a causal query may not see: a neutral grey no colour map uses for 0.
QColor maskColour();

class MapPanels {
    Q_DECLARE_TR_FUNCTIONS(MapPanels)
public:
    struct Panel {
        int outcome = -1;          // index into result->outcomes
        int minus = -1;            // difference mode: outcome subtracted
        QCPAxisRect* rect = nullptr;
        QCPColorMap* map = nullptr;   // null when the mechanism failed
        QCPColorScale* scale = nullptr;   // its own or the shared one; null when failed
        QCPItemStraightLine* queryLine = nullptr;
        QCPTextElement* title = nullptr;
        QString titleText;   // in one line; shown in two where the panel is narrower
        BlockBoundaries* blocks = nullptr;
        analysis::CausalMask mask, minusMask;
        analysis::ColourRange range;   // of its scale
    };
    // How the panels are built: the matrices, or in difference mode each other matrix minus `reference`'s
    // (a mechanism, else -1); with the matrices, one difference panel `extra` (first minus second
    // mechanism; -1: none); one panel only (`only`: its name(), empty: all); a colour scale per panel or
    // one shared by the matrices (a difference panel among matrices keeps its own); block boundaries.
    struct Layout {
        int reference = -1;
        std::pair<int, int> extra = {-1, -1};
        QString only;
        bool perPanelScale = true;
        bool blockBoundaries = true;
    };
    // How values become colours.
    struct Look {
        ColorMap cmap = ColorMap::viridis;
        bool log = false;
        double clipPercentile = 100;   // the top of each range: this percentile of the values (100: the largest)
        analysis::Reduce how = analysis::Reduce::max;
    };

    explicit MapPanels(QCustomPlot* plot) : m_plot(plot) {}

    void setResult(std::shared_ptr<const analysis::ExploreResult> result);
    Eigen::Index n() const { return m_result ? m_result->n : 0; }

    // Lays the plot out anew. False when there is nothing to draw: the plot then says why.
    bool build(const Layout& layout);
    const std::vector<Panel>& panels() const { return m_panels; }
    bool difference() const { return !m_panels.empty() && m_panels.front().minus >= 0; }
    // A panel's name: its mechanism, or "MHLA − softmax" for a difference.
    QString name(const Panel& p) const;
    // The names of the panels `layout` shows when `only` is empty, in order.
    QStringList panelNames(Layout layout) const;

    // Colour scales for the shown data (diverging and symmetric for differences and signed scores). False
    // when there is no scale.
    bool applyScale(const Look& look);
    // Fills the colour maps with the region visible in the first panel, at most capRows x capCols cells
    // (difference panels always the mean of their cells: the mean of a difference is exact).
    bool refreshImages(Eigen::Index capRows, Eigen::Index capCols, analysis::Reduce how);
    // The query's row marked in every panel (-1: none).
    void setQuery(int query);
    // Lays the panels out at the plot size `size` (layoutAt lays the plot out): arrangement, square
    // panels, token labels where they fit.
    void layOut(const QSize& size, const std::function<void(const QSize&)>& layoutAt);
    const PanelGrid* grid() const { return m_grid ? &*m_grid : nullptr; }
    // The panel at `pos` and the query t and key j under it; null outside the matrices.
    const Panel* panelAt(const QPoint& pos, Eigen::Index& t, Eigen::Index& j) const;
    // The token string of t for read-outs (empty without tokens).
    QString token(Eigen::Index t) const;

private:
    const analysis::MechanismOutcome& outcome(int i) const { return m_result->outcomes[static_cast<std::size_t>(i)]; }
    int outcomeOf(int mechanism) const;
    std::vector<Panel> choosePanels(const Layout& layout) const;
    void addPanel(Panel& p, QCPLayoutGrid* layout, QCPMarginGroup* group, int index, bool ownScale, bool blockLines);
    void addFootnote();
    QString panelTitle(const Panel& p) const;
    std::vector<Eigen::Index> blockCuts() const;
    const analysis::MapValues& valuesOf(const Panel& p, analysis::Reduce how);
    QString scaleLabel(const Panel* p, const analysis::ColourRange& range) const;
    void updateLabels();
    void wrapFootnote(int width);
    bool updateTickers();
    bool fitTitles();

    QCustomPlot* m_plot;
    std::shared_ptr<const analysis::ExploreResult> m_result;
    std::shared_ptr<const std::vector<QString>> m_tokens;   // display strings of the result's tokens
    std::map<std::tuple<int, int, int>, analysis::MapValues> m_values;   // per (outcome, minus, reduction)
    std::vector<Panel> m_panels;
    std::optional<PanelGrid> m_grid;
    QCPColorScale* m_sharedScale = nullptr;
    QCPTextElement* m_footnote = nullptr;
    QStringList m_footnoteLines;   // unwrapped
    QCPMarginGroup* m_group = nullptr;
    Look m_look;
    bool m_perPanel = true, m_anyMask = false, m_blockLines = false;
    double m_reducedFactor = 1.0;   // entries per cell along an axis in the last images
};

}  // namespace attnscope::widgets
