// CurvesView: a metric of a sweep against N or M, one line per mechanism, with a band for the spread over
// layers, heads, draws and seeds. The runs, their curves and the frame of the axes come from curve_sets.h
// (the mean and std of every point are the core's sweep_summary, the JSON summary of `attnscope sweep`);
// this file holds the widget: its controls, the list of runs with checkboxes that chooses which runs are
// drawn, the plot and its read-out, and its saved state. Reference lines: full rank (rank = N), and the
// feature dimension that bounds linear attention's rank when the sweep's data are synthetic (the only case
// in which the sweep knows d). The runs of one kind (against N, or against M) are overlaid, each run in its
// own line style.
#include <QComboBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QKeyEvent>
#include <QMenu>
#include <QMouseEvent>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>
#include <qcustomplot.h>

#include "analysis/sweep.h"
#include "curve_sets.h"
#include "curves.h"
#include "plot_util.h"
#include "view_base.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::SweepResult;
using attention::Mechanism;

QCPScatterStyle::ScatterShape markerOf(Mechanism m)
{
    return static_cast<QCPScatterStyle::ScatterShape>(mechanismStyle(m).marker);
}

// The marker of a mechanism's curve points (hollow ones filled white).
QCPScatterStyle markerStyle(Mechanism m, const QColor& color)
{
    const MechanismStyle style = mechanismStyle(m);
    return QCPScatterStyle(markerOf(m), color, style.hollow ? QColor(Qt::white) : color, style.marker_size);
}

class CurvesView : public SweepPlotView {
public:
    explicit CurvesView(QWidget* parent) : SweepPlotView(parent, QStringLiteral("curves"), tr("Curves"), {860, 560})
    {
        auto* tools = toolRow();
        // Each box after its label, in the order they are made (and tabbed through).
        auto field = [this, tools](const QString& label, const QList<std::pair<QString, QVariant>>& items, const QString& tip) {
            auto* l = new QLabel(label, this);
            tools->addWidget(l);
            QComboBox* box = comboBox(this, items, tip);
            tools->addWidget(box);
            return std::make_pair(l, box);
        };
        std::tie(m_kindLabel, m_kindBox) =
            field(tr("Against"), {{tr("N (sequence length)"), QStringLiteral("n")}, {tr("M (blocks)"), QStringLiteral("m")}},
                  tr("Sweeps over N and sweeps over M have different x axes: the view shows one kind at a time"));
        tools->addSpacing(12);
        // The interval first: the default wherever a point pools several units (one unit: no band).
        m_bandBox = field(tr("Band"),
                          {{tr("95% interval"), QStringLiteral("ci")},
                           {tr("min \u2013 max"), QStringLiteral("minmax")},
                           {tr("mean \u00b1 1 std"), QStringLiteral("std")},
                           {tr("none"), QStringLiteral("none")}},
                          tr("95% interval: of the mean over the layers, heads, draws and inputs pooled at each point, as "
                             "aggregate.csv computes it (a percentile bootstrap from 10 values, a t interval below, "
                             "none for one); min \u2013 max and \u00b1 1 std: their spread"))
                        .second;
        tools->addSpacing(12);
        m_xBox = field(tr("x axis"),
                       {{tr("auto"), QStringLiteral("auto")},
                        {tr("linear"), QStringLiteral("linear")},
                        {tr("log\u2082"), QStringLiteral("log2")},
                        {tr("log\u2081\u2080"), QStringLiteral("log10")}},
                       tr("auto: logarithmic when the values span more than 8\u00d7 (base 2 for powers of two)"))
                     .second;
        m_yBox = field(tr("y axis"), {{tr("auto"), QStringLiteral("auto")}, {tr("linear"), QStringLiteral("linear")}, {tr("log"), QStringLiteral("log")}},
                       tr("auto: linear, except seconds spanning more than 8\u00d7"))
                     .second;
        tools->addStretch(1);
        buildRunList();
        for (QComboBox* b : {m_bandBox, m_xBox, m_yBox})
            connect(b, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_kindBox, &QComboBox::currentIndexChanged, this, [this](int) {
            refreshRunList();
            rebuild();
        });
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        m_saved.addByData("kind", m_kindBox);
        m_saved.addByData("band", m_bandBox);
        m_saved.addByData("x_scale", m_xBox);
        m_saved.addByData("y_scale", m_yBox);
        refreshRunList();
        rebuild();
    }

    void setSweep(std::shared_ptr<const SweepResult> sweep) override
    {
        QList<CurveSet> sets;
        if (sweep)
            sets.append(CurveSet{std::move(sweep), QString()});
        setCurveSets(sets);
    }

    // Runs that were shown before keep their checkbox; a new run is shown, and its kind becomes the view's.
    void setCurveSets(const QList<CurveSet>& sets) override
    {
        const char newKind = m_runs.set(sets);
        m_sweep = m_runs.empty() ? nullptr : m_runs.all().back().sweep;
        if (newKind)
            setKind(newKind);
        else
            keepKindWithRuns();
        refreshRunList();
        rebuild();
    }

    void setNote(const QString& note) override
    {
        m_note = note;
        rebuild();
    }

    // The saved controls, and the runs whose checkbox is off (by name).
    QJsonObject saveState() const override
    {
        QJsonObject s = m_saved.save();
        const QStringList hidden = m_runs.hiddenNames();
        if (!hidden.isEmpty())
            s[QStringLiteral("hidden_runs")] = QJsonArray::fromStringList(hidden);
        return s;
    }

    void restoreState(const QJsonObject& state) override
    {
        m_saved.restore(state);
        QStringList hidden;
        for (const auto& v : state.value(QStringLiteral("hidden_runs")).toArray())
            hidden << v.toString();
        m_runs.setHiddenNames(hidden);
        keepKindWithRuns();
        refreshRunList();
        rebuild();
    }

    // A narrow printed figure puts the legend under the plot (adjustLayout): a little taller for it.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        return m_legend ? narrowExportHeight(width, font_scale, fallback, 1.2) : fallback;
    }

protected:
    // Delete (or Backspace) in the list of runs removes the selected run.
    bool eventFilter(QObject* watched, QEvent* event) override
    {
        if (watched == m_runList && event->type() == QEvent::KeyPress) {
            const int key = static_cast<QKeyEvent*>(event)->key();
            const QListWidgetItem* item = m_runList->currentItem();
            if ((key == Qt::Key_Delete || key == Qt::Key_Backspace) && item && !item->data(Qt::UserRole).toString().isEmpty()) {
                emit runRemovalRequested(item->data(Qt::UserRole).toString());
                return true;
            }
        }
        return SweepPlotView::eventFilter(watched, event);
    }

    void adjustLayout(const QSize& size) override
    {
        if (m_legend)
            placeLegend(m_plot, m_rect, m_legend, m_legendAlign, m_rectRow + 1, isNarrow(size.width(), fontScale()));
    }

private:
    char kind() const { return m_kindBox->currentData().toString() == QLatin1String("m") ? 'm' : 'n'; }
    bool varyM() const { return kind() == 'm'; }

    void setKind(char k)
    {
        const QSignalBlocker blocker(m_kindBox);
        m_kindBox->setCurrentIndex(k == 'm' ? 1 : 0);
    }

    // When no run has the selected kind but some run has the other, the view shows the other.
    void keepKindWithRuns()
    {
        const char k = kind();
        if (!m_runs.hasKind(k) && !m_runs.empty())
            setKind(k == 'n' ? 'm' : 'n');
    }

    // The list of runs (with checkboxes) between the tool row and the plot; shown when there are several runs.
    void buildRunList()
    {
        m_runRow = new QWidget(this);
        auto* row = new QHBoxLayout(m_runRow);
        row->setContentsMargins(4, 0, 4, 0);
        auto* label = new QLabel(tr("Runs"), m_runRow);
        label->setAlignment(Qt::AlignTop | Qt::AlignLeft);
        row->addWidget(label);
        m_runList = new QListWidget(m_runRow);
        m_runList->setFlow(QListView::LeftToRight);
        m_runList->setWrapping(true);
        m_runList->setResizeMode(QListView::Adjust);
        m_runList->setSpacing(2);
        m_runList->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
        m_runList->setFixedHeight(2 * fontMetrics().height() + 18);
        m_runList->setToolTip(tr("The runs of this kind: tick the ones to draw (line style marks the run)"));
        row->addWidget(m_runList, 1);
        if (auto* v = qobject_cast<QVBoxLayout*>(layout()))
            v->insertWidget(1, m_runRow);
        // Removing a run: its context menu, or Delete on the selected run.
        m_runList->setObjectName(QStringLiteral("runs"));
        m_runList->setSelectionMode(QAbstractItemView::SingleSelection);
        m_runList->setContextMenuPolicy(Qt::CustomContextMenu);
        connect(m_runList, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
            QListWidgetItem* item = m_runList->itemAt(pos);
            const QString name = item ? item->data(Qt::UserRole).toString() : QString();
            if (name.isEmpty())
                return;
            QMenu menu(this);
            menu.addAction(tr("Remove run \u201c%1\u201d").arg(name), this, [this, name] { emit runRemovalRequested(name); });
            menu.exec(m_runList->viewport()->mapToGlobal(pos));
        });
        m_runList->installEventFilter(this);   // Delete (eventFilter)
        connect(m_runList, &QListWidget::itemChanged, this, [this](QListWidgetItem* item) {
            m_runs.setShown(item->data(Qt::UserRole).toString(), item->checkState() == Qt::Checked);
            rebuild();
        });
        m_runRow->hide();
    }

    void refreshRunList()
    {
        const QSignalBlocker blocker(m_runList);
        m_runList->clear();
        bool kinds[2] = {false, false};
        for (const CurveRun& r : m_runs.all()) {
            kinds[r.kind() == 'm' ? 1 : 0] = true;
            if (r.kind() != kind())
                continue;
            QString text = r.name.isEmpty() ? tr("(unnamed run)") : r.name;
            if (!r.stale.isEmpty())
                text += tr(" (not current)");   // as the legend names it
            auto* item = new QListWidgetItem(text, m_runList);
            item->setData(Qt::UserRole, r.name);
            item->setFlags(r.name.isEmpty() ? Qt::ItemIsEnabled | Qt::ItemIsSelectable
                                            : Qt::ItemIsEnabled | Qt::ItemIsSelectable | Qt::ItemIsUserCheckable);
            item->setCheckState(m_runs.shown(r) ? Qt::Checked : Qt::Unchecked);
            if (!r.stale.isEmpty())
                item->setForeground(QColor(0xa0, 0x50, 0x00));
            item->setToolTip(runTip(r));
        }
        const bool both = kinds[0] && kinds[1];
        m_kindLabel->setVisible(both);
        m_kindBox->setVisible(both);
        m_runRow->setVisible(!m_runs.empty());   // one run too: its details in the tooltip, removable
    }

    void rebuild() override
    {
        m_curves.clear();
        m_rect = nullptr;
        m_legend = nullptr;   // the old plot's elements go with it
        m_drawn = m_runs.drawn(kind());
        if (m_runs.empty()) {
            showPlotMessage(m_plot, !m_note.isEmpty() ? m_note
                                                      : tr("No sweep yet.\nRun a sweep over N or M to see the metrics of each mechanism as curves."));
            return;
        }
        if (m_drawn.empty()) {
            showPlotMessage(m_plot, tr("No run against %1 is ticked.\nTick a run in the list above to draw its curves.")
                                        .arg(varyM() ? QStringLiteral("M") : QStringLiteral("N")));
            return;
        }
        m_curves = curvesOf(m_drawn, metric(), varyM());
        if (m_curves.empty()) {
            showPlotMessage(m_plot, tr("The sweep has no values of %1.").arg(sweepMetricLabel(metric())));
            return;
        }
        clearPlot(m_plot);
        CurveFrame f = curveFrame(m_curves, metric(), m_bandBox->currentData().toString(), varyM(),
                                  m_xBox->currentData().toString(), m_yBox->currentData().toString());
        addTitles(f);
        QCPLegend* legend = addAxes(f);
        const std::vector<QCPGraph*> refs = addReferenceLines(f);
        addCurves(f, legend);
        for (QCPGraph* g : refs)
            g->addToLegend(legend);
        setUpAxes(f, legend);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // Title (metric against x), a details line per drawn run (what it was computed with: data, layer, heads,
    // mechanisms, options), a line saying which runs no longer match the current inputs, and what a point pools.
    void addTitles(const CurveFrame& f)
    {
        QString title = tr("%1 against %2").arg(sweepMetricLabel(f.key), xName(f));
        title[0] = title[0].toUpper();
        QStringList details, stale;
        constexpr std::size_t kMaxDetails = 4;
        for (std::size_t i = 0; i < m_drawn.size(); ++i) {
            const CurveRun& r = *m_drawn[i];
            const QString d = runDetails(*r.sweep, r.datasetLayer);
            if (i < kMaxDetails)
                details << (m_drawn.size() == 1 ? d : tr("%1: %2").arg(runLabel(m_drawn, i), d));
            if (!r.stale.isEmpty())
                stale << (m_drawn.size() == 1 ? r.stale : tr("%1: %2").arg(runLabel(m_drawn, i), r.stale));
        }
        if (m_drawn.size() > kMaxDetails)
            details << tr("\u2026 and %1 more runs (their tooltips in the list of runs)").arg(m_drawn.size() - kMaxDetails);
        QString sub = m_drawn.size() == 1 ? sourceText(m_drawn.front()->sweep->spec)
                                          : tr("%1 runs (line style marks the run)").arg(m_drawn.size());
        if (f.pooled > 1)
            sub += tr("; mean of up to %1 records per point (%2)")
                       .arg(f.pooled)
                       .arg(bandText(f.band));
        auto* t = addTitle(m_plot, title, plotFont(kTitlePt, true));
        m_plot->plotLayout()->addElement(0, 0, t);
        auto* st = addTitle(m_plot, sub, plotFont(kTickPt));
        st->setTextColor(QColor(80, 80, 80));
        m_plot->plotLayout()->addElement(1, 0, st);
        auto* dt = addTitle(m_plot, details.join(QLatin1Char('\n')), plotFont(kTickPt));
        dt->setTextColor(QColor(60, 60, 60));
        m_plot->plotLayout()->addElement(2, 0, dt);
        if (!stale.isEmpty()) {
            auto* nt = addTitle(m_plot, tr("Not the current inputs or options \u2014 %1").arg(stale.join(QStringLiteral("; "))), plotFont(kTickPt, true));
            nt->setTextColor(QColor(0xa0, 0x50, 0x00));
            m_plot->plotLayout()->addElement(3, 0, nt);
        }
    }

    QString xName(const CurveFrame& f) const { return f.byM ? tr("blocks M") : tr("sequence length N"); }

    // The axis rect, a closed box like matplotlib's spines (ticks on the bottom and left only), and the
    // legend where the curves are not: top left when they rise, top right when they fall.
    QCPLegend* addAxes(const CurveFrame& f)
    {
        m_rect = new QCPAxisRect(m_plot, true);
        const int row = m_plot->plotLayout()->rowCount();   // under the title and its lines
        m_rectRow = row;
        m_plot->plotLayout()->addElement(row, 0, m_rect);
        for (int r = 0; r < row; ++r)
            m_plot->plotLayout()->setRowStretchFactor(r, 0.01);
        m_plot->plotLayout()->setRowSpacing(0);
        m_rect->setupFullAxesBox(true);
        styleAxisRect(m_rect);
        for (QCPAxis* ax : {m_rect->axis(QCPAxis::atTop), m_rect->axis(QCPAxis::atRight)}) {
            ax->setTicks(false);
            ax->setTickLabels(false);
            ax->grid()->setVisible(false);
        }
        m_rect->insetLayout()->setAutoMargins(QCP::msNone);
        m_rect->insetLayout()->setMargins(QMargins(7, 7, 7, 7));
        auto* x = m_rect->axis(QCPAxis::atBottom);
        auto* y = m_rect->axis(QCPAxis::atLeft);
        x->setLabel(xName(f));
        y->setLabel(sweepMetricLabel(f.key));
        x->grid()->setVisible(true);
        y->grid()->setVisible(true);
        double first = 0, last = 0;
        for (const Curve& c : m_curves) {
            first += c.points.front().mean;
            last += c.points.back().mean;
        }
        m_legendAlign = Qt::AlignTop | (last >= first ? Qt::AlignLeft : Qt::AlignRight);
        m_legend = addLegend(m_rect, m_legendAlign);
        return m_legend;
    }

    // Reference lines, drawn under the data: full rank against N, and the feature dimension that bounds
    // linear attention's rank when the sweep knows it. f.yhi grows to keep them in view.
    std::vector<QCPGraph*> addReferenceLines(CurveFrame& f)
    {
        auto* x = m_rect->axis(QCPAxis::atBottom);
        auto* y = m_rect->axis(QCPAxis::atLeft);
        const double xmax = f.xs.back();
        std::vector<QCPGraph*> refs;
        if (!f.byM && f.key == "rank") {
            auto* g = addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [](double v) { return v; }, QPen(QColor(90, 90, 90), 1.2, Qt::DashLine));
            g->setName(tr("full rank (rank = N)"));
            refs.push_back(g);
            f.yhi = std::max(f.yhi, xmax);
        } else if (!f.byM && f.key == "relative_rank") {
            auto* g = addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [](double) { return 1.0; }, QPen(QColor(90, 90, 90), 1.2, Qt::DashLine));
            g->setName(tr("full rank (rank / N = 1)"));
            refs.push_back(g);
            f.yhi = std::max(f.yhi, 1.0);
        }
        const bool rankLike = f.key == "rank" || f.key == "relative_rank";
        // Mechanisms whose rank is at most their feature dimension (linear attention, attention/mechanisms.h).
        const bool hasLinear = std::any_of(m_curves.begin(), m_curves.end(),
                                           [](const Curve& c) { return attention::mechanism_info(c.mechanism).rank_bound_factor == 1; });
        // One line per distinct bound among the drawn runs that know it (synthetic data).
        std::set<double> drawnBounds;
        for (const CurveRun* run : rankLike && hasLinear ? m_drawn : std::vector<const CurveRun*>{}) {
            QString dWhat;
            const double d = featureDimension(run->sweep->spec, &dWhat);
            const double n = run->sweep->spec.synth ? static_cast<double>(run->sweep->spec.synth->n) : 0;
            if (d <= 0 || (f.byM && f.key == "relative_rank" && n <= 0))
                continue;
            const double key = f.byM && f.key == "relative_rank" ? d / n : d;
            if (!drawnBounds.insert(key).second)
                continue;
            const QPen pen(QColor(60, 60, 60), 1.2, Qt::DotLine);
            QCPGraph* g = f.key == "rank" ? addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [d](double) { return d; }, pen)
                          : f.byM         ? addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [d, n](double) { return d / n; }, pen)
                                          : addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [d](double v) { return d / v; }, pen);
            g->setName(f.key == "rank" ? dWhat + tr(" (bound of linear rank)") : dWhat + tr(" over N (bound of linear)"));
            refs.push_back(g);
            if (f.key == "rank")
                f.yhi = std::max(f.yhi, d);
        }
        return refs;
    }

    // Per mechanism its band (a filled channel between two invisible graphs), then its mean with markers.
    void addCurves(const CurveFrame& f, QCPLegend* legend)
    {
        auto* x = m_rect->axis(QCPAxis::atBottom);
        auto* y = m_rect->axis(QCPAxis::atLeft);
        for (std::size_t ci = 0; ci < m_curves.size(); ++ci) {
            const Curve& c = m_curves[ci];
            const Curve* same = coincidingCurve(m_curves, ci);   // drawn dashed over it, so that both lines show
            const QColor color = mechanismColor(c.mechanism);
            QVector<double> px, pm, plo, phi;
            bool spread = false;
            for (const CurvePoint& p : c.points) {
                const auto [lo, hi] = bandOf(p, f.band);
                px << p.x;
                pm << p.mean;
                plo << (f.logy ? std::max(lo, f.yminPos) : lo);
                phi << hi;
                spread = spread || hi > lo;
            }
            if (f.band != "none" && spread) {
                auto* lower = m_plot->addGraph(x, y);
                lower->setData(px, plo, true);
                lower->setPen(Qt::NoPen);
                auto* upper = m_plot->addGraph(x, y);
                upper->setData(px, phi, true);
                upper->setPen(Qt::NoPen);
                QColor fill = color;
                fill.setAlpha(55);
                upper->setBrush(fill);
                upper->setChannelFillGraph(lower);
            }
            auto* g = m_plot->addGraph(x, y);
            g->setData(px, pm, true);
            QPen pen = mechanismPen(c.mechanism, 1.0);
            pen.setWidthF(mechanismStyle(c.mechanism).curve_width);
            if (m_drawn.size() > 1)
                pen.setStyle(runStyle(c.run));
            else if (same) {
                // Thinner than the line it lies on, with open dashes: the earlier line shows at its sides and gaps.
                pen.setWidthF(std::min(pen.widthF(), 0.5 * mechanismStyle(same->mechanism).curve_width));
                pen.setDashPattern({4.0, 4.0});
            }
            g->setPen(pen);
            g->setScatterStyle(markerStyle(c.mechanism, color));
            g->setName(same && m_drawn.size() < 2 ? tr("%1 (same as %2)").arg(curveName(c, m_drawn), curveName(*same, m_drawn))
                                                  : curveName(c, m_drawn));
            if (m_drawn.size() < 2)
                g->addToLegend(legend);
        }
        if (m_drawn.size() > 1)
            addRunLegend(legend);
    }

    // Several runs: the legend lists the mechanisms (colour and marker) and then the runs (line style), not
    // every combination. Its entries are graphs without data.
    void addRunLegend(QCPLegend* legend)
    {
        auto* x = m_rect->axis(QCPAxis::atBottom);
        auto* y = m_rect->axis(QCPAxis::atLeft);
        std::vector<Mechanism> mechanisms;
        for (const Curve& c : m_curves)
            if (std::find(mechanisms.begin(), mechanisms.end(), c.mechanism) == mechanisms.end())
                mechanisms.push_back(c.mechanism);
        for (Mechanism m : mechanisms) {
            auto* g = m_plot->addGraph(x, y);
            QPen pen = mechanismPen(m, 1.0);
            pen.setWidthF(1.7);
            g->setPen(pen);
            const QColor color = mechanismColor(m);
            QCPScatterStyle marker = markerStyle(m, color);
            marker.setSize(7);   // the legend's markers all of one size
            g->setScatterStyle(marker);
            g->setName(mechanismLabel(m));
            g->setSelectable(QCP::stNone);
            g->addToLegend(legend);
        }
        for (std::size_t i = 0; i < m_drawn.size(); ++i) {
            auto* g = m_plot->addGraph(x, y);
            g->setPen(QPen(QColor(60, 60, 60), 1.5, runStyle(static_cast<int>(i))));
            g->setName(runLabel(m_drawn, i));
            g->setSelectable(QCP::stNone);
            g->addToLegend(legend);
        }
    }

    // Tickers and ranges; a linear y axis leaves room above the curves for the legend.
    void setUpAxes(const CurveFrame& f, const QCPLegend* legend)
    {
        auto* x = m_rect->axis(QCPAxis::atBottom);
        auto* y = m_rect->axis(QCPAxis::atLeft);
        if (f.logx) {
            const bool base2 = f.xscale == "log2";
            setLogScale(x, base2 ? 2 : 10, base2 ? 0 : 8);
            x->setNumberFormat("gb");
            x->setNumberPrecision(6);
        } else if (std::all_of(f.xs.begin(), f.xs.end(), [](double v) { return v == std::round(v); })) {
            setIntegerTicks(x);
        }
        x->setRange(f.x0, f.x1);
        if (f.logy) {
            setLogScale(y);
            y->setNumberFormat("gb");
            y->setNumberPrecision(4);
            y->setRange(f.yminPos / 1.6, f.yhi * 1.6);
        } else {
            const double lo = f.ylo >= 0 ? 0.0 : f.ylo - 0.06 * (f.yhi - f.ylo);
            double hi = f.yhi + 0.08 * (f.yhi - lo);
            if (!(hi > lo))
                hi = lo + 1;
            hi += 0.06 * (hi - lo) * static_cast<double>(legend->itemCount());
            y->setRange(lo, hi);
        }
    }

    void hover(const QPoint& pos)
    {
        if (!m_rect || m_curves.empty() || !m_rect->rect().contains(pos))
            return;
        auto* x = m_rect->axis(QCPAxis::atBottom);
        double best = 1e300, bx = 0;
        for (const Curve& c : m_curves)
            for (const CurvePoint& p : c.points) {
                const double dist = std::abs(x->coordToPixel(p.x) - pos.x());
                if (dist < best)
                    best = dist, bx = p.x;
            }
        if (best > 40)
            return;
        const QString band = m_bandBox->currentData().toString();
        QStringList parts;
        for (const Curve& c : m_curves)
            for (const CurvePoint& p : c.points) {
                if (p.x != bx)
                    continue;
                QString s = tr("%1: mean %2").arg(curveName(c, m_drawn), fmtNum(p.mean, 4));
                if (band == "std")
                    s += tr(" \u00b1 %1").arg(fmtNum(p.std, 3));
                else if (band == "ci" && std::isfinite(p.ciLow))
                    s += tr(" (95% interval %1 \u2013 %2)").arg(fmtNum(p.ciLow, 4), fmtNum(p.ciHigh, 4));
                else
                    s += tr(" (min %1, max %2)").arg(fmtNum(p.min, 4), fmtNum(p.max, 4));
                s += tr(", %1 records").arg(p.count);
                parts << s;
            }
        emit statusMessage(tr("%1 = %2   %3").arg(varyM() ? QStringLiteral("M") : QStringLiteral("N"), fmtNum(bx, 8), parts.join(QStringLiteral("   |   "))));
    }

    CurveRuns m_runs;                        // every run, oldest first, and which are shown
    std::vector<const CurveRun*> m_drawn;    // the runs the plot shows (index = line style)
    QString m_note;                          // shown instead of the usual hint while there is no run
    std::vector<Curve> m_curves;
    QCPAxisRect* m_rect = nullptr;
    int m_rectRow = 0;                       // the plot layout's row of m_rect (a narrow legend goes below it)
    QCPLegend* m_legend = nullptr;
    Qt::Alignment m_legendAlign = Qt::AlignTop | Qt::AlignLeft;
    QComboBox *m_kindBox, *m_bandBox, *m_xBox, *m_yBox;
    QLabel* m_kindLabel = nullptr;
    QWidget* m_runRow = nullptr;
    QListWidget* m_runList = nullptr;
};

}  // namespace

SweepView* createCurvesView(QWidget* parent) { return new CurvesView(parent); }

}  // namespace attnscope::widgets
