#pragma once
// Tensor references (`FILE[:NAME]`) and axis selection (`--layout`, `--at`, `--head`,
// `--prefix-tokens`), exactly as docs/cli.md defines them.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <Eigen/Core>

#include "io/memory_tensor.h"
#include "io/tensor_file.h"

namespace attnscope::io {

// Where one tensor is read from: parsed once where the user's text enters (the command line, a job, a
// session, a Python argument) and passed on as is. Either a file and a tensor in it, or an array in memory.
struct TensorRef {
    std::string file;   // path as given (for an array: its name in messages, e.g. "<q: float32 array (64, 32)>")
    std::string name;   // dataset / member / tensor name; empty = the only tensor
    std::string text;   // the reference as the user wrote it (for an array: its name)
    std::shared_ptr<const ArrayView> array;   // an in-memory tensor (io/memory_tensor.h) instead of a file
    bool operator==(const TensorRef&) const = default;
};

// The tensor `name` of `file` (no parsing: the file part is `file` whatever it holds); text "FILE:NAME".
TensorRef tensor_in(std::string file, std::string name);

// An in-memory tensor as a reference called `name` in messages.
TensorRef array_ref(std::string name, ArrayView view);

// The file a reference names (opened by extension, io/tensor_file.h), or a view of its array.
std::unique_ptr<TensorFile> open_tensor(const TensorRef& ref);

// Splits `FILE[:NAME]`. The file part ends at the first recognised extension (.h5 .hdf5 .npy .npz
// .safetensors) followed by ':' or the end, so folders containing ':' work. Throws InputError for an
// empty reference and for a NAME given to a .npy file.
TensorRef parse_tensor_ref(std::string_view text);

// Parses "a=i,b=j" into {'a': i, 'b': j}. Throws std::invalid_argument naming the bad item.
std::map<char, std::int64_t> parse_at(std::string_view text);

// Parses "a=i,b=all": the indices into `at` (as parse_at), the axes given as `all` into `all`. Throws
// std::invalid_argument naming the bad item, or an axis given twice (b=1,b=all).
void parse_at_units(std::string_view text, std::map<char, std::int64_t>& at, std::set<char>& all);

struct AxisSelection {
    std::string layout;                  // one letter per axis; empty = default by rank (nd, hnd, bhnd)
    std::map<char, std::int64_t> at;     // index per index axis; absent = 0
    // Index axes whose every index is its own unit (`--at b=all`): the unit planner (analysis/plan.h)
    // expands them into selections with one index each; a selection still holding one is never read.
    std::set<char> all;
    std::int64_t prefix_tokens = 0;      // tokens dropped from the front
    std::optional<std::int64_t> kv_head; // --kv-head: the key/value head, instead of the grouped-query pairing
};

// The layout used for a tensor of rank `rank` under `sel` (validates: one 'n', one 'd', distinct
// letters, length == rank; every --at key names an index axis of the layout and is in range).
// A layout that is malformed in itself ("nnd", "b1nd", no 'n') or an --at on 'n'/'d' throws
// std::invalid_argument; a layout or index that does not fit this tensor (wrong rank, axis not in the
// layout, index out of range, rank without a default) throws InputError prefixed with `what`.
std::string resolve_layout(const TensorInfo& tensor, const AxisSelection& sel, std::string_view what);

struct SelectedMatrix {
    Eigen::MatrixXd values;              // N by d, one token per row (after dropping prefix tokens)
    std::string layout;                  // resolved layout
    std::map<char, std::int64_t> at;     // index taken on every index axis (defaults filled in)
    std::int64_t tokens_in_file = 0;     // N before dropping prefix tokens
};

// Reads only the selected N x d slice of `tensor_name` in `file`. `what` names the option for
// messages (e.g. "--q acts.h5:/q"). Throws InputError on non-finite values ("--q acts.h5:/q:
// non-finite value nan at token 3, feature 5 (selection h=2)"; the token is counted in the file,
// before dropping prefix tokens), on a bad layout or index (see resolve_layout), on a tensor with no
// token or no feature, or when prefix tokens leave no token.
SelectedMatrix load_selected(const TensorFile& file, std::string_view tensor_name, const AxisSelection& sel,
                             std::string_view what);

}  // namespace attnscope::io
