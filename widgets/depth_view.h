#pragma once
// DepthView: collapse with depth (viewName() "depth"; docs/maths.md 2.2, docs/gui.md "Depth"). For the layers of
// the file the views show, P_L = (alpha A_L + (1 - alpha) I) ... (alpha A_1 + (1 - alpha) I) per mechanism
// ticked, and against depth L = 1..L (ticks labelled with the layer multiplied last) two panels: the residual to
// uniform ||P_L - 1 pi^T||_F / ||P_L||_F (0: every row the same distribution, rank-one collapse) and the effective
// rank of P_L, one curve with markers per mechanism in its colours. The title says the file, N, alpha and the
// heads (their mean, or one head); the tool row sets alpha and "Mean over heads" (else the selected head), and
// "Log y"; all kept in the view's state. A file without layers gets a message instead of a plot.
//
// The view computes nothing: the window runs analysis::explore_depth (in the background, with its own cancel)
// for the explore request the views show, with the view's alpha and head choice, and hands the result over with
// setDepth(); settingsChanged() asks it to compute again.
#include <memory>

#include "result_view.h"

namespace attnscope::analysis {
struct ExploreDepthResult;
}

namespace attnscope::widgets {

class DepthView : public ResultView {
    Q_OBJECT
public:
    using ResultView::ResultView;

    // The depth to show (null: none).
    virtual void setDepth(std::shared_ptr<const analysis::ExploreDepthResult> depth) = 0;
    virtual std::shared_ptr<const analysis::ExploreDepthResult> depth() const = 0;
    // The tool row's choices: the weight of the attention path, and the mean over heads (else the selected head).
    virtual double alpha() const = 0;
    virtual bool headMean() const = 0;
    // The window's progress while the depth is computed (fraction < 0: none runs).
    virtual void setProgress(double fraction, const QString& stage) = 0;

signals:
    void settingsChanged();   // alpha or the head choice changed: the depth shown no longer answers them
};

DepthView* createDepthView(QWidget* parent = nullptr);

}  // namespace attnscope::widgets
