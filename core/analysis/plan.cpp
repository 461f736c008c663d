#include "analysis/plan.h"

#include <numeric>
#include <stdexcept>
#include <string>

#include "io/tensor_file.h"

namespace attnscope::analysis {

namespace {

// The indices to visit on index axis `axis` of a tensor with `layout` (empty when the layout has no such axis).
std::vector<Eigen::Index> axis_values(const io::TensorInfo& info, const std::string& layout, char axis,
                                      const AxisChoice& choice, const io::AxisSelection& sel)
{
    const auto pos = layout.find(axis);
    if (pos == std::string::npos) {
        if (choice.kind != AxisChoice::Kind::selection)
            throw std::invalid_argument(choice.what + ": the layout " + layout + " has no '" + std::string(1, axis) + "' axis");
        return {};
    }
    const Eigen::Index size = info.shape[pos];
    switch (choice.kind) {
    case AxisChoice::Kind::all: {
        std::vector<Eigen::Index> v(static_cast<std::size_t>(size));
        std::iota(v.begin(), v.end(), Eigen::Index{0});
        return v;
    }
    case AxisChoice::Kind::list:
        for (const Eigen::Index i : choice.indices)
            if (i < 0 || i >= size)
                throw std::invalid_argument(choice.what + ": index " + std::to_string(i) + " is outside 0.." +
                                            std::to_string(size - 1));
        return choice.indices;
    case AxisChoice::Kind::selection:
        break;
    }
    const auto it = sel.at.find(axis);
    return {it == sel.at.end() ? Eigen::Index{0} : it->second};
}

}  // namespace

std::vector<Unit> plan_units(const std::vector<TensorSource>& inputs, const AxisChoice& layers, const AxisChoice& heads,
                             const std::vector<std::optional<Eigen::Index>>& input_layers)
{
    std::vector<Unit> units;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const TensorSource& src = inputs[i];
        const io::TensorRef ref = io::parse_tensor_ref(src.q_ref);
        const auto file = io::open_tensor_file(ref.file);
        const io::TensorInfo& info = file->find(ref.name);
        const std::string layout = io::resolve_layout(info, src.selection, "--q " + src.q_ref);
        const auto ls = axis_values(info, layout, 'l', layers, src.selection);
        const auto hs = axis_values(info, layout, 'h', heads, src.selection);
        for (std::size_t li = 0; li < std::max<std::size_t>(ls.size(), 1); ++li)
            for (std::size_t hi = 0; hi < std::max<std::size_t>(hs.size(), 1); ++hi) {
                Unit u;
                u.index = units.size();
                u.input = i;
                u.source = src;
                if (i < input_layers.size())
                    u.layer = input_layers[i];
                if (!ls.empty()) {
                    u.layer = ls[li];
                    u.source.selection.at['l'] = ls[li];
                }
                if (!hs.empty()) {
                    u.head = hs[hi];
                    u.source.selection.at['h'] = hs[hi];
                }
                units.push_back(std::move(u));
            }
    }
    return units;
}

}  // namespace attnscope::analysis
