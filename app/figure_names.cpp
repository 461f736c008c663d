// The view and metric names of `attnscope figure` (declared in figure.h), and the names of a batch's figure
// files (declared in batch_job.h). Qt-free, so the batch job parser and its fuzzer use them in builds
// without the desktop app.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/sweep.h"
#include "batch_job.h"
#include "figure.h"

namespace attnscope::app {

namespace {

const std::vector<std::string> kExploreViews = {"maps", "query", "spectrum", "entropy", "mixing", "metrics", "heads", "depth"};
const std::vector<std::string> kSweepViews = {"curves", "overview"};

std::string joined(const std::vector<std::string>& names)
{
    std::string s;
    for (const auto& n : names)
        s += (s.empty() ? "" : ", ") + n;
    return s;
}

bool contains(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

bool is_explore_view(const std::string& view) { return contains(kExploreViews, view); }
bool is_sweep_view(const std::string& view) { return contains(kSweepViews, view); }
std::string figure_explore_view_names() { return joined(kExploreViews); }
std::string figure_view_names() { return joined(kExploreViews) + ", " + joined(kSweepViews); }
std::string figure_metric_names() { return joined(analysis::sweep_metric_names()); }

void check_figure_metric(const std::optional<std::string>& metric)
{
    if (metric && !contains(analysis::sweep_metric_names(), *metric))
        throw std::invalid_argument("--metric " + *metric + " is not one of " + joined(analysis::sweep_metric_names()));
}

std::optional<std::string> unit_figure_name(const BatchFigure& f, const analysis::BatchUnit& u)
{
    if (f.view == "overview")   // one per file: every unit of the file names the same figure
        return u.name + "_overview_" + f.look.metric.value_or("rank") + "." + f.format;
    if (!is_explore_view(f.view))
        return std::nullopt;
    if (f.heads && (!u.head || std::find(f.heads->begin(), f.heads->end(), *u.head) == f.heads->end()))
        return std::nullopt;
    std::string name = u.name;
    if (u.layer)
        name += "_l" + std::to_string(*u.layer);
    if (u.head)
        name += "_h" + std::to_string(*u.head);
    for (const auto& [axis, index] : u.at)   // axes the job gives as `all` (at = { b = "all" })
        name.append("_").append(1, axis).append(std::to_string(index));
    return name + "_" + f.view + "." + f.format;
}

std::optional<std::string> sweep_figure_name(const BatchFigure& f, const analysis::BatchSweep& sw)
{
    if (f.view != "curves" || !f.sweep || *f.sweep != sw.name)
        return std::nullopt;
    return sw.name + "_" + f.look.metric.value_or("rank") + "." + f.format;
}

std::vector<analysis::FigureFile> unit_figure_files(const BatchJob& job, const analysis::BatchUnit& u)
{
    std::vector<analysis::FigureFile> files;
    for (std::size_t i = 0; i < job.figures.size(); ++i) {
        const BatchFigure& f = job.figures[i];
        if (auto name = unit_figure_name(f, u))
            files.push_back({std::move(*name), "[[figure]] " + std::to_string(i + 1) + " (" + f.view + ") of " +
                                                   (f.view == "overview" ? u.display : u.key)});
    }
    return files;
}

std::vector<analysis::FigureFile> sweep_figure_files(const BatchJob& job, const analysis::BatchSweep& sw)
{
    std::vector<analysis::FigureFile> files;
    for (std::size_t i = 0; i < job.figures.size(); ++i)
        if (auto name = sweep_figure_name(job.figures[i], sw))
            files.push_back({std::move(*name), "[[figure]] " + std::to_string(i + 1) + " (curves) of sweep " + sw.name});
    return files;
}

}  // namespace attnscope::app
