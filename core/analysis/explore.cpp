#include "analysis/explore.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "analysis/analyze.h"
#include "analysis/inputs.h"
#include "attention/mechanisms.h"
#include "attention/mixing.h"
#include "attention/operator.h"
#include "io/tensor_file.h"
#include "metrics/structured.h"
#include "util/error.h"

namespace attnscope::analysis {

using attention::Mechanism;

const MechanismOutcome* ExploreResult::find(Mechanism m) const
{
    for (const auto& o : outcomes)
        if (o.result.mechanism == m)
            return &o;
    return nullptr;
}

nlohmann::ordered_json ExploreResult::to_json(bool with_row_entropy) const
{
    MetricOptions mo;
    mo.row_entropy = with_row_entropy;
    nlohmann::ordered_json doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    doc["input"] = input;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& o : outcomes) {
        nlohmann::ordered_json j = result_json(o.result, mo);
        if (!o.error.empty())
            j["error"] = o.error;
        list.push_back(std::move(j));
    }
    doc["results"] = std::move(list);
    return doc;
}

std::vector<Eigen::Index> ExploreResult::grid_coords(Eigen::Index t) const
{
    std::vector<Eigen::Index> c(token_grid.size());
    if (token_grid.empty() || t < 0 || t >= n)
        return {};
    if (token_order == attention::TokenOrder::blocked && blocks && blocks->block_grid.size() == token_grid.size()) {
        // Block b's tokens first, raster order inside the block (docs/maths.md 1.5).
        const auto& bg = blocks->block_grid;
        const std::size_t k = token_grid.size();
        std::vector<Eigen::Index> inner(k);
        Eigen::Index per_block = 1;
        for (std::size_t a = 0; a < k; ++a) {
            inner[a] = token_grid[a] / bg[a];
            per_block *= inner[a];
        }
        Eigen::Index b = t / per_block, p = t % per_block;
        for (std::size_t a = k; a-- > 0;) {
            c[a] = (b % bg[a]) * inner[a] + p % inner[a];
            b /= bg[a];
            p /= inner[a];
        }
        return c;
    }
    Eigen::Index r = t;
    for (std::size_t a = token_grid.size(); a-- > 0;) {
        c[a] = r % token_grid[a];
        r /= token_grid[a];
    }
    return c;
}

std::uint64_t explore_memory_bytes(Eigen::Index n, std::size_t mechanisms)
{
    const long double nn = static_cast<long double>(n) * static_cast<long double>(n) * 8.0L;
    // Each kept matrix with its pyramid (~1/12 of it), plus the SVD's copy and LAPACK's work.
    const long double total = nn * (1.1L * static_cast<long double>(mechanisms) + 1.5L) + 64.0L * 1024 * 1024;
    return total > 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(total);
}

namespace {

// Larger matrices get reduced images (MatrixPyramid) for the maps view.
constexpr Eigen::Index k_pyramid_above = 1024;
constexpr double k_pyramid_weight = 0.3;

struct Planned {
    MechanismOutcome outcome;
    std::optional<PreparedMechanism> prepared;
};

// Every requested mechanism ready to measure, or its own error (the others still compute).
std::vector<Planned> plan_mechanisms(const ExploreRequest& request, const LoadedInputs& in, const MetricOptions& mo,
                                     const JobContext& ctx)
{
    std::vector<Planned> plan;
    for (const Mechanism m : request.mechanisms) {
        Planned p;
        p.outcome.result.mechanism = m;
        try {
            p.prepared = prepare_mechanism(m, in.q.values, in.k.values, request.options, mo, UINT64_MAX);
            p.outcome.result.params = p.prepared->result.params;
        } catch (const std::invalid_argument& e) {
            p.outcome.error = e.what();
            p.prepared.reset();
        } catch (const InputError& e) {
            p.outcome.error = e.what();
            p.prepared.reset();
        }
        plan.push_back(std::move(p));
        ctx.check();
    }
    return plan;
}

// The kept matrix measured for the views (analyze's numbers and warnings, measure.h), with its reduced images.
void measure_kept(Planned& p, const MetricOptions& mo, StageProgress& progress)
{
    MechanismOutcome& o = p.outcome;
    const attention::AttentionOperator& op = *p.prepared->op;
    MeasureRequest request;
    request.path = p.prepared->path;
    request.metrics = mo;
    request.keep_matrix = true;
    o.allowed_keys = op.allowed_keys();
    Measurement m = measure(op, p.prepared->options, request, &progress);
    m.result.params = std::move(o.result.params);
    m.result.warnings.insert(m.result.warnings.begin(), p.prepared->result.warnings.begin(), p.prepared->result.warnings.end());
    m.result.same_as_linear = p.prepared->result.same_as_linear;
    m.result.rank_cap = p.prepared->result.rank_cap;
    o.result = std::move(m.result);
    o.matrix = std::move(m.matrix);
    if (m.finite && o.matrix && o.matrix->rows() > k_pyramid_above) {
        progress.begin(std::string(attention::to_string(o.result.mechanism)) + ": reduced images", k_pyramid_weight);
        o.pyramid = std::make_shared<const MatrixPyramid>(make_pyramid(*o.matrix, [&](double f) { progress.at(f); }));
    }
}

// MHLA's block layout and mixing matrix with its spectrum (when MHLA was requested and its options are valid).
void describe_mixing(ExploreResult& out, const ExploreRequest& request)
{
    if (std::none_of(request.mechanisms.begin(), request.mechanisms.end(),
                     [](Mechanism m) { return attention::mechanism_info(m).has_mixing(); }))
        return;
    try {
        attention::BlockLayout layout = attention::make_blocks(request.options.blocks, out.n);
        out.mixing = attention::make_mixing(request.options.mixing, layout, request.options.causal);
        out.blocks = std::move(layout);
        std::vector<double> s = metrics::singular_values(Eigen::MatrixXd(out.mixing));
        const auto m = out.mixing.rows();
        const auto spec = metrics::spectrum_metrics(s, m, m, std::nullopt);
        out.mixing_rank = spec.rank;
        out.mixing_singular_values = std::move(s);
    } catch (const std::invalid_argument&) {
        // MHLA's own outcome already carries the message.
    }
}

// The display grid: the request's, or the grid blocks'; dropped when it does not hold N tokens.
void set_token_grid(ExploreResult& out, const ExploreRequest& request)
{
    out.token_grid = request.token_grid;
    if (request.options.blocks.kind == attention::BlockSpec::Kind::grid) {
        out.token_grid = request.options.blocks.grid;
        out.token_order = request.options.blocks.order;
    }
    Eigen::Index cells = 1;
    for (auto g : out.token_grid)
        cells *= g;
    if (!out.token_grid.empty() && cells != out.n)
        out.token_grid.clear();
}

// What the file says about its input, for display: the analysed tokens' strings (the file lists every token,
// prefix tokens included, or only the analysed ones) and its image.
void describe_input(ExploreResult& out, const io::TensorRef& q_ref, const LoadedInputs& in)
{
    FileDefaults d;
    try {
        d = read_file_defaults(q_ref);
    } catch (const std::exception&) {
        return;   // the inputs were read: a file that cannot be read again has nothing to add
    }
    const auto all = static_cast<std::size_t>(in.q.tokens_in_file), n = static_cast<std::size_t>(out.n);
    if (d.tokens.size() == all && all >= n)
        out.tokens.assign(d.tokens.end() - static_cast<std::ptrdiff_t>(n), d.tokens.end());
    else if (d.tokens.size() == n)
        out.tokens = std::move(d.tokens);
    out.image = std::move(d.image);
}

}  // namespace

ExploreResult explore(const ExploreRequest& asked, const JobContext& ctx)
{
    ExploreRequest request = asked;   // with the analysed head's matrix of a per-head mixing file, once read
    const auto start = std::chrono::steady_clock::now();
    const std::size_t mechanisms = request.mechanisms.size();
    ctx.progress(0.0, "reading queries and keys");
    const std::uint64_t limit = request.memory_limit ? request.memory_limit : default_memory_limit();
    const LoadedInputs in = load_inputs(request.source.q_ref, request.source.k_ref, request.source.v_ref,
                                        request.source.selection);
    request.options = options_for_inputs(request.options, in);
    ExploreResult out;
    out.input = in.input_json;
    out.n = in.q.values.rows();
    out.d = in.q.values.cols();
    const std::uint64_t need = explore_memory_bytes(out.n, mechanisms);
    if (need > limit)
        throw InputError("N=" + std::to_string(out.n) + " tokens need about " + std::to_string(need >> 20) +
                         " MiB for " + std::to_string(mechanisms) + " dense matrices, over the memory limit of " +
                         std::to_string(limit >> 20) + " MiB");
    ctx.check();

    MetricOptions mo;
    mo.rank_rtol = request.rank_rtol;
    mo.past_split = request.past_split;
    mo.past_splits = request.past_splits;
    mo.row_entropy = true;
    std::vector<Planned> plan = plan_mechanisms(request, in, mo, ctx);
    double total = 0.1;   // reading
    for (const Planned& p : plan) {
        if (!p.prepared)
            continue;
        MeasureRequest r;
        r.path = p.prepared->path;
        r.keep_matrix = true;
        total += measure_weight(r, out.n) + (out.n > k_pyramid_above ? k_pyramid_weight : 0.0);
    }
    StageProgress progress(ctx, total);
    progress.begin("reading queries and keys", 0.1);

    for (Planned& p : plan) {
        MechanismOutcome& o = p.outcome;
        if (p.prepared) {
            try {
                measure_kept(p, mo, progress);
            } catch (const JobCancelled&) {
                throw;
            } catch (const std::invalid_argument& e) {
                o.error = e.what();
                o.matrix.reset();
            } catch (const InputError& e) {
                o.error = e.what();
                o.matrix.reset();
            }
            p.prepared.reset();
        }
        out.outcomes.push_back(std::move(o));
        ctx.check();
    }
    describe_mixing(out, request);
    set_token_grid(out, request);
    describe_input(out, request.source.q_ref, in);
    ctx.progress(1.0, "done");
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return out;
}
MatrixPyramid make_pyramid(const Eigen::Ref<const Eigen::MatrixXd>& A, const std::function<void(double)>& progress)
{
    using Eigen::Index;
    if (A.rows() != A.cols())
        throw std::invalid_argument("make_pyramid: the matrix is " + std::to_string(A.rows()) + " x " +
                                    std::to_string(A.cols()) + ", not square");
    MatrixPyramid p;
    const Index n = A.rows();
    p.min_positive = std::numeric_limits<double>::infinity();
    if (n == 0)
        return p;
    p.min = p.max = A(0, 0);
    constexpr Index f0 = 4;
    const Index l0 = (n + f0 - 1) / f0;
    MatrixPyramid::Level level{f0, Eigen::MatrixXf(l0, l0), Eigen::MatrixXf(l0, l0)};
    std::vector<double> bmax(static_cast<std::size_t>(l0)), bsum(static_cast<std::size_t>(l0));
    double lo = p.min, hi = p.max, pos = p.min_positive;
    for (Index J = 0; J < l0; ++J) {
        std::fill(bmax.begin(), bmax.end(), -std::numeric_limits<double>::infinity());
        std::fill(bsum.begin(), bsum.end(), 0.0);
        for (Index j = J * f0; j < std::min(n, (J + 1) * f0); ++j) {
            const double* col = A.col(j).data();
            for (Index t = 0; t < n; ++t) {
                const double a = col[t];
                const auto I = static_cast<std::size_t>(t / f0);
                bmax[I] = std::max(bmax[I], a);
                bsum[I] += a;
                lo = std::min(lo, a);
                hi = std::max(hi, a);
                if (a > 0.0)
                    pos = std::min(pos, a);
            }
        }
        for (Index I = 0; I < l0; ++I) {
            level.max(I, J) = static_cast<float>(bmax[static_cast<std::size_t>(I)]);
            level.sum(I, J) = static_cast<float>(bsum[static_cast<std::size_t>(I)]);
        }
        if (progress && (J % 64 == 63))
            progress(static_cast<double>(J + 1) / static_cast<double>(l0));
    }
    p.min = lo, p.max = hi, p.min_positive = pos;
    p.levels.push_back(std::move(level));
    while (p.levels.back().max.rows() > 256) {
        const MatrixPyramid::Level& below = p.levels.back();
        const Index m = below.max.rows(), h = (m + 1) / 2;
        MatrixPyramid::Level up{below.factor * 2, Eigen::MatrixXf(h, h), Eigen::MatrixXf(h, h)};
        for (Index J = 0; J < h; ++J)
            for (Index I = 0; I < h; ++I) {
                const Index i1 = std::min(m, 2 * I + 2) - 2 * I, j1 = std::min(m, 2 * J + 2) - 2 * J;
                up.max(I, J) = below.max.block(2 * I, 2 * J, i1, j1).maxCoeff();
                up.sum(I, J) = static_cast<float>(below.sum.block(2 * I, 2 * J, i1, j1).cast<double>().sum());
            }
        p.levels.push_back(std::move(up));
    }
    if (progress)
        progress(1.0);
    return p;
}

namespace {

// Cell of each of `length` positions split into `cells` parts at i * length / cells.
std::vector<Eigen::Index> cell_of(Eigen::Index length, Eigen::Index cells)
{
    std::vector<Eigen::Index> out(static_cast<std::size_t>(length));
    for (Eigen::Index i = 0; i < cells; ++i)
        for (Eigen::Index t = i * length / cells; t < (i + 1) * length / cells; ++t)
            out[static_cast<std::size_t>(t)] = i;
    return out;
}

// Max (or sum) of each cell of the region [r0, r0 + h) x [c0, c0 + w) of the column-major `src`, into
// `out` (row-major rows x cols): one pass down each column, so memory is read in order.
template <class Src>
void reduce_cells(const Src& src, Eigen::Index r0, Eigen::Index h, Eigen::Index c0, Eigen::Index w, Eigen::Index rows,
                  Eigen::Index cols, bool max, std::vector<double>& out)
{
    using Eigen::Index;
    const std::vector<Index> row_cell = cell_of(h, rows), col_cell = cell_of(w, cols);
    std::vector<double> acc(static_cast<std::size_t>(rows * cols),
                            max ? -std::numeric_limits<double>::infinity() : 0.0);   // column-major cells
    for (Index j = 0; j < w; ++j) {
        const auto* col = src.col(c0 + j).data() + r0;
        double* cells = acc.data() + col_cell[static_cast<std::size_t>(j)] * rows;
        if (max)
            for (Index t = 0; t < h; ++t) {
                double& c = cells[row_cell[static_cast<std::size_t>(t)]];
                c = std::max(c, static_cast<double>(col[t]));
            }
        else
            for (Index t = 0; t < h; ++t)
                cells[row_cell[static_cast<std::size_t>(t)]] += static_cast<double>(col[t]);
    }
    out.resize(static_cast<std::size_t>(rows * cols));
    for (Index i = 0; i < rows; ++i)
        for (Index j = 0; j < cols; ++j)
            out[static_cast<std::size_t>(i * cols + j)] = acc[static_cast<std::size_t>(j * rows + i)];
}

}  // namespace

ReducedImage reduce_region(const Eigen::Ref<const Eigen::MatrixXd>& A, Eigen::Index r0, Eigen::Index r1, Eigen::Index c0,
                           Eigen::Index c1, Eigen::Index out_rows, Eigen::Index out_cols, Reduce how,
                           const MatrixPyramid* pyramid)
{
    using Eigen::Index;
    r0 = std::clamp<Index>(r0, 0, A.rows());
    r1 = std::clamp<Index>(r1, r0, A.rows());
    c0 = std::clamp<Index>(c0, 0, A.cols());
    c1 = std::clamp<Index>(c1, c0, A.cols());
    ReducedImage img;
    if (r1 == r0 || c1 == c0 || out_rows < 1 || out_cols < 1)
        return img;
    // The coarsest pyramid level whose blocks still fit in a cell.
    const MatrixPyramid::Level* level = nullptr;
    if (pyramid && A.rows() == A.cols())
        for (const auto& l : pyramid->levels)
            if (l.factor * out_rows <= r1 - r0 && l.factor * out_cols <= c1 - c0 && l.max.rows() * l.factor >= A.rows() &&
                (l.max.rows() - 1) * l.factor < A.rows())
                level = &l;
    const Index f = level ? level->factor : 1, n = A.rows(), m = A.cols();
    // The region in units of the source (whole blocks of the level), and the cells.
    const Index R0 = r0 / f, R1 = (r1 + f - 1) / f, C0 = c0 / f, C1 = (c1 + f - 1) / f;
    const Index h = R1 - R0, w = C1 - C0;
    img.factor = f;
    img.rows = std::min(h, out_rows);
    img.cols = std::min(w, out_cols);
    img.r0 = R0 * f, img.r1 = std::min(R1 * f, n), img.c0 = C0 * f, img.c1 = std::min(C1 * f, m);
    const bool max = how == Reduce::max;
    if (level)
        reduce_cells(max ? level->max : level->sum, R0, h, C0, w, img.rows, img.cols, max, img.values);
    else
        reduce_cells(A, R0, h, C0, w, img.rows, img.cols, max, img.values);
    if (!max) {   // sums -> means over the entries of A each cell covers
        for (Index i = 0; i < img.rows; ++i) {
            const Index a0 = R0 + i * h / img.rows, a1 = R0 + (i + 1) * h / img.rows;
            const double rows = static_cast<double>(std::min(a1 * f, n) - a0 * f);
            for (Index j = 0; j < img.cols; ++j) {
                const Index b0 = C0 + j * w / img.cols, b1 = C0 + (j + 1) * w / img.cols;
                img.values[static_cast<std::size_t>(i * img.cols + j)] /= rows * static_cast<double>(std::min(b1 * f, m) - b0 * f);
            }
        }
    }
    return img;
}

}  // namespace attnscope::analysis
