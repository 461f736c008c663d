// Colour ranges and causal masks of the attention maps; see map_scale.h.
#include "analysis/map_scale.h"

#include <algorithm>
#include <cmath>

#include "attention/mechanisms.h"

namespace attnscope::analysis {

using Eigen::Index;

CausalMask CausalMask::of(const ExploreResult& result, const MechanismOutcome& outcome)
{
    const Index n = result.n;
    const auto& allowed = outcome.allowed_keys;
    if (static_cast<Index>(allowed.size()) != n || std::all_of(allowed.begin(), allowed.end(), [n](Index a) { return a >= n; }))
        return {};
    CausalMask m;
    m.m_key.resize(static_cast<std::size_t>(n));
    const bool blocks = attention::mechanism_info(outcome.result.mechanism).has_blocks() && result.blocks &&
                        static_cast<Index>(result.blocks->block_of_token.size()) == n;
    for (Index t = 0; t < n; ++t)
        m.m_key[static_cast<std::size_t>(t)] = blocks ? result.blocks->block_of_token[static_cast<std::size_t>(t)] * n + t : t;
    // The rule must give each query the number of keys the operator allows it; else draw no mask at all.
    std::vector<std::int64_t> sorted = m.m_key;
    std::sort(sorted.begin(), sorted.end());
    for (Index t = 0; t < n; ++t) {
        const auto seen = std::upper_bound(sorted.begin(), sorted.end(), m.m_key[static_cast<std::size_t>(t)]) - sorted.begin();
        if (seen != allowed[static_cast<std::size_t>(t)])
            return {};
    }
    return m;
}

std::vector<Index> cell_edges(Index first, Index end, Index cells, Index factor, Index n)
{
    const Index f = std::max<Index>(factor, 1);
    const Index u0 = first / f, u1 = (end + f - 1) / f, h = u1 - u0;
    std::vector<Index> edges(static_cast<std::size_t>(cells + 1));
    for (Index i = 0; i <= cells; ++i)
        edges[static_cast<std::size_t>(i)] = std::min((u0 + i * h / std::max<Index>(cells, 1)) * f, n);
    return edges;
}

std::vector<char> CausalMask::masked_cells(const ReducedImage& img, Index n) const
{
    if (m_key.empty() || img.rows < 1 || img.cols < 1)
        return {};
    const std::vector<Index> re = cell_edges(img.r0, img.r1, img.rows, img.factor, n);
    const std::vector<Index> ce = cell_edges(img.c0, img.c1, img.cols, img.factor, n);
    // A cell is masked when its smallest key comes after the largest query key of its rows.
    std::vector<std::int64_t> rowMax(static_cast<std::size_t>(img.rows), std::numeric_limits<std::int64_t>::min());
    std::vector<std::int64_t> colMin(static_cast<std::size_t>(img.cols), std::numeric_limits<std::int64_t>::max());
    for (Index i = 0; i < img.rows; ++i)
        for (Index t = re[static_cast<std::size_t>(i)]; t < re[static_cast<std::size_t>(i + 1)]; ++t)
            rowMax[static_cast<std::size_t>(i)] = std::max(rowMax[static_cast<std::size_t>(i)], m_key[static_cast<std::size_t>(t)]);
    for (Index j = 0; j < img.cols; ++j)
        for (Index k = ce[static_cast<std::size_t>(j)]; k < ce[static_cast<std::size_t>(j + 1)]; ++k)
            colMin[static_cast<std::size_t>(j)] = std::min(colMin[static_cast<std::size_t>(j)], m_key[static_cast<std::size_t>(k)]);
    std::vector<char> out(static_cast<std::size_t>(img.rows * img.cols), 0);
    for (Index i = 0; i < img.rows; ++i)
        for (Index j = 0; j < img.cols; ++j)
            out[static_cast<std::size_t>(i * img.cols + j)] = colMin[static_cast<std::size_t>(j)] > rowMax[static_cast<std::size_t>(i)];
    return out;
}

double MapValues::top(double percentile) const
{
    const double largest = signed_values ? std::max(std::abs(min), std::abs(max)) : max;
    if (percentile >= 100 || values.empty())
        return largest;
    std::vector<float> v = values;
    const auto k = static_cast<std::size_t>(std::floor(std::clamp(percentile, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1)));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return static_cast<double>(v[k]);
}

MapValues map_values(const MechanismOutcome& a, const CausalMask& mask_a, const MechanismOutcome* b, const CausalMask* mask_b,
                     Index n, Reduce how)
{
    MapValues out;
    if (!a.matrix || (b && !b->matrix))
        return out;
    const bool pyramids = a.pyramid && (!b || b->pyramid);   // both sides of a difference on the same cells
    ReducedImage img = reduce_region(*a.matrix, 0, n, 0, n, kRangeCells, kRangeCells, how, pyramids ? a.pyramid.get() : nullptr);
    std::vector<char> masked = mask_a.masked_cells(img, n);
    if (b) {
        const ReducedImage other =
            reduce_region(*b->matrix, 0, n, 0, n, kRangeCells, kRangeCells, how, pyramids ? b->pyramid.get() : nullptr);
        for (std::size_t i = 0; i < img.values.size() && i < other.values.size(); ++i)
            img.values[i] -= other.values[i];
        const std::vector<char> masked_b = mask_b ? mask_b->masked_cells(other, n) : std::vector<char>{};
        if (masked.empty() || masked_b.empty())
            masked.clear();   // masked only where both are
        else
            for (std::size_t i = 0; i < masked.size(); ++i)
                masked[i] = masked[i] && masked_b[i];
    }
    out.min = std::numeric_limits<double>::infinity();
    out.max = -out.min;
    for (std::size_t i = 0; i < img.values.size(); ++i) {
        if (!masked.empty() && masked[i])
            continue;
        const double v = img.values[i];
        out.min = std::min(out.min, v);
        out.max = std::max(out.max, v);
        if (v > 0)
            out.min_positive = std::min(out.min_positive, v);
    }
    if (!std::isfinite(out.min)) {
        out.min = out.max = 0;
        return out;
    }
    // A matrix with negative entries (identity features, a signed Mc) is signed even where max cells hide them.
    out.signed_values = b || out.min < 0 || (pyramids && a.pyramid->min < 0);
    out.values.reserve(img.values.size());
    for (std::size_t i = 0; i < img.values.size(); ++i)
        if (masked.empty() || !masked[i])
            out.values.push_back(static_cast<float>(out.signed_values ? std::abs(img.values[i]) : img.values[i]));
    return out;
}

ColourRange colour_range(const std::vector<const MapValues*>& values, double percentile, bool log_requested)
{
    ColourRange r;
    double top = 0, min_positive = std::numeric_limits<double>::infinity();
    for (const MapValues* v : values) {
        r.diverging = r.diverging || v->signed_values;
        top = std::max(top, v->top(percentile));
        min_positive = std::min(min_positive, v->min_positive);
    }
    if (r.diverging) {
        const double m = top > 0 ? top : 1e-12;
        r.lo = -m, r.hi = m;
        return r;
    }
    r.hi = top > 0 ? top : 1;
    r.lo = 0;
    if (log_requested) {
        r.log = true;
        r.lo = std::max(std::isfinite(min_positive) ? min_positive : r.hi * 1e-5, r.hi * 1e-5);
        if (r.lo >= r.hi)
            r.lo = r.hi * 1e-5;
    }
    return r;
}

}  // namespace attnscope::analysis
