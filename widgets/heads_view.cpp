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
#include <QScrollArea>
#include <QStyle>
#include <QFontMetricsF>
#include <algorithm>
#include <cmath>
#include <limits>
#include <qcustomplot.h>

#include "analysis/heads.h"
#include "analysis/metric_table.h"
#include "curves.h"
#include "heads_gallery.h"
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
    // On screen a map is never smaller than this (an inch at 96 dpi and the numbers above it whole); when
    // the view is too low for that the page scrolls.
    static constexpr double kMinScreenSide = 96;

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
        // The plot scrolls down when the view is too low for maps of kMinScreenSide (never across: the heads
        // wrap onto as many rows as the width needs).
        if (auto* box = qobject_cast<QBoxLayout*>(layout())) {
            const int at = box->indexOf(m_plot);
            box->removeWidget(m_plot);
            m_scroll = new QScrollArea(this);
            m_scroll->setFrameShape(QFrame::NoFrame);
            m_scroll->setWidgetResizable(true);
            m_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
            m_scroll->setWidget(m_plot);
            box->insertWidget(at, m_scroll, 1);
            m_scroll->viewport()->installEventFilter(this);
        }
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

    // About 130 px per small map and 150 px for the row's label and scale.
    QSize preferredExportSize() const override
    {
        const int cols = m_heads ? std::max<int>(1, static_cast<int>(m_heads->maps.size())) : 4;
        const int rows = m_heads ? std::max<int>(1, static_cast<int>(m_heads->mechanisms.size())) : 3;
        return {std::max(600, 150 + cols * 140), 160 + rows * 170};
    }

    int shownHeads() const { return m_heads ? static_cast<int>(m_heads->maps.size()) : 0; }

    // An export lays the page out for its own size (heads per row, numbers on one line or two) and the
    // screen's arrangement comes back afterwards. The layout is built before PlotPane scales the fonts for
    // the export (it scales the fonts of the elements that exist when it starts).
    void renderTo(QPainter* painter, const QSize& size, double font_scale) override
    {
        const Gallery screen = m_gallery;
        beginExport(size.width(), font_scale, choose(size, font_scale, false, true));
        PlotViewOf<HeadsView>::renderTo(painter, size, font_scale);
        endExport(screen);
    }

    // The page built for an export of this width and font scale in arrangement `g`, and the screen's back.
    void beginExport(int width, double font_scale, const Gallery& g)
    {
        m_exporting = true;
        m_exportWidth = width;
        m_exportScale = std::max(0.5, font_scale);
        m_gallery = g;
        rebuild();
    }
    void endExport(const Gallery& screen)
    {
        m_exporting = false;
        m_exportScale = 1.0;
        m_gallery = screen;
        rebuild();
    }

    // The height the page needs at this width: the arrangement with maps of at least about an inch
    // (when the width allows) and no number cut, measured, at most kMaxExportHeight.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        if (shownHeads() == 0)
            return fallback;
        const Gallery screen = m_gallery;
        beginExport(width, font_scale, Gallery{});
        int height = 0;
        buildGrown(width, font_scale, true, kMaxExportHeight, height);
        endExport(screen);
        return std::clamp(height, std::min(fallback, 2 * 96), kMaxExportHeight);
    }

    void setResult(std::shared_ptr<const analysis::ExploreResult> result) override
    {
        // Nothing to describe any more (no data, an error): the heads of older inputs go too.
        if (!result && m_heads) {
            m_heads.reset();
            relayOutScreen(true);
        }
    }

    void setHeads(std::shared_ptr<const analysis::HeadsResult> heads) override
    {
        m_heads = std::move(heads);
        if (m_heads)
            m_first = static_cast<int>(m_heads->first);
        relayOutScreen(true);
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
    bool eventFilter(QObject* watched, QEvent* event) override
    {
        if (m_scroll && watched == m_scroll->viewport() && event->type() == QEvent::Resize)
            relayOutScreen(false);
        return PlotViewOf<HeadsView>::eventFilter(watched, event);
    }

    void adjustLayout(const QSize& size) override
    {
        std::vector<CellRect> cells;
        for (const Cell& c : m_cells)
            cells.push_back({c.rect, static_cast<double>(c.cols), static_cast<double>(c.rows)});
        if (cells.empty())
            return;
        fitSquareCells(m_plot, cells, size, [this](const QSize& s) { layoutAt(s); });
    }

private:
    struct Cell {
        QCPAxisRect* rect = nullptr;
        int headIndex = -1;  // -1: the data have no head axis
        std::size_t map = 0;  // into m_heads->maps
        std::size_t panel = 0;
        Index cols = 1, rows = 1;
    };

    // What a cell's title says: the rank that shows the d bound (the past block's on causal data: the full
    // rank is near N for every causal matrix, the Maps view's titles alike) and the normalised entropy.
    // On screen in words ("past rank 16", "H/ln n 0.9861"); in a figure short ("p 16", "H 0.99": the foot
    // says what they are). Empty parts for a failed panel.
    std::pair<QString, QString> cellNumbers(const analysis::HeadPanel& p, bool figure) const
    {
        if (!p.error.empty())
            return {tr("failed"), QString()};
        const bool past = p.result.past_block && p.result.past_block->spectrum;
        if (figure)
            return {metricText(p.result, past ? "past_block_rank" : "rank", past ? tr("p") : tr("r")),
                    metricText(p.result, "entropy_normalized_mean", tr("H"), 2)};
        return {metricText(p.result, past ? "past_block_rank" : "rank", past ? tr("past rank") : tr("rank")),
                metricText(p.result, "entropy_normalized_mean", tr("H/ln n"))};
    }

    static QString joinNumbers(const std::pair<QString, QString>& n, bool split)
    {
        if (n.second.isEmpty())
            return n.first;
        return n.first + (split ? QStringLiteral("\n") : QStringLiteral(" \u00b7 ")) + n.second;
    }

    // The mechanisms whose every panel on the page failed, with the first failure's message.
    std::vector<std::pair<attention::Mechanism, QString>> failedRows() const
    {
        std::vector<std::pair<attention::Mechanism, QString>> out;
        for (std::size_t m = 0; m < m_heads->mechanisms.size(); ++m) {
            QString message;
            bool all = !m_heads->maps.empty();
            for (const analysis::HeadMaps& hm : m_heads->maps) {
                const std::string& e = hm.panels[m].error;
                all = all && !e.empty();
                if (message.isEmpty() && !e.empty())
                    message = QString::fromStdString(e);
            }
            if (!message.isEmpty())
                out.emplace_back(m_heads->mechanisms[m], all ? message : tr("some heads: %1").arg(message));
        }
        return out;
    }

    // The foot's sentences: what the colours are, the mask, what a figure's short names mean, each failure.
    QStringList footSentences(bool figure) const
    {
        const double top = m_heads->request.clip_percentile;
        const QString range = top >= 100 ? tr("largest") : tr("%1th percentile").arg(top);
        QStringList out{tr("Each row's colours are shared by its heads: 0 to the %1 of their weights (each cell drawn as the "
                           "largest weight it covers).")
                            .arg(range),
                        tr("In each map queries run down and keys across; grey: keys a causal query may not see.")};
        if (!m_gallery.scaleLabels)
            out << tr("Each row's colour bar: its mechanism's attention weight.");
        if (figure)
            out << tr("r: numerical rank, p: rank of the past block A[h:N, :h], H: entropy / ln n.");
        for (const auto& [mech, message] : failedRows())
            out << tr("%1 failed: %2").arg(mechanismLabel(mech), message);
        return out;
    }

    static QFont scaledFont(double pt, bool bold, double scale)
    {
        return plotFont(pt * std::max(0.5, scale), bold);
    }

    // The arrangement of the page at `size` with fonts x `scale`: for each number of heads per row, the
    // side a map gets from the width and from the height after every title, number and label line (the
    // head names and numbers must fit that side whole); the largest side wins (more heads per row on a
    // tie). `grow`: the height is free (a scrolling screen, an export whose height is still to be chosen):
    // the most heads per row whose maps keep kMinScreenSide x scale (or the width of their texts) across,
    // and the height that estimate needs (relayOutScreen and exportHeightFor correct it by measuring).
    // `figure`: the numbers' short names (an export).
    Gallery choose(const QSize& size, double scale, bool grow, bool figure, int onlyPerRow = 0) const
    {
        // A figure whose maps would stay under half an inch tries its heads' names and numbers smaller (never
        // below 6.6 pt printed, the text rules' 6.5 pt with a margin).
        const double fs = std::max(0.5, scale);
        Gallery best;
        for (const double cell : {1.0, 0.83, 0.65}) {
            if (cell < 1.0 && (!figure || kTickPt * cell * fs < 6.6))
                break;
            Gallery g = chooseAt(size, scale, grow, figure, onlyPerRow, cell);
            if (best.perRow == 0 || g.side > best.side + 0.5)
                best = g;
            if (grow || g.side >= 48 * fs)
                break;
        }
        return best;
    }

    Gallery chooseAt(const QSize& size, double scale, bool grow, bool figure, int onlyPerRow, double cell) const
    {
        Gallery best;
        const int shown = shownHeads();
        if (shown == 0 || size.width() < 10)
            return best;
        const double fs = std::max(0.5, scale);
        const QFontMetricsF cellFm(scaledFont(kTickPt * cell, false, fs)), nameFm(scaledFont(kTickPt * cell, true, fs)),
            tickFm(scaledFont(kTickPt, false, fs)), labelFm(scaledFont(kLabelPt, false, fs)), titleFm(scaledFont(kTitlePt, true, fs));
        const auto mechs = static_cast<int>(std::max<std::size_t>(1, m_heads->mechanisms.size()));
        // The widest head name and number line, one line and split.
        double headW = 0, oneW = 0, splitW = 0;
        for (const analysis::HeadMaps& hm : m_heads->maps) {
            headW = std::max(headW, nameFm.horizontalAdvance(headName(hm)));
            for (const analysis::HeadPanel& p : hm.panels) {
                const auto n = cellNumbers(p, figure);
                const QFontMetricsF& fm = p.error.empty() ? cellFm : nameFm;
                oneW = std::max(oneW, fm.horizontalAdvance(joinNumbers(n, false)));
                splitW = std::max({splitW, fm.horizontalAdvance(n.first), fm.horizontalAdvance(n.second)});
            }
        }
        const double textW = std::max(headW, splitW) + 4;
        const double width = size.width();
        const double line = cellFm.lineSpacing() + 1;
        // Across: the row labels (the mechanisms' names, level) and the colour scale (bar, its ticks, its label).
        double labelW = labelFm.horizontalAdvance(tr("failed")), scaleLabelW = 0;
        for (const attention::Mechanism m : m_heads->mechanisms) {
            labelW = std::max(labelW, labelFm.horizontalAdvance(rowLabel(m)));
            scaleLabelW = std::max(scaleLabelW, labelFm.horizontalAdvance(scaleLabel(m)));
        }
        const double scaleBase = 12 * fs + 12 * fs + tickFm.horizontalAdvance(QStringLiteral("0.0075")) + 12 * fs;
        // Down: the title, the details (two lines at most), the foot, and per block the head names.
        const QString foot = wrapToPixels(footSentences(figure), scaledFont(kTickPt, false, fs), 0.92 * (width - 16), true);
        const double fixed = titleFm.lineSpacing() * (titleFm.horizontalAdvance(pageTitle(false)) > width - 16 ? 2 : 1) +
                             tickFm.lineSpacing() * (tickFm.horizontalAdvance(detailsText()) > width - 16 ? 2 : 1) +
                             tickFm.lineSpacing() * (foot.count(QLatin1Char('\n')) + 2) + 24 * fs;
        GalleryTexts t;
        t.shown = shown;
        t.mechanisms = mechs;
        t.fontScale = fs;
        t.textWidth = textW;
        t.oneLineWidth = oneW;
        t.rowLabelWidth = labelW;
        t.scaleLabelWidth = scaleLabelW;
        t.scaleLabelLine = labelFm.lineSpacing();
        t.scaleWidth = scaleBase;
        t.fixedHeight = fixed;
        t.blockHeight = nameFm.lineSpacing() + 6 * fs;
        t.numberLine = line;
        t.minSide = kMinScreenSide * (figure ? 0.9 : 1.0) * fs;
        return arrangeGallery(t, size, grow, onlyPerRow, cell);
    }

    // A row's label, left of its first map: the mechanism; a colour bar's label along it.
    QString rowLabel(attention::Mechanism m) const { return mechanismLabel(m); }
    QString scaleLabel(attention::Mechanism m) const
    {
        for (std::size_t i = 0; i < m_heads->mechanisms.size(); ++i)
            if (m_heads->mechanisms[i] == m && m_heads->ranges[i].diverging)
                return tr("%1 weight (signed)").arg(mechanismLabel(m));
        return tr("%1 weight").arg(mechanismLabel(m));
    }

    // The smallest map side, in pixels, of the arrangement built, laid out at `size` with fonts x `scale`.
    double measuredSide(const QSize& size, double scale)
    {
        return measureAt(size, scale, [this] {
            int side = 0;
            for (const Cell& c : m_cells)
                side = side == 0 ? std::min(c.rect->width(), c.rect->height()) : std::min({side, c.rect->width(), c.rect->height()});
            return side;
        });
    }

    // A grown arrangement's height, corrected by laying it out: the estimate plus what the maps lack of
    // `side`, once per map row (at most three rounds), never above `cap`.
    int fittedHeight(const Gallery& g, int width, double scale, int cap)
    {
        const int shown = shownHeads();
        const int rows = ((shown + g.perRow - 1) / g.perRow) * static_cast<int>(std::max<std::size_t>(1, m_heads->mechanisms.size()));
        int height = std::min(g.height, cap);
        for (int round = 0; round < 3 && height < cap; ++round) {
            const double side = measuredSide(QSize(width, height), scale);
            if (side >= std::floor(g.side) - 0.5)
                break;
            height = std::min(cap, height + static_cast<int>(std::ceil((g.side - side) * rows)) + 2);
        }
        return height;
    }

    // The grown arrangement built (the height free up to `cap`): from the most heads per row the estimate
    // allows down, each laid out and measured, the first whose maps keep their side (else the one with the
    // largest maps); its height in `height`.
    Gallery buildGrown(int width, double scale, bool figure, int cap, int& height)
    {
        const Gallery first = choose(QSize(width, cap), scale, true, figure);
        Gallery best;
        double bestSide = -1;
        height = 0;
        for (int perRow = std::max(1, first.perRow); perRow >= 1; --perRow) {
            const Gallery g = choose(QSize(width, cap), scale, true, figure, perRow);
            if (g.perRow == 0)
                continue;
            m_gallery = g;
            rebuild();
            const int h = fittedHeight(g, width, scale, cap);
            const double side = measuredSide(QSize(width, h), scale);
            if (side > bestSide + 0.5) {
                best = g;
                bestSide = side;
                height = h;
            }
            if (side >= std::floor(g.side) - 0.5)
                break;
        }
        if (best.perRow != m_gallery.perRow || best.split != m_gallery.split) {
            m_gallery = best;
            rebuild();
        }
        m_gallery = best;
        return best;
    }

    // The screen's arrangement for the scroll area's viewport: the page fills the view when its maps keep
    // kMinScreenSide, else it keeps that side and scrolls down. `force`: rebuild even if nothing changed.
    void relayOutScreen(bool force)
    {
        if (m_exporting)
            return;
        Gallery g;
        int minHeight = 0;
        QSize room;
        if (m_scroll && m_heads && !m_heads->maps.empty() && m_scroll->isVisible()) {
            const QSize port = m_scroll->viewport()->size();
            const int bar = m_scroll->style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, m_scroll);
            room = QSize(port.width() - bar, port.height());
            g = choose(room, 1.0, false, false);
        }
        // The foot's lines are broken for the width: a new width rebuilds too.
        const int width = m_scroll ? m_scroll->viewport()->width() : 0;
        const bool changed = g.perRow != m_gallery.perRow || g.split != m_gallery.split || width != m_builtWidth;
        m_builtWidth = width;
        m_gallery = g;
        if (changed || force)
            rebuild();
        if (g.perRow > 0 && measuredSide(room, 1.0) < kMinScreenSide - 0.5) {
            int height = 0;
            buildGrown(room.width(), 1.0, false, 20000, height);
            minHeight = std::max(room.height(), height);
        }
        m_plot->setMinimumHeight(minHeight);
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

    // `twoLines`: the heads and layer on one line, the file and N on the next (a narrow figure).
    QString pageTitle(bool twoLines) const
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
        if (twoLines)
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
        const int shown = static_cast<int>(m_heads->maps.size());
        const int perRow = m_gallery.perRow > 0 ? std::min(m_gallery.perRow, shown) : shown;
        // Widths in the fonts' unscaled units (an export scales every font by m_exportScale afterwards).
        const double width = std::max(200, m_exporting ? m_exportWidth : m_plot->width()) / m_exportScale;
        auto* layout = m_plot->plotLayout();
        const bool narrowTitle = QFontMetricsF(plotFont(kTitlePt, true)).horizontalAdvance(pageTitle(false)) > width - 16;
        layout->addElement(0, 0, addTitle(m_plot, pageTitle(narrowTitle), plotFont(kTitlePt, true)));
        auto* details = addTitle(m_plot, detailsText(), plotFont(kTickPt));
        details->setTextColor(QColor(60, 60, 60));
        layout->addElement(1, 0, details);
        auto* grid = new QCPLayoutGrid;
        layout->addElement(2, 0, grid);
        // The foot's lines, broken for the width (the export's fonts are scaled later: the same words fit).
        auto* foot = new QCPTextElement(m_plot, wrapToPixels(footSentences(m_exporting), plotFont(kTickPt), 0.92 * (width - 16), true),
                                        plotFont(kTickPt));
        foot->setTextColor(QColor(60, 60, 60));
        layout->addElement(3, 0, foot);
        for (int r : {0, 1, 3})
            layout->setRowStretchFactor(r, 0.01);
        grid->setColumnSpacing(10);
        grid->setRowSpacing(0);
        // The maps' own margins (addRow): the row's label left of the first column, "keys" under a block's last
        // row. The first column and those rows get more of the room in proportion, so that every map's free
        // size is the same (square cells then fit the common side, not the smallest of unequal ones).
        const QFontMetricsF labelFm(plotFont(kLabelPt * m_exportScale));
        double labelW = labelFm.horizontalAdvance(tr("failed"));
        for (const attention::Mechanism m : m_heads->mechanisms)
            labelW = std::max(labelW, labelFm.horizontalAdvance(rowLabel(m)));
        m_labelMargin = static_cast<int>(std::ceil(labelW + 12 * m_exportScale));
        m_keysMargin = 1;
        const double side = m_gallery.side > 1 ? m_gallery.side : 100;
        const std::size_t mechs = m_heads->mechanisms.size();
        int row = 0;
        for (int first = 0; first < shown; first += perRow) {
            const int last = std::min(shown, first + perRow);
            // The block's head names, once above its first mechanism's row.
            for (int h = first; h < last; ++h) {
                auto* name = addTitle(m_plot, headName(m_heads->maps[static_cast<std::size_t>(h)]), plotFont(kTickPt * m_gallery.cellFont, true));
                grid->addElement(row, h - first, name);
                if (h == first)   // centred over the map, not over the map and the row's label
                    name->setMargins(QMargins(m_labelMargin + 2, 2, 2, 2));
            }
            grid->setRowStretchFactor(row, 0.01);
            ++row;
            for (std::size_t m = 0; m < mechs; ++m, row += 2) {
                addRow(grid, m, row, {first, last}, perRow);
                grid->setRowStretchFactor(row, 0.01);
                grid->setRowStretchFactor(row + 1, m + 1 == mechs ? (side + m_keysMargin + 1) / (side + 2) : 1.0);
            }
        }
        for (int c = 0; c + 1 < grid->columnCount(); ++c)
            grid->setColumnStretchFactor(c, c == 0 ? (side + m_labelMargin + 1) / (side + 2) : 1.0);
        grid->setColumnStretchFactor(grid->columnCount() - 1, 0.01);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // The size of a failed panel: the cells of the same head's first map that did not fail (any head's when
    // the whole head failed), so that a failed cell takes the room of the others.
    std::pair<Index, Index> cellsOf(std::size_t h) const
    {
        for (std::size_t pass = 0; pass < 2; ++pass)
            for (std::size_t i = 0; i < m_heads->maps.size(); ++i) {
                if (pass == 0 && i != h)
                    continue;
                for (const analysis::HeadPanel& p : m_heads->maps[i].panels)
                    if (p.error.empty() && p.image.cols > 0 && p.image.rows > 0)
                        return {p.image.cols, p.image.rows};
            }
        return {1, 1};
    }

    // Mechanism `m`'s row of heads heads.first .. heads.second - 1: the numbers in grid row `row`, the maps
    // in row + 1, and the row's colour scale in column perRow. A failed panel is a grey map saying so, its
    // row's label says "failed" when every head failed, and the foot gives the message.
    void addRow(QCPLayoutGrid* grid, std::size_t m, int row, std::pair<int, int> heads, int perRow)
    {
        const analysis::ColourRange range = m_heads->ranges[m];
        const attention::Mechanism mech = m_heads->mechanisms[m];
        auto* group = new QCPMarginGroup(m_plot);
        QCPColorGradient gradient = colorGradient(range.diverging ? ColorMap::diverging : colorMapFromName(m_cmapBox->currentText()));
        gradient.setNanHandling(QCPColorGradient::nhNanColor);
        gradient.setNanColor(maskColour());
        const bool lastRow = m + 1 == m_heads->mechanisms.size();
        bool allFailed = true;
        for (const analysis::HeadMaps& hm : m_heads->maps)
            allFailed = allFailed && !hm.panels[m].error.empty();
        int col = 0;
        std::vector<QCPColorMap*> maps;
        for (auto h = static_cast<std::size_t>(heads.first); h < static_cast<std::size_t>(heads.second); ++h, ++col) {
            const analysis::HeadMaps& hm = m_heads->maps[h];
            const analysis::HeadPanel& p = hm.panels[m];
            auto* numbers = addTitle(m_plot, joinNumbers(cellNumbers(p, m_exporting), m_gallery.split), plotFont(kTickPt * m_gallery.cellFont, !p.error.empty()));
            if (!p.error.empty())
                numbers->setTextColor(QColor(170, 0, 0));
            grid->addElement(row, col, numbers);
            if (col == 0)
                numbers->setMargins(QMargins(m_labelMargin + 2, 2, 2, 2));
            auto* rect = addAxisRect(m_plot, grid, row + 1, col);
            rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            // Margins of their own: the row's label left of the first map, "keys" under the last row, a
            // pixel elsewhere (QCustomPlot's automatic margins keep room for ticks these maps do not draw).
            rect->setAutoMargins(QCP::msNone);
            rect->setMargins(QMargins(col == 0 ? m_labelMargin : 1, 1, 1, lastRow ? m_keysMargin : 1));
            const auto [cols, rows] = p.error.empty() ? std::pair<Index, Index>{std::max<Index>(1, p.image.cols), std::max<Index>(1, p.image.rows)}
                                                      : cellsOf(h);
            setHeatmapAxes(rect, static_cast<double>(cols), static_cast<double>(rows), QString(), QString());
            for (QCPAxis* ax : {rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft)}) {
                ax->setTickLabels(false);
                ax->setTicks(false);
            }
            if (col == 0) {   // the row's label, level, left of its first map ("MHLA failed" when every head failed)
                auto* label = new QCPItemText(m_plot);
                label->setClipToAxisRect(false);
                label->position->setType(QCPItemPosition::ptAxisRectRatio);
                label->position->setAxisRect(rect);
                label->position->setCoords(0, 0.5);
                label->setPositionAlignment(Qt::AlignRight | Qt::AlignVCenter);
                label->setPadding(QMargins(0, 0, 6, 0));
                label->setFont(plotFont(kLabelPt));
                label->setText(allFailed ? tr("%1\nfailed").arg(rowLabel(mech)) : rowLabel(mech));
                label->setTextAlignment(Qt::AlignRight);
                if (allFailed)
                    label->setColor(QColor(170, 0, 0));
            }
            Cell cell;
            cell.rect = rect;
            cell.headIndex = hm.head ? static_cast<int>(*hm.head) : -1;
            cell.map = h;
            cell.panel = m;
            cell.cols = cols;
            cell.rows = rows;
            m_cells.push_back(cell);
            if (!p.error.empty()) {
                rect->setBackground(QColor(236, 236, 236));
                addPanelMessage(m_plot, rect, tr("failed"))->setColor(QColor(170, 0, 0));
                continue;
            }
            maps.push_back(addHeatmap(rect, static_cast<int>(cols), static_cast<int>(rows)));
            fillMap(maps.back(), p);
        }
        auto* scale = addColorScale(m_plot, m_gallery.scaleLabels ? scaleLabel(mech) : QString(), 12, group);
        scale->setGradient(gradient);
        scale->setDataRange(QCPRange(range.lo, range.hi));
        grid->addElement(row + 1, perRow, scale);
        if (allFailed)
            scale->setVisible(false);
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
            text += tr(" failed: ") + QString::fromStdString(p.error);
        emit statusMessage(text);
    }

    void click(const QPoint& pos)
    {
        if (const Cell* c = cellAt(pos))
            emit headActivated(c->headIndex);
    }

    std::shared_ptr<const analysis::HeadsResult> m_heads;
    std::vector<Cell> m_cells;
    Gallery m_gallery;          // the arrangement drawn: the screen's, or an export's while it renders
    bool m_exporting = false;
    int m_exportWidth = 0;
    int m_builtWidth = 0;
    int m_labelMargin = 0, m_keysMargin = 0;   // the maps' left margin in the first column, bottom margin in a block's last row   // the viewport width the screen's page was built for
    double m_exportScale = 1.0;
    int m_first = 0;
    SavedControls m_saved;
    QScrollArea* m_scroll = nullptr;
    QPushButton *m_prev, *m_next;
    QLabel *m_page, *m_status;
    QComboBox* m_cmapBox;
    QPoint m_pressPos;
};

}  // namespace

HeadsView* createHeadsView(QWidget* parent) { return new HeadsViewImpl(parent); }

}  // namespace attnscope::widgets
