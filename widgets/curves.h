#pragma once
// Views of many analyses at once: curves of a metric against N or M from one or several sweeps, and the
// layers x heads overview of one model. Both are ResultViews (export, state) fed by core results.
#include <QList>
#include <QString>
#include <memory>
#include <utility>

#include "attention/options.h"
#include "result_view.h"

namespace attnscope::analysis {
struct SweepResult;
}

namespace attnscope::widgets {

// One finished run of a sweep as the Curves tab lists it: its result and the name its curves carry in
// the legend and in the list of runs.
struct CurveSet {
    CurveSet() = default;
    CurveSet(std::shared_ptr<const analysis::SweepResult> s, QString n) : sweep(std::move(s)), name(std::move(n)) {}
    std::shared_ptr<const analysis::SweepResult> sweep;
    QString name;
    QString stale;           // why it no longer matches the window's current inputs or options ("": it does)
    int datasetLayer = -1;   // the layer its queries are, for files with per-layer datasets (-1: none)
};

// "N sweep · vit_local2d.h5 h=0", "M sweep · synthetic local1d d=16", "M sweep · lm.h5 l=1 h=1": what varied,
// on which data, and the layers and heads the records hold (or `datasetLayer`, the layer of per-layer datasets).
QString curveSetName(const analysis::SweepResult& sweep, int datasetLayer = -1);
// Everything a run was computed with, on one line: data, layer, heads, mechanisms and the options that differ
// from the program's defaults ("char_lm_licenses.h5 · l=0 · h=1 · softmax, linear, MHLA · feature map relu,
// causal"). Legends name runs by curveSetName; tooltips and the views' details lines show this.
QString runDetails(const analysis::SweepResult& sweep, int datasetLayer = -1);
// The mechanism options in words: the feature map and every option that differs from the program's defaults
// ("feature map relu, causal"). runDetails and the heads view's details line use it.
QString optionsText(const attention::AttentionOptions& options);
// The options of `run` that differ from `now`, in words ("feature map relu (now elu1), causal (now not)"); "" when
// none does.
QString optionsDifference(const attention::AttentionOptions& run, const attention::AttentionOptions& now);

// CurvesView: one line per mechanism of the chosen metric (a sweep metric: analysis::sweep_metric_names)
// against N or M (from the sweep's vary), mean over layers / heads / draws / seeds with a shaded band
// (min..max or +-1 std, selectable), log axes where they help (toggles), reference lines (y = x for rank
// against N; y = d for linear rank). Several runs (setCurveSets) are kept apart: the view shows the runs
// of one kind at a time (against N or against M: their x axes differ), overlaid, each with its own line
// style and checkbox.
// viewName() "curves".
// OverviewView: see createOverviewView. Both emit cellActivated only where it applies (the overview).
class SweepView : public ResultView {
    Q_OBJECT
public:
    using ResultView::ResultView;
    // One sweep (null: none); it replaces every curve set.
    virtual void setSweep(std::shared_ptr<const analysis::SweepResult> sweep) = 0;
    // Several runs, oldest first. Views that show one sweep show the last.
    virtual void setCurveSets(const QList<CurveSet>& sets) { setSweep(sets.isEmpty() ? nullptr : sets.back().sweep); }
    // Metric shown: one of analysis::sweep_metric_names() ("rank", "effective_rank", "entropy_mean",
    // "seconds" ...). Unknown names are ignored.
    virtual void setMetric(const QString& metric) = 0;
    // What the view says while it shows no sweep (empty: its usual hint), e.g. that a session kept a sweep's
    // settings but not its results.
    virtual void setNote(const QString& note) = 0;

signals:
    // The user clicked the cell of this layer and head (the file's numbers; -1 where the data have no such
    // axis). The overview emits it; another view may then select that layer and head.
    void cellActivated(int layer, int head);
    // The user asked to remove the run of this name (the Curves tab's list of runs: context menu or Delete).
    void runRemovalRequested(const QString& name);
};

SweepView* createCurvesView(QWidget* parent = nullptr);

// OverviewView: for a sweep made with analysis::overview_spec (records with layer and head), one
// heatmap per mechanism of layers (rows) x heads (columns) coloured by the chosen metric, with the
// values readable on hover and a shared colour scale; which heads collapse first. A click on a cell emits
// cellActivated(layer, head). viewName() "overview".
SweepView* createOverviewView(QWidget* parent = nullptr);

}  // namespace attnscope::widgets
