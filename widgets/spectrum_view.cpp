// SpectrumView: normalised singular values s_i / s_1 (log y) per mechanism with the rank tolerance
// tol / s_1 and the ranks in the legend; optionally the cumulative energy sum_{i<=k} s_i^2 / sum s^2, or the
// rank against the relative tolerance (the core's rank_at_rtol, docs/maths.md 2.2) as a step curve, or the
// semiseparable profile (docs/maths.md 2.2): the rank of the block below the diagonal A[h:N, 0:h] against the
// split h, with the head dimension d and the full-rank bound min(h, N - h).
#include <QCheckBox>
#include <QHBoxLayout>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "metrics/metrics.h"
#include "plot_util.h"
#include "view_base.h"
#include "views.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using Tolerances = std::vector<std::pair<QColor, double>>;   // tol / s_1 per mechanism, in its colour

class SpectrumView : public PlotView {
public:
    explicit SpectrumView(QWidget* parent) : PlotView(parent, QStringLiteral("spectrum"), tr("Singular value spectrum"), QSize(900, 600))
    {
        auto* tools = toolRow();
        m_cumBox = new QCheckBox(tr("Cumulative energy"), this);
        m_cumBox->setToolTip(tr("Show sum_{i<=k} s_i^2 / sum_i s_i^2 on a linear axis"));
        tools->addWidget(m_cumBox);
        m_logxBox = new QCheckBox(tr("Log index axis"), this);
        tools->addWidget(m_logxBox);
        m_tolBox = new QCheckBox(tr("Rank vs tolerance"), this);
        m_tolBox->setToolTip(tr("Show the rank #{s_i > rtol s_1} at rtol = 1e-2 ... 1e-12: where the order of the "
                                "mechanisms depends on the tolerance"));
        tools->addWidget(m_tolBox);
        m_profileBox = new QCheckBox(tr("Rank at every split"), this);
        m_profileBox->setToolTip(tr("The semiseparable profile: the rank of the past block A[h:N, 0:h] against the split h, "
                                    "with the head dimension d (linear attention's bound at every split). Measured for "
                                    "causal attention"));
        tools->addWidget(m_profileBox);
        tools->addStretch(1);
        connect(m_cumBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_logxBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_tolBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_profileBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        m_saved.add("cumulative", m_cumBox);
        m_saved.add("log_x", m_logxBox);
        m_saved.add("rank_vs_tolerance", m_tolBox);
        m_saved.add("profile", m_profileBox);
        rebuild();
    }

public:
    // A narrow printed figure puts the legend under the plot (adjustLayout): a little taller for it.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        return m_legend ? narrowExportHeight(width, font_scale, fallback, 1.1) : fallback;
    }

protected:
    void adjustLayout(const QSize& size) override
    {
        if (m_legend)
            placeLegend(m_plot, m_rect, m_legend, m_legendAlign, 2, isNarrow(size.width(), fontScale()));
    }

private:
    // What the drawn curves span: the smallest normalised value, the longest spectrum, the tolerances;
    // and why a mechanism has no curve.
    struct Drawn {
        double ymin = 1.0;
        std::size_t count = 1;
        Tolerances tols;
        QStringList notes;
    };

    void rebuild() override
    {
        m_legend = nullptr;   // whatever happens below, the old plot's elements are gone
        m_rect = nullptr;
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see the singular value spectra."));
            return;
        }
        clearPlot(m_plot);
        // One plot at a time: the profile, else the ranks against the tolerance, else the spectrum (the boxes that
        // do not apply to the plot shown are greyed).
        m_tolBox->setEnabled(!m_profileBox->isChecked());
        m_cumBox->setEnabled(!m_profileBox->isChecked() && !m_tolBox->isChecked());
        m_logxBox->setEnabled(!m_profileBox->isChecked() && !m_tolBox->isChecked());
        if (m_profileBox->isChecked()) {
            rebuildProfile();
            return;
        }
        if (m_tolBox->isChecked()) {
            rebuildRankAgainstTolerance();
            return;
        }
        const bool cumulative = m_cumBox->isChecked();
        QCPAxisRect* rect = titledRect(cumulative ? tr("Cumulative spectral energy (N = %1)").arg(m_result->n)
                                                  : tr("Normalised singular values (N = %1)").arg(m_result->n));
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("index i"));
        setIntegerTicks(x);
        y->setLabel(cumulative ? tr("cumulative energy  \u03a3\u1D62\u2264\u2096 s\u1D62\u00b2 / \u03a3 s\u1D62\u00b2") : tr("s\u1D62 / s\u2081"));
        if (cumulative)
            x->setLabel(tr("number of singular values k"));
        m_legendAlign = cumulative ? (Qt::AlignBottom | Qt::AlignRight) : (Qt::AlignBottom | Qt::AlignLeft);
        auto* legend = addLegend(rect, m_legendAlign);
        m_legend = legend;
        m_rect = rect;

        const Drawn drawn = addCurves(rect, legend, cumulative);
        if (m_plot->graphCount() == 0) {
            showNothing(tr("No spectrum to show.\n") + drawn.notes.join('\n'));
            return;
        }
        const double xmax = static_cast<double>(drawn.count);
        if (m_logxBox->isChecked()) {
            setLogScale(x);
            x->setRange(0.8, xmax * 1.25);
        } else {
            x->setRange(0, xmax * 1.02 + 1);
        }
        if (cumulative) {
            y->setRange(0, 1.04);
            addHLine(m_plot, rect, 0.99, QPen(QColor(120, 120, 120), 1, Qt::DotLine));
        } else {
            setLogScale(y, 10, 0);
            setPowerLabels(y);
            y->setRange(std::max(drawn.ymin / 5, 1e-300), 3);
            addToleranceLines(rect, legend, drawn.tols);
        }
        if (!drawn.notes.isEmpty())
            addNote(m_plot, rect, drawn.notes.join('\n'), 0.02, cumulative ? 0.02 : 0.98,
                    Qt::AlignLeft | (cumulative ? Qt::AlignTop : Qt::AlignBottom));
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // One curve per mechanism with a spectrum: s_i / s_1 (zeros left out: the axis is logarithmic), or the
    // cumulative energy with the k that reaches 99 %.
    Drawn addCurves(QCPAxisRect* rect, QCPLegend* legend, bool cumulative)
    {
        Drawn drawn;
        for (const auto& o : m_result->outcomes) {
            const auto mech = o.result.mechanism;
            if (!o.matrix && !o.error.empty()) {
                drawn.notes << tr("%1: failed (%2)").arg(mechanismLabel(mech), QString::fromStdString(o.error));
                continue;
            }
            if (!o.result.spectrum || o.result.spectrum->singular_values.empty() || o.result.spectrum->singular_values.front() <= 0) {
                drawn.notes << tr("%1: no spectrum").arg(mechanismLabel(mech));
                continue;
            }
            const auto& sp = *o.result.spectrum;
            const auto& s = sp.singular_values;
            const double s1 = s.front();
            QVector<double> xs, ys;
            xs.reserve(static_cast<int>(s.size()));
            ys.reserve(static_cast<int>(s.size()));
            QString name = tr("%1: rank %2 / %3").arg(mechanismLabel(mech)).arg(sp.rank).arg(m_result->n);
            if (cumulative) {
                double total = 0;
                for (double v : s)
                    total += v * v;
                double acc = 0;
                std::size_t k99 = 0;
                for (std::size_t i = 0; i < s.size(); ++i) {
                    acc += s[i] * s[i];
                    xs << static_cast<double>(i + 1);
                    ys << acc / total;
                    if (k99 == 0 && acc / total >= 0.99)
                        k99 = i + 1;
                }
                name += tr(", 99% energy at k = %1").arg(k99);
            } else {
                std::size_t dropped = 0;
                for (std::size_t i = 0; i < s.size(); ++i) {
                    if (s[i] <= 0) {
                        ++dropped;
                        continue;
                    }
                    xs << static_cast<double>(i + 1);
                    ys << s[i] / s1;
                    drawn.ymin = std::min(drawn.ymin, s[i] / s1);
                }
                if (dropped)
                    name += tr(" (%1 zero values not drawn)").arg(dropped);
                drawn.tols.emplace_back(mechanismColor(mech), sp.tol / s1);
                drawn.ymin = std::min(drawn.ymin, sp.tol / s1);
            }
            drawn.count = std::max(drawn.count, s.size());
            auto* g = m_plot->addGraph(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
            g->setData(xs, ys, true);
            g->setPen(mechanismPen(mech, 1.1));
            g->setName(name);
            g->addToLegend(legend);
        }
        return drawn;
    }

    // A message instead of a plot (the legend and axis rect it replaces are gone).
    void showNothing(const QString& text)
    {
        m_legend = nullptr;
        m_rect = nullptr;
        showPlotMessage(m_plot, text);
    }

    // The plot's layout: the title in row 0, one axis rect below it (returned).
    QCPAxisRect* titledRect(const QString& title)
    {
        m_plot->plotLayout()->addElement(0, 0, addTitle(m_plot, title, plotFont(kTitlePt, true)));
        QCPAxisRect* rect = addAxisRect(m_plot, m_plot->plotLayout(), 1, 0);
        m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        return rect;
    }

    // The rank at each relative tolerance of the core (metrics::k_rank_rtols), one step curve per mechanism with
    // every singular value known; the tolerance-free ranks are the core's numbers, nothing is computed here.
    void rebuildRankAgainstTolerance()
    {
        QCPAxisRect* rect = titledRect(tr("Rank against the relative tolerance (N = %1)").arg(m_result->n));
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("relative tolerance rtol"));
        y->setLabel(tr("rank  #{s\u1D62 > rtol s\u2081}"));
        setLogScale(x, 10, 0);
        setPowerLabels(x);
        setIntegerTicks(y);
        m_legendAlign = Qt::AlignBottom | Qt::AlignLeft;   // the ranks fall towards large rtol, on the right
        auto* legend = addLegend(rect, m_legendAlign);
        m_legend = legend;
        m_rect = rect;
        QStringList notes;
        double ymax = 1;
        for (const auto& o : m_result->outcomes) {
            const auto mech = o.result.mechanism;
            if (!o.result.spectrum || o.result.partial_spectrum) {
                notes << tr("%1: no ranks at fixed tolerances (not every singular value is known)").arg(mechanismLabel(mech));
                continue;
            }
            QVector<double> xs, ys;
            for (std::size_t i = metrics::k_rank_rtols.size(); i-- > 0;) {   // ascending rtol
                xs << metrics::k_rank_rtols[i].rtol;
                ys << static_cast<double>(o.result.spectrum->rank_at_rtol[i]);
                ymax = std::max(ymax, ys.back());
            }
            auto* g = m_plot->addGraph(x, y);
            g->setData(xs, ys, true);
            g->setPen(mechanismPen(mech, 1.1));
            g->setLineStyle(QCPGraph::lsStepLeft);   // each rank holds up to the next tolerance (an upper bound there)
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
            g->setName(tr("%1: %2 at 1e-3, %3 at 1e-12")
                           .arg(mechanismLabel(mech))
                           .arg(o.result.spectrum->rank_at_rtol[1])
                           .arg(o.result.spectrum->rank_at_rtol[6]));
            g->addToLegend(legend);
        }
        if (m_plot->graphCount() == 0) {
            showNothing(tr("No ranks at fixed tolerances to show.\n") + notes.join('\n'));
            return;
        }
        x->setRange(3e-13, 3e-2);
        y->setRange(0, ymax * 1.08 + 1);
        if (!notes.isEmpty())
            addNote(m_plot, rect, notes.join('\n'), 0.02, 0.02, Qt::AlignLeft | Qt::AlignTop);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // The semiseparable profile of every mechanism that has one (the core's past_profile: nothing is computed
    // here), with d and min(h, N - h).
    void rebuildProfile()
    {
        const auto n = m_result->n;
        QCPAxisRect* rect = titledRect(tr("Rank of the past block A[h:N, 0:h] at each split h (N = %1)").arg(n));
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("split h (queries h..N−1 against keys 0..h−1)"));
        y->setLabel(tr("rank of A[h:N, 0:h]"));
        setIntegerTicks(x);
        setIntegerTicks(y);
        m_legendAlign = Qt::AlignTop | Qt::AlignRight;
        auto* legend = addLegend(rect, m_legendAlign);
        m_legend = legend;
        m_rect = rect;
        QStringList notes;
        double ymax = 1;
        for (const auto& o : m_result->outcomes) {
            const auto mech = o.result.mechanism;
            if (!o.result.past_profile || o.result.past_profile->splits.empty()) {
                if (!o.error.empty())
                    notes << tr("%1: failed (%2)").arg(mechanismLabel(mech), QString::fromStdString(o.error));
                else if (o.result.past_block_asked)
                    notes << tr("%1: no profile (see its warnings in the Metrics view)").arg(mechanismLabel(mech));
                continue;
            }
            const auto& pp = *o.result.past_profile;
            QVector<double> xs, ys;
            for (const auto& sr : pp.splits) {
                xs << static_cast<double>(sr.h);
                ys << static_cast<double>(sr.rank);
                ymax = std::max(ymax, ys.back());
            }
            auto* g = m_plot->addGraph(x, y);
            g->setData(xs, ys, true);
            g->setPen(mechanismPen(mech, 1.3));
            g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, pp.splits.size() > 64 ? 0 : 5));
            g->setName(tr("%1: semiseparable rank %2 (%3 splits, %4)")
                           .arg(mechanismLabel(mech))
                           .arg(pp.semiseparable_rank)
                           .arg(pp.splits.size())
                           .arg(pp.method == "factors" ? tr("exact from the factors") : tr("from the matrix")));
            g->addToLegend(legend);
        }
        if (m_plot->graphCount() == 0) {
            QString why = tr("No semiseparable profile to show.\n");
            const bool causal = std::any_of(m_result->outcomes.begin(), m_result->outcomes.end(),
                                            [](const auto& o) { return o.result.past_block_asked; });
            if (!causal)
                why += tr("It is measured for causal attention: tick Causal in the Mechanisms dock (or use\n"
                          "attnscope analyze --past-split H --past-splits K|all on the command line).");
            showNothing(why + (notes.isEmpty() ? QString() : QStringLiteral("\n") + notes.join('\n')));
            return;
        }
        // The full-rank bound min(h, N - h) and linear attention's d.
        QVector<double> bx, by;
        for (const double h : {1.0, static_cast<double>(n) / 2.0, static_cast<double>(n - 1)}) {
            bx << h;
            by << std::min(h, static_cast<double>(n) - h);
        }
        auto* bound = m_plot->addGraph(x, y);
        bound->setData(bx, by, true);
        bound->setPen(QPen(QColor(110, 110, 110), 1.3, Qt::DotLine));
        bound->setName(tr("full rank min(h, N − h)"));
        bound->addToLegend(legend);
        const double d = static_cast<double>(m_result->d);
        addHLine(m_plot, rect, d, QPen(QColor(60, 60, 60), 1.2, Qt::DashLine));
        auto* dLine = m_plot->addGraph(x, y);   // legend entry only
        dLine->setPen(QPen(QColor(60, 60, 60), 1.2, Qt::DashLine));
        dLine->setName(tr("d = %1 (linear attention's bound at every split)").arg(m_result->d));
        dLine->addToLegend(legend);
        x->setRange(0, static_cast<double>(n));
        // Up to the highest profile or d, with room for the legend; the full-rank bound is clipped beyond.
        y->setRange(0, std::max(ymax, d) * 1.35 + 1);
        if (!notes.isEmpty())
            addNote(m_plot, rect, notes.join('\n'), 0.02, 0.98, Qt::AlignLeft | Qt::AlignBottom);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // Tolerance lines: one grey line when they agree within a factor 1.5, else one per mechanism; the
    // legend says which.
    void addToleranceLines(QCPAxisRect* rect, QCPLegend* legend, const Tolerances& tols)
    {
        double lo = 1e300, hi = 0;
        for (const auto& t : tols)
            lo = std::min(lo, t.second), hi = std::max(hi, t.second);
        const bool one = !tols.empty() && hi <= lo * 1.5;
        const Tolerances lines = one ? Tolerances{{QColor(90, 90, 90), hi}} : tols;
        for (const auto& [color, v] : lines)
            if (v > 0)
                addHLine(m_plot, rect, v, QPen(color, 1.2, Qt::DashLine));
        if (tols.empty())
            return;
        auto* legendLine = m_plot->addGraph(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));   // legend entry only
        legendLine->setPen(QPen(one ? QColor(90, 90, 90) : QColor(40, 40, 40), 1.2, Qt::DashLine));
        legendLine->setName(one ? tr("rank tolerance tol / s\u2081 = %1").arg(fmtNum(hi, 2))
                                : tr("rank tolerance tol / s\u2081 (dashed, mechanism colour)"));
        legendLine->addToLegend(legend);
    }

    QCheckBox *m_cumBox, *m_logxBox, *m_tolBox, *m_profileBox;
    QCPLegend* m_legend = nullptr;
    QCPAxisRect* m_rect = nullptr;
    Qt::Alignment m_legendAlign = Qt::AlignBottom | Qt::AlignLeft;
};

}  // namespace

ResultView* createSpectrumView(QWidget* parent) { return new SpectrumView(parent); }

}  // namespace attnscope::widgets
