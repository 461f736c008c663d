#pragma once
// Headless figures (`attnscope figure`, `attnscope sweep --plot`): the desktop app's own views
// (widgets/views.h, widgets/curves.h) rendered by widgets/export.h on Qt's offscreen platform, so a
// figure made on a cluster node looks exactly like one exported from the desktop.
//
// Every function creates the QApplication it needs (setting QT_QPA_PLATFORM=offscreen when it is
// unset, before the application exists) and removes it again. This header stays free of Qt so that
// cli.cpp builds without it. Failures throw std::invalid_argument (bad view name, extension, option)
// or InputError (compute failure naming the mechanism, file or session; unwritable output); the
// output file is then never left behind.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/output.h"

namespace attnscope::analysis {
struct ExploreRequest;
struct ExplicitChoices;
struct SweepResult;
}

namespace attnscope::app {

// Where and how large: --out, --width, --height (logical pixels; 0 = the view's preferred size),
// --dpi (PNG pixels = size * dpi / 96), --font-scale; or a printed size: --preset column|double|slide, or
// --width-mm (and --height-mm) with --font-size, the tick labels' size in points at that width (the other
// texts in proportion; widgets/export.h). PDF and SVG pages are 96 logical pixels per inch.
struct FigureTarget {
    std::string path;
    int width = 0, height = 0;
    double dpi = 300.0;
    double font_scale = 1.0;
    std::string preset;               // "" or column, double, slide
    double width_mm = 0, height_mm = 0;   // 0: unset (height: from the view's aspect)
    double font_pt = 0;               // 0: the preset's, or 8 pt with --width-mm
};

// How the view looks; each field maps to the view's own saved-state keys (ResultView::saveState).
struct FigureLook {
    std::optional<std::string> colormap;   // maps, overview: "colormap"
    bool log = false;                      // maps: "log"; query, depth: "log_y"; spectrum: "log_x"; curves: "y_scale"
    std::optional<int> query;              // the selected query token (maps, query, entropy)
    std::optional<std::string> metric;     // curves, overview
    nlohmann::json state;                  // extra view-state keys merged last (--view-state JSON)
};

// "maps", "query", "spectrum", "entropy", "mixing", "metrics", "heads", "depth" (one explore result). The name
// functions below are Qt-free (figure_names.cpp); the rendering ones need the desktop app.
bool is_explore_view(const std::string& view);
// "curves", "overview" (a sweep result).
bool is_sweep_view(const std::string& view);
// The explore view names, comma-separated.
std::string figure_explore_view_names();
// The names above, comma-separated, for messages.
std::string figure_view_names();
// Metric names the curves and overview views accept, comma-separated.
std::string figure_metric_names();
// Throws std::invalid_argument when `metric` is set and not one of figure_metric_names().
void check_figure_metric(const std::optional<std::string>& metric);

// Checks the view name, the output's extension (.png, .pdf, .svg) and that its folder is writable,
// before any work. Throws std::invalid_argument / InputError.
void check_figure_target(const std::string& view, const FigureTarget& target);

// Checks the look against the view's own state keys (--colormap, --log, unknown --view-state keys), before
// any computation. Throws std::invalid_argument.
void check_figure_look(const std::string& view, const FigureLook& look);

// Computes `request` (core explore(), synchronously) and renders one of the explore views. The depth view also
// multiplies the layers of the request's file (analysis::explore_depth, its view state's alpha and head_mean);
// `given` says which options were chosen (the rest follow each layer's attributes; null: every option as given).
void render_explore_figure(const analysis::ExploreRequest& request, const std::string& view, const FigureLook& look,
                           const FigureTarget& target, const analysis::ExplicitChoices* given = nullptr);

// Renders the curves or overview view of a finished sweep.
void render_sweep_figure(std::shared_ptr<const analysis::SweepResult> sweep, const std::string& view,
                         const FigureLook& look, const FigureTarget& target);

// Opens an .attnscope session in the desktop app's main window (never shown), waits for its
// computation and renders view `view` with the session's saved view state.
// The inputs of a scripted run of the session `session`, for check_output_paths: the session file itself
// ("--session") and every file it names (analysis::session_input_files, by key). A session that cannot be
// read gives only itself (loading it then says why).
std::vector<NamedPath> session_inputs(const std::string& session);

void render_session_figure(const std::string& session, const std::string& view, const FigureTarget& target);

// Renders into `path` as given (the caller commits a temporary path later: sweep --plot writes the
// figure, the CSV and the JSON, then renames them all). Used by render_sweep_figure.
void render_sweep_figure_to(std::shared_ptr<const analysis::SweepResult> sweep, const std::string& view,
                            const FigureLook& look, const FigureTarget& target, const std::string& path);

}  // namespace attnscope::app
