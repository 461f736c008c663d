#include "metrics/streaming.h"

#include <algorithm>
#include <cmath>

namespace attnscope::metrics {

StreamedEntropy streaming_row_entropy(const attention::AttentionOperator& op, Eigen::Index tile_rows)
{
    const Eigen::Index n = op.rows();
    if (tile_rows <= 0)
        tile_rows = std::clamp<Eigen::Index>((32LL << 20) / (8 * std::max<Eigen::Index>(n, 1)), 1, 1024);
    StreamedEntropy out;
    std::vector<double> h(static_cast<std::size_t>(n));
    Eigen::MatrixXd tile;
    for (Eigen::Index t0 = 0; t0 < n; t0 += tile_rows) {
        const Eigen::Index count = std::min(tile_rows, n - t0);
        tile.resize(count, n);
        op.dense_rows(t0, count, tile);
        // One pass, column by column (memory order): -sum A ln A with 0 ln 0 = 0, watching for entries
        // that make entropy undefined.
        Eigen::VectorXd acc = Eigen::VectorXd::Zero(count);
        for (Eigen::Index j = 0; j < n; ++j) {
            const double* col = tile.col(j).data();
            for (Eigen::Index i = 0; i < count; ++i) {
                const double a = col[i];
                if (a > 0.0 && a <= 1.7976931348623157e308)
                    acc(i) -= a * std::log(a);
                else if (a != 0.0) {
                    if (std::isnan(a) || std::isinf(a))
                        out.non_finite = true;
                    else
                        out.negative = true;
                    return out;
                }
            }
        }
        for (Eigen::Index i = 0; i < count; ++i)
            h[static_cast<std::size_t>(t0 + i)] = acc(i) == 0.0 ? 0.0 : acc(i);   // no -0
    }
    out.stats = entropy_stats(std::move(h), op.allowed_keys());
    return out;
}

}  // namespace attnscope::metrics
