#pragma once
// Private to the main window's sources (main_window*.cpp): the sweep slot and the pieces those files share.
#include <QJsonObject>
#include <QLabel>
#include <QString>
#include <memory>
#include <optional>
#include <string>

#include "analysis/depth_curves.h"
#include "analysis/explore.h"
#include "analysis/heads.h"
#include "analysis/job.h"
#include "analysis/sweep.h"
#include "curves.h"
#include "depth_view.h"
#include "gui_job.h"
#include "heads_view.h"
#include "main_window.h"

namespace attnscope::widgets {

using ExploreResultPtr = std::shared_ptr<const analysis::ExploreResult>;
using SweepResultPtr = std::shared_ptr<const analysis::SweepResult>;

// One kind of sweep ("curves" or "overview"): its own job (queue depth one), its finished runs and the tab
// that shows them (created when the first run finishes, or by a session).
struct MainWindow::SweepSlot {
    QString name;
    GuiJob<SweepResultPtr> job;
    double fraction = 0;
    QString stage;
    bool cancelling = false;                   // Cancel was asked for and the job has not ended yet
    QList<CurveSet> runs;                      // finished runs, oldest first (the overview keeps its last only)
    SweepResultPtr result;                     // the last finished run
    SweepView* view = nullptr;
    std::optional<QJsonObject> pendingState;   // a session's view state, applied when the tab is made
    QString note;                              // what the tab says while it has no run (a session's old sweep)
};
// The Heads view's page (main_window_heads.cpp): the explore request last started and the one the views'
// result answers (with the mixing file each reads), the result the view's page answers and the one the
// running job answers (a page of another result is never shown as current).
struct MainWindow::HeadsSlot {
    GuiJob<std::shared_ptr<const analysis::HeadsResult>> job;
    HeadsView* view = nullptr;
    std::optional<analysis::ExploreRequest> started, shown;
    std::string startedMixing, shownMixing;
    ExploreResultPtr basis, computing;
    analysis::ExploreRequest basisRequest, computingRequest;   // as asked (the mixing file not read yet)
    std::string basisMixing, computingMixing;
    int computingFirst = -1;
    QString notice;   // what the view's notice says while its page is computed (the progress is added to it)
};
// The Depth view's products (main_window_depth.cpp): the explore request last started and the one the views'
// result answers, each with the mixing file read and the options the user chose; the depth request the view's
// result answers and the one the running job answers (a depth of other inputs is never shown as current).
struct MainWindow::DepthSlot {
    GuiJob<std::shared_ptr<const analysis::ExploreDepthResult>> job;
    DepthView* view = nullptr;
    std::optional<analysis::ExploreRequest> started, shown;
    std::string startedMixing, shownMixing;
    analysis::ExplicitChoices startedGiven, shownGiven;
    std::optional<analysis::ExploreDepthRequest> basis, computing;   // as asked (the mixing file not read yet)
    std::string basisMixing, computingMixing;
    QString notice;   // what the view's notice says while its depth is computed (the progress is added to it)
};
// A one-line label for places whose width is shared (the status bar): when the text is wider than the
// label it is drawn elided ("softmax: singular val…") and the label's tool tip shows all of it. Its
// minimum width is small, so a long stage text never widens the window beyond the screen.
class ElidedLabel : public QLabel {
public:
    using QLabel::QLabel;
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent* event) override;
};

// Reads the mixing matrix the mechanism panel names (FILE[:DATASET]; empty: none) into `options`. Called at
// the start of a job, so that reading the file runs on the worker thread and reports progress.
void loadMixingMatrix(const std::string& mixingRef, attention::AttentionOptions& options, const analysis::JobContext& ctx);

}  // namespace attnscope::widgets
