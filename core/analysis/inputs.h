#pragma once
// Loading the tensors an analysis needs: Q, K (and V) from tensor references with one axis selection,
// checked against each other, plus a mixing matrix from `FILE[:DATASET]`. Only headers are read until
// load_inputs() / load_matrix() read data.
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "attention/options.h"
#include "io/selection.h"

namespace attnscope::analysis {

// Where one analysis reads its queries and keys (and values): tensor references and one axis selection.
// The references are parsed once, where the text enters (io::parse_tensor_ref), or hold arrays in memory.
struct TensorSource {
    io::TensorRef q_ref, k_ref;
    std::optional<io::TensorRef> v_ref;
    io::AxisSelection selection;
};

// Tokens the selection yields (after prefix tokens) without reading tensor data; throws like load_inputs.
Eigen::Index selected_tokens(const TensorSource& source);

// Which key/value head the selected query head pairs with (docs/maths.md 1.7): the same head when keys
// have as many heads as queries (H); head h // (H / Hk) when they have fewer, Hk dividing H (grouped-query
// attention; multi-query when Hk = 1); --kv-head when given. Reads headers only.
struct HeadPairing {
    std::optional<Eigen::Index> q_head, kv_head;   // absent when the queries / keys have no 'h' axis
    Eigen::Index heads = 0, kv_heads = 0;          // H and Hk (0 without an 'h' axis)
    bool grouped() const { return q_head && kv_head && heads != kv_heads; }
};
// Throws InputError naming both head counts when Hk does not divide H (or exceeds it), and
// std::invalid_argument for a --kv-head outside the keys' heads.
HeadPairing pair_heads(const io::TensorRef& q_ref, const io::TensorRef& k_ref, const io::AxisSelection& selection);

struct LoadedInputs {
    io::SelectedMatrix q, k;
    std::optional<io::SelectedMatrix> v;
    HeadPairing heads;                   // the query head and the key/value head it pairs with
    nlohmann::ordered_json input_json;   // the "input" object of the analyze JSON (kv_head when grouped or chosen)
};

// Bytes a run over these inputs needs at its peak, from their headers alone: every selected slice as
// float64, the largest once more (it is copied while read), and the least working space any analysis of
// them needs (analysis::streaming_memory_bytes of one mechanism's streamed entropy; analyze() checks its
// own options and metrics before any work). Compressed files are measured by what they decompress to.
std::uint64_t input_budget_bytes(const io::TensorRef& q_ref, const io::TensorRef& k_ref, const std::optional<io::TensorRef>& v_ref,
                                 const io::AxisSelection& selection);

// Reads the selected N x d slices, keys and values at the key/value head pair_heads() gives. First checks
// input_budget_bytes() against the memory limit (io::read_limit_bytes(), --max-memory) from the headers, so
// that no input is decompressed or widened when the whole run cannot fit. Throws
// InputError when Q and K disagree in N or d, when V has a different N, or when any file or selection is
// bad (see io::load_selected).
LoadedInputs load_inputs(const io::TensorRef& q_ref, const io::TensorRef& k_ref, const std::optional<io::TensorRef>& v_ref,
                         const io::AxisSelection& selection);

// Reads a 2-D matrix (e.g. a learned mixing matrix) from `FILE[:DATASET]`. Throws InputError naming `what`
// and the reference when it is not 2-D, not finite, or too large (more than 4096 x 4096).
Eigen::MatrixXd load_matrix(const io::TensorRef& ref, const std::string& what = "--mixing");

// Reads a learned mixing matrix into `spec` (docs/maths.md 1.6): FILE[:DATASET] holding one M x M matrix
// (spec.matrix) or one per query head, H x M x M (spec.head_matrices, of which with_head_mixing() takes the
// analysed head's). spec.preset names the reference. Throws InputError naming `what` like load_matrix().
void load_mixing(attention::MixingSpec& spec, const io::TensorRef& ref, const std::string& what = "--mixing");

// `options` for the query head `heads` selects: the head as query_head (decay's default gamma, docs/maths.md
// 1.8); with a per-head mixing file, that head's matrix as mixing.matrix and the head in mixing.head. Throws
// InputError when the file's head count differs from the queries' or the queries have no head axis.
attention::AttentionOptions with_head_mixing(const attention::AttentionOptions& options, const HeadPairing& heads);

// The N gates of `gated` (docs/maths.md 1.8) at the queries' selection: the tensor gates.tensor (an array) or
// the reference gates.source `FILE[:NAME]` is laid out
// like the queries without their feature axis (same index axes and tokens; prefix tokens dropped alike).
// Values are returned as stored (g, or ln g); the operator checks them. Throws InputError naming the tensor.
Eigen::VectorXd load_gates(const attention::GateSpec& gates, const io::SelectedMatrix& q);

// Where the gates are read: gates.tensor, else the reference gates.source parsed.
io::TensorRef gates_ref(const attention::GateSpec& gates);

// with_head_mixing() for the loaded inputs, plus the gates read (load_gates) when options.gates names a tensor
// and holds no values yet: the options every analysis of `in` computes with.
attention::AttentionOptions options_for_inputs(const attention::AttentionOptions& options, const LoadedInputs& in);

}  // namespace attnscope::analysis
