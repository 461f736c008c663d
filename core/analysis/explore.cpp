#include "analysis/explore.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "analysis/inputs.h"
#include "attention/mixing.h"
#include "attention/operator.h"
#include "io/tensor_file.h"
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
    const long double total = nn * (static_cast<long double>(mechanisms) + 1.5L) + 64.0L * 1024 * 1024;
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

ExploreResult explore(const ExploreRequest& request, const JobContext& ctx)
{
    const auto start = std::chrono::steady_clock::now();
    const std::size_t mechanisms = request.mechanisms.size();
    const double steps = 1.0 + 3.0 * static_cast<double>(mechanisms);
    double step = 0;
    auto advance = [&](const std::string& stage) { ctx.progress(step++ / steps, stage); };

    advance("reading queries and keys");
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

    MetricOptions mo;
    mo.rank_rtol = request.rank_rtol;
    mo.row_entropy = true;
    for (const Mechanism m : request.mechanisms) {
        MechanismOutcome o;
        o.result.mechanism = m;
        const std::string name(attention::to_string(m));
        try {
            const attention::AttentionOptions opts = options_for(m, request.options);
            o.result.params = mechanism_params(m, opts, out.n, out.d);
            advance(name + ": attention matrix");
            const auto op = attention::make_operator(m, in.q.values, in.k.values, opts);
            auto A = std::make_shared<Eigen::MatrixXd>(op->dense());
            o.allowed_keys = op->allowed_keys();
            advance(name + ": singular values");
            measure(o.result, *op, A.get(), false, choose_spectrum_path(*op, mo, UINT64_MAX), opts, mo);
            o.matrix = std::move(A);
            step += 1;
        } catch (const JobCancelled&) {
            throw;
        } catch (const std::invalid_argument& e) {
            o.error = e.what();
        } catch (const InputError& e) {
            o.error = e.what();
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

ReducedImage reduce_region(const Eigen::Ref<const Eigen::MatrixXd>& A, Eigen::Index r0, Eigen::Index r1, Eigen::Index c0,
                           Eigen::Index c1, Eigen::Index out_rows, Eigen::Index out_cols, Reduce how)
{
    r0 = std::clamp<Eigen::Index>(r0, 0, A.rows());
    r1 = std::clamp<Eigen::Index>(r1, r0, A.rows());
    c0 = std::clamp<Eigen::Index>(c0, 0, A.cols());
    c1 = std::clamp<Eigen::Index>(c1, c0, A.cols());
    ReducedImage img;
    const Eigen::Index h = r1 - r0, w = c1 - c0;
    if (h == 0 || w == 0 || out_rows < 1 || out_cols < 1)
        return img;
    img.rows = std::min(h, out_rows);
    img.cols = std::min(w, out_cols);
    img.values.assign(static_cast<std::size_t>(img.rows * img.cols), 0.0);
    for (Eigen::Index i = 0; i < img.rows; ++i) {
        const Eigen::Index a0 = r0 + i * h / img.rows, a1 = r0 + (i + 1) * h / img.rows;
        for (Eigen::Index j = 0; j < img.cols; ++j) {
            const Eigen::Index b0 = c0 + j * w / img.cols, b1 = c0 + (j + 1) * w / img.cols;
            const auto cell = A.block(a0, b0, a1 - a0, b1 - b0);
            img.values[static_cast<std::size_t>(i * img.cols + j)] = how == Reduce::max ? cell.maxCoeff() : cell.mean();
        }
    }
    return img;
}

}  // namespace attnscope::analysis
