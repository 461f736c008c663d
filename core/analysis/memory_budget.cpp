// The memory budget and what each path needs of it (analysis/measure.h): the dense matrix, the streamed
// passes, and the default budget (half the physical memory).
#include "analysis/measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "attention/blocks.h"
#include "attention/mechanisms.h"

namespace attnscope::analysis {

std::string human_bytes(std::uint64_t b)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = static_cast<double>(b);
    int u = 0;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
    return buf;
}

std::uint64_t dense_memory_bytes(Index n)
{
    // The matrix, the copy dgesdd destroys, and dgesdd's O(N^2) workspace (jobz='N': ~ N^2 / 2 doubles
    // plus O(N)). Entropy reads the matrix in place.
    const long double nn = static_cast<long double>(n) * static_cast<long double>(n) * 8.0L;
    const long double total = nn * 2.5L + 64.0L * 1024 * 1024;
    if (total > 1.8e19L)
        return UINT64_MAX;
    return static_cast<std::uint64_t>(total);
}

namespace {

// Blocks M of `spec` over N tokens, without building them (make_blocks allocates N entries); at most N.
long double block_count(const attention::BlockSpec& spec, Index n)
{
    using Kind = attention::BlockSpec::Kind;
    long double m = 1;
    switch (spec.kind) {
    case Kind::count:
        m = static_cast<long double>(spec.blocks > 0 ? spec.blocks : std::min<Index>(16, n));
        break;
    case Kind::chunk:
        m = spec.chunk > 0 ? static_cast<long double>((n - 1) / spec.chunk + 1) : static_cast<long double>(n);
        break;
    case Kind::grid:
        for (const Index b : spec.block_grid)
            m *= static_cast<long double>(std::max<Index>(b, 1));
        break;
    }
    return std::clamp(m, 1.0L, static_cast<long double>(std::max<Index>(n, 1)));
}

}  // namespace

std::uint64_t streaming_memory_bytes(Index n, Index d, const std::vector<attention::Mechanism>& mechanisms,
                                     const attention::AttentionOptions& options, const MetricOptions& metrics)
{
    const long double N = static_cast<long double>(n), D = static_cast<long double>(d);
    const long double r = options.feature_map.kind == attention::FeatureMapKind::favor
                              ? static_cast<long double>(options.feature_map.favor_features)
                              : D;
    long double per_token = 2.0L * D;   // Q and K
    long double fixed = 32.0L * 1024 * 1024;
    bool kernel = false;
    for (const attention::Mechanism m : mechanisms) {
        const attention::MechanismInfo& info = attention::mechanism_info(m);
        if (info.structure == attention::Structure::scores) {
            per_token += 3.0L * D + 16.0L;
            continue;
        }
        kernel = true;
        // Its factors: r features per token, times the rank bound's factor when the features are widened
        // (cosformer's cos and sin halves: 2r, attention/mechanisms.h).
        per_token += 4.0L * r * static_cast<long double>(std::max(1, info.rank_bound_factor)) + 16.0L;
        const long double blocks = info.has_blocks() ? block_count(options.blocks, n) : 1.0L;
        fixed += blocks * blocks * 8.0L;
    }
    if (kernel && metrics.entropy)
        per_token += 6.0L * r + 8.0L * block_count(options.blocks, n) + 16.0L;
    if (metrics.spectrum)
        per_token = std::max(per_token, 8.0L * D + 4096.0L);
    const long double total = N * per_token * 8.0L + fixed;
    return total > 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(total);
}

std::uint64_t default_memory_limit()
{
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0)
        return 4ULL << 30;
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size) / 2;
}

}  // namespace attnscope::analysis
