#pragma once
// Private to the main window's sources (main_window*.cpp): the sweep slot and the pieces those files share.
#include <QJsonObject>
#include <QString>
#include <memory>
#include <optional>
#include <string>

#include "analysis/explore.h"
#include "analysis/job.h"
#include "analysis/sweep.h"
#include "gui_job.h"
#include "main_window.h"

namespace attnscope::widgets {

using ExploreResultPtr = std::shared_ptr<const analysis::ExploreResult>;
using SweepResultPtr = std::shared_ptr<const analysis::SweepResult>;

// One kind of sweep ("curves" or "overview"): its own job (queue depth one), its last result and the tab
// that shows it (created when the first result arrives).
struct MainWindow::SweepSlot {
    QString name;
    GuiJob<SweepResultPtr> job;
    double fraction = 0;
    QString stage;
    SweepResultPtr result;
    SweepView* view = nullptr;
    std::optional<QJsonObject> pendingState;   // a session's view state, applied with the first result
    bool requested = false;                    // run since the last reset (recorded in sessions)
    bool activate = true;                      // show the tab when done (not for a session's reruns)
};

// Reads the mixing matrix the mechanism panel names (FILE[:DATASET]; empty: none) into `options`. Called at
// the start of a job, so that reading the file runs on the worker thread and reports progress.
void loadMixingMatrix(const std::string& mixingRef, attention::AttentionOptions& options, const analysis::JobContext& ctx);

}  // namespace attnscope::widgets
