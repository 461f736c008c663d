// QueryView: the selected query's attention distribution A[t, :] under each mechanism: a line per
// mechanism over keys j (1-D data) with, when the file names its tokens, the tokens shaded by each
// mechanism's weights below it (token_strip.h); or one heatmap per mechanism over the token grid with the
// query marked (grid data; 3-D grids show the query's frame), as in the MHLA paper's figure 3, and below
// each the file's input image with that attention over it when the file carries one.
#include <QCheckBox>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QScopedValueRollback>
#include <QLabel>
#include <QSpinBox>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "maps_marks.h"
#include "analysis/map_scale.h"
#include "plot_util.h"
#include "token_strip.h"
#include "view_base.h"
#include "views.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using Eigen::Index;

constexpr int kNoLimit = QWIDGETSIZE_MAX - 1;   // a maximum size that a layout takes instead of the element's hint

class QueryView : public PlotView {
public:
    explicit QueryView(QWidget* parent) : PlotView(parent, QStringLiteral("query"), tr("Query distribution"))
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Query t"), this));
        m_spin = spinBox(this, 0, 0, 0, tr("The query token shown (also set by clicking a row of the attention maps)"));
        tools->addWidget(m_spin);
        m_logBox = new QCheckBox(tr("Log y (1-D)"), this);
        tools->addWidget(m_logBox);
        m_sharedBox = new QCheckBox(tr("Shared colour scale (grid)"), this);
        m_sharedBox->setToolTip(tr("One colour scale for all mechanisms instead of one per panel"));
        tools->addWidget(m_sharedBox);
        tools->addStretch(1);
        connect(m_spin, &QSpinBox::valueChanged, this, [this](int v) {
            if (m_updating || !m_result)
                return;
            m_query = v;
            rebuild();
            emit querySelected(v);
        });
        connect(m_logBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_sharedBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        m_saved.add("log_y", m_logBox);
        m_saved.add("shared_scale", m_sharedBox);
        rebuild();
    }

    QSize preferredExportSize() const override
    {
        const bool image = m_result && m_result->image;   // a second row of panels
        if (m_result && gridTokens(*m_result).valid())
            return {std::max<int>(600, 40 + 400 * static_cast<int>(m_result->outcomes.size())), image ? 820 : 460};
        return {1000, m_result && !m_result->tokens.empty() ? 860 : 560};   // room for the token strip
    }

    void setQuery(int token) override
    {
        m_query = token;
        rebuild();
    }

    // A narrow printed figure: over the grid, one row per mechanism (adjustLayout) at the lowest height at
    // which its panels are largest; over a sequence, the token strip's height on top of a plot at least
    // half the width high.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        const QScopedValueRollback<bool> exporting(m_exporting, true);   // its rows are measured
        if (!m_result || !isNarrow(width, font_scale))
            return fallback;
        if (!m_panels.empty())
            return heightForLargestPanels(fallback, kMaxExportHeight, [&](int h) {
                const int side = measureAt(QSize(width, h), font_scale, [this] {
                    const QRect r = m_panels.front().rect->rect();
                    return std::min(r.width(), r.height());
                });
                return std::pair{static_cast<double>(side), true};
            });
        if (!m_lineRect)
            return fallback;
        // What the title, the axes and the token strip take at this width, measured on a tall page.
        const int cap = std::max(fallback, kMaxExportHeight);
        const int plotHeight = measureAt(QSize(width, cap), font_scale, [this] { return m_lineRect->height(); });
        return std::clamp(cap - plotHeight + width / 2, fallback, cap);
    }

    QJsonObject saveState() const override
    {
        QJsonObject s = m_saved.save();
        s["query"] = m_query;
        return s;
    }

    void restoreState(const QJsonObject& s) override
    {
        m_saved.restore(s);
        if (s.contains("query"))
            m_query = s["query"].toInt(-1);
        if (m_result && m_query >= m_result->n)
            m_query = -1;
        rebuild();
    }

private:
    void resultChanged() override
    {
        if (m_result && m_query >= m_result->n)
            m_query = -1;
        rebuild();
    }

    // The query shown: the selected one, else a default (the middle token / grid centre).
    Index shownQuery(const GridTokens& g, bool& isDefault) const
    {
        isDefault = m_query < 0;
        if (!isDefault)
            return m_query;
        if (g.valid())
            return g.at(0, g.h / 2, g.w / 2);
        return m_result->n / 2;
    }

    QString coordText(Index t) const
    {
        const auto c = m_result->grid_coords(t);
        if (c.size() == 2)
            return tr(" at (row %1, col %2)").arg(c[0]).arg(c[1]);
        if (c.size() == 3)
            return tr(" at (frame %1, row %2, col %3)").arg(c[0]).arg(c[1]).arg(c[2]);
        return {};
    }

    // Moves the spin box without treating it as the user's choice.
    void showInSpin(int maximum, int value)
    {
        m_updating = true;
        m_spin->setRange(0, maximum);
        m_spin->setValue(value);
        m_updating = false;
    }

    void rebuild() override
    {
        // Forgotten before the plot is cleared: the message's replot runs adjustLayout, which must not
        // reach the deleted panels.
        m_heatmaps.clear();
        m_panels.clear();
        m_sharedScale = nullptr;
        m_grid = nullptr;
        m_mapGroup = m_imageGroup = m_scaleGroup = nullptr;
        m_narrowGrid = false;
        m_lineRect = nullptr;
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K; then click a row of the\n"
                                       "attention maps to see that query's distribution over the keys."));
            return;
        }
        clearPlot(m_plot);
        const GridTokens g = gridTokens(*m_result);
        bool isDefault = false;
        const Index t = shownQuery(g, isDefault);
        showInSpin(static_cast<int>(std::max<Index>(0, m_result->n - 1)), static_cast<int>(t));
        QString title = tr("Attention of query t = %1%2 over the keys").arg(t).arg(coordText(t));
        // The title says what is shown, in the app and in every export; how to choose another query is the
        // spin box's tool tip (a click on a map row), never part of a figure.
        if (isDefault)
            title += g.valid() ? tr(" (default: the grid's centre)") : tr(" (default: the middle token)");
        auto* titleElement = addTitle(m_plot, title, plotFont(kTitlePt, true));
        m_plot->plotLayout()->addElement(0, 0, titleElement);
        if (g.valid()) {
            buildGrid(g, t);
        } else {
            buildLine(t);
            if (!m_result->tokens.empty())
                addTokenStrip(t);
        }
        m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    void buildLine(Index t)
    {
        auto* rect = addAxisRect(m_plot, m_plot->plotLayout(), 1, 0);
        m_lineRect = rect;
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("key j"));
        y->setLabel(tr("attention weight A[t, j]"));
        if (!m_result->tokens.empty())   // "index\ntoken" at the ticks
            x->setTicker(QSharedPointer<TokenTicker>::create(std::make_shared<const std::vector<QString>>(displayTokens(*m_result)), true));
        const bool log = m_logBox->isChecked();
        auto* legend = addLegend(rect, Qt::AlignTop | Qt::AlignRight);
        const Index N = m_result->n;
        QVector<double> keys(static_cast<int>(N));
        for (Index j = 0; j < N; ++j)
            keys[static_cast<int>(j)] = static_cast<double>(j);
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
        QStringList failed;
        for (const auto& o : m_result->outcomes) {
            if (!o.matrix) {
                failed << tr("%1 failed: %2").arg(mechanismLabel(o.result.mechanism), QString::fromStdString(o.error));
                continue;
            }
            QVector<double> vals(static_cast<int>(N));
            for (Index j = 0; j < N; ++j) {
                double v = (*o.matrix)(t, j);
                if (log && v <= 0)
                    v = std::numeric_limits<double>::quiet_NaN();   // a gap: log scale cannot show 0
                else {
                    lo = std::min(lo, v);
                    hi = std::max(hi, v);
                }
                vals[static_cast<int>(j)] = v;
            }
            auto* graph = m_plot->addGraph(x, y);
            graph->setData(keys, vals, true);
            graph->setPen(mechanismPen(o.result.mechanism));
            graph->setName(mechanismLabel(o.result.mechanism));
            graph->addToLegend(legend);
        }
        x->setRange(-0.5, static_cast<double>(N) - 0.5);
        if (log) {
            setLogScale(y);
            setPowerLabels(y);
            if (std::isfinite(lo))
                y->setRange(std::max(lo, hi * 1e-12) / 2, hi * 2);
        } else if (std::isfinite(lo)) {
            y->setRange(std::min(0.0, lo), hi + 0.05 * (hi - std::min(0.0, lo)));
        }
        addVLine(m_plot, rect, static_cast<double>(t), QPen(QColor(60, 60, 60), 1, Qt::DashLine));
        auto* label = new QCPItemText(m_plot);
        label->setClipAxisRect(rect);
        label->position->setAxes(x, y);
        label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        label->position->setAxisRect(rect);
        label->position->setCoords(static_cast<double>(t), 0.02);
        label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        label->setPadding(QMargins(4, 0, 0, 0));
        label->setText(tr("j = t"));
        label->setFont(plotFont(kTickPt));
        label->setColor(QColor(60, 60, 60));
        if (!failed.isEmpty())
            addFailure(rect, failed.join('\n'));
    }

    void addFailure(QCPAxisRect* rect, const QString& text)
    {
        addNote(m_plot, rect, text, 0.02, 0.02, Qt::AlignLeft | Qt::AlignTop)->setBrush(QColor(255, 255, 255, 220));
    }

    // One panel per mechanism of the query's row over the grid (the query's frame for 3-D grids), each
    // with its own colour scale or sharing one.
    void buildGrid(const GridTokens& g, Index t)
    {
        const auto qc = m_result->grid_coords(t);
        const Index frame = qc.size() == 3 ? qc[0] : 0;
        const bool shared = m_sharedBox->isChecked();
        auto* grid = new QCPLayoutGrid;
        m_grid = grid;
        m_plot->plotLayout()->addElement(1, 0, grid);
        // The grid's own maximum is the sum of each row's smallest maximum, less than its rows take when a row's
        // elements differ (a one-line title beside a two-line caption): given only that, the grid squeezed its
        // capped panels (fitNarrow) out of square. It takes what the plot gives, the rest staying below its rows.
        grid->setMaximumSize(kNoLimit, kNoLimit);
        auto* group = new QCPMarginGroup(m_plot);
        m_mapGroup = group;
        m_scaleGroup = new QCPMarginGroup(m_plot);
        double sharedMax = 0;
        std::vector<QCPColorMap*> maps;
        std::vector<int> rectCols;   // per outcome
        std::vector<double> tops;    // per outcome: the top of its colour scale (per panel)
        int col = 0;
        for (const auto& o : m_result->outcomes) {
            auto* title = new QCPTextElement(m_plot, mechanismLabel(o.result.mechanism), plotFont(kLabelPt, true));
            title->setTextColor(mechanismColor(o.result.mechanism).darker(130));
            grid->addElement(0, col, title);
            auto* rect = addAxisRect(m_plot, grid, 1, col);
            m_heatmaps.push_back({rect, static_cast<double>(g.w), static_cast<double>(g.h)});
            rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            setHeatmapAxes(rect, static_cast<double>(g.w), static_cast<double>(g.h), tr("grid column"), tr("grid row"));
            rectCols.push_back(col);
            tops.push_back(0);
            m_panels.push_back({title, rect, nullptr, nullptr, nullptr});
            ++col;
            if (!o.matrix) {
                addFailure(rect, tr("failed:\n%1").arg(QString::fromStdString(o.error)));
                continue;
            }
            double hi = 0;
            QCPColorMap* map = addRowMap(rect, g, frame, *o.matrix, t, hi);
            maps.push_back(map);
            sharedMax = std::max(sharedMax, hi);
            tops.back() = hi;
            if (!shared) {
                auto* scale = addColorScale(m_plot, QString(), 10, group);
                grid->addElement(1, col, scale);
                m_panels.back().scale = scale;
                ++col;
                scale->axis()->ticker()->setTickCount(4);
                scale->axis()->setNumberFormat("gb");
                map->setColorScale(scale);
                scale->setGradient(colorGradient(ColorMap::viridis));
                scale->setDataRange(QCPRange(0, hi > 0 ? hi : 1));
                grid->setColumnStretchFactor(col - 1, 0.01);
            }
            addQueryMarker(rect, qc);
        }
        if (shared && !maps.empty()) {
            auto* sharedScale = addColorScale(m_plot, tr("attention weight A[t, j]"), 12, group);
            grid->addElement(1, col, sharedScale);
            m_sharedScale = sharedScale;
            for (auto* m : maps)
                m->setColorScale(sharedScale);
            sharedScale->setGradient(colorGradient(ColorMap::viridis));
            sharedScale->setDataRange(QCPRange(0, sharedMax > 0 ? sharedMax : 1));
            grid->setColumnStretchFactor(col, 0.01);
        }
        if (shared)
            std::fill(tops.begin(), tops.end(), sharedMax);
        if (m_result->image)
            addImageRow(grid, g, t, rectCols, tops);
        grid->setRowStretchFactor(0, 0.01);
        grid->setColumnSpacing(4);
        if (qc.size() == 3) {
            auto* foot = new QCPTextElement(m_plot, tr("keys of frame %1 shown").arg(frame), plotFont(kTickPt));
            m_plot->plotLayout()->addElement(2, 0, foot);
        }
    }

    // A[t, j] at the grid position of every key j of `frame`; `hi` gets the largest magnitude.
    QCPColorMap* addRowMap(QCPAxisRect* rect, const GridTokens& g, Index frame, const Eigen::MatrixXd& A, Index t, double& hi)
    {
        auto* map = addHeatmap(rect, static_cast<int>(g.w), static_cast<int>(g.h));
        for (Index r = 0; r < g.h; ++r)
            for (Index c = 0; c < g.w; ++c) {
                const Index j = g.at(frame, r, c);
                const double v = j >= 0 ? A(t, j) : std::numeric_limits<double>::quiet_NaN();
                if (std::isfinite(v))
                    hi = std::max(hi, std::abs(v));
                map->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
            }
        return map;
    }

    // Below the 1-D plot: the tokens shaded by each mechanism's weights of query t.
    void addTokenStrip(Index t)
    {
        const Index N = m_result->n;
        std::vector<TokenStrip::Row> rows;
        for (const auto& o : m_result->outcomes) {
            TokenStrip::Row row;
            row.label = mechanismLabel(o.result.mechanism);
            row.colour = mechanismColor(o.result.mechanism);
            if (!o.matrix) {
                row.note = tr("could not be computed");
                rows.push_back(std::move(row));
                continue;
            }
            const analysis::CausalMask mask = analysis::CausalMask::of(*m_result, o);
            row.weights.resize(static_cast<std::size_t>(N));
            for (Index j = 0; j < N; ++j)
                row.weights[static_cast<std::size_t>(j)] = (*o.matrix)(t, j);
            if (mask.active()) {
                row.allowed.resize(static_cast<std::size_t>(N));
                for (Index j = 0; j < N; ++j)
                    row.allowed[static_cast<std::size_t>(j)] = mask.allowed(t, j);
            }
            rows.push_back(std::move(row));
        }
        auto* strip = new TokenStrip(m_plot, displayTokens(*m_result, 16), t, std::move(rows));
        m_plot->plotLayout()->addElement(2, 0, strip);
        m_plot->plotLayout()->setRowStretchFactor(2, 0.01);
    }

    // Below each mechanism's grid map (grid columns `cols`): the file's input image in grey with the
    // query's attention over it, transparent at 0 and strongest at the map's top colour `tops`.
    void addImageRow(QCPLayoutGrid* grid, const GridTokens& g, Index t, const std::vector<int>& cols, const std::vector<double>& tops)
    {
        const analysis::FileImage& img = *m_result->image;
        if (img.rows < 1 || img.cols < 1 || static_cast<Index>(img.values.size()) != img.rows * img.cols)
            return;
        const auto qc = m_result->grid_coords(t);
        const Index frame = qc.size() == 3 ? qc[0] : 0;
        const auto [lo, hi] = std::minmax_element(img.values.begin(), img.values.end());
        QCPColorGradient grey;
        grey.setColorStops({{0.0, QColor(255, 255, 255)}, {1.0, QColor(110, 110, 110)}});   // light: the attention stays visible over the ink
        QCPColorGradient heat;
        heat.setColorStops({{0.0, QColor(255, 60, 0, 0)}, {1.0, QColor(255, 60, 0, 215)}});
        heat.setNanHandling(QCPColorGradient::nhTransparent);
        auto* group = new QCPMarginGroup(m_plot);
        m_imageGroup = group;
        const double sx = static_cast<double>(img.cols) / static_cast<double>(g.w), sy = static_cast<double>(img.rows) / static_cast<double>(g.h);
        for (std::size_t k = 0; k < m_result->outcomes.size() && k < cols.size(); ++k) {
            const auto& o = m_result->outcomes[k];
            auto* caption = addTitle(m_plot, tr("%1 over %2").arg(mechanismLabel(o.result.mechanism), QString::fromStdString(img.name)),
                                     plotFont(kTickPt));
            grid->addElement(2, cols[k], caption);
            auto* rect = addAxisRect(m_plot, grid, 3, cols[k]);
            m_panels[k].caption = caption;
            m_panels[k].image = rect;
            m_heatmaps.push_back({rect, static_cast<double>(img.cols), static_cast<double>(img.rows)});
            rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            setHeatmapAxes(rect, static_cast<double>(img.cols), static_cast<double>(img.rows), tr("image column"), tr("image row"));
            auto* base = addHeatmap(rect, static_cast<int>(img.cols), static_cast<int>(img.rows));
            for (Index r = 0; r < img.rows; ++r)
                for (Index c = 0; c < img.cols; ++c)
                    base->data()->setCell(static_cast<int>(c), static_cast<int>(r), img.values[static_cast<std::size_t>(r * img.cols + c)]);
            base->setGradient(grey);
            base->setDataRange(QCPRange(*lo, *hi > *lo ? *hi : *lo + 1));
            if (!o.matrix)
                continue;
            double top = 0;
            QCPColorMap* over = addRowMap(rect, g, frame, *o.matrix, t, top);
            // Token (c, r) covers image columns [c sx, (c + 1) sx) and rows [r sy, (r + 1) sy).
            over->data()->setRange(QCPRange(sx / 2 - 0.5, (static_cast<double>(g.w) - 0.5) * sx - 0.5),
                                   QCPRange(sy / 2 - 0.5, (static_cast<double>(g.h) - 0.5) * sy - 0.5));
            over->setGradient(heat);
            over->setDataRange(QCPRange(0, tops[k] > 0 ? tops[k] : 1));
            addQueryMarker(rect, QPointF((static_cast<double>(qc[qc.size() - 1]) + 0.5) * sx - 0.5, (static_cast<double>(qc[qc.size() - 2]) + 0.5) * sy - 0.5));
        }
        grid->setRowStretchFactor(2, 0.01);
    }

    // A red crossed circle on the query's own cell.
    void addQueryMarker(QCPAxisRect* rect, const std::vector<Index>& qc)
    {
        addQueryMarker(rect, QPointF(static_cast<double>(qc[qc.size() - 1]), static_cast<double>(qc[qc.size() - 2])));
    }
    void addQueryMarker(QCPAxisRect* rect, const QPointF& at)
    {
        auto* marker = m_plot->addGraph(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
        marker->setLineStyle(QCPGraph::lsNone);
        marker->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCrossCircle, QPen(QColor(255, 40, 40), 1.8), Qt::NoBrush, 13));
        marker->setData(QVector<double>{at.x()}, QVector<double>{at.y()});
    }

    // Square cells, every panel as large as the layout allows: capped in a narrow figure, fitted with
    // margins in a wide one.
    void adjustLayout(const QSize& size) override
    {
        if (m_heatmaps.empty())
            return;
        // A narrow view takes a row per mechanism only where it has the height for them: a small docked view (or
        // a figure of that size, 420 x 300) left those maps no height at all. The height of a narrow printed
        // figure is chosen for its rows (exportHeightFor measures them), and at that height the rows win.
        const bool narrow = isNarrow(size.width(), fontScale()) && (m_exporting || !m_grid || rowsGiveLargerPanels(size));
        arrangeGrid(narrow);
        m_plot->plotLayout()->setMargins(QMargins());
        if (narrow)
            fitNarrow(size);
        else
            fitWide(size);
    }

    bool rowsGiveLargerPanels(const QSize& size) const
    {
        const bool image = std::any_of(m_panels.begin(), m_panels.end(), [](const Panel& p) { return p.image != nullptr; });
        return rowsBeatColumns(size, static_cast<int>(m_panels.size()), image, fontScale());
    }

    // Rows of panels: every panel as wide as the narrowest has room for, by its own aspect (fitSquareCells);
    // QCPAxisRect's 15-pixel minimum margins would take a fifth of each panel's width.
    void fitNarrow(const QSize& size)
    {
        for (const CellRect& h : m_heatmaps)
            h.rect->setMinimumMargins(QMargins(2, 2, 2, 2));
        fitSquareCells(m_plot, m_heatmaps, size, [this](const QSize& s) { layoutAt(s); });
    }

    // Each heatmap's inner rect gets the aspect of its cells (cols x rows), the rest of its cell in the layout
    // goes to its margins (sides, and below: the title stays above it), so that its axes stay at the image's
    // edges and the columns keep their widths for the titles and captions above them.
    void fitWide(const QSize& size)
    {
        for (const CellRect& h : m_heatmaps) {
            h.rect->setMaximumSize(QWIDGETSIZE_MAX, QWIDGETSIZE_MAX);
            h.rect->setMinimumMargins(QMargins());
        }
        layoutAt(size);
        for (const CellRect& h : m_heatmaps) {
            const QRect r = h.rect->rect();
            if (r.width() < 8 || r.height() < 8)
                continue;
            const double px = std::min(r.width() / h.cols, r.height() / h.rows);   // pixels per cell
            const int extraX = r.width() - static_cast<int>(std::lround(px * h.cols));
            const int extraY = r.height() - static_cast<int>(std::lround(px * h.rows));
            const QMargins m = h.rect->margins();
            h.rect->setMinimumMargins(QMargins(m.left() + extraX / 2, m.top(), m.right() + extraX - extraX / 2, m.bottom() + extraY));
        }
        layoutAt(size);
    }

    // The grid's panels: in a wide figure one column per mechanism (its map, its colour scale, the input
    // image under them), as built; in a narrow one a row per mechanism (map, scale, image), so that a
    // journal's column keeps every panel an inch wide instead of a third of it.
    void arrangeGrid(bool narrow)
    {
        if (!m_grid || m_panels.empty() || narrow == m_narrowGrid)
            return;
        std::vector<GridCell> cells;
        int col = 0;
        for (std::size_t k = 0; k < m_panels.size(); ++k) {
            const Panel& p = m_panels[k];
            const int r = narrow ? 2 * static_cast<int>(k) : 0, c = narrow ? 0 : col;
            cells.push_back({p.title, r, c});
            cells.push_back({p.rect, r + 1, c});
            if (p.scale)
                cells.push_back({p.scale, r + 1, c + 1});
            if (p.image) {
                cells.push_back({p.caption, narrow ? r : 2, narrow ? 2 : c});
                cells.push_back({p.image, narrow ? r + 1 : 3, narrow ? 2 : c});
            }
            col += p.scale ? 2 : 1;
        }
        if (m_sharedScale)
            cells.push_back({m_sharedScale, 1, narrow ? 1 : col});
        moveElements(m_grid, cells);
        shareMargins(narrow);
        for (int r = 0; r < m_grid->rowCount(); ++r)
            m_grid->setRowStretchFactor(r, r % 2 == 0 ? 0.01 : 1.0);
        for (int c = 0; c < m_grid->columnCount(); ++c) {
            const bool scaleColumn = std::any_of(cells.begin(), cells.end(), [&](const GridCell& e) {
                return e.col == c && (e.element == m_sharedScale || std::any_of(m_panels.begin(), m_panels.end(), [&](const Panel& p) {
                                                                        return p.scale == e.element;
                                                                    }));
            });
            m_grid->setColumnStretchFactor(c, scaleColumn ? 0.01 : 1.0);
        }
        m_narrowGrid = narrow;
    }

    // A grid row is only as high as the lowest maximum of its elements, so the panels in one row share their top
    // and bottom margins: the maps with their scales and the images with each other when wide, all of them when
    // narrow (beside the images, the maps lost the 13 px more that the scales take at the top: 96 x 82). The
    // scales stacked in a narrow column share the width of their tick labels, so that each bar is drawn at its
    // width (the softmax scale's, with the shortest labels, was 17 px wide instead of 9).
    void shareMargins(bool narrow)
    {
        for (const Panel& p : m_panels) {
            if (p.image)
                p.image->setMarginGroup(QCP::msTop | QCP::msBottom, narrow ? m_mapGroup : m_imageGroup);
            if (p.scale)
                p.scale->axis()->axisRect()->setMarginGroup(QCP::msLeft | QCP::msRight, narrow ? m_scaleGroup : nullptr);
        }
    }

    struct Panel {
        QCPTextElement* title;
        QCPAxisRect* rect;
        QCPColorScale* scale;      // its own colour scale, or null (shared)
        QCPTextElement* caption;   // "... over <image>", or null
        QCPAxisRect* image;        // the input image with the attention over it, or null
    };
    std::vector<Panel> m_panels;   // per mechanism, grid data
    QCPColorScale* m_sharedScale = nullptr;
    QCPLayoutGrid* m_grid = nullptr;
    QCPMarginGroup* m_mapGroup = nullptr;     // the maps' and their scales' top and bottom margins
    QCPMarginGroup* m_imageGroup = nullptr;   // the images' (the maps' too in a narrow figure: arrangeGrid)
    QCPMarginGroup* m_scaleGroup = nullptr;   // the colour scales' tick label widths in a narrow figure
    bool m_narrowGrid = false;       // the panels in rows (arrangeGrid)
    bool m_exporting = false;        // choosing a narrow figure's height (exportHeightFor): its rows are measured
    QCPAxisRect* m_lineRect = nullptr;   // 1-D data: the plot

    std::vector<CellRect> m_heatmaps;   // the grid and image panels of the last rebuild
    QSpinBox* m_spin;
    QCheckBox *m_logBox, *m_sharedBox;
    int m_query = -1;
    bool m_updating = false;
};

}  // namespace

ResultView* createQueryView(QWidget* parent) { return new QueryView(parent); }

}  // namespace attnscope::widgets
