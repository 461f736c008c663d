#include "attention/blocks.h"

#include <stdexcept>
#include <string>

#include "util/checked.h"

namespace attnscope::attention {

std::string join_dims(const std::vector<Index>& v)
{
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i)
        s.append(i ? "x" : "").append(std::to_string(v[i]));
    return s;
}

namespace {

// Fills tokens[] (ascending) and the 1-D centres index + 0.5.
void finish_1d(BlockLayout& layout)
{
    layout.tokens.assign(static_cast<std::size_t>(layout.num_blocks), {});
    for (Index t = 0; t < layout.num_tokens; ++t)
        layout.tokens[static_cast<std::size_t>(layout.block_of_token[static_cast<std::size_t>(t)])].push_back(t);
    layout.centres.resize(layout.num_blocks, 1);
    for (Index b = 0; b < layout.num_blocks; ++b)
        layout.centres(b, 0) = static_cast<double>(b) + 0.5;
    layout.block_grid = {layout.num_blocks};
}

BlockLayout count_blocks(Index m, Index n)
{
    if (m == 0)
        m = std::min<Index>(16, n);   // the default
    if (m < 1)
        throw std::invalid_argument("blocks M=" + std::to_string(m) + " must be >= 1");
    if (m > n)
        throw std::invalid_argument("blocks M=" + std::to_string(m) + " exceeds tokens N=" + std::to_string(n));
    BlockLayout layout;
    layout.num_tokens = n;
    layout.num_blocks = m;
    layout.block_of_token.resize(static_cast<std::size_t>(n));
    // numpy.array_split: q, r = divmod(N, M); the first r blocks hold q + 1 tokens, the others q.
    const Index q = n / m, r = n % m;
    Index t = 0;
    for (Index b = 0; b < m; ++b)
        for (Index i = 0; i < q + (b < r ? 1 : 0); ++i)
            layout.block_of_token[static_cast<std::size_t>(t++)] = b;
    finish_1d(layout);
    return layout;
}

BlockLayout chunk_blocks(Index c, Index n)
{
    if (c < 1)
        throw std::invalid_argument("chunk C=" + std::to_string(c) + " must be >= 1");
    BlockLayout layout;
    layout.num_tokens = n;
    layout.num_blocks = (n - 1) / c + 1;   // ceil(N / C) without N + C - 1, which overflows for a huge C
    layout.block_of_token.resize(static_cast<std::size_t>(n));
    for (Index t = 0; t < n; ++t)
        layout.block_of_token[static_cast<std::size_t>(t)] = t / c;
    finish_1d(layout);
    return layout;
}

BlockLayout grid_blocks(const BlockSpec& spec, Index n)
{
    const auto& g = spec.grid;
    const auto& bg = spec.block_grid;
    if (g.size() != 2 && g.size() != 3)
        throw std::invalid_argument("grid must have 2 or 3 axes, got " + std::to_string(g.size()));
    if (bg.empty())
        throw std::invalid_argument("blocks on the grid " + join_dims(g) + " need the blocks per axis (--block-grid B1,B2" +
                                    (g.size() == 3 ? ",B3" : "") + "); only decay on a grid needs the grid alone");
    if (bg.size() != g.size())
        throw std::invalid_argument("block-grid has " + std::to_string(bg.size()) + " axes but grid " + join_dims(g) +
                                    " has " + std::to_string(g.size()));
    const std::size_t nd = g.size();
    Index total = 1, m = 1;
    std::vector<Index> step(nd);   // tokens per block along each axis
    for (std::size_t a = 0; a < nd; ++a) {
        if (g[a] < 1)
            throw std::invalid_argument("grid axis " + std::to_string(a) + ": size " + std::to_string(g[a]) +
                                        " must be >= 1");
        if (bg[a] < 1)
            throw std::invalid_argument("block-grid axis " + std::to_string(a) + ": " + std::to_string(bg[a]) +
                                        " blocks, must be >= 1");
        if (g[a] % bg[a] != 0)
            throw std::invalid_argument("grid axis " + std::to_string(a) + ": " + std::to_string(g[a]) + " % " +
                                        std::to_string(bg[a]) + " != 0");
        step[a] = g[a] / bg[a];
        // A product that wraps around would pass for a small N (17 x 4340410370284600384 wraps to 64).
        const auto t = checked_mul(total, g[a]);
        if (!t)
            throw std::invalid_argument("grid " + join_dims(g) + ": the product of the sizes overflows (it must equal N=" +
                                        std::to_string(n) + ")");
        total = *t;
        m *= bg[a];   // bg[a] <= g[a], so m <= total
    }
    if (total != n)
        throw std::invalid_argument("grid " + join_dims(g) + " has " + std::to_string(total) + " tokens but N=" +
                                    std::to_string(n));

    BlockLayout layout;
    layout.num_tokens = n;
    layout.num_blocks = m;
    layout.block_grid = bg;
    layout.block_of_token.resize(static_cast<std::size_t>(n));
    if (spec.order == TokenOrder::raster) {
        // Token t at unravel_index(t, grid); its block is ravel_multi_index(coords // step, block_grid).
        std::vector<Index> coord(nd);
        for (Index t = 0; t < n; ++t) {
            Index rest = t;
            for (std::size_t a = nd; a-- > 0;) {
                coord[a] = rest % g[a];
                rest /= g[a];
            }
            Index b = 0;
            for (std::size_t a = 0; a < nd; ++a)
                b = b * bg[a] + coord[a] / step[a];
            layout.block_of_token[static_cast<std::size_t>(t)] = b;
        }
    } else {
        // Tokens arrive grouped block by block (raster order inside each block).
        const Index per_block = n / m;
        for (Index t = 0; t < n; ++t)
            layout.block_of_token[static_cast<std::size_t>(t)] = t / per_block;
    }
    layout.tokens.assign(static_cast<std::size_t>(m), {});
    for (Index t = 0; t < n; ++t)
        layout.tokens[static_cast<std::size_t>(layout.block_of_token[static_cast<std::size_t>(t)])].push_back(t);
    // Centres: unravel_index(b, block_grid) + 0.5.
    layout.centres.resize(m, static_cast<Index>(nd));
    for (Index b = 0; b < m; ++b) {
        Index rest = b;
        for (std::size_t a = nd; a-- > 0;) {
            layout.centres(b, static_cast<Index>(a)) = static_cast<double>(rest % bg[a]) + 0.5;
            rest /= bg[a];
        }
    }
    return layout;
}

}  // namespace

bool BlockLayout::equal_sizes() const
{
    for (const auto& blk : tokens)
        if (blk.size() != tokens.front().size())   // (the loop body never runs when tokens is empty)
            return false;
    return true;
}

BlockLayout one_block(Index n)
{
    BlockLayout layout;
    layout.num_tokens = n;
    layout.num_blocks = 1;
    layout.block_of_token.assign(static_cast<std::size_t>(n), 0);
    layout.tokens.assign(1, {});
    for (Index t = 0; t < n; ++t)
        layout.tokens[0].push_back(t);
    layout.centres = Eigen::MatrixXd::Constant(1, 1, 0.5);
    layout.block_grid = {1};
    return layout;
}

BlockLayout make_blocks(const BlockSpec& spec, Index n)
{
    if (n < 1)
        throw std::invalid_argument("blocks: tokens N=" + std::to_string(n) + " must be >= 1");
    switch (spec.kind) {
    case BlockSpec::Kind::count:
        return count_blocks(spec.blocks, n);
    case BlockSpec::Kind::chunk:
        return chunk_blocks(spec.chunk, n);
    case BlockSpec::Kind::grid:
        return grid_blocks(spec, n);
    }
    throw std::logic_error("blocks: unhandled kind");
}

}  // namespace attnscope::attention
