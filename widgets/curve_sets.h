#pragma once
// The runs of the Curves tab and the curves made from them (private to widgets/; CurvesView in
// curves_view.cpp draws them, nothing here draws). CurveRuns keeps the finished sweeps the tab lists, oldest
// first: each with its name, its sweep_summary (computed once per run) and its kind (against N or against
// M), and the names of the runs whose checkbox is off. curvesOf turns the drawn runs into one Curve per
// mechanism and run, as analysis::sweep_curves pools them (core/analysis/sweep.h). curveFrame finds what
// the axes show for those curves: the distinct x values, the scales (auto: log when the values span more
// than 8x) and the extent of means and bands. The texts that name and describe a run (legend, list of
// runs, subtitle, read-out) are here too.
#include <QList>
#include <QSet>
#include <QString>
#include <QStringList>
#include <cstddef>
#include <limits>
#include <memory>
#include <utility>
#include <vector>
#include <Qt>

#include <nlohmann/json.hpp>

#include "attention/options.h"
#include "curves.h"

namespace attnscope::analysis {
struct SweepSpec;
struct SweepResult;
}

namespace attnscope::widgets {

struct CurvePoint {
    double x = 0, mean = 0, std = 0;
    double min = std::numeric_limits<double>::infinity(), max = -std::numeric_limits<double>::infinity();
    // The core's 95% bootstrap interval of the mean over the point's records (analysis::sweep_curves).
    double ciLow = std::numeric_limits<double>::quiet_NaN(), ciHigh = std::numeric_limits<double>::quiet_NaN();
    long count = 0;   // records with a value
};

struct Curve {
    attention::Mechanism mechanism{};
    int run = 0;                      // index into the drawn runs (its line style)
    std::vector<CurvePoint> points;   // ascending x
};

// One run as the view keeps it: the sweep, its name and its summary (computed once).
struct CurveRun {
    std::shared_ptr<const analysis::SweepResult> sweep;
    QString name;
    nlohmann::ordered_json summary;
    QString stale;           // CurveSet::stale
    int datasetLayer = -1;   // CurveSet::datasetLayer
    char kind() const;   // 'm' for a sweep over M, else 'n'
};

// Every run, oldest first, and which are shown. A run's checkbox is remembered by its name; a run without
// a name is always shown.
class CurveRuns {
public:
    // Replaces the runs by those of `sets` that hold a sweep. A run kept from before keeps its summary and its
    // checkbox; a new run is shown. Returns the kind of the last new run, or 0 when none is new.
    char set(const QList<CurveSet>& sets);
    const std::vector<CurveRun>& all() const { return m_runs; }
    bool empty() const { return m_runs.empty(); }
    bool hasKind(char kind) const;
    bool shown(const CurveRun& run) const { return run.name.isEmpty() || !m_hidden.contains(run.name); }
    void setShown(const QString& name, bool shown);
    // The runs drawn: those of `kind` that are shown, oldest first.
    std::vector<const CurveRun*> drawn(char kind) const;
    // The names of the runs whose checkbox is off, sorted (a view's saved state), and setting them anew.
    QStringList hiddenNames() const;
    void setHiddenNames(const QStringList& names);

private:
    std::vector<CurveRun> m_runs;
    QSet<QString> m_hidden;
};

// The curves of `metric` (a sweepMetricKeys() key) of the drawn runs against M (byM) or N, run by run;
// Curve::run indexes `drawn`. Mechanisms without a value of the metric have no curve.
std::vector<Curve> curvesOf(const std::vector<const CurveRun*>& drawn, const QString& metric, bool byM);

// What the axes show: the metric and band, the distinct x values and the axes' extent and scales.
struct CurveFrame {
    QString key, band, xscale;
    bool byM = false, logx = false, logy = false;
    std::vector<double> xs;            // ascending, distinct
    double x0 = 0, x1 = 1;             // the x axis range (room around the outer points)
    double ylo = 0, yhi = 0, yminPos = 0;   // extent of the drawn values (yminPos: smallest positive)
    double pooled = 0;                 // most records pooled in one point
};

// The frame of non-empty `curves`. band: "ci" (95% bootstrap), "minmax", "std" or "none"; xscale: "auto", "linear", "log2" or
// "log10" (auto: log when the values span more than 8x, base 2 for powers of two); yscale: "auto",
// "linear" or "log" (auto: log for seconds spanning more than 8x). A log scale that the values do not allow
// falls back to linear.
CurveFrame curveFrame(const std::vector<Curve>& curves, const QString& metric, const QString& band, bool byM,
                      const QString& xscale, const QString& yscale);

// The band drawn around a point's mean ("ci": the bootstrap interval, "minmax", "std"; anything else, or "ci"
// without an interval: none, the mean itself).
std::pair<double, double> bandOf(const CurvePoint& p, const QString& band);

// The band's name in the subtitle ("band: 95% bootstrap interval of the mean").
QString bandText(const QString& band);

// An earlier curve of the same run whose means equal curve i's at every x (softmax and MHLA both at rank N,
// linear and MHLA at M = 1), which curve i would hide entirely when drawn over it; null when none.
const Curve* coincidingCurve(const std::vector<Curve>& curves, std::size_t i);

// Line styles that tell overlaid runs apart (the colour stays the mechanism's).
Qt::PenStyle runStyle(int run);
// Drawn run i in the legend: its name, or "run i+1" when it has none.
QString runLabel(const std::vector<const CurveRun*>& drawn, std::size_t i);
// A run's tooltip in the list of runs: runDetails, sourceText and why it is not current.
QString runTip(const CurveRun& run);
// A curve's name in the legend and the read-out: the mechanism, and its run when several are drawn.
QString curveName(const Curve& c, const std::vector<const CurveRun*>& drawn);
// What a run's data are ("vit_local2d.h5", "synthetic local1d, d = 16, N = 256, 3 seeds") and, when it has
// MHLA, its mixing preset: the subtitle of one run and the tooltip in the list of runs.
QString sourceText(const analysis::SweepSpec& spec);
// The rank bound of linear attention of a run: the feature dimension (d, or FAVOR+'s feature count), named
// in *what; 0 when unknown (loaded data).
double featureDimension(const analysis::SweepSpec& spec, QString* what);

}  // namespace attnscope::widgets
