#pragma once
// The one description of every attention mechanism (docs/architecture.md, "Add a mechanism"): its name and
// label, the options it reads, the masks it allows, the structure its operator offers the metrics, its
// factory, what it records about itself and the checks that need no data. Every mechanism list, default,
// help text, combo box, colour slot and parameter writer in core, app and widgets reads this table; no other
// file branches on a Mechanism value.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "attention/operator.h"
#include "attention/options.h"

namespace attnscope::attention {

// The option groups a mechanism reads (docs/cli.md, "Mechanism options"); --causal applies to all.
enum OptionGroup : unsigned {
    opt_scale = 1u << 0,         // --scale (softmax)
    opt_feature_map = 1u << 1,   // --feature-map, --favor-features, --seed
    opt_blocks = 1u << 2,        // --blocks | --chunk | --grid --block-grid --token-order
    opt_mixing = 1u << 3,        // --mixing, --mixing-sigma, --mixing-threshold
    opt_normalize = 1u << 4,     // --normalize (row | none; official where `official_normalize`)
    opt_decay = 1u << 5,         // --decay
    opt_gates = 1u << 6,         // --gates, --gates-log
    opt_grid = 1u << 7,          // --grid as token positions (decay's Manhattan distance), without blocks
};

// What an operator offers the metrics besides dense rows and products (attention/operator.h):
//  - scores: softmax's Q, K and scale (tiled scores, shared log-normalisers);
//  - kernel: kernel pieces phi_q, phi_k, blocks and mixing (low-rank factors when non-causal: the exact
//    structured spectrum; the streamed kernel entropy);
//  - rows: dense rows and products only (the generic tiled entropy; dense or matrix-free spectra).
enum class Structure { scores, kernel, rows };

struct MechanismInfo {
    Mechanism id;
    std::string_view name;       // command line, JSON, TOML, sessions: "mhla"
    std::string_view label;      // plots, tables, messages: "MHLA"
    std::string_view summary;    // one line for help texts and tooltips
    unsigned options = 0;        // OptionGroup bits
    bool causal_only = false;    // refuses non-causal attention
    bool official_normalize = false;   // takes normalize=official (docs/maths.md 1.4)
    bool default_set = false;    // in the default --mechanism list (docs/cli.md)
    bool plain_kernel_scores = false;  // its kernel scores are phi(q) . phi(k) (one pass serves all such mechanisms)
    int style_slot = 0;          // its colour, marker and pen in plots (widgets/plot_style)
    int rank_bound_factor = 0;   // rank <= factor * r (r the feature dimension) whatever the data; 0: no such bound
    Structure structure = Structure::rows;
    // The operator on Q, K (N by d, one token per row); throws std::invalid_argument for impossible options.
    std::unique_ptr<AttentionOperator> (*make)(const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                               const Eigen::Ref<const Eigen::MatrixXd>& K,
                                               const AttentionOptions& options) = nullptr;
    // The resolved parameters that shaped the matrix (the analyze JSON's "params", in this order).
    void (*params)(nlohmann::ordered_json& p, const AttentionOptions& options, Index n, Index d) = nullptr;
    // Why it cannot be computed on N tokens with these options, needing no data; empty when it can.
    std::string (*problem)(const AttentionOptions& options, Index n) = nullptr;
    // Why it is another mechanism by construction with these options (a warning in every report); empty
    // when it is not.
    std::string (*same_as)(const AttentionOptions& options, Index n) = nullptr;

    bool takes(OptionGroup g) const { return (options & g) != 0; }
    bool has_blocks() const { return takes(opt_blocks); }
    bool has_mixing() const { return takes(opt_mixing); }
};

// Every mechanism, in the order of docs/maths.md section 1 (and of every list that shows them).
const std::vector<MechanismInfo>& mechanism_table();
const MechanismInfo& mechanism_info(Mechanism m);
// The default --mechanism list (docs/cli.md: softmax, linear, mhla).
std::vector<Mechanism> default_mechanisms();
// Every mechanism of the table.
std::vector<Mechanism> all_mechanisms();
// The default list as the command line takes it: "softmax,linear,mhla".
std::string default_mechanism_text();
// The names of `mechanisms`, in their order.
std::vector<std::string> mechanism_name_list(const std::vector<Mechanism>& mechanisms);

// Softmax's scale: --scale, or 1/sqrt(d) (docs/maths.md 1.1). The one place that knows the default.
double softmax_scale(const AttentionOptions& options, Index d);

// The options `m` is computed with: what it does not read is reset to its default (linear attention is always
// row-normalised, docs/maths.md 1.3).
AttentionOptions effective_options(Mechanism m, const AttentionOptions& options);

// Why `m` cannot be computed on N tokens with `options` (mask, blocks, mixing, normalisation, decay, gates),
// needing no data; empty when it can.
std::string mechanism_problem(Mechanism m, const AttentionOptions& options, Index n);

}  // namespace attnscope::attention
