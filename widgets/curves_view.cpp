// CurvesView: a metric of a sweep against N or M, one line per mechanism, with a band for the spread over
// layers, heads, draws and seeds. The mean and std of every point are the core's sweep_summary (the JSON
// summary of `attnscope sweep`); the view only pools summary points that share an x value and collects
// min..max for the band. Reference lines: full rank (rank = N), and the feature dimension that bounds linear
// attention's rank when the sweep's data are synthetic (the only case in which the sweep knows d).
// Several runs (curve sets) stay apart: the runs of one kind (against N, or against M) are overlaid, each
// run in its own line style, and a list of runs with checkboxes chooses which are drawn.
#include <QComboBox>
#include <QCoreApplication>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QMouseEvent>
#include <QSet>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <qcustomplot.h>

#include "analysis/sweep.h"
#include "curves.h"
#include "plot_util.h"
#include "view_base.h"
#include "widget_util.h"

namespace attnscope::widgets {
namespace {

using analysis::SweepResult;
using attention::Mechanism;

struct CurvePoint {
    double x = 0, mean = 0, std = 0;
    double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
    long count = 0;   // records with a value
};

struct Curve {
    Mechanism mechanism = Mechanism::softmax;
    int run = 0;                      // index into the drawn runs (its line style)
    std::vector<CurvePoint> points;   // ascending x
};

// One run as the view keeps it: the sweep, its name, its summary (computed once) and whether it is drawn.
struct Run {
    std::shared_ptr<const SweepResult> sweep;
    QString name;
    nlohmann::ordered_json summary;
    char kind() const { return sweep->spec.vary == 'm' ? 'm' : 'n'; }
};

// Line styles that tell overlaid runs apart (the colour stays the mechanism's).
Qt::PenStyle runStyle(int run)
{
    static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine, Qt::DashDotDotLine};
    return styles[run % 5];
}

// "vit_local2d.h5" or "synthetic local1d, d = 16": the data of a sweep.
QString dataText(const analysis::SweepSpec& spec)
{
    if (spec.synth)
        return QCoreApplication::translate("CurvesView", "synthetic %1, d = %2").arg(QString::fromStdString(spec.synth->kind)).arg(spec.synth->d);
    QStringList files;
    for (const auto& in : spec.inputs) {
        const QString f = QFileInfo(QString::fromStdString(in.q_ref).section(':', 0, 0)).fileName();
        if (!files.contains(f))
            files << f;
    }
    return files.size() > 2 ? QCoreApplication::translate("CurvesView", "%1 inputs").arg(files.size()) : files.join(", ");
}

// "h=2", "h=0\u20133" (first to last) or "" when the records have no such axis.
QString axisText(const std::set<Eigen::Index>& values, const char* letter)
{
    if (values.empty())
        return {};
    const QString l = QString::fromLatin1(letter);
    if (values.size() == 1)
        return QStringLiteral("%1=%2").arg(l).arg(*values.begin());
    return QStringLiteral("%1=%2\u2013%3").arg(l).arg(*values.begin()).arg(*values.rbegin());
}

QCPScatterStyle::ScatterShape markerOf(Mechanism m)
{
    switch (m) {
    case Mechanism::softmax: return QCPScatterStyle::ssCircle;
    case Mechanism::linear: return QCPScatterStyle::ssSquare;
    case Mechanism::mhla: return QCPScatterStyle::ssTriangle;
    }
    return QCPScatterStyle::ssDisc;
}

bool allPowersOfTwo(const std::vector<double>& xs)
{
    for (double x : xs) {
        if (!(x >= 1))
            return false;
        const double l = std::log2(x);
        if (std::abs(l - std::round(l)) > 1e-9)
            return false;
    }
    return !xs.empty();
}

// y = f(x) sampled densely (straight on any combination of linear and log axes).
QCPGraph* addFunction(QCustomPlot* plot, QCPAxis* x, QCPAxis* y, double x0, double x1, bool logx,
                      const std::function<double(double)>& f, const QPen& pen)
{
    QVector<double> xs, ys;
    const int n = 200;
    for (int i = 0; i <= n; ++i) {
        const double t = static_cast<double>(i) / n;
        const double v = logx ? x0 * std::pow(x1 / x0, t) : x0 + (x1 - x0) * t;
        xs << v;
        ys << f(v);
    }
    auto* g = plot->addGraph(x, y);
    g->setData(xs, ys, true);
    g->setPen(pen);
    g->setSelectable(QCP::stNone);
    return g;
}

class CurvesView : public SweepPlotView {
public:
    explicit CurvesView(QWidget* parent) : SweepPlotView(parent, QStringLiteral("curves"), tr("Curves"), {860, 560})
    {
        auto* tools = toolRow();
        m_kindLabel = new QLabel(tr("Against"), this);
        tools->addWidget(m_kindLabel);
        m_kindBox = comboBox(this, {{tr("N (sequence length)"), QStringLiteral("n")}, {tr("M (blocks)"), QStringLiteral("m")}},
                             tr("Sweeps over N and sweeps over M have different x axes: the view shows one kind at a time"));
        tools->addWidget(m_kindBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Band"), this));
        m_bandBox = comboBox(this,
                             {{tr("min \u2013 max"), QStringLiteral("minmax")},
                              {tr("mean \u00b1 1 std"), QStringLiteral("std")},
                              {tr("none"), QStringLiteral("none")}},
                             tr("Spread over layers, heads, draws and seeds pooled at each point"));
        tools->addWidget(m_bandBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("x axis"), this));
        m_xBox = comboBox(this,
                          {{tr("auto"), QStringLiteral("auto")},
                           {tr("linear"), QStringLiteral("linear")},
                           {tr("log\u2082"), QStringLiteral("log2")},
                           {tr("log\u2081\u2080"), QStringLiteral("log10")}},
                          tr("auto: logarithmic when the values span more than 8\u00d7 (base 2 for powers of two)"));
        tools->addWidget(m_xBox);
        tools->addWidget(new QLabel(tr("y axis"), this));
        m_yBox = comboBox(this,
                          {{tr("auto"), QStringLiteral("auto")}, {tr("linear"), QStringLiteral("linear")}, {tr("log"), QStringLiteral("log")}},
                          tr("auto: linear, except seconds spanning more than 8\u00d7"));
        tools->addWidget(m_yBox);
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
        std::map<const SweepResult*, nlohmann::ordered_json> known;
        for (Run& r : m_runs)
            known[r.sweep.get()] = std::move(r.summary);
        m_runs.clear();
        char newKind = 0;
        for (const CurveSet& set : sets) {
            if (!set.sweep)
                continue;
            Run r{set.sweep, set.name, {}};
            const auto it = known.find(set.sweep.get());
            if (it != known.end()) {
                r.summary = std::move(it->second);
            } else {
                r.summary = analysis::sweep_summary(set.sweep->spec, set.sweep->records);
                m_hidden.remove(set.name);
                newKind = r.kind();
            }
            m_runs.push_back(std::move(r));
        }
        m_sweep = m_runs.empty() ? nullptr : m_runs.back().sweep;
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
        if (!m_hidden.isEmpty()) {
            QStringList names = m_hidden.values();
            names.sort();
            s[QStringLiteral("hidden_runs")] = QJsonArray::fromStringList(names);
        }
        return s;
    }

    void restoreState(const QJsonObject& state) override
    {
        m_saved.restore(state);
        m_hidden.clear();
        for (const auto& v : state.value(QStringLiteral("hidden_runs")).toArray())
            m_hidden.insert(v.toString());
        keepKindWithRuns();
        refreshRunList();
        rebuild();
    }

private:
    // What the axes show: the metric and band, the distinct x values and the axes' extent and scales.
    struct Frame {
        QString key, band, xscale;
        bool byM = false, logx = false, logy = false;
        std::vector<double> xs;            // ascending, distinct
        double x0 = 0, x1 = 1;             // the x axis range (room around the outer points)
        double ylo = 0, yhi = 0, yminPos = 0;   // extent of the drawn values (yminPos: smallest positive)
        double pooled = 0;                 // most records pooled in one point
    };

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
        const bool have = std::any_of(m_runs.begin(), m_runs.end(), [k](const Run& r) { return r.kind() == k; });
        if (!have && !m_runs.empty())
            setKind(k == 'n' ? 'm' : 'n');
    }

    bool shown(const Run& r) const { return r.name.isEmpty() || !m_hidden.contains(r.name); }

    // The runs drawn: the selected kind's, ticked, oldest first.
    std::vector<const Run*> drawnRuns() const
    {
        std::vector<const Run*> out;
        for (const Run& r : m_runs)
            if (r.kind() == kind() && shown(r))
                out.push_back(&r);
        return out;
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
        connect(m_runList, &QListWidget::itemChanged, this, [this](QListWidgetItem* item) {
            const QString name = item->data(Qt::UserRole).toString();
            if (item->checkState() == Qt::Checked)
                m_hidden.remove(name);
            else
                m_hidden.insert(name);
            rebuild();
        });
        m_runRow->hide();
    }

    void refreshRunList()
    {
        const QSignalBlocker blocker(m_runList);
        m_runList->clear();
        bool kinds[2] = {false, false};
        for (const Run& r : m_runs) {
            kinds[r.kind() == 'm' ? 1 : 0] = true;
            if (r.kind() != kind())
                continue;
            auto* item = new QListWidgetItem(r.name.isEmpty() ? tr("(unnamed run)") : r.name, m_runList);
            item->setData(Qt::UserRole, r.name);
            item->setFlags(r.name.isEmpty() ? Qt::ItemIsEnabled : Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
            item->setCheckState(shown(r) ? Qt::Checked : Qt::Unchecked);
            item->setToolTip(sourceText(r.sweep->spec));
        }
        const bool both = kinds[0] && kinds[1];
        m_kindLabel->setVisible(both);
        m_kindBox->setVisible(both);
        m_runRow->setVisible(m_runs.size() > 1);
    }

    // Points per mechanism of one run: mean and std from its sweep_summary (pooled over summary points that
    // share x), min..max and counts from the records.
    void addRunCurves(const Run& run, int index, std::vector<Curve>& out) const
    {
        if (!run.summary.contains("points"))
            return;
        const SweepResult& sweep = *run.sweep;
        const std::string key = metric().toStdString();
        const bool byM = varyM();
        struct Acc {
            double n = 0, sum = 0, sumsq = 0, min = std::numeric_limits<double>::infinity(),
                   max = -std::numeric_limits<double>::infinity();
        };
        std::vector<Mechanism> order;
        std::map<std::pair<int, double>, Acc> acc;
        auto mechIndex = [&order](Mechanism m) {
            auto it = std::find(order.begin(), order.end(), m);
            if (it == order.end()) {
                order.push_back(m);
                return static_cast<int>(order.size() - 1);
            }
            return static_cast<int>(it - order.begin());
        };
        for (Mechanism m : sweep.spec.mechanisms)
            mechIndex(m);
        // Summary points: count = records of the point; metrics' mean/std over those with a value.
        std::map<std::tuple<std::string, long long, long long>, long> withValue;
        for (const auto& r : sweep.records) {
            Mechanism m;
            const double v = sweepMetricValue(r, metric());
            if (!mechanismFromName(r.mechanism, m) || !std::isfinite(v))
                continue;
            ++withValue[{r.mechanism, static_cast<long long>(r.n), static_cast<long long>(r.m)}];
            Acc& a = acc[{mechIndex(m), static_cast<double>(byM ? r.m : r.n)}];
            a.min = std::min(a.min, v);
            a.max = std::max(a.max, v);
        }
        for (const auto& p : run.summary["points"]) {
            Mechanism m;
            if (!mechanismFromName(p["mechanism"].get<std::string>(), m) || !p.contains(key) || !p[key].is_object())
                continue;
            const long long n = p["n"].get<long long>(), mm = p["m"].get<long long>();
            const auto it = withValue.find({p["mechanism"].get<std::string>(), n, mm});
            if (it == withValue.end())
                continue;
            const double c = static_cast<double>(it->second);
            const double mean = p[key]["mean"].get<double>(), sd = p[key]["std"].get<double>();
            Acc& a = acc[{mechIndex(m), static_cast<double>(byM ? mm : n)}];
            a.n += c;
            a.sum += c * mean;
            a.sumsq += c * (sd * sd + mean * mean);
        }
        for (std::size_t i = 0; i < order.size(); ++i) {
            Curve c;
            c.mechanism = order[i];
            c.run = index;
            for (const auto& [k, a] : acc) {
                if (k.first != static_cast<int>(i) || a.n <= 0)
                    continue;
                CurvePoint p;
                p.x = k.second;
                p.mean = a.sum / a.n;
                p.std = std::sqrt(std::max(0.0, a.sumsq / a.n - p.mean * p.mean));
                p.min = a.min;
                p.max = a.max;
                p.count = static_cast<long>(a.n);
                c.points.push_back(p);
            }
            if (!c.points.empty())
                out.push_back(std::move(c));
        }
    }

    std::vector<Curve> curves() const
    {
        std::vector<Curve> out;
        int index = 0;
        for (const Run* r : m_drawn)
            addRunCurves(*r, index++, out);
        return out;
    }

    // A curve's name in the legend and the read-out: the mechanism, and its run when several are drawn.
    QString curveName(const Curve& c) const
    {
        const QString mech = mechanismLabel(c.mechanism);
        if (m_drawn.size() < 2)
            return mech;
        const QString& run = m_drawn[static_cast<std::size_t>(c.run)]->name;
        return mech + QStringLiteral(" \u00b7 ") + (run.isEmpty() ? tr("run %1").arg(c.run + 1) : run);
    }

    // The rank bound of linear attention of a run: the feature dimension (d, or FAVOR+'s feature count);
    // 0 when unknown (loaded data).
    static double featureDimension(const analysis::SweepSpec& spec, QString* what)
    {
        if (!spec.synth)
            return 0;
        const auto& fm = spec.options.feature_map;
        if (fm.kind == attention::FeatureMapKind::favor) {
            *what = tr("FAVOR+ features m = %1").arg(fm.favor_features);
            return static_cast<double>(fm.favor_features);
        }
        *what = tr("feature dimension d = %1").arg(spec.synth->d);
        return static_cast<double>(spec.synth->d);
    }

    static QString sourceText(const analysis::SweepSpec& spec)
    {
        QString s = dataText(spec);
        if (spec.synth) {
            if (spec.vary == 'm')
                s += tr(", N = %1").arg(spec.synth->n);
            if (spec.synth->seeds > 1)
                s += tr(", %1 seeds").arg(spec.synth->seeds);
        }
        const bool mhla = std::find(spec.mechanisms.begin(), spec.mechanisms.end(), Mechanism::mhla) != spec.mechanisms.end();
        if (mhla && !spec.options.mixing.preset.empty())
            s += tr("; MHLA mixing: %1").arg(QString::fromStdString(spec.options.mixing.preset));
        return s;
    }

    // The band drawn around a point's mean.
    static std::pair<double, double> bandOf(const CurvePoint& p, const QString& band)
    {
        if (band == "minmax")
            return std::make_pair(p.min, p.max);
        if (band == "std")
            return std::make_pair(p.mean - p.std, p.mean + p.std);
        return std::make_pair(p.mean, p.mean);
    }

    void rebuild() override
    {
        m_curves.clear();
        m_rect = nullptr;
        m_drawn = drawnRuns();
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
        m_curves = curves();
        if (m_curves.empty()) {
            showPlotMessage(m_plot, tr("The sweep has no values of %1.").arg(sweepMetricLabel(metric())));
            return;
        }
        clearPlot(m_plot);
        Frame f = frame();
        addTitles(f);
        QCPLegend* legend = addAxes(f);
        const std::vector<QCPGraph*> refs = addReferenceLines(f);
        addCurves(f, legend);
        for (QCPGraph* g : refs)
            g->addToLegend(legend);
        setUpAxes(f, legend);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // The x values and scale (auto: log when they span more than 8x, base 2 for powers of two) and the
    // y extent of means and bands (auto: log for seconds spanning more than 8x).
    Frame frame() const
    {
        Frame f;
        f.key = metric();
        f.band = m_bandBox->currentData().toString();
        f.byM = varyM();
        for (const Curve& c : m_curves)
            for (const CurvePoint& p : c.points) {
                f.xs.push_back(p.x);
                f.pooled = std::max(f.pooled, static_cast<double>(p.count));
            }
        std::sort(f.xs.begin(), f.xs.end());
        f.xs.erase(std::unique(f.xs.begin(), f.xs.end()), f.xs.end());
        const double xmin = f.xs.front(), xmax = f.xs.back();
        f.xscale = m_xBox->currentData().toString();
        if (f.xscale == "auto")
            f.xscale = (xmin > 0 && xmax > 8 * xmin) ? (allPowersOfTwo(f.xs) ? "log2" : "log10") : "linear";
        if (xmin <= 0 && f.xscale != "linear")
            f.xscale = "linear";
        f.logx = f.xscale != "linear";
        if (f.logx) {
            f.x0 = xmin / 1.3;
            f.x1 = xmax * 1.3;
        } else {
            const double pad = xmax > xmin ? 0.05 * (xmax - xmin) : std::max(1.0, 0.1 * std::abs(xmin));
            f.x0 = xmin - pad;
            f.x1 = xmax + pad;
        }
        f.ylo = std::numeric_limits<double>::infinity();
        f.yhi = -f.ylo;
        f.yminPos = f.ylo;
        for (const Curve& c : m_curves)
            for (const CurvePoint& p : c.points) {
                const auto [lo, hi] = bandOf(p, f.band);
                f.ylo = std::min({f.ylo, lo, p.mean});
                f.yhi = std::max({f.yhi, hi, p.mean});
                for (double v : {lo, p.mean})
                    if (v > 0)
                        f.yminPos = std::min(f.yminPos, v);
            }
        QString yscale = m_yBox->currentData().toString();
        if (yscale == "auto")
            yscale = (f.key == "seconds" && f.yminPos > 0 && f.yhi > 8 * f.yminPos) ? "log" : "linear";
        if (!std::isfinite(f.yminPos))
            yscale = "linear";
        f.logy = yscale == "log";
        return f;
    }

    // Title (metric against x) and a subtitle saying what the data are and what a point pools.
    void addTitles(const Frame& f)
    {
        QString title = tr("%1 against %2").arg(sweepMetricLabel(f.key), xName(f));
        title[0] = title[0].toUpper();
        QString sub = m_drawn.size() == 1 ? sourceText(m_drawn.front()->sweep->spec)
                                          : tr("%1 runs (line style marks the run)").arg(m_drawn.size());
        if (f.pooled > 1)
            sub += tr("; mean of up to %1 records per point (%2)")
                       .arg(f.pooled)
                       .arg(f.band == "minmax" ? tr("band: min \u2013 max") : f.band == "std" ? tr("band: \u00b1 1 std") : tr("no band"));
        auto* t = new QCPTextElement(m_plot, title, plotFont(kTitlePt, true));
        m_plot->plotLayout()->addElement(0, 0, t);
        auto* st = new QCPTextElement(m_plot, sub, plotFont(kTickPt));
        st->setTextColor(QColor(80, 80, 80));
        m_plot->plotLayout()->addElement(1, 0, st);
    }

    QString xName(const Frame& f) const { return f.byM ? tr("blocks M") : tr("sequence length N"); }

    // The axis rect, a closed box like matplotlib's spines (ticks on the bottom and left only), and the
    // legend where the curves are not: top left when they rise, top right when they fall.
    QCPLegend* addAxes(const Frame& f)
    {
        m_rect = new QCPAxisRect(m_plot, true);
        m_plot->plotLayout()->addElement(2, 0, m_rect);
        m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        m_plot->plotLayout()->setRowStretchFactor(1, 0.01);
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
        return addLegend(m_rect, Qt::AlignTop | (last >= first ? Qt::AlignLeft : Qt::AlignRight));
    }

    // Reference lines, drawn under the data: full rank against N, and the feature dimension that bounds
    // linear attention's rank when the sweep knows it. f.yhi grows to keep them in view.
    std::vector<QCPGraph*> addReferenceLines(Frame& f)
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
        const bool hasLinear = std::any_of(m_curves.begin(), m_curves.end(), [](const Curve& c) { return c.mechanism == Mechanism::linear; });
        // One line per distinct bound among the drawn runs that know it (synthetic data).
        std::set<double> drawnBounds;
        for (const Run* run : rankLike && hasLinear ? m_drawn : std::vector<const Run*>{}) {
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
    void addCurves(const Frame& f, QCPLegend* legend)
    {
        auto* x = m_rect->axis(QCPAxis::atBottom);
        auto* y = m_rect->axis(QCPAxis::atLeft);
        for (const Curve& c : m_curves) {
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
            pen.setWidthF(c.mechanism == Mechanism::linear ? 2.4 : 1.7);
            if (m_drawn.size() > 1)
                pen.setStyle(runStyle(c.run));
            g->setPen(pen);
            g->setScatterStyle(QCPScatterStyle(markerOf(c.mechanism), color, c.mechanism == Mechanism::softmax ? Qt::white : color,
                                               c.mechanism == Mechanism::mhla ? 8 : 7));
            g->setName(curveName(c));
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
            g->setScatterStyle(QCPScatterStyle(markerOf(m), color, m == Mechanism::softmax ? Qt::white : color, 7));
            g->setName(mechanismLabel(m));
            g->setSelectable(QCP::stNone);
            g->addToLegend(legend);
        }
        for (std::size_t i = 0; i < m_drawn.size(); ++i) {
            auto* g = m_plot->addGraph(x, y);
            g->setPen(QPen(QColor(60, 60, 60), 1.5, runStyle(static_cast<int>(i))));
            g->setName(m_drawn[i]->name.isEmpty() ? tr("run %1").arg(i + 1) : m_drawn[i]->name);
            g->setSelectable(QCP::stNone);
            g->addToLegend(legend);
        }
    }

    // Tickers and ranges; a linear y axis leaves room above the curves for the legend.
    void setUpAxes(const Frame& f, const QCPLegend* legend)
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
                QString s = tr("%1: mean %2").arg(curveName(c), fmtNum(p.mean, 4));
                if (band == "std")
                    s += tr(" \u00b1 %1").arg(fmtNum(p.std, 3));
                else
                    s += tr(" (min %1, max %2)").arg(fmtNum(p.min, 4), fmtNum(p.max, 4));
                s += tr(", %1 records").arg(p.count);
                parts << s;
            }
        emit statusMessage(tr("%1 = %2   %3").arg(varyM() ? QStringLiteral("M") : QStringLiteral("N"), fmtNum(bx, 8), parts.join(QStringLiteral("   |   "))));
    }

    std::vector<Run> m_runs;                 // every run, oldest first
    std::vector<const Run*> m_drawn;         // the runs the plot shows (index = line style)
    QSet<QString> m_hidden;                  // names of runs whose checkbox is off
    QString m_note;                          // shown instead of the usual hint while there is no run
    std::vector<Curve> m_curves;
    QCPAxisRect* m_rect = nullptr;
    QComboBox *m_kindBox, *m_bandBox, *m_xBox, *m_yBox;
    QLabel* m_kindLabel = nullptr;
    QWidget* m_runRow = nullptr;
    QListWidget* m_runList = nullptr;
};

}  // namespace

SweepView* createCurvesView(QWidget* parent) { return new CurvesView(parent); }

QString curveSetName(const analysis::SweepResult& sweep)
{
    const auto& spec = sweep.spec;
    QString name = spec.vary == 'm' ? QCoreApplication::translate("CurvesView", "M sweep") : QCoreApplication::translate("CurvesView", "N sweep");
    name += QStringLiteral(" \u00b7 ");
    if (spec.synth) {
        name += QCoreApplication::translate("CurvesView", "synthetic %1 d=%2").arg(QString::fromStdString(spec.synth->kind)).arg(spec.synth->d);
        if (spec.vary == 'm')
            name += QStringLiteral(" N=%1").arg(spec.synth->n);
        return name;
    }
    name += dataText(spec);
    std::set<Eigen::Index> layers, heads;
    for (const auto& r : sweep.records) {
        if (r.layer)
            layers.insert(*r.layer);
        if (r.head)
            heads.insert(*r.head);
    }
    for (const QString& part : {axisText(layers, "l"), axisText(heads, "h")})
        if (!part.isEmpty())
            name += QLatin1Char(' ') + part;
    return name;
}

}  // namespace attnscope::widgets
