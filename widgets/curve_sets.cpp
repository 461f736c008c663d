// The runs of the Curves tab, their curves, the frame of those curves and the texts that name a run: see
// curve_sets.h. The texts keep the translation contexts they have in the view (SweepView's tr(), and
// "CurvesView" for the names of curve sets).
#include "curve_sets.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "analysis/sweep.h"
#include "attention/options_json.h"
#include "plot_style.h"

namespace attnscope::widgets {
namespace {

using analysis::SweepResult;
using attention::Mechanism;

// "vit_local2d.h5" or "synthetic local1d, d = 16": the data of a sweep.
QString dataText(const analysis::SweepSpec& spec)
{
    if (spec.synth)
        return QCoreApplication::translate("CurvesView", "synthetic %1, d = %2").arg(QString::fromStdString(spec.synth->kind)).arg(spec.synth->d);
    QStringList files;
    for (const auto& in : spec.inputs) {
        const QString f = QFileInfo(QString::fromStdString(in.q_ref.file)).fileName();
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

// The layers and heads of a run: "l=0" (the records' layers, or the per-layer dataset's) and "h=1" / "h=0\u20133".
QStringList unitTexts(const analysis::SweepResult& sweep, int datasetLayer)
{
    std::set<Eigen::Index> layers, heads;
    for (const auto& r : sweep.records) {
        if (r.layer)
            layers.insert(*r.layer);
        if (r.head)
            heads.insert(*r.head);
    }
    if (layers.empty() && datasetLayer >= 0)
        layers.insert(datasetLayer);
    QStringList out;
    for (const QString& part : {axisText(layers, "l"), axisText(heads, "h")})
        if (!part.isEmpty())
            out << part;
    return out;
}

// An option's value as a reader would say it: names bare, lists as 4x4, none as "default".
QString valueText(const std::string& key, const nlohmann::ordered_json& v)
{
    if (v.is_null())
        return key == "scale" ? QStringLiteral("1/\u221ad") : QCoreApplication::translate("CurvesView", "default");
    if (v.is_boolean())
        return v.get<bool>() ? QStringLiteral("on") : QStringLiteral("off");
    if (v.is_string())
        return v.get<std::string>().empty() ? QCoreApplication::translate("CurvesView", "default") : QString::fromStdString(v.get<std::string>());
    if (v.is_array()) {
        QStringList parts;
        for (const auto& x : v)
            parts << QString::fromStdString(x.dump());
        return parts.isEmpty() ? QCoreApplication::translate("CurvesView", "none") : parts.join(QLatin1Char('x'));
    }
    return QString::fromStdString(v.dump());
}

// "feature map relu": an option (options_json.h's key, underscores as spaces) and its value.
QString optionText(const std::string& key, const nlohmann::ordered_json& v)
{
    QString k = QString::fromStdString(key);
    k.replace(QLatin1Char('_'), QLatin1Char(' '));
    return k + QLatin1Char(' ') + valueText(key, v);
}

// The options that differ from the program's defaults, the feature map always: what a run's numbers depend on.
}  // namespace

QString optionsText(const attention::AttentionOptions& o)
{
    const nlohmann::ordered_json j = attention::options_to_json(o), defaults = attention::options_to_json(attention::AttentionOptions{});
    QStringList parts;
    for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() == "feature_map" || defaults.value(it.key(), nlohmann::ordered_json()) != it.value())
            parts << optionText(it.key(), it.value());
    return parts.join(QStringLiteral(", "));
}

namespace {

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

// The curves of one run (analysis::sweep_curves pools them), for the mechanisms this build draws.
void addRunCurves(const CurveRun& run, int index, const QString& metric, bool byM, std::vector<Curve>& out)
{
    for (const analysis::SweepCurve& sc : analysis::sweep_curves(*run.sweep, run.summary, metric.toStdString(), byM)) {
        Curve c;
        if (!mechanismFromName(sc.mechanism, c.mechanism))
            continue;
        c.run = index;
        for (const auto& [x, s] : sc.points) {
            CurvePoint p;
            p.x = x;
            p.mean = s.mean;
            p.std = s.std;
            p.min = s.min;
            p.max = s.max;
            p.ciLow = s.ci_low;
            p.ciHigh = s.ci_high;
            p.count = static_cast<long>(s.count);
            c.points.push_back(p);
        }
        out.push_back(std::move(c));
    }
}

}  // namespace

char CurveRun::kind() const { return sweep->spec.vary == 'm' ? 'm' : 'n'; }

char CurveRuns::set(const QList<CurveSet>& sets)
{
    std::map<const SweepResult*, nlohmann::ordered_json> known;
    for (CurveRun& r : m_runs)
        known[r.sweep.get()] = std::move(r.summary);
    m_runs.clear();
    char newKind = 0;
    for (const CurveSet& set : sets) {
        if (!set.sweep)
            continue;
        CurveRun r{set.sweep, set.name, {}, set.stale, set.datasetLayer};
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
    return newKind;
}

bool CurveRuns::hasKind(char kind) const
{
    return std::any_of(m_runs.begin(), m_runs.end(), [kind](const CurveRun& r) { return r.kind() == kind; });
}

void CurveRuns::setShown(const QString& name, bool shown)
{
    if (shown)
        m_hidden.remove(name);
    else
        m_hidden.insert(name);
}

std::vector<const CurveRun*> CurveRuns::drawn(char kind) const
{
    std::vector<const CurveRun*> out;
    for (const CurveRun& r : m_runs)
        if (r.kind() == kind && shown(r))
            out.push_back(&r);
    return out;
}

QStringList CurveRuns::hiddenNames() const
{
    QStringList names = m_hidden.values();
    names.sort();
    return names;
}

void CurveRuns::setHiddenNames(const QStringList& names)
{
    m_hidden.clear();
    for (const QString& name : names)
        m_hidden.insert(name);
}

std::vector<Curve> curvesOf(const std::vector<const CurveRun*>& drawn, const QString& metric, bool byM)
{
    std::vector<Curve> out;
    int index = 0;
    for (const CurveRun* r : drawn)
        addRunCurves(*r, index++, metric, byM, out);
    return out;
}

CurveFrame curveFrame(const std::vector<Curve>& curves, const QString& metric, const QString& band, bool byM,
                      const QString& xscale, const QString& yscale)
{
    CurveFrame f;
    f.key = metric;
    f.band = band;
    f.byM = byM;
    for (const Curve& c : curves)
        for (const CurvePoint& p : c.points) {
            f.xs.push_back(p.x);
            f.pooled = std::max(f.pooled, static_cast<double>(p.count));
        }
    std::sort(f.xs.begin(), f.xs.end());
    f.xs.erase(std::unique(f.xs.begin(), f.xs.end()), f.xs.end());
    const double xmin = f.xs.front(), xmax = f.xs.back();
    f.xscale = xscale;
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
    for (const Curve& c : curves)
        for (const CurvePoint& p : c.points) {
            const auto [lo, hi] = bandOf(p, f.band);
            f.ylo = std::min({f.ylo, lo, p.mean});
            f.yhi = std::max({f.yhi, hi, p.mean});
            for (double v : {lo, p.mean})
                if (v > 0)
                    f.yminPos = std::min(f.yminPos, v);
        }
    QString ys = yscale;
    if (ys == "auto")
        ys = (f.key == "seconds" && f.yminPos > 0 && f.yhi > 8 * f.yminPos) ? "log" : "linear";
    if (!std::isfinite(f.yminPos))
        ys = "linear";
    f.logy = ys == "log";
    return f;
}

std::pair<double, double> bandOf(const CurvePoint& p, const QString& band)
{
    if (band == "ci" && std::isfinite(p.ciLow) && std::isfinite(p.ciHigh))
        return std::make_pair(p.ciLow, p.ciHigh);
    if (band == "minmax")
        return std::make_pair(p.min, p.max);
    if (band == "std")
        return std::make_pair(p.mean - p.std, p.mean + p.std);
    return std::make_pair(p.mean, p.mean);
}

QString bandText(const QString& band)
{
    const auto tr = [](const char* text) { return QCoreApplication::translate("CurvesView", text); };
    if (band == "ci")
        return tr("band: 95% interval of the mean (bootstrap; t below 10 values)");
    return band == "minmax" ? tr("band: min \u2013 max") : band == "std" ? tr("band: \u00b1 1 std") : tr("no band");
}

Qt::PenStyle runStyle(int run)
{
    static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine, Qt::DashDotDotLine};
    return styles[run % 5];
}

QString runLabel(const std::vector<const CurveRun*>& drawn, std::size_t i)
{
    const QString& name = drawn[i]->name;
    const QString label = name.isEmpty() ? SweepView::tr("run %1").arg(i + 1) : name;
    return drawn[i]->stale.isEmpty() ? label : SweepView::tr("%1 (not current)").arg(label);
}

QString runTip(const CurveRun& r)
{
    QString tip = runDetails(*r.sweep, r.datasetLayer) + QLatin1Char('\n') + sourceText(r.sweep->spec);
    if (!r.stale.isEmpty())
        tip += QLatin1Char('\n') + SweepView::tr("Not the current inputs or options: %1").arg(r.stale);
    return tip;
}

QString curveName(const Curve& c, const std::vector<const CurveRun*>& drawn)
{
    const QString mech = mechanismLabel(c.mechanism);
    if (drawn.size() < 2)
        return mech;
    return mech + QStringLiteral(" \u00b7 ") + runLabel(drawn, static_cast<std::size_t>(c.run));
}

QString sourceText(const analysis::SweepSpec& spec)
{
    QString s = dataText(spec);
    if (spec.synth) {
        if (spec.vary == 'm')
            s += SweepView::tr(", N = %1").arg(spec.synth->n);
        if (spec.synth->seeds > 1)
            s += SweepView::tr(", %1 seeds").arg(spec.synth->seeds);
    }
    for (const Mechanism m : spec.mechanisms)
        if (attention::mechanism_info(m).has_mixing() && !spec.options.mixing.preset.empty())
            s += SweepView::tr("; %1 mixing: %2").arg(mechanismLabel(m), QString::fromStdString(spec.options.mixing.preset));
    return s;
}

double featureDimension(const analysis::SweepSpec& spec, QString* what)
{
    if (!spec.synth)
        return 0;
    const auto& fm = spec.options.feature_map;
    if (fm.kind == attention::FeatureMapKind::favor) {
        *what = SweepView::tr("FAVOR+ features m = %1").arg(fm.favor_features);
        return static_cast<double>(fm.favor_features);
    }
    *what = SweepView::tr("feature dimension d = %1").arg(spec.synth->d);
    return static_cast<double>(spec.synth->d);
}

QString curveSetName(const analysis::SweepResult& sweep, int datasetLayer)
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
    for (const QString& part : unitTexts(sweep, datasetLayer))
        name += QLatin1Char(' ') + part;
    return name;
}

const Curve* coincidingCurve(const std::vector<Curve>& curves, std::size_t i)
{
    const Curve& c = curves[i];
    const auto same = [&c](const Curve& e) {
        if (e.run != c.run || e.points.size() != c.points.size() || c.points.empty())
            return false;
        for (std::size_t k = 0; k < c.points.size(); ++k)
            if (e.points[k].x != c.points[k].x ||
                std::abs(e.points[k].mean - c.points[k].mean) > 1e-9 * std::max(1.0, std::abs(e.points[k].mean)))
                return false;
        return true;
    };
    for (std::size_t j = 0; j < i; ++j)
        if (same(curves[j]))
            return &curves[j];
    return nullptr;
}

QString runDetails(const analysis::SweepResult& sweep, int datasetLayer)
{
    const auto& spec = sweep.spec;
    QStringList parts;
    parts << dataText(spec);
    if (spec.synth)
        parts.back() = QCoreApplication::translate("CurvesView", "synthetic %1 d=%2").arg(QString::fromStdString(spec.synth->kind)).arg(spec.synth->d);
    parts << unitTexts(sweep, datasetLayer);
    // How the tokens of each N were chosen (an N sweep on data): first N, `draws` random subsets (with their
    // seed), or a crop of the grid; synthetic draws are the seeds of the data line.
    if (spec.vary == 'n' && !spec.synth) {
        const QString how = QString::fromLatin1(analysis::to_string(spec.subsample).data(),
                                                qsizetype(analysis::to_string(spec.subsample).size()));
        parts << (spec.subsample == analysis::Subsample::random
                      ? QCoreApplication::translate("CurvesView", "subsample random, %1 draws (seed %2)").arg(spec.draws).arg(spec.seed)
                      : QCoreApplication::translate("CurvesView", "subsample %1").arg(how));
    }
    QStringList mechanisms;
    for (const Mechanism m : spec.mechanisms)
        mechanisms << mechanismLabel(m);
    parts << mechanisms.join(QStringLiteral(", "));
    parts << optionsText(spec.options);
    parts.removeAll(QString());
    return parts.join(QStringLiteral(" \u00b7 "));
}

QString optionsDifference(const attention::AttentionOptions& run, const attention::AttentionOptions& now)
{
    const nlohmann::ordered_json a = attention::options_to_json(run), b = attention::options_to_json(now);
    QStringList parts;
    for (auto it = a.begin(); it != a.end(); ++it)
        if (!b.contains(it.key()) || b[it.key()] != it.value())
            parts << QCoreApplication::translate("CurvesView", "%1 (now %2)")
                         .arg(optionText(it.key(), it.value()), valueText(it.key(), b.value(it.key(), nlohmann::ordered_json())));
    return parts.join(QStringLiteral(", "));
}

}  // namespace attnscope::widgets
