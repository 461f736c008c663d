#pragma once
// Loading the tensors an analysis needs: Q, K (and V) from tensor references with one axis selection,
// checked against each other, plus a mixing matrix from `FILE[:DATASET]`.
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "io/selection.h"

namespace attnscope::analysis {

struct LoadedInputs {
    io::SelectedMatrix q, k;
    std::optional<io::SelectedMatrix> v;
    nlohmann::ordered_json input_json;   // the "input" object of the analyze JSON
};

// Reads the selected N x d slices. Throws InputError when Q and K disagree in N or d, when V has a
// different N, or when any file or selection is bad (see io::load_selected).
LoadedInputs load_inputs(const std::string& q_ref, const std::string& k_ref, const std::optional<std::string>& v_ref,
                         const io::AxisSelection& selection);

// The indices to visit on index axis `axis` ('h', 'l', ...) of a tensor with `layout`: all of them,
// the chosen list (checked against the axis size), or the selection's own index (default 0). Empty
// when the layout has no such axis (an error if indices were asked for). `option` names the option.
std::vector<Eigen::Index> axis_values(const io::TensorInfo& info, const std::string& layout, char axis,
                                      const std::optional<std::vector<Eigen::Index>>& chosen, bool all,
                                      const io::AxisSelection& sel, const std::string& option);

// Defaults a file can carry for its own analysis (written by tools/python/attnscope_dump.py and
// `attnscope synth`): `prefix_tokens` (int), `grid` (int array: the token grid after the prefix tokens)
// and `causal` (bool). The queries' dataset attributes come first, then the file's root attributes.
struct FileDefaults {
    std::optional<std::int64_t> prefix_tokens;
    std::vector<Eigen::Index> grid;
    std::optional<bool> causal;
};
FileDefaults file_defaults(const std::string& q_ref);

// True when `text` names a mixing preset rather than a file.
bool is_mixing_preset(const std::string& text);

// Reads a 2-D matrix (e.g. a learned mixing matrix) from `FILE[:DATASET]`. Throws InputError when it
// is not 2-D, not finite, or too large (more than 4096 x 4096).
Eigen::MatrixXd load_matrix(const std::string& ref_text);

}  // namespace attnscope::analysis
