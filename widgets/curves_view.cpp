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

class CurvesView : public SweepPlotView {
public:
    explicit CurvesView(QWidget* parent) : SweepPlotView(parent, QStringLiteral("curves"), tr("Curves"), {860, 560})
    {
        auto* tools = toolRow();
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
        for (QComboBox* b : {m_bandBox, m_xBox, m_yBox})
            connect(b, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
        connect(m_plot, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) { hover(e->pos()); });
        m_saved.addByData("band", m_bandBox);
        m_saved.addByData("x_scale", m_xBox);
        m_saved.addByData("y_scale", m_yBox);
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

    bool varyM() const { return m_sweep && m_sweep->spec.vary == 'm'; }

    void sweepChanged() override
    {
        m_summary = m_sweep ? analysis::sweep_summary(m_sweep->spec, m_sweep->records) : nlohmann::ordered_json();
        rebuild();
    }

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
        if (!m_sweep) {
            showPlotMessage(m_plot, tr("No sweep yet.\nRun a sweep over N or M to see the metrics of each mechanism as curves."));
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
        QString sub = sourceText();
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
        QString dWhat;
        const double d = rankLike && hasLinear ? featureDimension(&dWhat) : 0;
        if (d > 0) {
            const QPen pen(QColor(60, 60, 60), 1.2, Qt::DotLine);
            QCPGraph* g = f.key == "rank" ? addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [d](double) { return d; }, pen)
                          : f.byM         ? addFunction(m_plot, x, y, f.x0, f.x1, f.logx, [this](double) {
                                        return featureDimensionOverN();
                                    }, pen)
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
            g->setPen(pen);
            g->setScatterStyle(QCPScatterStyle(markerOf(c.mechanism), color, c.mechanism == Mechanism::softmax ? Qt::white : color,
                                               c.mechanism == Mechanism::mhla ? 8 : 7));
            g->setName(mechanismLabel(c.mechanism));
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

    nlohmann::ordered_json m_summary;
    std::vector<Curve> m_curves;
    QCPAxisRect* m_rect = nullptr;
    QComboBox *m_bandBox, *m_xBox, *m_yBox;
};

}  // namespace

SweepView* createCurvesView(QWidget* parent) { return new CurvesView(parent); }

}  // namespace attnscope::widgets
