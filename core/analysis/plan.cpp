#include "analysis/plan.h"

#include <algorithm>
#include <cstdint>
#include <map>
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
        // A header may claim any size: the count is checked before the indices are allocated.
        if (size < 0 || static_cast<std::uint64_t>(size) > k_max_units)
            throw std::invalid_argument(choice.what + (choice.what.ends_with("=all") ? "" : " all") + ": the '" + std::string(1, axis) + "' axis has " + std::to_string(size) +
                                        " indices, over the cap of " + std::to_string(k_max_units) +
                                        " units per plan (docs/cli.md, \"Counts and caps\"); list the ones to visit");
        std::vector<Eigen::Index> v(static_cast<std::size_t>(size));
        std::iota(v.begin(), v.end(), Eigen::Index{0});
        return v;
    }
    case AxisChoice::Kind::list: {
        for (const Eigen::Index i : choice.indices)
            if (i < 0 || i >= size)
                throw std::invalid_argument(choice.what + ": index " + std::to_string(i) + " is outside 0.." +
                                            std::to_string(size - 1));
        // An index listed twice would be one unit analysed twice under one name (a long list of zeros, a
        // hundred thousand analyses of one head).
        std::vector<Eigen::Index> sorted = choice.indices;
        std::sort(sorted.begin(), sorted.end());
        if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
            throw std::invalid_argument(choice.what + ": index " + std::to_string(*twice) + " is listed twice");
        return choice.indices;
    }
    case AxisChoice::Kind::selection:
        break;
    }
    const auto it = sel.at.find(axis);
    return {it == sel.at.end() ? Eigen::Index{0} : it->second};
}

// `choice`, or all the indices when the selection gives the axis as `all` (`--at h=all`).
AxisChoice choice_with_all(const AxisChoice& choice, const io::AxisSelection& sel, char axis)
{
    if (!sel.all.count(axis))
        return choice;
    if (choice.kind != AxisChoice::Kind::selection)
        throw std::invalid_argument("axis index " + std::string(1, axis) + "=all and " + choice.what +
                                    " both choose the " + (axis == 'h' ? "heads" : "layers") + "; give one of them");
    return AxisChoice::all("axis index " + std::string(1, axis) + "=all");
}

// `u` once per index of each remaining `all` axis (others[k..]), appended to `units` in order.
void add_other_axes(Unit u, const std::vector<std::pair<char, std::vector<Eigen::Index>>>& others, std::size_t k,
                    std::vector<Unit>& units)
{
    if (k == others.size()) {
        u.index = units.size();
        units.push_back(std::move(u));
        return;
    }
    for (const Eigen::Index index : others[k].second) {
        Unit v = u;
        v.at[others[k].first] = index;
        v.source.selection.at[others[k].first] = index;
        add_other_axes(std::move(v), others, k + 1, units);
    }
}

// "/layers/3/q" -> ("/layers/", "/q", 3): the last path component made of digits only.
bool split_numeric_component(const std::string& name, std::string& before, std::string& after, Eigen::Index& value)
{
    std::size_t end = name.size();
    while (end > 0) {
        const std::size_t slash = name.rfind('/', end - 1);
        const std::size_t begin = slash == std::string::npos ? 0 : slash + 1;
        const std::string part = name.substr(begin, end - begin);
        if (!part.empty() && part.size() < 10 && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            before = name.substr(0, begin);
            after = name.substr(end);
            value = std::stol(part);
            return true;
        }
        if (slash == std::string::npos || slash == 0)
            return false;
        end = slash;
    }
    return false;
}

}  // namespace

std::vector<char> input_axes(const TensorSource& source)
{
    const io::TensorRef& ref = source.q_ref;
    const auto file = io::open_tensor(ref);
    std::vector<char> out;
    for (const char axis : io::resolve_layout(file->find(ref.name), source.selection, "--q " + ref.text))
        if (axis != 'n' && axis != 'd' && axis != 'l' && axis != 'h')
            out.push_back(axis);
    return out;
}

std::vector<Unit> plan_units(const std::vector<TensorSource>& inputs, const AxisChoice& layers, const AxisChoice& heads,
                             const std::vector<std::optional<Eigen::Index>>& input_layers)
{
    std::vector<Unit> units;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const TensorSource& src = inputs[i];
        const io::TensorRef& ref = src.q_ref;
        const auto file = io::open_tensor(ref);
        const io::TensorInfo& info = file->find(ref.name);
        const std::string layout = io::resolve_layout(info, src.selection, "--q " + ref.text);
        const auto ls = axis_values(info, layout, 'l', choice_with_all(layers, src.selection, 'l'), src.selection);
        const auto hs = axis_values(info, layout, 'h', choice_with_all(heads, src.selection, 'h'), src.selection);
        // Each other `all` axis, innermost last; each at most k_max_units, so the running product cannot overflow.
        std::vector<std::pair<char, std::vector<Eigen::Index>>> others;
        std::uint64_t count = static_cast<std::uint64_t>(std::max<std::size_t>(ls.size(), 1)) * std::max<std::size_t>(hs.size(), 1);
        for (const char axis : src.selection.all)
            if (axis != 'l' && axis != 'h') {
                others.emplace_back(axis, axis_values(info, layout, axis, AxisChoice::all("axis index " + std::string(1, axis) + "=all"),
                                                      src.selection));
                count = std::min<std::uint64_t>(count, k_max_units + 1) * std::max<std::size_t>(others.back().second.size(), 1);
            }
        if (count > k_max_units - std::min<std::uint64_t>(units.size(), k_max_units))
            throw std::invalid_argument("--q " + src.q_ref.text + ": " + std::to_string(std::min<std::uint64_t>(count, k_max_units + 1) + units.size()) +
                                        (count > k_max_units ? " or more" : "") +
                                        " units (inputs x layers x heads x other axes) are over the cap of " +
                                        std::to_string(k_max_units) + " per plan (docs/cli.md, \"Counts and caps\")");
        for (std::size_t li = 0; li < std::max<std::size_t>(ls.size(), 1); ++li)
            for (std::size_t hi = 0; hi < std::max<std::size_t>(hs.size(), 1); ++hi) {
                Unit u;
                u.input = i;
                u.source = src;
                u.source.selection.all.clear();
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
                add_other_axes(std::move(u), others, 0, units);
            }
    }
    return units;
}

std::vector<LayerTensors> layer_tensors(const io::TensorRef& qref, const io::TensorRef& kref,
                                        const std::optional<io::TensorRef>& v_ref)
{
    if (qref.array || kref.array || (v_ref && v_ref->array) || kref.file != qref.file || (v_ref && v_ref->file != qref.file))
        return {};
    const auto file = io::open_tensor(qref);
    // The numeric component of each name, and the text around it, must agree between q, k (and v).
    struct Split {
        std::string before, after;
        Eigen::Index value = 0;
    };
    auto split = [&](const std::string& ref_name, Split& out) {
        return split_numeric_component(file->find(ref_name).name, out.before, out.after, out.value);
    };
    Split q, k, v;
    if (!split(qref.name, q) || !split(kref.name, k) || k.before != q.before || k.value != q.value)
        return {};
    if (v_ref && (!split(v_ref->name, v) || v.before != q.before || v.value != q.value))
        return {};
    auto has = [&](const std::string& name) {
        for (const auto& t : file->tensors())
            if (t.name == name)
                return true;
        return false;
    };
    std::map<Eigen::Index, LayerTensors> layers;
    for (const auto& t : file->tensors()) {
        Split s;
        if (!split_numeric_component(t.name, s.before, s.after, s.value) || s.before != q.before || s.after != q.after)
            continue;
        const std::string kname = k.before + std::to_string(s.value) + k.after;
        if (!has(kname))
            continue;
        LayerTensors l{s.value, io::tensor_in(qref.file, t.name), io::tensor_in(qref.file, kname), std::nullopt};
        if (v_ref) {
            const std::string vname = v.before + std::to_string(s.value) + v.after;
            if (has(vname))
                l.v_ref = io::tensor_in(qref.file, vname);
        }
        layers[s.value] = std::move(l);
    }
    if (layers.size() < 2)
        return {};
    std::vector<LayerTensors> out;
    for (auto& [layer, l] : layers)
        out.push_back(std::move(l));
    return out;
}

bool expand_layer_datasets(std::vector<TensorSource>& sources, std::vector<std::optional<Index>>& input_layers, const AxisChoice& choice)
{
    if (choice.kind == AxisChoice::Kind::selection)
        return false;
    std::vector<TensorSource> inputs;
    std::vector<std::optional<Index>> layers;
    std::size_t expanded = 0;
    for (const TensorSource& src : sources) {
        const auto file = io::open_tensor(src.q_ref);
        const std::string layout = io::resolve_layout(file->find(src.q_ref.name), src.selection, "--q " + src.q_ref.text);
        const std::vector<LayerTensors> found =
            layout.find('l') == std::string::npos ? layer_tensors(src.q_ref, src.k_ref, src.v_ref) : std::vector<LayerTensors>{};
        if (found.empty()) {
            inputs.push_back(src);
            layers.push_back(std::nullopt);
            continue;
        }
        ++expanded;
        std::vector<Index> have;
        for (const LayerTensors& l : found) {
            have.push_back(l.layer);
            const auto& want = choice.indices;
            if (choice.kind == AxisChoice::Kind::list && std::find(want.begin(), want.end(), l.layer) == want.end())
                continue;
            inputs.push_back({l.q_ref, l.k_ref, l.v_ref, src.selection});
            layers.push_back(l.layer);
        }
        for (const Index want : choice.indices)
            if (std::find(have.begin(), have.end(), want) == have.end()) {
                std::string list;
                for (const Index h : have)
                    list += (list.empty() ? "" : ", ") + std::to_string(h);
                throw std::invalid_argument(choice.what + ": --q " + src.q_ref.text + " has no layer " + std::to_string(want) +
                                            " among its per-layer datasets (layers " + list + ")");
            }
    }
    if (expanded == 0)
        return false;   // plan_units says what is wrong with an input that has neither
    if (expanded != sources.size())
        throw std::invalid_argument(choice.what + ": some inputs hold their layers as per-layer datasets (/layers/<i>/q) and "
                                                       "others not; sweep them apart");
    sources = std::move(inputs);
    input_layers = std::move(layers);
    return true;
}


}  // namespace attnscope::analysis
