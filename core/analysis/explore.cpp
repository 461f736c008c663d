#include "analysis/explore.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "analysis/inputs.h"
#include "attention/mixing.h"
#include "attention/operator.h"
#include "io/tensor_file.h"
#include "metrics/bidiag_svd.h"
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
        // Block b's tokens first, raster order inside the block (attention.md 1.5).
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

Eigen::Index selected_tokens(const TensorSource& source)
{
    const io::TensorRef ref = io::parse_tensor_ref(source.q_ref);
    const auto file = io::open_tensor_file(ref.file);
    const io::TensorInfo& info = file->find(ref.name);
    const std::string layout = io::resolve_layout(info, source.selection, "--q " + source.q_ref);
    const auto axis = layout.find('n');
    const auto tokens = info.shape[axis] - source.selection.prefix_tokens;
    if (tokens < 1)
        throw InputError("--q " + source.q_ref + ": --prefix-tokens " + std::to_string(source.selection.prefix_tokens) +
                         " leaves no token of " + std::to_string(info.shape[axis]));
    return tokens;
}

namespace {

// Progress over stages of unequal cost: fractions of the whole job by the stages' weights, reported at
// most every 50 ms (each report is a queued call on the GUI thread); cancellation is checked every time.
class WeightedProgress {
public:
    WeightedProgress(const JobContext& ctx, double total) : m_ctx(ctx), m_total(total > 0 ? total : 1.0) {}

    void begin(const std::string& stage, double weight)
    {
        m_done += m_weight;
        m_weight = weight;
        m_stage = stage;
        report(0.0, true);
    }
    // `fraction` of the current stage is done.
    void at(double fraction) { report(fraction, false); }
    double fraction() const { return m_last; }

private:
    void report(double fraction, bool force)
    {
        m_ctx.check();
        const auto now = std::chrono::steady_clock::now();
        if (!force && now - m_reported < std::chrono::milliseconds(50))
            return;
        m_reported = now;
        m_last = std::min(1.0, (m_done + std::clamp(fraction, 0.0, 1.0) * m_weight) / m_total);
        m_ctx.progress(m_last, m_stage);
    }

    const JobContext& m_ctx;
    double m_total, m_done = 0, m_weight = 0, m_last = 0;
    std::string m_stage;
    std::chrono::steady_clock::time_point m_reported{};
};

// Rows per tile when the matrix is built, checked and measured in pieces (a multiple of the softmax
// operator's own tile, so that its tiles are dense()'s).
constexpr Eigen::Index k_rows_per_tile = 256;
// From this N on the matrix is built tile by tile with cancellation between tiles (dense() of a kernel
// operator is one GEMM: ~1 s at N = 8192). Below, dense() as analyze() calls it.
constexpr Eigen::Index k_tiled_build_from = 2048;

// Larger matrices get reduced images (MatrixPyramid) for the maps view.
constexpr Eigen::Index k_pyramid_above = 1024;

// Relative costs, in units of one pass building the N x N matrix: measured on 2 cores (docs/gui.md).
double spectrum_weight(SpectrumPath path, Eigen::Index n)
{
    if (path == SpectrumPath::dense)
        return std::max(1.0, static_cast<double>(n) / 40.0);
    return path == SpectrumPath::none ? 0.0 : 0.2;
}

// measure() (analyze.h) for the GUI, which keeps the N x N matrix: the same numbers and warnings (row
// entropies summed as row_entropy() sums them; the dense spectrum is dgesdd's, metrics/bidiag_svd.h, where
// analyze() takes the two-stage SVD from N = 512 on: they agree to ~1e-15 s_1), and every step
// interruptible: the matrix is built, checked and measured in tiles of rows, and the dense SVD reports
// twice per column. (The two-stage SVD reports only between 64-column panels and not at all in its
// band-to-bidiagonal stage: seconds apart at N = 2048-4096 on 2 cores, too coarse for a 1 s cancel.)
void measure_kept(MechanismOutcome& o, const attention::AttentionOperator& op, SpectrumPath path,
                  const attention::AttentionOptions& options, const MetricOptions& mo, const std::string& name,
                  WeightedProgress& progress)
{
    using Eigen::Index;
    const Index n = op.rows();
    MechanismResult& r = o.result;
    o.allowed_keys = op.allowed_keys();
    const std::vector<Index>& allowed = o.allowed_keys;
    const auto tiles = [n](auto&& body) {
        for (Index t0 = 0; t0 < n; t0 += k_rows_per_tile)
            if (!body(t0, std::min(k_rows_per_tile, n - t0)))
                return;
    };
    const auto fraction = [n](Index t0, Index count) { return static_cast<double>(t0 + count) / static_cast<double>(n); };

    progress.begin(name + ": attention matrix", 1.0);
    auto A = std::make_shared<Eigen::MatrixXd>();
    if (n < k_tiled_build_from) {
        *A = op.dense();
    } else {
        A->resize(n, n);
        tiles([&](Index t0, Index count) {
            op.dense_rows(t0, count, A->middleRows(t0, count));
            progress.at(fraction(t0, count));
            return true;
        });
    }

    progress.begin(name + ": entropy", 1.0);
    bool finite = true, negative = false;
    std::vector<double> h(static_cast<std::size_t>(n), 0.0);
    tiles([&](Index t0, Index count) {
        const auto rows = A->middleRows(t0, count);
        if (!rows.allFinite()) {
            finite = false;
            return false;
        }
        negative = negative || (rows.array() < 0.0).any();
        if (!negative && mo.entropy) {
            const std::vector<Index> allowed_rows(allowed.begin() + t0, allowed.begin() + t0 + count);
            const metrics::EntropyStats part = metrics::row_entropy(rows, allowed_rows);
            std::copy(part.rows.begin(), part.rows.end(), h.begin() + t0);
        }
        progress.at(fraction(t0, count));
        return true;
    });
    o.matrix = A;
    if (finite && n > k_pyramid_above) {
        progress.begin(name + ": reduced images", 0.3);
        o.pyramid = std::make_shared<const MatrixPyramid>(make_pyramid(*A, [&](double f) { progress.at(f); }));
    }
    if (!finite) {
        r.warnings.push_back("the attention matrix has non-finite entries (a row normaliser is zero); "
                             "no metric is reported");
        return;
    }
    // measure()'s warnings, word for word (tests/core/analysis/test_explore.cpp compares them).
    if (mo.entropy) {
        if (negative) {
            r.warnings.push_back("entropy is undefined: the matrix has negative entries (feature map " +
                                 std::string(attention::to_string(options.feature_map.kind)) +
                                 "), so its rows are not distributions");
        } else {
            r.entropy = metrics::entropy_stats(std::move(h), allowed);
            r.entropy_method = "dense";
            if (r.mechanism == Mechanism::mhla && options.normalize != attention::Normalize::row)
                r.warnings.push_back("rows are not normalised to sum 1 (normalize=" +
                                     std::string(attention::to_string(options.normalize)) +
                                     "); entropy is computed from the entries as they are");
        }
    }

    if (path == SpectrumPath::none)
        return;
    if (path != SpectrumPath::dense && path != SpectrumPath::structured)
        throw std::logic_error("explore: spectrum path without all singular values");
    progress.begin(name + ": singular values", spectrum_weight(path, n));
    std::vector<double> s = path == SpectrumPath::structured
                                ? metrics::structured_singular_values(*op.factors())
                                : metrics::singular_values_with_progress(Eigen::MatrixXd(*A), [&](double f) { progress.at(f); });
    r.spectrum = metrics::spectrum_metrics(std::move(s), n, n, mo.rank_rtol);
    r.spectrum_method = path == SpectrumPath::structured ? "structured" : "dense";
}

}  // namespace

ExploreResult explore(const ExploreRequest& request, const JobContext& ctx)
{
    const auto start = std::chrono::steady_clock::now();
    const std::size_t mechanisms = request.mechanisms.size();
    ctx.progress(0.0, "reading queries and keys");
    const std::uint64_t limit = request.memory_limit ? request.memory_limit : default_memory_limit();
    const LoadedInputs in = load_inputs(request.source.q_ref, request.source.k_ref, request.source.v_ref,
                                        request.source.selection);
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
    mo.row_entropy = true;
    // Operators first (cheap: feature maps and factors), so that the stages' weights are known.
    struct Planned {
        MechanismOutcome outcome;
        attention::AttentionOptions options;
        std::unique_ptr<attention::AttentionOperator> op;
        SpectrumPath path = SpectrumPath::none;
    };
    std::vector<Planned> plan;
    double total = 0.1;   // reading
    for (const Mechanism m : request.mechanisms) {
        Planned p;
        p.outcome.result.mechanism = m;
        try {
            p.options = options_for(m, request.options);
            p.outcome.result.params = mechanism_params(m, p.options, out.n, out.d);
            p.op = attention::make_operator(m, in.q.values, in.k.values, p.options);
            p.path = choose_spectrum_path(*p.op, mo, UINT64_MAX);
            total += 2.0 + spectrum_weight(p.path, out.n) + (out.n > k_pyramid_above ? 0.3 : 0.0);
        } catch (const std::invalid_argument& e) {
            p.outcome.error = e.what();
            p.op.reset();
        } catch (const InputError& e) {
            p.outcome.error = e.what();
            p.op.reset();
        }
        plan.push_back(std::move(p));
        ctx.check();
    }
    WeightedProgress progress(ctx, total);
    progress.begin("reading queries and keys", 0.1);

    for (Planned& p : plan) {
        MechanismOutcome& o = p.outcome;
        if (p.op) {
            const std::string name(attention::to_string(o.result.mechanism));
            try {
                measure_kept(o, *p.op, p.path, p.options, mo, name, progress);
            } catch (const JobCancelled&) {
                throw;
            } catch (const std::invalid_argument& e) {
                o.error = e.what();
                o.matrix.reset();
            } catch (const InputError& e) {
                o.error = e.what();
                o.matrix.reset();
            }
        }
        out.outcomes.push_back(std::move(o));
        ctx.check();
    }

    if (std::find(request.mechanisms.begin(), request.mechanisms.end(), Mechanism::mhla) != request.mechanisms.end()) {
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
    out.token_grid = request.token_grid;
    if (request.options.blocks.kind == attention::BlockSpec::Kind::grid) {
        out.token_grid = request.options.blocks.grid;
        out.token_order = request.options.blocks.order;
    }
    Eigen::Index cells = 1;
    for (auto g : out.token_grid)
        cells *= g;
    if (!out.token_grid.empty() && cells != out.n)
        out.token_grid.clear();   // a display grid that does not hold N tokens is ignored
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
