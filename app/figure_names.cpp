// The view and metric names of `attnscope figure` (declared in figure.h). Qt-free, so the batch job
// parser and its fuzzer use them in builds without the desktop app.
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/sweep.h"
#include "figure.h"

namespace attnscope::app {

namespace {

const std::vector<std::string> kExploreViews = {"maps", "query", "spectrum", "entropy", "mixing", "metrics"};
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

}  // namespace attnscope::app
