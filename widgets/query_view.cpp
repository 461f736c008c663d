// QueryView: the selected query's attention distribution A[t, :] under each mechanism: a line per
// mechanism over keys j (1-D data), or one heatmap per mechanism over the token grid with the query
// marked (grid data; 3-D grids show the query's frame), as in the MHLA paper's figure 3.
#include <QCheckBox>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QSpinBox>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "plot_style.h"
#include "views.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using Eigen::Index;

class QueryView : public PlotView {
public:
    explicit QueryView(QWidget* parent) : PlotView(parent)
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Query t"), this));
        m_spin = new QSpinBox(this);
        m_spin->setRange(0, 0);
        m_spin->setToolTip(tr("The query token shown (also set by clicking a row of the attention maps)"));
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
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("query"); }
    QString viewTitle() const override { return tr("Query distribution"); }
    QSize preferredExportSize() const override
    {
        if (m_result && gridTokens(*m_result).valid())
            return {std::max<int>(600, 40 + 400 * static_cast<int>(m_result->outcomes.size())), 460};
        return {1000, 560};
    }

    void setResult(std::shared_ptr<const ExploreResult> result) override
    {
        m_result = std::move(result);
        if (m_result && m_query >= m_result->n)
            m_query = -1;
        rebuild();
    }

    void setQuery(int token) override
    {
        m_query = token;
        rebuild();
    }

    QJsonObject saveState() const override
    {
        return QJsonObject{{"query", m_query}, {"log_y", m_logBox->isChecked()}, {"shared_scale", m_sharedBox->isChecked()}};
    }

    void restoreState(const QJsonObject& s) override
    {
        const QSignalBlocker b1(m_logBox), b2(m_sharedBox);
        if (s.contains("log_y"))
            m_logBox->setChecked(s["log_y"].toBool());
        if (s.contains("shared_scale"))
            m_sharedBox->setChecked(s["shared_scale"].toBool());
        if (s.contains("query"))
            m_query = s["query"].toInt(-1);
        if (m_result && m_query >= m_result->n)
            m_query = -1;
        rebuild();
    }

private:
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

    void rebuild()
    {
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K; then click a row of the\n"
                                       "attention maps to see that query's distribution over the keys."));
            return;
        }
        {
            m_updating = true;
            m_spin->setRange(0, static_cast<int>(std::max<Index>(0, m_result->n - 1)));
            m_updating = false;
        }
        clearPlot(m_plot);
        const GridTokens g = gridTokens(*m_result);
        bool isDefault = false;
        const Index t = shownQuery(g, isDefault);
        {
            m_updating = true;
            m_spin->setValue(static_cast<int>(t));
            m_updating = false;
        }
        QString title = tr("Attention of query t = %1%2 over the keys").arg(t).arg(coordText(t));
        if (isDefault)
            title += tr("   (default query; click a map row to choose)");
        auto* titleElement = new QCPTextElement(m_plot, title, plotFont(kTitlePt, true));
        m_plot->plotLayout()->addElement(0, 0, titleElement);
        if (g.valid())
            buildGrid(g, t);
        else
            buildLine(t);
        m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    void buildLine(Index t)
    {
        auto* rect = new QCPAxisRect(m_plot, true);
        m_plot->plotLayout()->addElement(1, 0, rect);
        styleAxisRect(rect);
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("key j"));
        y->setLabel(tr("attention weight A[t, j]"));
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
            y->setScaleType(QCPAxis::stLogarithmic);
            y->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
            y->setNumberFormat("eb");
            y->setNumberPrecision(0);
            if (std::isfinite(lo))
                y->setRange(std::max(lo, hi * 1e-12) / 2, hi * 2);
        } else if (std::isfinite(lo)) {
            y->setRange(std::min(0.0, lo), hi + 0.05 * (hi - std::min(0.0, lo)));
        }
        auto* mark = new QCPItemStraightLine(m_plot);
        mark->setClipAxisRect(rect);
        mark->point1->setAxes(x, y);
        mark->point2->setAxes(x, y);
        mark->point1->setTypeY(QCPItemPosition::ptAxisRectRatio);
        mark->point2->setTypeY(QCPItemPosition::ptAxisRectRatio);
        mark->point1->setAxisRect(rect);
        mark->point2->setAxisRect(rect);
        mark->point1->setCoords(static_cast<double>(t), 0);
        mark->point2->setCoords(static_cast<double>(t), 1);
        mark->setPen(QPen(QColor(60, 60, 60), 1, Qt::DashLine));
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
            addNote(rect, failed.join('\n'));
    }

    void addNote(QCPAxisRect* rect, const QString& text)
    {
        auto* note = new QCPItemText(m_plot);
        note->setClipAxisRect(rect);
        note->position->setType(QCPItemPosition::ptAxisRectRatio);
        note->position->setAxisRect(rect);
        note->position->setCoords(0.02, 0.02);
        note->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
        note->setTextAlignment(Qt::AlignLeft);
        note->setText(text);
        note->setFont(plotFont(kTickPt));
        note->setColor(QColor(170, 20, 20));
        note->setBrush(QColor(255, 255, 255, 220));
    }

    void buildGrid(const GridTokens& g, Index t)
    {
        const auto qc = m_result->grid_coords(t);
        const Index frame = qc.size() == 3 ? qc[0] : 0;
        const Index qr = qc[qc.size() - 2], qcol = qc[qc.size() - 1];
        const bool shared = m_sharedBox->isChecked();
        auto* grid = new QCPLayoutGrid;
        m_plot->plotLayout()->addElement(1, 0, grid);
        auto* group = new QCPMarginGroup(m_plot);
        QCPColorScale* sharedScale = nullptr;
        double sharedMax = 0;
        std::vector<QCPColorMap*> maps;
        int col = 0;
        for (const auto& o : m_result->outcomes) {
            auto* title = new QCPTextElement(m_plot, mechanismLabel(o.result.mechanism), plotFont(kLabelPt, true));
            title->setTextColor(mechanismColor(o.result.mechanism).darker(130));
            grid->addElement(0, col, title);
            auto* rect = new QCPAxisRect(m_plot, true);
            grid->addElement(1, col, rect);
            styleAxisRect(rect);
            rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            auto* x = rect->axis(QCPAxis::atBottom);
            auto* y = rect->axis(QCPAxis::atLeft);
            x->setLabel(tr("grid column"));
            y->setLabel(tr("grid row"));
            x->grid()->setVisible(false);
            y->grid()->setVisible(false);
            setIntegerTicks(x);
            setIntegerTicks(y);
            y->setRangeReversed(true);
            x->setRange(-0.5, static_cast<double>(g.w) - 0.5);
            y->setRange(-0.5, static_cast<double>(g.h) - 0.5);
            ++col;
            if (!o.matrix) {
                addNote(rect, tr("failed:\n%1").arg(QString::fromStdString(o.error)));
                continue;
            }
            auto* map = new QCPColorMap(x, y);
            map->setInterpolate(false);
            map->data()->setSize(static_cast<int>(g.w), static_cast<int>(g.h));
            map->data()->setRange(QCPRange(0, static_cast<double>(g.w) - 1), QCPRange(0, static_cast<double>(g.h) - 1));
            double hi = 0;
            for (Index r = 0; r < g.h; ++r)
                for (Index c = 0; c < g.w; ++c) {
                    const Index j = g.at(frame, r, c);
                    const double v = j >= 0 ? (*o.matrix)(t, j) : std::numeric_limits<double>::quiet_NaN();
                    if (std::isfinite(v))
                        hi = std::max(hi, std::abs(v));
                    map->data()->setCell(static_cast<int>(c), static_cast<int>(r), v);
                }
            maps.push_back(map);
            sharedMax = std::max(sharedMax, hi);
            if (!shared) {
                auto* scale = new QCPColorScale(m_plot);
                grid->addElement(1, col, scale);
                ++col;
                scale->setBarWidth(10);
                scale->setMarginGroup(QCP::msTop | QCP::msBottom, group);
                scale->axis()->setTickLabelFont(plotFont(kTickPt));
                scale->axis()->setLabelFont(plotFont(kLabelPt));
                scale->axis()->ticker()->setTickCount(4);
                scale->axis()->setNumberFormat("gb");
                map->setColorScale(scale);
                scale->setGradient(colorGradient(ColorMap::viridis));
                scale->setDataRange(QCPRange(0, hi > 0 ? hi : 1));
                grid->setColumnStretchFactor(col - 1, 0.01);
            }
            auto* marker = m_plot->addGraph(x, y);
            marker->setLineStyle(QCPGraph::lsNone);
            marker->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCrossCircle, QPen(QColor(255, 40, 40), 1.8), Qt::NoBrush, 13));
            marker->setData(QVector<double>{static_cast<double>(qcol)}, QVector<double>{static_cast<double>(qr)});
        }
        if (shared && !maps.empty()) {
            sharedScale = new QCPColorScale(m_plot);
            grid->addElement(1, col, sharedScale);
            sharedScale->setBarWidth(12);
            sharedScale->setMarginGroup(QCP::msTop | QCP::msBottom, group);
            sharedScale->axis()->setTickLabelFont(plotFont(kTickPt));
            sharedScale->axis()->setLabelFont(plotFont(kLabelPt));
            sharedScale->axis()->setLabel(tr("attention weight A[t, j]"));
            for (auto* m : maps)
                m->setColorScale(sharedScale);
            sharedScale->setGradient(colorGradient(ColorMap::viridis));
            sharedScale->setDataRange(QCPRange(0, sharedMax > 0 ? sharedMax : 1));
            grid->setColumnStretchFactor(col, 0.01);
        }
        grid->setRowStretchFactor(0, 0.01);
        grid->setColumnSpacing(4);
        if (qc.size() == 3) {
            auto* foot = new QCPTextElement(m_plot, tr("keys of frame %1 shown").arg(frame), plotFont(kTickPt));
            m_plot->plotLayout()->addElement(2, 0, foot);
        }
    }

    std::shared_ptr<const ExploreResult> m_result;
    QSpinBox* m_spin;
    QCheckBox *m_logBox, *m_sharedBox;
    int m_query = -1;
    bool m_updating = false;
};

}  // namespace

ResultView* createQueryView(QWidget* parent) { return new QueryView(parent); }

}  // namespace attnscope::widgets
