#pragma once
// Where the attention maps' panels go (private to widgets/): k panels in the grid of rows x columns that
// gives the largest square panels at the plot's size (three panels side by side in a wide view, two by
// two in a square one, one above the other in a tall one), each panel's inner rect exactly square (equal
// aspect, like imshow) with the space left over shared around the grid.
#include <QSize>
#include <QString>
#include <functional>
#include <vector>

class QCPAxisRect;
class QCPColorScale;
class QCPLayoutGrid;
class QCPTextElement;
class QCustomPlot;

namespace attnscope::widgets {

class PanelGrid {
public:
    struct Cell {
        QCPTextElement* title = nullptr;
        QCPAxisRect* rect = nullptr;
        QCPColorScale* scale = nullptr;   // the panel's own colour scale, or null
    };
    // The panels (in reading order) and the scale they share (null when each has its own), all in `grid`,
    // a layout element of `plot`.
    PanelGrid(QCustomPlot* plot, QCPLayoutGrid* grid, std::vector<Cell> cells, QCPColorScale* shared);

    // Lays the plot out at `size` (layoutAt lays it out; `relabel` may change tick labels after a layout
    // and returns true when it did): the arrangement with the largest panels, then square panels.
    void layOut(const QSize& size, const std::function<void(const QSize&)>& layoutAt, const std::function<bool()>& relabel);
    int rows() const { return m_rows; }
    int cols() const { return m_cols; }
    // Forgets the chosen arrangement: the next layOut chooses again (new labels, fonts or scales).
    void invalidate() { m_chosenFor = QSize(); }

private:
    void arrange(int rows, int cols);
    int sideAt(const QSize& size, const std::function<void(const QSize&)>& layoutAt);
    void settle(const QSize& size, const std::function<void(const QSize&)>& layoutAt, int passes);
    void centreTitles();

    QCustomPlot* m_plot;
    QCPLayoutGrid* m_grid;
    std::vector<Cell> m_cells;
    QCPColorScale* m_shared;
    QString m_yLabel;   // the query axis' label, shown left of the first column
    QString m_xLabel;   // the key axis' label, shown under the last panel of each column
    int m_rows = 0, m_cols = 0;
    QSize m_chosenFor;   // the size the arrangement was chosen for
    int m_extraX = 0, m_extraY = 0;
};

}  // namespace attnscope::widgets
