#pragma once
// Views of many analyses at once: curves of a metric against N or M from a sweep, and the
// layers x heads overview of one model. Both are ResultViews (export, state) fed by core results.
#include <memory>

#include "result_view.h"

namespace attnscope::analysis {
struct SweepResult;
}

namespace attnscope::widgets {

// CurvesView: one line per mechanism of the chosen metric (rank, relative_rank, effective_rank,
// stable_rank, entropy_mean, entropy_normalized_mean, seconds) against N or M (from the sweep's vary),
// mean over layers / heads / draws / seeds with a shaded band (min..max or +-1 std, selectable), log
// axes where they help (toggles), reference lines (y = x for rank against N; y = d for linear rank).
// viewName() "curves".
class SweepView : public ResultView {
    Q_OBJECT
public:
    using ResultView::ResultView;
    virtual void setSweep(std::shared_ptr<const analysis::SweepResult> sweep) = 0;
    // Metric shown: "rank", "relative_rank", "effective_rank", "stable_rank", "entropy_mean",
    // "entropy_normalized_mean", "seconds". Unknown names are ignored.
    virtual void setMetric(const QString& metric) = 0;
};

SweepView* createCurvesView(QWidget* parent = nullptr);

// OverviewView: for a sweep made with analysis::overview_spec (records with layer and head), one
// heatmap per mechanism of layers (rows) x heads (columns) coloured by the chosen metric, with the
// values readable on hover and a shared colour scale; which heads collapse first. viewName() "overview".
SweepView* createOverviewView(QWidget* parent = nullptr);

}  // namespace attnscope::widgets
