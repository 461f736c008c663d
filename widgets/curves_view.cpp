// CurvesView: a metric of a sweep against N or M, one line per mechanism, with a band for the spread over
// layers, heads, draws and seeds. The mean and std of every point are the core's sweep_summary (the JSON
// summary of `attnscope sweep`); the view only pools summary points that share an x value and collects
// min..max for the band. Reference lines: full rank (rank = N), and the feature dimension that bounds linear
// attention's rank when the sweep's data are synthetic (the only case in which the sweep knows d).
#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QMouseEvent>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <qcustomplot.h>

#include "analysis/sweep.h"
#include "curves.h"
#include "plot_style.h"

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
    std::vector<CurvePoint> points;   // ascending x
};

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

class CurvesView : public PlotViewOf<SweepView> {
public:
    explicit CurvesView(QWidget* parent) : PlotViewOf<SweepView>(parent)
    {
        auto* tools = toolRow();
        tools->addWidget(new QLabel(tr("Metric"), this));
        m_metricBox = new QComboBox(this);
        for (const QString& k : sweepMetricKeys())
            m_metricBox->addItem(sweepMetricLabel(k), k);
        tools->addWidget(m_metricBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("Band"), this));
        m_bandBox = new QComboBox(this);
        m_bandBox->addItem(tr("min \u2013 max"), QStringLiteral("minmax"));
        m_bandBox->addItem(tr("mean \u00b1 1 std"), QStringLiteral("std"));
        m_bandBox->addItem(tr("none"), QStringLiteral("none"));
        m_bandBox->setToolTip(tr("Spread over layers, heads, draws and seeds pooled at each point"));
        tools->addWidget(m_bandBox);
        tools->addSpacing(12);
        tools->addWidget(new QLabel(tr("x axis"), this));
        m_xBox = new QComboBox(this);
        m_xBox->addItem(tr("auto"), QStringLiteral("auto"));
        m_xBox->addItem(tr("linear"), QStringLiteral("linear"));
        m_xBox->addItem(tr("log\u2082"), QStringLiteral("log2"));
        m_xBox->addItem(tr("log\u2081\u2080"), QStringLiteral("log10"));
        m_xBox->setToolTip(tr("auto: logarithmic when the values span more than 8\u00d7 (base 2 for powers of two)"));
        tools->addWidget(m_xBox);
        tools->addWidget(new QLabel(tr("y axis"), this));
        m_yBox = new QComboBox(this);
        m_yBox->addItem(tr("auto"), QStringLiteral("auto"));
        m_yBox->addItem(tr("linear"), QStringLiteral("linear"));
        m_yBox->addItem(tr("log"), QStringLiteral("log"));
        m_yBox->setToolTip(tr("auto: linear, except seconds spanning more than 8\u00d7"));
        tools->addWidget(m_yBox);
        tools->addStretch(1);
        for (QComboBox* b : {m_metricBox, m_bandBox, m_xBox, m_yBox})
            connect(b, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("curves"); }
    QString viewTitle() const override { return tr("Curves"); }
    QSize preferredExportSize() const override { return {860, 560}; }
    void setResult(std::shared_ptr<const analysis::ExploreResult> result) override { Q_UNUSED(result); }

    void setSweep(std::shared_ptr<const SweepResult> sweep) override
    {
        m_sweep = std::move(sweep);
        m_summary = m_sweep ? analysis::sweep_summary(m_sweep->spec, m_sweep->records) : nlohmann::ordered_json();
        rebuild();
    }

    void setMetric(const QString& metric) override
    {
        const int i = m_metricBox->findData(metric);
        if (i >= 0)
            m_metricBox->setCurrentIndex(i);   // rebuilds when it changes
    }

    QJsonObject saveState() const override
    {
        return QJsonObject{{"metric", m_metricBox->currentData().toString()},
                           {"band", m_bandBox->currentData().toString()},
                           {"x_scale", m_xBox->currentData().toString()},
                           {"y_scale", m_yBox->currentData().toString()}};
    }

    void restoreState(const QJsonObject& s) override
    {
        const QSignalBlocker b1(m_metricBox), b2(m_bandBox), b3(m_xBox), b4(m_yBox);
        auto pick = [&s](QComboBox* box, const char* key) {
            const int i = box->findData(s[key].toString());
            if (s.contains(key) && i >= 0)
                box->setCurrentIndex(i);
        };
        pick(m_metricBox, "metric");
        pick(m_bandBox, "band");
        pick(m_xBox, "x_scale");
        pick(m_yBox, "y_scale");
        rebuild();
    }

private:
    QString metric() const { return m_metricBox->currentData().toString(); }
    bool varyM() const { return m_sweep && m_sweep->spec.vary == 'm'; }

    // Points per mechanism: mean and std from sweep_summary (pooled over summary points that share x),
    // min..max and counts from the records.
    std::vector<Curve> curves() const
    {
        std::vector<Curve> out;
        if (!m_sweep || !m_summary.contains("points"))
            return out;
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
        for (Mechanism m : m_sweep->spec.mechanisms)
            mechIndex(m);
        // Summary points: count = records of the point; metrics' mean/std over those with a value.
        std::map<std::tuple<std::string, long long, long long>, long> withValue;
        std::map<std::pair<int, double>, std::pair<double, double>> range;
        for (const auto& r : m_sweep->records) {
            Mechanism m;
            const double v = sweepMetricValue(r, metric());
            if (!mechanismFromName(r.mechanism, m) || !std::isfinite(v))
                continue;
            ++withValue[{r.mechanism, static_cast<long long>(r.n), static_cast<long long>(r.m)}];
            Acc& a = acc[{mechIndex(m), static_cast<double>(byM ? r.m : r.n)}];
            a.min = std::min(a.min, v);
            a.max = std::max(a.max, v);
        }
        for (const auto& p : m_summary["points"]) {
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
        return out;
    }

    // The rank bound of linear attention: the feature dimension (d, or FAVOR+'s feature count); 0 when unknown.
    double featureDimension(QString* what) const
    {
        if (!m_sweep || !m_sweep->spec.synth)
            return 0;
        const auto& fm = m_sweep->spec.options.feature_map;
        if (fm.kind == attention::FeatureMapKind::favor) {
            *what = tr("FAVOR+ features m = %1").arg(fm.favor_features);
            return static_cast<double>(fm.favor_features);
        }
        *what = tr("feature dimension d = %1").arg(m_sweep->spec.synth->d);
        return static_cast<double>(m_sweep->spec.synth->d);
    }

    QString sourceText() const
    {
        const auto& spec = m_sweep->spec;
        QString s;
        if (spec.synth) {
            s = tr("synthetic %1, d = %2").arg(QString::fromStdString(spec.synth->kind)).arg(spec.synth->d);
            if (spec.vary == 'm')
                s += tr(", N = %1").arg(spec.synth->n);
            if (spec.synth->seeds > 1)
                s += tr(", %1 seeds").arg(spec.synth->seeds);
        } else {
            QStringList files;
            for (const auto& in : spec.inputs) {
                const QString f = QFileInfo(QString::fromStdString(in.q_ref).section(':', 0, 0)).fileName();
                if (!files.contains(f))
                    files << f;
            }
            s = files.size() > 2 ? tr("%1 inputs").arg(files.size()) : files.join(", ");
        }
        const bool mhla = std::find(spec.mechanisms.begin(), spec.mechanisms.end(), Mechanism::mhla) != spec.mechanisms.end();
        if (mhla && !spec.options.mixing.preset.empty())
            s += tr("; MHLA mixing: %1").arg(QString::fromStdString(spec.options.mixing.preset));
        return s;
    }

    void rebuild()
    {
        m_curves.clear();
        m_rect = nullptr;
        if (!m_sweep) {
            showPlotMessage(m_plot, tr("No sweep yet.\nRun a sweep over N or M to see the metrics of each mechanism as curves."));
            return;
        }
        m_curves = curves();
        const QString key = metric();
        if (m_curves.empty()) {
            showPlotMessage(m_plot, tr("The sweep has no values of %1.").arg(sweepMetricLabel(key)));
            return;
        }
        clearPlot(m_plot);
        const bool byM = varyM();
        const bool rankLike = key == "rank" || key == "relative_rank";

        std::vector<double> xs;
        double pooled = 0;
        for (const Curve& c : m_curves)
            for (const CurvePoint& p : c.points) {
                xs.push_back(p.x);
                pooled = std::max(pooled, static_cast<double>(p.count));
            }
        std::sort(xs.begin(), xs.end());
        xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
        const double xmin = xs.front(), xmax = xs.back();

        QString xscale = m_xBox->currentData().toString();
        if (xscale == "auto")
            xscale = (xmin > 0 && xmax > 8 * xmin) ? (allPowersOfTwo(xs) ? "log2" : "log10") : "linear";
        if (xmin <= 0 && xscale != "linear")
            xscale = "linear";
        const bool logx = xscale != "linear";

        // y extent of what will be drawn.
        const QString band = m_bandBox->currentData().toString();
        auto bandOf = [&band](const CurvePoint& p) {
            if (band == "minmax")
                return std::make_pair(p.min, p.max);
            if (band == "std")
                return std::make_pair(p.mean - p.std, p.mean + p.std);
            return std::make_pair(p.mean, p.mean);
        };
        double ylo = std::numeric_limits<double>::infinity(), yhi = -ylo, yminPos = ylo;
        for (const Curve& c : m_curves)
            for (const CurvePoint& p : c.points) {
                const auto [lo, hi] = bandOf(p);
                ylo = std::min({ylo, lo, p.mean});
                yhi = std::max({yhi, hi, p.mean});
                for (double v : {lo, p.mean})
                    if (v > 0)
                        yminPos = std::min(yminPos, v);
            }
        QString yscale = m_yBox->currentData().toString();
        if (yscale == "auto")
            yscale = (key == "seconds" && yminPos > 0 && yhi > 8 * yminPos) ? "log" : "linear";
        if (!std::isfinite(yminPos))
            yscale = "linear";
        const bool logy = yscale == "log";

        // Title: metric against x, and what the data are.
        const QString xname = byM ? tr("blocks M") : tr("sequence length N");
        QString title = tr("%1 against %2").arg(sweepMetricLabel(key), xname);
        title[0] = title[0].toUpper();
        QString sub = sourceText();
        if (pooled > 1)
            sub += tr("; mean of up to %1 records per point (%2)")
                       .arg(pooled)
                       .arg(band == "minmax" ? tr("band: min \u2013 max") : band == "std" ? tr("band: \u00b1 1 std") : tr("no band"));
        auto* t = new QCPTextElement(m_plot, title, plotFont(kTitlePt, true));
        m_plot->plotLayout()->addElement(0, 0, t);
        auto* st = new QCPTextElement(m_plot, sub, plotFont(kTickPt));
        st->setTextColor(QColor(80, 80, 80));
        m_plot->plotLayout()->addElement(1, 0, st);
        m_rect = new QCPAxisRect(m_plot, true);
        m_plot->plotLayout()->addElement(2, 0, m_rect);
        m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        m_plot->plotLayout()->setRowStretchFactor(1, 0.01);
        m_plot->plotLayout()->setRowSpacing(0);
        // A closed box like matplotlib's spines; ticks on the bottom and left only.
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
        x->setLabel(xname);
        y->setLabel(sweepMetricLabel(key));
        x->grid()->setVisible(true);
        y->grid()->setVisible(true);

        // Legend where the curves are not: top left when they rise, top right when they fall.
        double first = 0, last = 0;
        for (const Curve& c : m_curves) {
            first += c.points.front().mean;
            last += c.points.back().mean;
        }
        auto* legend = addLegend(m_rect, Qt::AlignTop | (last >= first ? Qt::AlignLeft : Qt::AlignRight));

        // x range, with room around the outer points.
        double x0, x1;
        if (logx) {
            x0 = xmin / 1.3;
            x1 = xmax * 1.3;
        } else {
            const double pad = xmax > xmin ? 0.05 * (xmax - xmin) : std::max(1.0, 0.1 * std::abs(xmin));
            x0 = xmin - pad;
            x1 = xmax + pad;
        }

        // Reference lines first (drawn under the data).
        std::vector<QCPGraph*> refs;
        if (!byM && key == "rank") {
            auto* g = addFunction(m_plot, x, y, x0, x1, logx, [](double v) { return v; }, QPen(QColor(90, 90, 90), 1.2, Qt::DashLine));
            g->setName(tr("full rank (rank = N)"));
            refs.push_back(g);
            yhi = std::max(yhi, xmax);
        } else if (!byM && key == "relative_rank") {
            auto* g = addFunction(m_plot, x, y, x0, x1, logx, [](double) { return 1.0; }, QPen(QColor(90, 90, 90), 1.2, Qt::DashLine));
            g->setName(tr("full rank (rank / N = 1)"));
            refs.push_back(g);
            yhi = std::max(yhi, 1.0);
        }
        const bool hasLinear = std::any_of(m_curves.begin(), m_curves.end(), [](const Curve& c) { return c.mechanism == Mechanism::linear; });
        QString dWhat;
        const double d = rankLike && hasLinear ? featureDimension(&dWhat) : 0;
        if (d > 0) {
            const QPen pen(QColor(60, 60, 60), 1.2, Qt::DotLine);
            QCPGraph* g = key == "rank" ? addFunction(m_plot, x, y, x0, x1, logx, [d](double) { return d; }, pen)
                          : byM          ? addFunction(m_plot, x, y, x0, x1, logx, [this](double) {
                                     return featureDimensionOverN();
                                 }, pen)
                                         : addFunction(m_plot, x, y, x0, x1, logx, [d](double v) { return d / v; }, pen);
            g->setName(key == "rank" ? dWhat + tr(" (bound of linear rank)") : dWhat + tr(" over N (bound of linear)"));
            refs.push_back(g);
            if (key == "rank")
                yhi = std::max(yhi, d);
        }

        // Bands, then the mean curves with markers.
        for (const Curve& c : m_curves) {
            const QColor color = mechanismColor(c.mechanism);
            QVector<double> px, pm, plo, phi;
            bool spread = false;
            for (const CurvePoint& p : c.points) {
                const auto [lo, hi] = bandOf(p);
                px << p.x;
                pm << p.mean;
                plo << (logy ? std::max(lo, yminPos) : lo);
                phi << hi;
                spread = spread || hi > lo;
            }
            if (band != "none" && spread) {
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
            g->setPen(pen);
            g->setScatterStyle(QCPScatterStyle(markerOf(c.mechanism), color, c.mechanism == Mechanism::softmax ? Qt::white : color,
                                               c.mechanism == Mechanism::mhla ? 8 : 7));
            g->setName(mechanismLabel(c.mechanism));
            g->addToLegend(legend);
        }
        for (QCPGraph* g : refs)
            g->addToLegend(legend);

        // Axes.
        if (logx) {
            auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
            ticker->setLogBase(xscale == "log2" ? 2 : 10);
            ticker->setSubTickCount(xscale == "log2" ? 0 : 8);
            x->setScaleType(QCPAxis::stLogarithmic);
            x->setTicker(ticker);
            x->setNumberFormat("gb");
            x->setNumberPrecision(6);
        } else if (std::all_of(xs.begin(), xs.end(), [](double v) { return v == std::round(v); })) {
            setIntegerTicks(x);
        }
        x->setRange(x0, x1);
        if (logy) {
            auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
            ticker->setLogBase(10);
            ticker->setSubTickCount(8);
            y->setScaleType(QCPAxis::stLogarithmic);
            y->setTicker(ticker);
            y->setNumberFormat("gb");
            y->setNumberPrecision(4);
            y->setRange(yminPos / 1.6, yhi * 1.6);
        } else {
            const double lo = ylo >= 0 ? 0.0 : ylo - 0.06 * (yhi - ylo);
            double hi = yhi + 0.08 * (yhi - lo);
            if (!(hi > lo))
                hi = lo + 1;
            // Room for the legend above the curves.
            hi += 0.06 * (hi - lo) * static_cast<double>(legend->itemCount());
            y->setRange(lo, hi);
        }
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    double featureDimensionOverN() const
    {
        QString unused;
        const double d = featureDimension(&unused);
        return m_sweep && m_sweep->spec.synth && m_sweep->spec.synth->n > 0 ? d / static_cast<double>(m_sweep->spec.synth->n) : 0;
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
                QString s = tr("%1: mean %2").arg(mechanismLabel(c.mechanism), fmtNum(p.mean, 4));
                if (band == "std")
                    s += tr(" \u00b1 %1").arg(fmtNum(p.std, 3));
                else
                    s += tr(" (min %1, max %2)").arg(fmtNum(p.min, 4), fmtNum(p.max, 4));
                s += tr(", %1 records").arg(p.count);
                parts << s;
            }
        emit statusMessage(tr("%1 = %2   %3").arg(varyM() ? QStringLiteral("M") : QStringLiteral("N"), fmtNum(bx, 8), parts.join(QStringLiteral("   |   "))));
    }

    std::shared_ptr<const SweepResult> m_sweep;
    nlohmann::ordered_json m_summary;
    std::vector<Curve> m_curves;
    QCPAxisRect* m_rect = nullptr;
    QComboBox *m_metricBox, *m_bandBox, *m_xBox, *m_yBox;
};

}  // namespace

SweepView* createCurvesView(QWidget* parent) { return new CurvesView(parent); }

}  // namespace attnscope::widgets
