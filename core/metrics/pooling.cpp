#include "metrics/pooling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace attnscope::metrics {

Spread spread_of(const std::vector<double>& values)
{
    Spread s;
    if (values.empty())
        return s;
    const double n = static_cast<double>(values.size());
    s.count = n;
    s.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
    double var = 0;
    for (const double x : values)
        var += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(var / n);
    s.min = *std::min_element(values.begin(), values.end());
    s.max = *std::max_element(values.begin(), values.end());
    return s;
}

Spread pooled(const std::vector<Spread>& groups)
{
    Spread s;
    double sum = 0, sumsq = 0;
    for (const Spread& g : groups) {
        if (g.count <= 0)
            continue;
        s.count += g.count;
        sum += g.count * g.mean;
        sumsq += g.count * (g.std * g.std + g.mean * g.mean);
        s.min = std::min(s.min, g.min);
        s.max = std::max(s.max, g.max);
    }
    if (s.count <= 0)
        return s;
    s.mean = sum / s.count;
    s.std = std::sqrt(std::max(0.0, sumsq / s.count - s.mean * s.mean));
    return s;
}

}  // namespace attnscope::metrics
