// The attention maps' panel grid; see maps_layout.h.
#include "maps_layout.h"

#include <QFontMetrics>
#include <algorithm>
#include <qcustomplot.h>

namespace attnscope::widgets {

PanelGrid::PanelGrid(QCustomPlot* plot, QCPLayoutGrid* grid, std::vector<Cell> cells, QCPColorScale* shared)
    : m_plot(plot), m_grid(grid), m_cells(std::move(cells)), m_shared(shared)
{
    m_grid->setAutoMargins(QCP::msNone);
    if (!m_cells.empty()) {
        m_yLabel = m_cells.front().rect->axis(QCPAxis::atLeft)->label();
        m_xLabel = m_cells.front().rect->axis(QCPAxis::atBottom)->label();
    }
    const int k = static_cast<int>(m_cells.size());
    arrange(1, std::max(1, k));
}

// Panel i at row i / cols, column i % cols: its title above its rect, its own scale right of it. A shared
// scale goes right of the first row. Only the first column shows the query axis' labels, and only the last
// panel of each column the key axis' (the panels share both axes): the rows above take no height for them,
// which goes to the panels.
void PanelGrid::arrange(int rows, int cols)
{
    if (rows == m_rows && cols == m_cols)
        return;
    for (const Cell& c : m_cells)
        for (QCPLayoutElement* e : {static_cast<QCPLayoutElement*>(c.title), static_cast<QCPLayoutElement*>(c.rect),
                                    static_cast<QCPLayoutElement*>(c.scale)})
            if (e)
                m_grid->take(e);
    if (m_shared)
        m_grid->take(m_shared);
    m_grid->simplify();
    // Grid columns per panel: two when any panel has its own scale (a difference beside matrices that share one).
    const bool ownScales = std::any_of(m_cells.begin(), m_cells.end(), [](const Cell& c) { return c.scale != nullptr; });
    const int span = m_shared && !ownScales ? 1 : 2;
    m_grid->expandTo(2 * rows, span * cols + (m_shared ? 1 : 0));
    for (std::size_t i = 0; i < m_cells.size(); ++i) {
        const int r = static_cast<int>(i) / cols, c = static_cast<int>(i) % cols;
        const Cell& cell = m_cells[i];
        m_grid->addElement(2 * r, span * c, cell.title);
        m_grid->addElement(2 * r + 1, span * c, cell.rect);
        if (cell.scale)
            m_grid->addElement(2 * r + 1, span * c + 1, cell.scale);
        QCPAxis* y = cell.rect->axis(QCPAxis::atLeft);
        y->setTickLabels(c == 0);
        y->setLabel(c == 0 ? m_yLabel : QString());
        const bool bottom = static_cast<int>(i) + cols >= static_cast<int>(m_cells.size());
        QCPAxis* x = cell.rect->axis(QCPAxis::atBottom);
        x->setTickLabels(bottom);
        x->setLabel(bottom ? m_xLabel : QString());
    }
    if (m_shared)
        m_grid->addElement(1, span * cols, m_shared);
    for (int r = 0; r < m_grid->rowCount(); ++r)
        m_grid->setRowStretchFactor(r, r % 2 == 0 ? 0.01 : 1.0);
    for (int c = 0; c < m_grid->columnCount(); ++c)
        m_grid->setColumnStretchFactor(c, (c % span == 0 && c < span * cols) ? 1.0 : 0.01);
    m_rows = rows;
    m_cols = cols;
}

// The side of the first panel's inner rect when squared at `size` in the current arrangement.
int PanelGrid::sideAt(const QSize& size, const std::function<void(const QSize&)>& layoutAt)
{
    m_grid->setMargins(QMargins());
    layoutAt(size);
    const QRect r = m_cells.front().rect->rect();
    return std::min(r.width(), r.height());
}

void PanelGrid::layOut(const QSize& size, const std::function<void(const QSize&)>& layoutAt, const std::function<bool()>& relabel)
{
    if (m_cells.empty())
        return;
    const int k = static_cast<int>(m_cells.size());
    if (size != m_chosenFor) {
        // Every arrangement without an empty row; the largest side wins, the current one on a tie.
        int bestRows = m_rows, bestCols = m_cols, best = sideAt(size, layoutAt);
        for (int rows = 1; rows <= k; ++rows) {
            const int cols = (k + rows - 1) / rows;
            if ((rows - 1) * cols >= k || (rows == m_rows && cols == m_cols))
                continue;
            arrange(rows, cols);
            const int side = sideAt(size, layoutAt);
            if (side > best) {
                best = side;
                bestRows = rows, bestCols = cols;
            }
        }
        arrange(bestRows, bestCols);
        m_chosenFor = size;
        m_extraX = m_extraY = 0;
    }
    m_grid->setMargins(QMargins());
    for (const Cell& c : m_cells)
        if (c.title) {
            c.title->setAutoMargins(QCP::msNone);
            c.title->setMargins(QMargins());
        }
    m_extraX = m_extraY = 0;
    layoutAt(size);
    if (relabel && relabel())
        layoutAt(size);
    settle(size, layoutAt, 4);
    if (relabel && relabel())
        settle(size, layoutAt, 3);
    centreTitles();
    layoutAt(size);
    settle(size, layoutAt, 2);
}

// The grid's margins take what is left over, so that the panels' inner rects are side x side and
// centred: width excess by horizontal margins (cols panels shrink), height excess by vertical ones (rows
// panels shrink); later passes only correct the residual (tick labels change with the layout).
void PanelGrid::settle(const QSize& size, const std::function<void(const QSize&)>& layoutAt, int passes)
{
    auto diff = [this] {
        const QRect r = m_cells.front().rect->rect();
        return r.width() < 8 || r.height() < 8 ? 0 : r.width() - r.height();
    };
    const bool wide = diff() > 0;
    for (int pass = 0; pass < passes; ++pass) {
        const int d = diff();
        if (d == 0)
            break;
        if (wide)
            m_extraX = std::clamp(m_extraX + m_cols * d, 0, std::max(0, size.width() - 60));
        else
            m_extraY = std::clamp(m_extraY - m_rows * d, 0, std::max(0, size.height() - 60));
        m_grid->setMargins(QMargins(m_extraX / 2, m_extraY / 2, m_extraX - m_extraX / 2, m_extraY - m_extraY / 2));
        layoutAt(size);
    }
}

// Titles centred over the image rather than the column (which includes the tick labels): a left margin of
// (left - right) margin, when every title still fits its column (else titles could widen the columns and
// break the squares).
void PanelGrid::centreTitles()
{
    const QMargins m = m_cells.front().rect->margins();
    const int shift = std::max(0, m.left() - m.right());
    bool fit = true;
    for (const Cell& c : m_cells)
        if (c.title)
            fit = fit && QFontMetrics(c.title->font()).horizontalAdvance(c.title->text()) + shift + 8 <= c.rect->outerRect().width();
    for (const Cell& c : m_cells)
        if (c.title)
            c.title->setMargins(QMargins(fit ? shift : 0, 0, 0, 0));
}

}  // namespace attnscope::widgets
