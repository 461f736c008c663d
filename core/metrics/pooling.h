#pragma once
// Pooling one metric over many analyses (layers, heads, draws or seeds at one point of a sweep): the
// sweep summary's mean, population std, min and max per point, and the pooled statistics of several such
// points that a curve draws at one x (docs/cli.md, "sweep": the summary).
#include <limits>
#include <vector>

namespace attnscope::metrics {

struct Spread {
    double count = 0;                                         // values pooled
    double mean = 0, std = 0;                                 // std: the population std
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
    // The 95% bootstrap interval of the mean, where the caller computed one (analysis::bootstrap_interval over
    // the pooled values: analysis/sweep.h, sweep_curves); NaN otherwise (spread_of and pooled leave it).
    double ci_low = std::numeric_limits<double>::quiet_NaN();
    double ci_high = std::numeric_limits<double>::quiet_NaN();
};

// Of the values themselves: mean = sum x / n, std = sqrt(sum (x - mean)^2 / n) (two passes), min, max.
// Empty: count 0 (the other fields keep their defaults).
Spread spread_of(const std::vector<double>& values);

// Of the union of disjoint groups, from each group's count c_i, mean m_i and std s_i:
//   n = sum c_i,  mean = sum c_i m_i / n,  std^2 = sum c_i (s_i^2 + m_i^2) / n - mean^2  (clamped at 0),
// min and max over the groups'. Groups with count 0 add nothing; none: count 0.
Spread pooled(const std::vector<Spread>& groups);

}  // namespace attnscope::metrics
