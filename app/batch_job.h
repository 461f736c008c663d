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

}  // namespace attnscope::app
