#pragma once
// Options of the attention mechanisms, one field per option of docs/cli.md ("Mechanism options");
// meanings in docs/maths.md section 1. The names below are the one vocabulary every front end uses.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

namespace attnscope::io {
struct TensorRef;   // io/selection.h: the options hold one only to pass it on
}

namespace attnscope::attention {

using Index = Eigen::Index;

// The mechanisms of docs/maths.md section 1; what each takes and offers is in attention/mechanisms.h.
enum class Mechanism { softmax, linear, mhla, decay, gated, cosformer };
enum class FeatureMapKind { relu, elu1, identity, favor };
enum class Normalize { row, none, official };
enum class TokenOrder { raster, blocked };

std::string_view to_string(Mechanism m);
std::string_view to_string(FeatureMapKind f);
std::string_view to_string(Normalize n);
std::string_view to_string(TokenOrder o);
// Every name, in declaration order (util/names.h joins them for messages and help texts); the mechanisms'
// come from their table (attention/mechanisms.cpp), in its order.
std::vector<std::string_view> mechanism_names();
std::vector<std::string_view> feature_map_names();
std::vector<std::string_view> normalize_names();
std::vector<std::string_view> token_order_names();
// Parsers throw std::invalid_argument listing the valid names.
Mechanism parse_mechanism(std::string_view s);
FeatureMapKind parse_feature_map(std::string_view s);
Normalize parse_normalize(std::string_view s);
TokenOrder parse_token_order(std::string_view s);

struct FeatureMapOptions {
    FeatureMapKind kind = FeatureMapKind::relu;
    Index favor_features = 256;   // m, rows of the FAVOR+ projection W
    std::uint64_t seed = 0;       // seed of W (util/rng.h: splitmix64 + Box-Muller, row-major fill)
};

struct BlockSpec {
    enum class Kind { count, chunk, grid };
    Kind kind = Kind::count;
    Index blocks = 0;                  // Kind::count: M; 0 = default (min(16, N))
    Index chunk = 0;                   // Kind::chunk: C tokens per block
    std::vector<Index> grid;           // Kind::grid: token grid (G1,G2[,G3])
    std::vector<Index> block_grid;     // Kind::grid: blocks per axis (B1,B2[,B3])
    TokenOrder order = TokenOrder::raster;
};

struct MixingSpec {
    std::string preset;                      // cos linear exp gaussian local uniform identity causal; "" = default
    double sigma = 3.0;                      // exp
    double threshold = 1.5;                  // local
    std::optional<Eigen::MatrixXd> matrix;   // a matrix loaded from FILE[:DATASET] (preset then names the source)
    // A per-head file, H x M x M (docs/maths.md 1.6): one matrix per query head; the analysis of query head h
    // uses head_matrices[h] as `matrix` and records h in `head` (analysis::with_head_mixing).
    std::vector<Eigen::MatrixXd> head_matrices;
    std::optional<Eigen::Index> head;
};

// decay (docs/maths.md 1.8): P[t,j] = gamma^dist(t,j) phi(q_t) . phi(k_j).
struct DecaySpec {
    std::optional<double> gamma;   // 0 < gamma <= 1; default RetNet's schedule 1 - 2^(-5 - h) for query head h
};

// gated (docs/maths.md 1.8, causal only): P[t,j] = (prod_{i=j+1..t} g_i) phi(q_t) . phi(k_j), one gate per token.
struct GateSpec {
    std::string source;            // where the gates came from (a tensor reference), for reports
    // Where the gates are read when known already (an array from the Python module, a file's `gates`
    // attribute resolved against its folder); read instead of parsing `source` (analysis::gates_ref). Not saved
    // with the options (sessions, options JSON keep `source`). Shared: options are copied per unit.
    std::shared_ptr<const io::TensorRef> tensor;
    bool log = false;              // `values` hold ln g (Mamba-2's dt * A), not g
    Eigen::VectorXd values;        // N values of the selected head, prefix tokens dropped
};

struct AttentionOptions {
    std::optional<double> scale;   // softmax scale; default 1/sqrt(d)
    bool causal = false;
    FeatureMapOptions feature_map;
    BlockSpec blocks;
    MixingSpec mixing;
    Normalize normalize = Normalize::row;
    DecaySpec decay;
    GateSpec gates;
    Index query_head = 0;          // the query head analysed (decay's default gamma depends on it)
};

}  // namespace attnscope::attention
