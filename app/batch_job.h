#pragma once
// The TOML job file of `attnscope batch` (schema in docs/batch.md), parsed into a core BatchPlan with
// the same validation as the command-line options. Unknown keys and wrong types are errors naming the
// file, line and key.
#include <optional>
#include <string>
#include <vector>

#include "analysis/batch.h"
#include "figure.h"

namespace attnscope::app {

// A [[figure]] table: rendered into DIR/figures/ by the same code as `attnscope figure`.
struct BatchFigure {
    std::string view;                                   // maps query spectrum entropy mixing metrics curves overview
    std::string format = "png";                         // png | pdf | svg
    std::optional<std::string> sweep;                   // curves: the [[sweep]] drawn
    std::optional<std::vector<Eigen::Index>> heads;     // explore views: only these heads (default: every unit)
    FigureLook look;                                    // metric, log, colormap, query
    FigureTarget size;                                  // width, height, dpi, font_scale (path set per figure)
};

struct BatchJob {
    analysis::BatchPlan plan;
    std::vector<BatchFigure> figures;
};

BatchJob parse_batch_job(const std::string& path);

// The file that [[figure]] table `f` draws into DIR/figures/ for unit `u` / sweep `sw` (nullopt: the table
// draws nothing for it): <file name>[_l<L>][_h<H>]_<view>.<format>, <file name>_overview_<metric>.<format>,
// <sweep>_<metric>.<format>, where <file name> is the unit's name unique in the job (analysis::input_names).
// Defined in figure_names.cpp (Qt-free): the batch's figure hooks draw exactly these names.
std::optional<std::string> unit_figure_name(const BatchFigure& f, const analysis::BatchUnit& u);
std::optional<std::string> sweep_figure_name(const BatchFigure& f, const analysis::BatchSweep& sw);
// Every figure file of the job for one unit / one sweep, with what each draws (run_batch checks that no
// two drawings share a name and removes the figures a rerun no longer draws).
std::vector<analysis::FigureFile> unit_figure_files(const BatchJob& job, const analysis::BatchUnit& u);
std::vector<analysis::FigureFile> sweep_figure_files(const BatchJob& job, const analysis::BatchSweep& sw);

}  // namespace attnscope::app
