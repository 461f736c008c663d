#include "analysis/retrieval.h"

#include <algorithm>
#include <cmath>

#include "io/tensor_file.h"
#include "util/error.h"

namespace attnscope::analysis {

using Eigen::Index;

std::optional<RetrievalTargets> load_retrieval_targets(const io::TensorRef& ref, const io::AxisSelection& selection,
                                                       Index n, bool causal)
{
    auto file = io::open_tensor(ref);
    if (const std::string holder = file->attributes_file(); holder != ref.file) {
        // Queries held in memory: the targets of the file they were loaded from, when they are that file's tensor
        // whole (attnscope.load without a selection); a slice (`sliced_from`) lost the axes the targets index.
        if (holder.empty() || (file->file_attributes().is_object() && file->file_attributes().contains("sliced_from")))
            return std::nullopt;
        file = io::open_tensor_file(holder);
    }
    const io::TensorInfo* info = nullptr;
    for (const io::TensorInfo& t : file->tensors())
        if (t.name == "retrieval_targets" || t.name == "/retrieval_targets")
            info = &t;
    if (!info)
        return std::nullopt;
    const std::string where = ref.file + ":retrieval_targets";
    const auto& shape = info->shape;
    if ((shape.size() != 2 && shape.size() != 3) || shape.back() != 2)
        throw InputError(where + ": expected (t, j*) pairs, shape [P, 2] or [B, P, 2] (docs/formats.md)");
    const std::int64_t pairs = shape[shape.size() - 2];
    if (pairs > k_max_retrieval_targets)
        throw InputError(where + ": " + std::to_string(pairs) + " pairs, more than the " +
                         std::to_string(k_max_retrieval_targets) + " AttnScope reads");
    std::int64_t b = 0;
    if (shape.size() == 3) {
        const auto it = selection.at.find('b');
        b = it == selection.at.end() ? 0 : it->second;
        if (b < 0 || b >= shape[0])
            throw InputError(where + " holds " + std::to_string(shape[0]) + " batch elements; the queries' b = " +
                             std::to_string(b) + " is not one of them");
    }
    std::vector<std::int64_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    if (shape.size() == 3) {
        start[0] = b;
        count[0] = 1;
    }
    const std::vector<double> raw = file->read_box(*info, start, count);
    RetrievalTargets out;
    out.source = where;
    for (std::int64_t p = 0; p < pairs; ++p) {
        const double t = raw[static_cast<std::size_t>(2 * p)], j = raw[static_cast<std::size_t>(2 * p + 1)];
        if (!(t >= 0 && j >= 0 && t < 9e15 && j < 9e15) || t != std::floor(t) || j != std::floor(j))
            throw InputError(where + ": pair " + std::to_string(p) + " is not two non-negative integer positions");
        const Index tt = static_cast<Index>(t) - selection.prefix_tokens, jj = static_cast<Index>(j) - selection.prefix_tokens;
        if (tt < 0 || jj < 0 || tt >= n || jj >= n) {
            ++out.dropped;
            continue;
        }
        if (causal && jj > tt)
            throw InputError(where + ": pair " + std::to_string(p) + " targets key " + std::to_string(jj) +
                             " from query " + std::to_string(tt) + ", which a causal row cannot see");
        out.pairs.emplace_back(tt, jj);
    }
    return out;
}

Retrieval measure_retrieval(const attention::AttentionOperator& op, const RetrievalTargets& targets)
{
    Retrieval r;
    if (targets.pairs.empty())
        return r;
    const std::vector<Index> allowed = op.allowed_keys();
    // Each row formed once, however many targets it has (a file may repeat a query row up to the pair cap); the
    // sums are then taken in the file's order.
    const std::size_t p = targets.pairs.size();
    std::vector<std::size_t> order(p);
    for (std::size_t i = 0; i < p; ++i)
        order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return targets.pairs[a].first < targets.pairs[b].first; });
    std::vector<double> mass(p), rank(p);
    Eigen::MatrixXd row(1, op.cols());
    Index formed = -1;
    for (const std::size_t i : order) {
        const auto [t, j] = targets.pairs[i];
        if (t != formed)
            op.dense_rows(t, 1, row);
        formed = t;
        const Index nt = allowed[static_cast<std::size_t>(t)];
        Index above = 0;
        for (Index c = 0; c < nt; ++c)
            above += row(0, c) > row(0, j) ? 1 : 0;
        mass[i] = row(0, j);
        rank[i] = static_cast<double>(above + 1);
    }
    for (std::size_t i = 0; i < p; ++i) {
        r.mass += mass[i];
        r.rank += rank[i];
    }
    r.count = static_cast<Index>(p);
    r.mass /= static_cast<double>(r.count);
    r.rank /= static_cast<double>(r.count);
    return r;
}

}  // namespace attnscope::analysis
