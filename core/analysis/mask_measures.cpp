#include "analysis/mask_measures.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "analysis/baseline_cache.h"
#include "attention/decay.h"
#include "attention/mechanisms.h"
#include "attention/options_json.h"
#include "kernels/kernels.h"
#include "metrics/metrics.h"
#include "metrics/structured.h"
#include "util/error.h"

namespace attnscope::analysis {

std::vector<Index> support_sizes(const attention::AttentionOperator& op)
{
    const attention::KernelFactors* f = op.kernel_pieces();
    if (!f)   // no blocks and no mixing: nothing but the causal rule is zero by construction (docs/maths.md 2.2)
        return op.allowed_keys();
    const Index n = op.rows();
    const Index m = f->mixing.rows();
    std::vector<Index> size(static_cast<std::size_t>(m), 0);
    for (const Index b : f->block)
        ++size[static_cast<std::size_t>(b)];
    // Non-causal: every block b with Mc[blk(t), b] != 0. Causal (the rule of attention/operator.h): the whole
    // of every earlier block, and of t's own block the tokens up to t, seen in token order.
    std::vector<Index> seen(static_cast<std::size_t>(m), 0);
    std::vector<Index> out(static_cast<std::size_t>(n), 0);
    for (Index t = 0; t < n; ++t) {
        const Index bt = f->block[static_cast<std::size_t>(t)];
        ++seen[static_cast<std::size_t>(bt)];
        Index s = 0;
        for (Index b = 0; b < m; ++b) {
            if (f->mixing(bt, b) == 0.0 || (f->causal && b > bt))
                continue;
            s += f->causal && b == bt ? seen[static_cast<std::size_t>(b)] : size[static_cast<std::size_t>(b)];
        }
        out[static_cast<std::size_t>(t)] = s;
    }
    return out;
}

std::unique_ptr<attention::AttentionOperator> make_baseline_operator(const attention::AttentionOperator& op,
                                                                     const attention::AttentionOptions& options,
                                                                     attention::AttentionOptions* built_with)
{
    // phi(q) . phi(k) = 1 for every pair: ones under the identity map (relu would add its epsilon). What
    // multiplies the kernel (mixing, decay, gates, cosformer's cos/sin reweighting) and the normalisation
    // (official's den(t) = 1e-6 + sum_b Mc[i, b] |b|) come out as for A.
    const Eigen::MatrixXd ones = Eigen::MatrixXd::Ones(op.rows(), 1);
    attention::AttentionOptions o = options;
    o.feature_map.kind = attention::FeatureMapKind::identity;
    if (attention::mechanism_info(op.mechanism()).structure == attention::Structure::scores) {
        // rowsoftmax of a constant score on the causal rule is 1 / n_t on the allowed keys: linear attention on
        // these ones, row-normalised. Built so, it has factors (rank 1 when non-causal: the structured spectrum,
        // where the dense SVD of the constant matrix is needlessly slow).
        o = attention::effective_options(attention::Mechanism::linear, o);
        o.feature_map.kind = attention::FeatureMapKind::identity;
        if (built_with)
            *built_with = o;
        return attention::make_operator(attention::Mechanism::linear, ones, ones, o);
    }
    if (built_with)
        *built_with = o;
    return attention::make_operator(op.mechanism(), ones, ones, o);
}

Index parse_past_splits(const std::string& text, const std::string& what)
{
    if (text == "all")
        return k_all_past_splits;
    std::size_t used = 0;
    long long k = 0;
    try {
        k = std::stoll(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (used == 0 || used != text.size() || k < 1 || k > (1LL << 20))
        throw std::invalid_argument(what + " must be 'all' or a count of splits in 1..1048576 (got '" + text + "')");
    return static_cast<Index>(k);
}

std::optional<Index> past_split_of(bool causal, std::optional<Index> given, Index n)
{
    if (given) {
        if (*given < 1 || *given > n - 1)
            throw std::invalid_argument("the past split h=" + std::to_string(*given) + " must lie in 1..N-1 (N=" +
                                        std::to_string(n) + " tokens)");
        return given;
    }
    if (!causal)
        return std::nullopt;
    return n / 2;
}

std::optional<metrics::BlockFactorization> past_block_factors(const attention::AttentionOperator& op, Index h)
{
    const Index n = op.rows();
    if (h < 1 || h > n - 1)
        throw std::invalid_argument("the past split h=" + std::to_string(h) + " must lie in 1..N-1 (N=" +
                                    std::to_string(n) + " tokens)");
    metrics::BlockFactorization b;
    if (const attention::KernelFactors* f = op.kernel_pieces()) {
        // A[t,j] = row_scale[t] Mc[blk(t), blk(j)] phi_q(t) . phi_k(j) for t >= h > j. The causal rule allows j to t
        // when blk(j) < blk(t), or blk(j) == blk(t) and j <= t; here j < t always, so exactly when blk(j) <= blk(t):
        // the mask keeps the lower triangle of Mc, diagonal included.
        b.x = f->row_scale.tail(n - h).asDiagonal() * f->phi_q.bottomRows(n - h);
        b.y = f->phi_k.topRows(h);
        b.mixing = f->causal ? Eigen::MatrixXd(f->mixing.triangularView<Eigen::Lower>()) : f->mixing;
        b.row_block.assign(f->block.begin() + h, f->block.end());
        b.col_block.assign(f->block.begin(), f->block.begin() + h);
        return b;
    }
    const auto* decay = dynamic_cast<const attention::DecayOperator*>(&op);
    if (!decay)
        return std::nullopt;   // softmax: no factors
    const std::optional<attention::DecayOperator::SplitWeights> w = decay->split_weights(h);
    if (!w)
        return std::nullopt;
    // A[t,j] = (1/z_t) w(t, h) w(h, j) phi_q(t) . phi_k(j): the weights folded into the rows of each side.
    const attention::DecayOperator::Pieces& p = decay->pieces();
    b.x = (decay->row_scale().tail(n - h).array() * w->after.array()).matrix().asDiagonal() * p.phi_q.bottomRows(n - h);
    b.y = w->before.asDiagonal() * p.phi_k.topRows(h);
    b.mixing = Eigen::MatrixXd::Ones(1, 1);
    b.row_block.assign(static_cast<std::size_t>(n - h), 0);
    b.col_block.assign(static_cast<std::size_t>(h), 0);
    return b;
}

double past_block_weight(Index n) { return std::max(0.1, static_cast<double>(n) / 320.0); }

std::optional<metrics::SplitFactors> split_factors(const attention::AttentionOperator& op)
{
    metrics::SplitFactors f;
    if (const attention::KernelFactors* k = op.kernel_pieces()) {
        // As past_block_factors: for t >= h > j the causal rule keeps Mc's lower triangle, diagonal included.
        f.x = k->row_scale.asDiagonal() * k->phi_q;
        f.y = k->phi_k;
        f.mixing = k->causal ? Eigen::MatrixXd(k->mixing.triangularView<Eigen::Lower>()) : k->mixing;
        f.block = k->block;
        return f;
    }
    const auto* decay = dynamic_cast<const attention::DecayOperator*>(&op);
    if (!decay || op.rows() < 2 || !decay->split_weights(1))
        return std::nullopt;   // softmax, non-causal decay on a grid
    const attention::DecayOperator::Pieces& p = decay->pieces();
    f.x = decay->row_scale().asDiagonal() * p.phi_q;
    f.y = p.phi_k;
    f.mixing = Eigen::MatrixXd::Ones(1, 1);
    if (p.mechanism == attention::Mechanism::decay)
        f.step = Eigen::VectorXd::Constant(op.rows(), decay->gamma());
    else if (p.log_line.size() > 0)
        f.step = p.log_line.array().exp().matrix();
    else
        f.step = p.line;
    return f;
}

namespace {

// The profile of `op` into r.past_profile: from its factors (split_factors) when it has them, else from `A` or
// the matrix formed from the operator when it fits the memory limit (a few splits only), else null with a warning.
void measure_past_profile(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                          const MeasureRequest& request, StageProgress* progress)
{
    const Index n = op.rows();
    const Index asked = request.metrics.past_splits.value_or(k_default_past_splits);
    const bool all = asked == k_all_past_splits;
    const std::optional<metrics::SplitFactors> f = split_factors(op);
    const attention::KernelFactors* k = op.kernel_pieces();
    std::vector<Index> splits =
        all ? metrics::all_splits(n) : metrics::default_splits(n, asked, k ? k->block : std::vector<Index>{});
    // The past block's own split belongs to H, so that semiseparable_rank >= past_block.rank.
    if (const std::optional<Index> h = past_split_of(true, request.metrics.past_split, n); !all && h && *h >= 1) {
        splits.insert(std::lower_bound(splits.begin(), splits.end(), *h), *h);
        splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
    }
    const std::string name(attention::to_string(r.mechanism));
    auto keep_going = [&] { return !(progress && progress->cancelled()); };
    PastProfileResult out;
    out.all = all;
    if (f) {
        if (splits.size() >= metrics::k_carry_from_splits &&
            metrics::carried_factor_bytes(n, f->x.cols()) > request.memory_limit) {
            r.warnings.push_back("no past profile: carrying the factors of " + std::to_string(splits.size()) +
                                 " splits needs about " + human_bytes(metrics::carried_factor_bytes(n, f->x.cols())) +
                                 ", over the memory limit of " + human_bytes(request.memory_limit) +
                                 "; give fewer --past-splits");
            return;
        }
        out.splits = metrics::profile_from_factors(*f, splits, request.metrics.rank_rtol, kernels::threads(), keep_going);
        out.method = "factors";
    } else {
        if (all) {
            r.warnings.push_back("no past profile: " + name +
                                 " attention has no factors, and every split of the formed matrix costs an SVD each; "
                                 "give --past-splits K");
            return;
        }
        std::shared_ptr<Eigen::MatrixXd> formed;
        if (!A) {
            const double bytes = 8.0 * static_cast<double>(n) * static_cast<double>(n) * 2.0;
            if (bytes > static_cast<double>(request.memory_limit)) {
                r.warnings.push_back("no past profile: forming " + name + "'s matrix needs about " +
                                     human_bytes(static_cast<std::uint64_t>(bytes)) + ", over the memory limit of " +
                                     human_bytes(request.memory_limit));
                return;
            }
            formed = std::make_shared<Eigen::MatrixXd>(n, n);
            op.dense_rows(0, n, *formed);
            A = formed.get();
        }
        out.splits = metrics::profile_from_matrix(*A, splits, request.metrics.rank_rtol, keep_going);
        out.method = "matrix";
    }
    if (progress)
        progress->check();   // a cancelled profile is empty: the job stops here
    for (const metrics::SplitRank& s : out.splits)
        out.semiseparable_rank = std::max(out.semiseparable_rank, s.rank);
    r.past_profile = std::move(out);
}

void measure_one_past_block(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                            const MeasureRequest& request, StageProgress* progress);

}  // namespace

void measure_past_block(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                        const MeasureRequest& request, StageProgress* progress)
{
    if (!request.metrics.spectrum || request.is_baseline || !past_measures_asked(op.causal(), request.metrics))
        return;
    measure_one_past_block(r, op, A, request, progress);
    if (op.rows() >= 2)
        measure_past_profile(r, op, A, request, progress);
}

namespace {

void measure_one_past_block(MechanismResult& r, const attention::AttentionOperator& op, const Eigen::MatrixXd* A,
                            const MeasureRequest& request, StageProgress* progress)
{
    const Index n = op.rows();
    const std::optional<Index> split =
        past_split_of(op.causal() || request.metrics.past_splits.has_value(), request.metrics.past_split, n);
    if (!split)
        return;
    r.past_block_asked = true;
    const Index h = *split;
    if (h < 1) {   // the default split of one token
        r.warnings.push_back("no past block: it needs a split h in 1..N-1, and N=" + std::to_string(n));
        return;
    }
    if (progress)
        progress->begin(std::string(attention::to_string(r.mechanism)) + ": past block", past_block_weight(n));
    PastBlockResult out;
    out.split = h;
    out.rows = n - h;
    out.cols = h;
    if (n >= k_structured_mask_measures_from)
        if (const std::optional<metrics::BlockFactorization> f = past_block_factors(op, h)) {
            // Rank <= M r: thin QRs of the factors and a small SVD, never the (N - h) x h block.
            out.spectrum = metrics::spectrum_metrics(metrics::block_factor_singular_values(*f), n - h, h,
                                                     request.metrics.rank_rtol);
            r.past_block = std::move(out);
            return;
        }
    Eigen::MatrixXd B;
    if (A) {
        B = A->bottomLeftCorner(n - h, h);
    } else {
        // The rows h.. of A, then the block of them: (N - h) N doubles, and the block's copy for the SVD.
        const double bytes = 8.0 * static_cast<double>(n - h) * static_cast<double>(n + h);
        if (bytes > static_cast<double>(request.memory_limit)) {
            r.warnings.push_back("no past block: forming its rows A[" + std::to_string(h) + ":N, :] needs about " +
                                 human_bytes(static_cast<std::uint64_t>(bytes)) + ", over the memory limit of " +
                                 human_bytes(request.memory_limit));
            return;
        }
        Eigen::MatrixXd rows(n - h, n);
        op.dense_rows(h, n - h, rows);
        B = rows.leftCols(h);
    }
    if (progress)
        progress->at(0.5);
    out.spectrum = metrics::spectrum_metrics(metrics::singular_values(std::move(B)), n - h, h, request.metrics.rank_rtol);
    r.past_block = std::move(out);
}

}  // namespace

namespace {

// FNV-1a over the bytes of some doubles: the key's fingerprint of a mixing matrix's or the gates' values.
std::string values_hash(const double* v, Index count)
{
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (Index i = 0; i < count; ++i) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &v[i], sizeof bits);
        for (int b = 0; b < 8; ++b) {
            h ^= (bits >> (8 * b)) & 0xffu;
            h *= 0x100000001b3ULL;
        }
    }
    char text[40];
    std::snprintf(text, sizeof text, "%zd:%016llx", static_cast<std::ptrdiff_t>(count), static_cast<unsigned long long>(h));
    return text;
}

// Everything that shapes A0 = `op0` (built with `o0`) and its measurement under `base`: the mechanism A0 is built
// as (softmax's is linear attention's, so the two share one entry), N, the options that mechanism reads
// (attention/options_json.h; the feature map is always identity on ones, decay's gamma resolved, a loaded
// mixing matrix and the gates by a hash of their values), the metric options, the memory limit that picks
// its path, and the kernels' thread count and instruction set (the last bits of a dense SVD depend on both).
std::string baseline_key(const attention::AttentionOperator& op0, const attention::AttentionOptions& o0,
                         const MeasureRequest& base)
{
    const attention::MechanismInfo& info = attention::mechanism_info(op0.mechanism());
    nlohmann::ordered_json j = attention::options_to_json(o0);
    for (const char* k : {"feature_map", "favor_features", "seed", "gates"})
        j.erase(k);
    if (!info.takes(attention::opt_scale))
        j.erase("scale");
    if (!info.takes(attention::opt_blocks)) {
        for (const char* k : {"block_mode", "blocks", "chunk", "block_grid", "token_order"})
            j.erase(k);
        if (!info.takes(attention::opt_grid))
            j.erase("grid");
    }
    if (!info.takes(attention::opt_mixing))
        for (const char* k : {"mixing", "mixing_sigma", "mixing_threshold"})
            j.erase(k);
    else if (o0.mixing.matrix)
        j["mixing_values"] = std::to_string(o0.mixing.matrix->rows()) + "x" +
                             values_hash(o0.mixing.matrix->data(), o0.mixing.matrix->size());
    if (info.takes(attention::opt_decay))
        j["decay"] = attention::decay_gamma(o0);
    else
        j.erase("decay");
    if (info.takes(attention::opt_gates))
        j["gates_values"] = values_hash(o0.gates.values.data(), o0.gates.values.size());
    else
        j.erase("gates_log");
    const MetricOptions& mo = base.metrics;
    nlohmann::ordered_json k;
    k["mechanism"] = std::string(info.name);
    k["n"] = op0.rows();
    k["options"] = std::move(j);
    k["method"] = std::string(to_string(mo.method));
    k["spectrum"] = mo.spectrum;
    k["entropy"] = mo.entropy;
    k["rank_rtol"] = mo.rank_rtol ? nlohmann::ordered_json(*mo.rank_rtol) : nlohmann::ordered_json(nullptr);
    k["top_k"] = mo.top_k ? nlohmann::ordered_json(*mo.top_k) : nlohmann::ordered_json(nullptr);
    k["path"] = static_cast<int>(base.path);
    k["memory_limit"] = base.memory_limit;
    k["threads"] = kernels::threads();
    k["isa"] = std::string(kernels::to_string(kernels::active_isa()));
    k["gemm"] = static_cast<int>(kernels::gemm_path());
    return k.dump();
}

// The singular values of A0 where its structure gives them without the dense SVD: the causal averaging
// matrix D^{-1} L of softmax and linear attention (metrics::causal_averaging_singular_values); else none.
std::optional<std::vector<double>> structured_baseline_values(const attention::AttentionOperator& op0,
                                                              const MeasureRequest& base)
{
    if (op0.rows() < k_structured_mask_measures_from || base.path != SpectrumPath::dense ||
        op0.mechanism() != attention::Mechanism::linear || !op0.causal())
        return std::nullopt;
    return metrics::causal_averaging_singular_values(op0.rows());
}

// measure_baseline's work for one setting (what the cache stores).
CachedBaseline compute_baseline(const attention::AttentionOperator& op0, const attention::AttentionOptions& options,
                                MeasureRequest base, const MetricOptions& asked, StageProgress* progress)
{
    CachedBaseline out;
    const std::optional<std::vector<double>> values = structured_baseline_values(op0, base);
    Measurement m = values ? measure_with_known_values(op0, options, base, *values, progress)
                           : measure(op0, options, base, progress);
    if (!m.finite) {
        out.warnings.push_back("no content-free baseline: with every kernel score replaced by 1 a row normaliser is <= 0 "
                               "(a signed mixing matrix), so the baseline matrix is not defined");
        return out;
    }
    BaselineResult b;
    if (m.result.spectrum && !m.result.partial_spectrum)
        b.spectrum = std::move(m.result.spectrum);
    else if (asked.spectrum)
        out.warnings.push_back("the content-free baseline's ranks need every singular value of its matrix, which its "
                               "spectrum path does not give here");
    b.entropy = std::move(m.result.entropy);
    if (b.entropy)
        b.entropy->rows.clear();
    else if (asked.entropy)
        out.warnings.push_back("the content-free baseline has negative entries (a signed mixing matrix): its entropy is "
                               "not defined");
    out.baseline = std::move(b);
    return out;
}

}  // namespace

void measure_baseline(MechanismResult& r, const attention::AttentionOperator& op,
                      const attention::AttentionOptions& options, const MeasureRequest& request,
                      StageProgress* progress)
{
    if (!request.metrics.baseline || request.is_baseline || !(request.metrics.spectrum || request.metrics.entropy))
        return;
    MeasureRequest base;
    base.metrics = request.metrics;
    base.metrics.row_entropy = false;
    base.metrics.baseline = false;
    base.metrics.past_split.reset();
    base.memory_limit = request.memory_limit;
    base.is_baseline = true;
    std::unique_ptr<attention::AttentionOperator> op0;
    attention::AttentionOptions o0;
    try {
        op0 = make_baseline_operator(op, options, &o0);
        base.path = choose_spectrum(*op0, base.metrics, request.memory_limit).path;
    } catch (const std::invalid_argument& e) {
        r.warnings.push_back(std::string("no content-free baseline: ") + e.what());
        return;
    } catch (const InputError& e) {
        r.warnings.push_back(std::string("no content-free baseline: ") + e.what());
        return;
    }
    const std::shared_ptr<const CachedBaseline> b = baseline_cache().get_or_compute(
        baseline_key(*op0, o0, base), [&] { return compute_baseline(*op0, options, base, request.metrics, progress); },
        progress);
    r.warnings.insert(r.warnings.end(), b->warnings.begin(), b->warnings.end());
    r.baseline = b->baseline;
}

}  // namespace attnscope::analysis
