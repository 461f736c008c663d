// The options of one analysis that depend on the inputs it reads: the query head (decay's default gamma, a
// per-head mixing file) and the gates of `gated` read from their tensor; see inputs.h.
#include <string>

#include "analysis/inputs.h"
#include "io/tensor_file.h"
#include "util/error.h"

namespace attnscope::analysis {

namespace {

std::string shape_text(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s.append(i ? ", " : "").append(std::to_string(shape[i]));
    return s + "]";
}

}  // namespace

io::TensorRef gates_ref(const attention::GateSpec& gates)
{
    return gates.tensor ? *gates.tensor : io::parse_tensor_ref(gates.source);
}

Eigen::VectorXd load_gates(const attention::GateSpec& gates, const io::SelectedMatrix& q)
{
    const io::TensorRef ref = gates_ref(gates);
    const std::string& ref_text = ref.text;
    const auto file = io::open_tensor(ref);
    const io::TensorInfo& t = file->find(ref.name);
    std::string layout = q.layout;   // the queries' layout without the feature axis (docs/maths.md 1.8)
    layout.erase(layout.find('d'), 1);
    const std::string what = "the gates " + ref_text;
    if (t.shape.size() != layout.size())
        throw InputError(what + ": shape " + shape_text(t.shape) + " has rank " + std::to_string(t.shape.size()) +
                         ", but gates are laid out like the queries (" + q.layout + ") without their feature axis: " +
                         layout);
    const Eigen::Index n = q.values.rows();
    const std::int64_t prefix = q.tokens_in_file - n;
    std::vector<std::int64_t> start(layout.size(), 0), count(layout.size(), 1);
    for (std::size_t a = 0; a < layout.size(); ++a) {
        const char axis = layout[a];
        if (axis == 'n') {
            if (t.shape[a] != q.tokens_in_file)
                throw InputError(what + ": " + std::to_string(t.shape[a]) + " tokens (shape " + shape_text(t.shape) +
                                 "), but the queries have " + std::to_string(q.tokens_in_file));
            start[a] = prefix;
            count[a] = n;
            continue;
        }
        const auto it = q.at.find(axis);
        start[a] = it == q.at.end() ? 0 : it->second;
        if (start[a] >= t.shape[a])
            throw InputError(what + ": index " + std::string(1, axis) + "=" + std::to_string(start[a]) + " is outside shape " +
                             shape_text(t.shape) + " (the queries' selection)");
    }
    const std::vector<double> values = file->read_box(t, start, count);
    return Eigen::Map<const Eigen::VectorXd>(values.data(), static_cast<Eigen::Index>(values.size()));
}

attention::AttentionOptions options_for_inputs(const attention::AttentionOptions& options, const LoadedInputs& in)
{
    attention::AttentionOptions o = with_head_mixing(options, in.heads);
    if (!o.gates.source.empty() && o.gates.values.size() == 0)
        o.gates.values = load_gates(o.gates, in.q);
    return o;
}

}  // namespace attnscope::analysis
