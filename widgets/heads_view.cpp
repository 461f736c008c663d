// HeadsView (heads_view.h): a grid of small attention maps, mechanisms down and the page's heads across,
// drawn from an analysis::HeadsResult. Each map is the result's reduced image (the largest weight of each
// cell), grey where a causal query may not see the keys; each row has its colour scale; a click names the
// head under the mouse.
#include "heads_view.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <QPushButton>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "analysis/heads.h"
#include "analysis/metric_table.h"
#include "curves.h"
#include "io/selection.h"
#include "maps_panels.h"
#include "plot_util.h"
#include "view_base.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using Eigen::Index;

// "rank 37" and "H/ln n 0.7123": the values the Metrics view shows for a result, in its digits.
// `digits` < 0: the Metrics view's; a wrapped figure's narrow columns take 2.
QString metricText(const analysis::MechanismResult& r, std::string_view key, const QString& name, int digits = -1)
{
    const analysis::MetricEntry* e = analysis::find_metric(key);
    const std::optional<double> v = e ? e->read(r) : std::nullopt;
    if (!v)
        return QStringLiteral("%1 \u2014").arg(name);
    if (e->kind == analysis::MetricKind::count)
        return QStringLiteral("%1 %2").arg(name).arg(static_cast<qlonglong>(*v));
    return QStringLiteral("%1 %2").arg(name, fmtNum(*v, digits < 0 ? e->view_digits : digits));
}

class HeadsViewImpl : public PlotViewOf<HeadsView> {
public:
    explicit HeadsViewImpl(QWidget* parent) : PlotViewOf<HeadsView>(parent)
    {
        auto* tools = toolRow();
        m_prev = new QPushButton(tr("\u25c0 Prev"), this);
        m_next = new QPushButton(tr("Next \u25b6"), this);
        m_page = new QLabel(this);
        m_status = new QLabel(this);
        m_prev->setToolTip(tr("The previous %1 heads").arg(kPageSize));
        m_next->setToolTip(tr("The next %1 heads").arg(kPageSize));
        tools->addWidget(m_prev);
        tools->addWidget(m_page);
        tools->addWidget(m_next);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Colour map"), this));
        m_cmapBox = colorMapBox(this);
        tools->addWidget(m_cmapBox);
        tools->addSpacing(12);
        tools->addWidget(m_status, 1);
        setToolTip(tr("Click a map to open that head in the Maps view"));
        connect(m_prev, &QPushButton::clicked, this, [this] { askPage(m_first - kPageSize); });
        connect(m_next, &QPushButton::clicked, this, [this] { askPage(m_first + kPageSize); });
        connect(m_cmapBox, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        connect(m_plot, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { m_pressPos = e->pos(); });
        connect(m_plot, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
            if ((e->pos() - m_pressPos).manhattanLength() <= 3 && e->button() == Qt::LeftButton)
                click(e->pos());
        });
        m_saved.addByText("colormap", m_cmapBox);
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("heads"); }
    QString viewTitle() const override { return tr("Heads"); }

    // About 170 px per small map and 110 px for the row's scale and labels.
    QSize preferredExportSize() const override
    {
        const int cols = m_heads ? std::max<int>(1, static_cast<int>(m_heads->maps.size())) : 4;
        const int rows = m_heads ? std::max<int>(1, static_cast<int>(m_heads->mechanisms.size())) : 3;
        return {std::max(600, 120 + cols * 175 + 110), 150 + rows * 200};
    }

    // A narrow figure (a journal column: plot_util.h isNarrow) wraps the heads onto rows of as many maps as keep
    // about 95 logical pixels (an inch at 96 dpi) each beside the row's labels and colour scale; on screen and
    // in wide figures the page is one row.
    static int perRowFor(int width, double fontScale, int shown)
    {
        if (!isNarrow(width, fontScale))
            return 0;
        const double fs = std::max(0.5, fontScale);
        const int fit = static_cast<int>((width - 110 * fs) / (95 * fs));
        return std::clamp(fit, 1, std::max(1, shown));
    }

    int shownHeads() const { return m_heads ? static_cast<int>(m_heads->maps.size()) : 0; }

    // The wrapped layout is built before the fonts are scaled for the export and the screen's afterwards
    // (PlotPane scales the fonts of the elements that exist when it starts).
    void renderTo(QPainter* painter, const QSize& size, double font_scale) override
    {
        const int perRow = perRowFor(size.width(), font_scale, shownHeads());
        const bool wrap = perRow != m_perRow;
        if (wrap) {
            m_perRow = perRow;
            rebuild();
        }
        PlotViewOf<HeadsView>::renderTo(painter, size, font_scale);
        if (wrap) {
            m_perRow = 0;
            rebuild();
        }
    }

    // Wrapped: each block of heads takes a row of maps per mechanism, with their titles; the page's title,
    // details and foot lines above and below.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        const int shown = shownHeads();
        const int perRow = perRowFor(width, font_scale, shown);
        if (perRow == 0)
            return fallback;
        const double fs = std::max(0.5, font_scale);
        const int blocks = (shown + perRow - 1) / perRow;
        const auto mechs = static_cast<double>(std::max<std::size_t>(1, m_heads->mechanisms.size()));
        const double side = (width - 110 * fs) / perRow - 10 * fs;
        const double height = 100 * fs + blocks * (mechs * (side + 42 * fs) + 18 * fs) + 50 * fs;
        return std::max(fallback, std::min(static_cast<int>(std::lround(height)), kMaxExportHeight));
    }

    void setResult(std::shared_ptr<const analysis::ExploreResult> result) override
    {
        // Nothing to describe any more (no data, an error): the heads of older inputs go too.
        if (!result && m_heads) {
            m_heads.reset();
            rebuild();
        }
    }

    void setHeads(std::shared_ptr<const analysis::HeadsResult> heads) override
    {
        m_heads = std::move(heads);
        if (m_heads)
            m_first = static_cast<int>(m_heads->first);
        rebuild();
    }
    std::shared_ptr<const analysis::HeadsResult> heads() const override { return m_heads; }
    int pageFirst() const override { return m_first; }

    void setProgress(double fraction, const QString& stage) override
    {
        m_status->setText(fraction < 0 ? QString() : tr("computing %1 (%2 %)").arg(stage).arg(std::lround(fraction * 100)));
    }

    QJsonObject saveState() const override
    {
        QJsonObject s = m_saved.save();
        s[QStringLiteral("first_head")] = m_first;
        return s;
    }

    void restoreState(const QJsonObject& state) override
    {
        m_saved.restore(state);
        if (state.contains(QStringLiteral("first_head")))
            m_first = std::max(0, state[QStringLiteral("first_head")].toInt());
        rebuild();
    }

protected:
    void adjustLayout(const QSize& size) override
    {
        std::vector<CellRect> cells;
        for (const Cell& c : m_cells)
            cells.push_back({c.rect, static_cast<double>(c.cols), static_cast<double>(c.rows)});
        if (cells.empty())
            return;
        const auto layOut = [this](const QSize& s) { layoutAt(s); };
        fitSquareCells(m_plot, cells, size, layOut);
        // The numbers on a third line of their own when a column is too narrow for "rank · entropy" (the
        // titles are taller then: the cells are fitted again).
        bool split = false;
        for (const Cell& c : m_cells)
            if (c.title && !c.numbers.isEmpty())
                split = split || QFontMetricsF(c.title->font()).horizontalAdvance(c.numbers) > c.rect->width() + 8;
        if (split != m_split) {
            m_split = split;
            for (const Cell& c : m_cells)
                if (c.title)
                    c.title->setText(titleText(c));
            fitSquareCells(m_plot, cells, size, layOut);
        }
    }

private:
    struct Cell {
        QCPAxisRect* rect = nullptr;
        int headIndex = -1;  // -1: the data have no head axis
        std::size_t map = 0;  // into m_heads->maps
        std::size_t panel = 0;
        Index cols = 1, rows = 1;
        QCPTextElement* title = nullptr;
        QString head, numbers;   // the title's lines: "head 3" and "rank 37 · H/ln n 0.71" (empty on failure)
    };

    // The head on the first line, the numbers on the second (or, split, rank and entropy on two): a narrow
    // column shortens a number's line, never the word that names the number.
    QString titleText(const Cell& c) const
    {
        if (c.numbers.isEmpty())
            return c.head;
        return c.head + QLatin1Char('\n') + (m_split ? QString(c.numbers).replace(QStringLiteral(" \u00b7 "), QStringLiteral("\n")) : c.numbers);
    }

    Index totalHeads() const { return m_heads ? std::max<Index>(1, m_heads->heads) : 0; }

    void askPage(int first)
    {
        const Index total = totalHeads();
        if (total == 0 || first < 0 || first >= total || first == m_first)
            return;
        m_first = first;
        updatePageControls();
        emit pageRequested(first);
    }

    void updatePageControls()
    {
        const Index total = totalHeads();
        const Index shown = m_heads ? static_cast<Index>(m_heads->maps.size()) : 0;
        m_prev->setEnabled(total > 0 && m_first > 0);
        m_next->setEnabled(total > 0 && m_first + kPageSize < total);
        if (!m_heads || m_heads->heads == 0)
            m_page->setText(m_heads ? tr("one head (no head axis)") : QString());
        else if (m_heads->first != m_first)
            m_page->setText(tr("heads %1\u2013%2 of %3 asked").arg(m_first).arg(std::min<Index>(m_first + kPageSize, total) - 1).arg(total));
        else
            m_page->setText(tr("heads %1\u2013%2 of %3").arg(m_heads->first).arg(m_heads->first + shown - 1).arg(total));
    }

    // "q head 5 (kv 2)" for grouped-query attention, "head 5" otherwise.
    QString headName(const analysis::HeadMaps& hm) const
    {
        if (!hm.head)
            return tr("the selection");
        if (hm.kv_head && m_heads->kv_heads != m_heads->heads)
            return tr("q head %1 (kv %2)").arg(*hm.head).arg(*hm.kv_head);
        return tr("head %1").arg(*hm.head);
    }

    QString pageTitle() const
    {
        const analysis::TensorSource& src = m_heads->request.base.source;
        const QString file = QFileInfo(QString::fromStdString(src.q_ref.file)).fileName();
        QString heads = m_heads->heads == 0 ? tr("one head (no head axis)")
                                            : tr("heads %1\u2013%2 of %3")
                                                  .arg(m_heads->first)
                                                  .arg(m_heads->first + static_cast<Index>(m_heads->maps.size()) - 1)
                                                  .arg(m_heads->heads);
        if (m_heads->kv_heads > 0 && m_heads->kv_heads != m_heads->heads)
            heads += tr(", %1 key/value heads").arg(m_heads->kv_heads);
        const QString layer = m_heads->layer ? tr("layer %1").arg(*m_heads->layer) : tr("no layer axis");
        if (m_perRow > 0)   // a wrapped (narrow) figure: two short lines rather than one cut short
            return tr("%1, %2\n%3 (N = %4)").arg(heads, layer, file).arg(m_heads->n);
        return tr("Every head: %1, %2 \u00b7 %3 (N = %4)").arg(heads, layer, file).arg(m_heads->n);
    }

    // What the page was computed with: the queries and keys read and the mechanism options.
    QString detailsText() const
    {
        const analysis::ExploreRequest& base = m_heads->request.base;
        QStringList parts;
        parts << QString::fromStdString(base.source.q_ref.name) + QStringLiteral(", ") +
                     QString::fromStdString(base.source.k_ref.name);
        for (const auto& [axis, index] : base.source.selection.at)
            if (axis != 'h')
                parts << QStringLiteral("%1=%2").arg(QChar::fromLatin1(axis)).arg(index);
        if (base.source.selection.prefix_tokens > 0)
            parts << tr("prefix tokens %1 dropped").arg(base.source.selection.prefix_tokens);
        const QString options = optionsText(base.options);
        if (!options.isEmpty())
            parts << options;
        return parts.join(QStringLiteral(" \u00b7 "));
    }

    void rebuild()
    {
        m_cells.clear();
        clearPlot(m_plot);
        updatePageControls();
        if (!m_heads || m_heads->maps.empty()) {
            showPlotMessage(m_plot, tr("No heads yet.\nWith queries and keys assigned, this tab shows every head of the layer:\n"
                                       "one small map per mechanism and head, with its rank and entropy."));
            return;
        }
        auto* layout = m_plot->plotLayout();
        layout->addElement(0, 0, addTitle(m_plot, pageTitle(), plotFont(kTitlePt, true)));
        auto* details = addTitle(m_plot, detailsText(), plotFont(kTickPt));
        details->setTextColor(QColor(60, 60, 60));
        layout->addElement(1, 0, details);
        auto* grid = new QCPLayoutGrid;
        layout->addElement(2, 0, grid);
        const double top = m_heads->request.clip_percentile;
        const QString range = top >= 100 ? tr("largest") : tr("%1th percentile").arg(top);
        // Short lines of their own in a wrapped (narrow) figure, where one line would be cut short.
        const QString footText =
            m_perRow > 0 ? tr("Colours shared by each row's heads:\n0 to the %1 of their weights;\neach cell: the largest "
                              "weight it covers.\nGrey: keys a causal query may not see.\nr: numerical rank, p: rank of the past\nblock A[h:N, :h], H: entropy / ln n.")
                               .arg(range)
                         : tr("Each row's colours are shared by its heads: 0 to the %1 of their weights (each cell drawn as "
                              "the largest weight it covers). Grey: keys a causal query may not see.")
                               .arg(range);
        auto* foot = addTitle(m_plot, footText, plotFont(kTickPt));
        foot->setTextColor(QColor(60, 60, 60));
        layout->addElement(3, 0, foot);
        for (int r : {0, 1, 3})
            layout->setRowStretchFactor(r, 0.01);
        grid->setColumnSpacing(10);
        grid->setRowSpacing(0);
        // A narrow figure wraps the page's heads onto rows of perRow (each block: every mechanism's row).
        const int shown = static_cast<int>(m_heads->maps.size());
        const int perRow = m_perRow > 0 ? std::min(m_perRow, shown) : shown;
        for (int first = 0, block = 0; first < shown; first += perRow, ++block)
            for (std::size_t m = 0; m < m_heads->mechanisms.size(); ++m)
                addRow(grid, m, block, {first, std::min(shown, first + perRow)}, perRow);
        for (int c = 0; c + 1 < grid->columnCount(); ++c)
            grid->setColumnStretchFactor(c, 1.0);
        grid->setColumnStretchFactor(grid->columnCount() - 1, 0.01);
        for (int r = 0; r < grid->rowCount(); ++r)
            grid->setRowStretchFactor(r, r % 2 == 0 ? 0.01 : 1.0);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // Mechanism `m`'s row of block `block`: its maps of the page's heads heads.first .. heads.second - 1
    // (titles above, in grid row 2 (block M + m)) and the row's colour scale in column perRow.
    void addRow(QCPLayoutGrid* grid, std::size_t m, int block, std::pair<int, int> heads, int perRow)
    {
        const analysis::ColourRange range = m_heads->ranges[m];
        const attention::Mechanism mech = m_heads->mechanisms[m];
        auto* group = new QCPMarginGroup(m_plot);
        QCPColorGradient gradient = colorGradient(range.diverging ? ColorMap::diverging : colorMapFromName(m_cmapBox->currentText()));
        gradient.setNanHandling(QCPColorGradient::nhNanColor);
        gradient.setNanColor(maskColour());
        const int row = 2 * (block * static_cast<int>(m_heads->mechanisms.size()) + static_cast<int>(m));
        const bool lastRow = m + 1 == m_heads->mechanisms.size();
        int col = 0;
        std::vector<QCPColorMap*> maps;
        for (auto h = static_cast<std::size_t>(heads.first); h < static_cast<std::size_t>(heads.second); ++h, ++col) {
            const analysis::HeadMaps& hm = m_heads->maps[h];
            const analysis::HeadPanel& p = hm.panels[m];
            Cell cell;
            cell.head = headName(hm);
            // Causal heads lead with the past block's rank (the d bound's measure; the full rank is near N for
            // every causal matrix), the Maps view's titles alike.
            const bool past = p.result.past_block && p.result.past_block->spectrum;
            if (p.error.empty())
                cell.numbers = m_perRow > 0   // a wrapped figure's narrow columns: short names, the foot says them
                                   ? metricText(p.result, past ? "past_block_rank" : "rank", past ? tr("p") : tr("r")) +
                                         QStringLiteral(" \u00b7 ") + metricText(p.result, "entropy_normalized_mean", tr("H"), 2)
                                   : metricText(p.result, past ? "past_block_rank" : "rank", past ? tr("past rank") : tr("rank")) +
                                         QStringLiteral(" \u00b7 ") +
                                         metricText(p.result, "entropy_normalized_mean", tr("H/ln n"));
            cell.title = addTitle(m_plot, titleText(cell), plotFont(kTickPt, true));
            grid->addElement(row, col, cell.title);
            auto* rect = addAxisRect(m_plot, grid, row + 1, col);
            rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            const Index cols = std::max<Index>(1, p.image.cols), rows = std::max<Index>(1, p.image.rows);
            setHeatmapAxes(rect, static_cast<double>(cols), static_cast<double>(rows), lastRow ? tr("keys") : QString(),
                           col == 0 ? tr("%1\nqueries").arg(mechanismLabel(mech)) : QString());
            for (QCPAxis* ax : {rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft)}) {
                ax->setTickLabels(false);
                ax->setTicks(false);
            }
            cell.rect = rect;
            cell.headIndex = hm.head ? static_cast<int>(*hm.head) : -1;
            cell.map = h;
            cell.panel = m;
            cell.cols = cols;
            cell.rows = rows;
            m_cells.push_back(cell);
            if (!p.error.empty()) {
                addPanelMessage(m_plot, rect, QString::fromStdString(p.error));
                continue;
            }
            maps.push_back(addHeatmap(rect, static_cast<int>(cols), static_cast<int>(rows)));
            fillMap(maps.back(), p);
        }
        auto* scale = addColorScale(m_plot, range.diverging ? tr("%1 weight (signed)").arg(mechanismLabel(mech)) : tr("%1 weight").arg(mechanismLabel(mech)),
                                    12, group);
        scale->setGradient(gradient);
        scale->setDataRange(QCPRange(range.lo, range.hi));
        grid->addElement(row + 1, perRow, scale);
        for (QCPColorMap* map : maps)
            map->setColorScale(scale);   // the scale's gradient and range
    }

    // The image's cells; NaN (the mask colour) where only keys a causal query may not see lie.
    static void fillMap(QCPColorMap* map, const analysis::HeadPanel& p)
    {
        const double nan = std::numeric_limits<double>::quiet_NaN();
        for (Index r = 0; r < p.image.rows; ++r)
            for (Index c = 0; c < p.image.cols; ++c) {
                const auto i = static_cast<std::size_t>(r * p.image.cols + c);
                const bool masked = !p.masked.empty() && p.masked[i] != 0;
                map->data()->setCell(static_cast<int>(c), static_cast<int>(r), masked ? nan : p.image.values[i]);
            }
    }

    const Cell* cellAt(const QPoint& pos) const
    {
        for (const Cell& c : m_cells)
            if (c.rect->rect().contains(pos))
                return &c;
        return nullptr;
    }

    void hover(const QPoint& pos)
    {
        const Cell* c = cellAt(pos);
        if (!c || !m_heads)
            return;
        const analysis::HeadMaps& hm = m_heads->maps[c->map];
        const analysis::HeadPanel& p = hm.panels[c->panel];
        QString text = tr("%1, %2").arg(mechanismLabel(p.mechanism), headName(hm));
        if (p.error.empty())
            text += tr(": %1%2, %3, %4 \u2014 click to open it in the Maps view")
                        .arg(p.result.past_block && p.result.past_block->spectrum
                                 ? metricText(p.result, "past_block_rank", tr("past-block rank")) + QStringLiteral(", ")
                                 : QString(),
                             metricText(p.result, "rank", tr("rank")), metricText(p.result, "effective_rank", tr("effective rank")),
                             metricText(p.result, "entropy_normalized_mean", tr("normalised entropy")));
        else
            text += QStringLiteral(": ") + QString::fromStdString(p.error);
        emit statusMessage(text);
    }

    void click(const QPoint& pos)
    {
        if (const Cell* c = cellAt(pos))
            emit headActivated(c->headIndex);
    }

    std::shared_ptr<const analysis::HeadsResult> m_heads;
    std::vector<Cell> m_cells;
    int m_perRow = 0;       // heads per row: 0 = the whole page on one row (on screen, wide figures)
    bool m_split = false;   // rank and entropy on lines of their own (narrow columns)
    int m_first = 0;
    SavedControls m_saved;
    QPushButton *m_prev, *m_next;
    QLabel *m_page, *m_status;
    QComboBox* m_cmapBox;
    QPoint m_pressPos;
};

}  // namespace

HeadsView* createHeadsView(QWidget* parent) { return new HeadsViewImpl(parent); }

}  // namespace attnscope::widgets
