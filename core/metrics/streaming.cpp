#include "metrics/streaming.h"

#include "kernels/kernels.h"

#include <algorithm>
#include <cmath>

namespace attnscope::metrics {

StreamedEntropy streaming_row_entropy(const attention::AttentionOperator& op, Eigen::Index tile_rows)
{
    StreamedEntropy out;
    std::vector<double> h;
    int status = 0;
    if (tile_rows > 0)   // explicit tiles: the generic dense_rows path (tests compare both)
        status = op.row_entropies_by_rows(h, tile_rows);
    else
        status = op.row_entropies(h);
    if (status == 2) {
        out.non_finite = true;
        return out;
    }
    if (status == 1) {
        out.negative = true;
        return out;
    }
    for (double& v : h)
        if (v == 0.0)
            v = 0.0;   // no -0
    out.stats = entropy_stats(std::move(h), op.allowed_keys());
    return out;
}

}  // namespace attnscope::metrics
