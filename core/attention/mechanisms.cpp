#include "attention/mechanisms.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

#include "attention/blocks.h"
#include "attention/decay.h"
#include "attention/feature_map.h"
#include "attention/mixing.h"
#include "util/names.h"

namespace attnscope::attention {

using json = nlohmann::ordered_json;
using Eigen::MatrixXd;

namespace {

// ---------------------------------------------------------------------------------------------------
// What each mechanism records (the analyze JSON's "params"), piece by piece, in the order they appear.

void feature_map_params(json& p, const AttentionOptions& o)
{
    p["feature_map"] = std::string(to_string(o.feature_map.kind));
    if (o.feature_map.kind == FeatureMapKind::favor) {
        p["favor_features"] = o.feature_map.favor_features;
        p["seed"] = o.feature_map.seed;
    }
    p["causal"] = o.causal;
}

void block_params(json& p, const AttentionOptions& o, Index n)
{
    const BlockLayout layout = make_blocks(o.blocks, n);
    p["blocks"] = layout.num_blocks;
    using Kind = BlockSpec::Kind;
    if (o.blocks.kind == Kind::chunk) {
        p["chunk"] = o.blocks.chunk;
    } else if (o.blocks.kind == Kind::grid) {
        p["grid"] = o.blocks.grid;
        p["block_grid"] = o.blocks.block_grid;
        p["token_order"] = std::string(to_string(o.blocks.order));
    }
}

void mixing_params(json& p, const AttentionOptions& o)
{
    const std::string mixing = o.mixing.matrix ? o.mixing.preset
                                                : resolved_mixing_name(o.mixing, o.causal, o.blocks.kind == BlockSpec::Kind::grid);
    p["mixing"] = mixing;
    if (o.mixing.matrix && o.mixing.head)
        p["mixing_head"] = *o.mixing.head;   // a per-head mixing file: the analysed head's matrix
    if (!o.mixing.matrix && (mixing == "exp" || mixing == "causal-local"))
        p["mixing_sigma"] = o.mixing.sigma;
    if (!o.mixing.matrix && mixing == "local")
        p["mixing_threshold"] = o.mixing.threshold;
}

void softmax_params(json& p, const AttentionOptions& o, Index, Index d)
{
    p["scale"] = softmax_scale(o, d);
    p["causal"] = o.causal;
}

void linear_params(json& p, const AttentionOptions& o, Index, Index) { feature_map_params(p, o); }

void mhla_params(json& p, const AttentionOptions& o, Index n, Index)
{
    feature_map_params(p, o);
    block_params(p, o, n);
    mixing_params(p, o);
    p["normalize"] = std::string(to_string(o.normalize));
}

// decay: gamma resolved (RetNet's per-head default included), the grid whose Manhattan distance it uses.
void decay_params(json& p, const AttentionOptions& o, Index, Index)
{
    feature_map_params(p, o);
    p["decay"] = decay_gamma(o);
    if (!o.causal && o.blocks.kind == BlockSpec::Kind::grid) {
        p["grid"] = o.blocks.grid;
        p["token_order"] = std::string(to_string(o.blocks.order));
    }
    p["normalize"] = std::string(to_string(o.normalize));
}

void cosformer_params(json& p, const AttentionOptions& o, Index, Index)
{
    feature_map_params(p, o);
    p["normalize"] = std::string(to_string(o.normalize));
}

void gated_params(json& p, const AttentionOptions& o, Index, Index)
{
    feature_map_params(p, o);
    p["gates"] = o.gates.source;
    p["gates_log"] = o.gates.log;
    p["normalize"] = std::string(to_string(o.normalize));
}

// ---------------------------------------------------------------------------------------------------
// Factories.

std::unique_ptr<AttentionOperator> make_softmax(const Eigen::Ref<const MatrixXd>& Q, const Eigen::Ref<const MatrixXd>& K,
                                                const AttentionOptions& o)
{
    const double scale = softmax_scale(o, Q.cols());
    if (!std::isfinite(scale))
        throw std::invalid_argument("scale must be finite");
    return make_softmax_operator(Q, K, scale, o.causal);
}

// Linear attention: one block, mixing [[1]] (docs/maths.md 1.3).
std::unique_ptr<AttentionOperator> make_linear(const Eigen::Ref<const MatrixXd>& Q, const Eigen::Ref<const MatrixXd>& K,
                                               const AttentionOptions& o)
{
    const FeatureMap phi(o.feature_map, Q.cols());
    return make_kernel_operator(Mechanism::linear, phi(Q), phi(K), one_block(Q.rows()), MatrixXd::Ones(1, 1), o,
                                !phi.non_negative());
}

std::unique_ptr<AttentionOperator> make_mhla(const Eigen::Ref<const MatrixXd>& Q, const Eigen::Ref<const MatrixXd>& K,
                                             const AttentionOptions& o)
{
    const FeatureMap phi(o.feature_map, Q.cols());
    BlockLayout layout = make_blocks(o.blocks, Q.rows());
    MatrixXd mixing = make_mixing(o.mixing, layout, o.causal);
    const bool negative = !phi.non_negative() || signed_mixing(mixing);
    return make_kernel_operator(Mechanism::mhla, phi(Q), phi(K), std::move(layout), std::move(mixing), o, negative);
}

std::string no_problem(const AttentionOptions&, Index) { return {}; }

std::string cosformer_problem(const AttentionOptions& o, Index)
{
    return o.normalize == Normalize::official ? "cosformer takes normalize row or none; the official normalisation is MHLA's"
                                              : std::string();
}

// cosformer (docs/maths.md 1.8): cos(a (t - j)) = cos(at) cos(aj) + sin(at) sin(aj), a = pi / (2N), so it is linear
// attention on the 2r features [phi cos(a t), phi sin(a t)]: rank <= 2r, the structured spectrum when non-causal.
std::unique_ptr<AttentionOperator> make_cosformer(const Eigen::Ref<const MatrixXd>& Q, const Eigen::Ref<const MatrixXd>& K,
                                                  const AttentionOptions& o)
{
    if (const std::string p = cosformer_problem(o, Q.rows()); !p.empty())
        throw std::invalid_argument(p);
    const FeatureMap phi(o.feature_map, Q.cols());
    const Index n = Q.rows();
    const double a = std::numbers::pi / (2.0 * static_cast<double>(n));
    const auto reweighted = [n, a](const MatrixXd& f) {
        MatrixXd out(n, 2 * f.cols());
        for (Index t = 0; t < n; ++t) {
            out.row(t).head(f.cols()) = std::cos(a * static_cast<double>(t)) * f.row(t);
            out.row(t).tail(f.cols()) = std::sin(a * static_cast<double>(t)) * f.row(t);
        }
        return out;
    };
    return make_kernel_operator(Mechanism::cosformer, reweighted(phi(Q)), reweighted(phi(K)), one_block(n),
                                MatrixXd::Ones(1, 1), o, !phi.non_negative());
}

// Weights that are all 1 leave linear attention (docs/maths.md 1.8) when rows are normalised.
std::string decay_same_as_linear(const AttentionOptions& o, Index)
{
    if (o.normalize != Normalize::row || decay_gamma(o) != 1.0)
        return {};
    return "decay is linear attention by construction here (the same matrix, not a measured similarity): gamma = 1";
}

std::string gated_same_as_linear(const AttentionOptions& o, Index)
{
    const Eigen::VectorXd& g = o.gates.values;
    if (o.normalize != Normalize::row || g.size() == 0 || !(o.gates.log ? (g.array() == 0.0).all() : (g.array() == 1.0).all()))
        return {};
    return "gated is causal linear attention by construction here (the same matrix, not a measured similarity): every "
           "gate is 1";
}

// The table: one entry per mechanism, in the order of docs/maths.md section 1. Fields as MechanismInfo lists them.
std::vector<MechanismInfo> build_table()
{
    return {
        {.id = Mechanism::softmax, .name = "softmax", .label = "softmax", .summary = "rowsoftmax(scale Q K^T)",
         .options = opt_scale, .default_set = true, .style_slot = 0, .structure = Structure::scores,
         .make = make_softmax, .params = softmax_params, .problem = no_problem, .same_as = no_problem},
        {.id = Mechanism::linear, .name = "linear", .label = "linear", .summary = "phi(Q) phi(K)^T, row-normalised",
         .options = opt_feature_map, .default_set = true, .plain_kernel_scores = true, .style_slot = 1,
         .rank_bound_factor = 1, .structure = Structure::kernel, .make = make_linear, .params = linear_params,
         .problem = no_problem, .same_as = no_problem},
        {.id = Mechanism::mhla, .name = "mhla", .label = "MHLA",
         .summary = "token-level multi-head linear attention: M blocks mixed by an M x M matrix",
         .options = opt_feature_map | opt_blocks | opt_mixing | opt_normalize, .official_normalize = true,
         .default_set = true, .plain_kernel_scores = true, .style_slot = 2, .structure = Structure::kernel,
         .make = make_mhla, .params = mhla_params, .problem = mhla_options_problem, .same_as = mhla_same_as_linear},
        {.id = Mechanism::decay, .name = "decay", .label = "decay",
         .summary = "RetNet retention / RMT: gamma^dist(t,j) phi(q_t) . phi(k_j)",
         .options = opt_feature_map | opt_normalize | opt_decay | opt_grid, .style_slot = 3, .structure = Structure::rows,
         .make = make_decay_operator, .params = decay_params, .problem = decay_problem, .same_as = decay_same_as_linear},
        {.id = Mechanism::gated, .name = "gated", .label = "gated",
         .summary = "Mamba-2 / SSD scalar gates: (prod g) phi(q_t) . phi(k_j), j <= t",
         .options = opt_feature_map | opt_normalize | opt_gates, .causal_only = true, .style_slot = 4,
         .structure = Structure::rows, .make = make_gated_operator, .params = gated_params, .problem = gates_problem,
         .same_as = gated_same_as_linear},
        {.id = Mechanism::cosformer, .name = "cosformer", .label = "cosFormer",
         .summary = "cosFormer: cos(pi/2 (t - j) / N) phi(q_t) . phi(k_j), rank <= 2r",
         .options = opt_feature_map | opt_normalize, .style_slot = 5, .rank_bound_factor = 2,
         .structure = Structure::kernel, .make = make_cosformer, .params = cosformer_params,
         .problem = cosformer_problem, .same_as = no_problem},
    };
}

}  // namespace

const std::vector<MechanismInfo>& mechanism_table()
{
    static const std::vector<MechanismInfo> table = build_table();
    return table;
}

const MechanismInfo& mechanism_info(Mechanism m)
{
    for (const MechanismInfo& info : mechanism_table())
        if (info.id == m)
            return info;
    throw std::logic_error("mechanism_info: a mechanism without a table entry");
}

std::vector<Mechanism> default_mechanisms()
{
    std::vector<Mechanism> out;
    for (const MechanismInfo& info : mechanism_table())
        if (info.default_set)
            out.push_back(info.id);
    return out;
}

std::vector<Mechanism> all_mechanisms()
{
    std::vector<Mechanism> out;
    for (const MechanismInfo& info : mechanism_table())
        out.push_back(info.id);
    return out;
}

std::string default_mechanism_text()
{
    std::vector<std::string_view> names;
    for (const Mechanism m : default_mechanisms())
        names.push_back(mechanism_info(m).name);
    return joined(names, ",");
}

std::vector<std::string> mechanism_name_list(const std::vector<Mechanism>& mechanisms)
{
    std::vector<std::string> out;
    for (const Mechanism m : mechanisms)
        out.emplace_back(mechanism_info(m).name);
    return out;
}

std::vector<std::string_view> mechanism_names()
{
    std::vector<std::string_view> out;
    for (const MechanismInfo& info : mechanism_table())
        out.push_back(info.name);
    return out;
}

std::string_view to_string(Mechanism m)
{
    for (const MechanismInfo& info : mechanism_table())
        if (info.id == m)
            return info.name;
    return "?";
}

Mechanism parse_mechanism(std::string_view s)
{
    for (const MechanismInfo& info : mechanism_table())
        if (info.name == s)
            return info.id;
    throw std::invalid_argument("unknown mechanism '" + std::string(s) + "' (valid: " + joined(mechanism_names()) + ")");
}

double softmax_scale(const AttentionOptions& options, Index d)
{
    return options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(d));
}

AttentionOptions effective_options(Mechanism m, const AttentionOptions& options)
{
    AttentionOptions o = options;
    if (!mechanism_info(m).takes(opt_normalize))
        o.normalize = Normalize::row;
    return o;
}

namespace {

// A causal-only mechanism asked for without the mask, in words; empty otherwise.
std::string mask_problem(const MechanismInfo& info, const AttentionOptions& options)
{
    if (!info.causal_only || options.causal)
        return {};
    return std::string(info.name).append(" attention is causal only (").append(info.summary).append(")");
}

}  // namespace

std::string mechanism_problem(Mechanism m, const AttentionOptions& options, Index n)
{
    const MechanismInfo& info = mechanism_info(m);
    if (std::string p = mask_problem(info, options); !p.empty())
        return p;
    return info.problem(effective_options(m, options), n);
}

std::unique_ptr<AttentionOperator> make_operator(Mechanism mechanism, const Eigen::Ref<const MatrixXd>& Q,
                                                 const Eigen::Ref<const MatrixXd>& K, const AttentionOptions& options)
{
    check_queries_and_keys(Q, K);
    const MechanismInfo& info = mechanism_info(mechanism);
    if (const std::string p = mask_problem(info, options); !p.empty())
        throw std::invalid_argument(p);
    return info.make(Q, K, options);
}

}  // namespace attnscope::attention
