#include "io/selection.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "io/detail.h"
#include "util/error.h"

namespace attnscope::io {

namespace {

// Extensions that end the file part of a reference. The refused (pickle) ones are here too so that
// "model.pt:q" splits into "model.pt" and is then refused with advice.
constexpr std::array<std::string_view, 11> kRefExtensions = {".safetensors", ".hdf5", ".h5",  ".npy", ".npz",   ".pickle",
                                                             ".ckpt",        ".pth",  ".pkl", ".bin", ".pt"};

bool iequals(std::string_view a, std::string_view b)
{
    if (a.size() != b.size())
        return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
            return false;
    return true;
}

std::string_view trim(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return s;
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string value_text(double v)
{
    if (std::isnan(v))
        return "nan";
    if (std::isinf(v))
        return v > 0 ? "inf" : "-inf";
    return fmt::format("{}", v);
}

}  // namespace

TensorRef tensor_in(std::string file, std::string name)
{
    TensorRef ref;
    ref.text = name.empty() ? file : file + ":" + name;
    ref.file = std::move(file);
    ref.name = std::move(name);
    return ref;
}

TensorRef array_ref(std::string name, ArrayView view)
{
    TensorRef ref;
    ref.file = name;
    ref.text = std::move(name);
    ref.array = std::make_shared<const ArrayView>(std::move(view));
    return ref;
}

std::unique_ptr<TensorFile> open_tensor(const TensorRef& ref)
{
    return ref.array ? open_memory_tensor(ref.text, *ref.array) : open_tensor_file(ref.file);
}

TensorRef parse_tensor_ref(std::string_view text)
{
    if (trim(text).empty())
        throw InputError("empty tensor reference (expected FILE or FILE:NAME)");
    TensorRef ref;
    ref.text = std::string(text);
    ref.file = std::string(text);
    bool split = false;
    for (std::size_t pos = text.find('.'); pos != std::string_view::npos && !split; pos = text.find('.', pos + 1)) {
        for (const std::string_view ext : kRefExtensions) {
            const std::size_t end = pos + ext.size();
            if (end > text.size() || !iequals(text.substr(pos, ext.size()), ext))
                continue;
            if (end == text.size() || text[end] == ':') {
                ref.file = std::string(text.substr(0, end));
                ref.name = end == text.size() ? std::string() : std::string(text.substr(end + 1));
                split = true;
                break;
            }
        }
    }
    if (!ref.name.empty() && ref.file.size() >= 4 && iequals(std::string_view(ref.file).substr(ref.file.size() - 4), ".npy"))
        throw InputError(fmt::format("{}: a .npy file holds one unnamed tensor; write {} without ':{}'", ref.text,
                                     ref.file, ref.name));
    return ref;
}

std::map<char, std::int64_t> parse_at(std::string_view text)
{
    std::map<char, std::int64_t> out;
    if (trim(text).empty())
        return out;
    std::size_t begin = 0;
    while (begin <= text.size()) {
        const std::size_t comma = text.find(',', begin);
        const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
        const std::string_view item = trim(text.substr(begin, end - begin));
        const auto eq = item.find('=');
        if (item.empty())
            throw std::invalid_argument(fmt::format("axis indices {}: empty item (expected LETTER=INDEX, e.g. h=2,b=0)", text));
        if (eq == std::string_view::npos)
            throw std::invalid_argument(fmt::format("axis indices: item '{}' is not LETTER=INDEX (e.g. h=2)", item));
        const std::string_view key = trim(item.substr(0, eq));
        const std::string_view value = trim(item.substr(eq + 1));
        if (key.size() != 1 || !is_letter(key[0]))
            throw std::invalid_argument(fmt::format("axis indices: item '{}': the axis must be a single letter", item));
        std::int64_t index = 0;
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), index);
        if (value.empty() || value.front() == '-' || value.front() == '+' || ec != std::errc() ||
            ptr != value.data() + value.size())
            throw std::invalid_argument(fmt::format("axis indices: item '{}': the index must be a non-negative integer", item));
        if (!out.emplace(key[0], index).second)
            throw std::invalid_argument(fmt::format("axis indices {}: axis '{}' is given twice", text, key[0]));
        if (comma == std::string_view::npos)
            break;
        begin = comma + 1;
    }
    return out;
}

void parse_at_units(std::string_view text, std::map<char, std::int64_t>& at, std::set<char>& all)
{
    // The `all` items are taken out; the rest is parse_at's (with its messages).
    std::string rest;
    std::size_t begin = 0, kept = 0;
    while (!trim(text).empty() && begin <= text.size()) {
        const std::size_t comma = text.find(',', begin);
        const std::size_t end = comma == std::string_view::npos ? text.size() : comma;
        const std::string_view item = trim(text.substr(begin, end - begin));
        if (item.empty())
            throw std::invalid_argument(fmt::format("axis indices {}: empty item (expected LETTER=INDEX, e.g. h=2,b=0)", text));
        const auto eq = item.find('=');
        const std::string_view key = eq == std::string_view::npos ? item : trim(item.substr(0, eq));
        if (eq != std::string_view::npos && trim(item.substr(eq + 1)) == "all" && key.size() == 1 && is_letter(key[0])) {
            if (!all.insert(key[0]).second)
                throw std::invalid_argument(fmt::format("axis indices {}: axis '{}' is given twice", text, key[0]));
        } else {
            rest.append(kept++ ? "," : "").append(item);
        }
        if (comma == std::string_view::npos)
            break;
        begin = comma + 1;
    }
    at = parse_at(rest);
    for (const char a : all)
        if (at.count(a))
            throw std::invalid_argument(fmt::format("axis indices {}: axis '{}' is given twice", text, a));
}

std::string resolve_layout(const TensorInfo& tensor, const AxisSelection& sel, std::string_view what)
{
    const std::size_t rank = tensor.shape.size();
    const std::string shape = detail::shape_text(tensor.shape);
    std::string layout = sel.layout;
    if (layout.empty()) {
        switch (rank) {
        case 2: layout = "nd"; break;
        case 3: layout = "hnd"; break;
        case 4: layout = "bhnd"; break;
        default:
            throw InputError(fmt::format("{}: the tensor has rank {} (shape {}); give a layout with {} letters "
                                         "(n = tokens, d = features, any other letter an index axis)",
                                         what, rank, shape, rank));
        }
    } else {
        std::string seen;
        for (const char c : layout) {
            if (!is_letter(c))
                throw std::invalid_argument(fmt::format("layout {}: '{}' is not a letter (one letter per axis: n = "
                                                        "tokens, d = features, others index axes)",
                                                        layout, c));
            if (seen.find(c) != std::string::npos)
                throw std::invalid_argument(fmt::format("layout {}: letter '{}' appears twice", layout, c));
            seen += c;
        }
        if (layout.find('n') == std::string::npos || layout.find('d') == std::string::npos)
            throw std::invalid_argument(fmt::format("layout {}: needs exactly one 'n' (tokens) and one 'd' (features)",
                                                    layout));
        if (layout.size() != rank)
            throw InputError(fmt::format("{}: layout {} has {} letters but the tensor has rank {} (shape {})", what,
                                         layout, layout.size(), rank, shape));
    }
    for (const char axis : sel.all) {
        if (axis == 'n' || axis == 'd')
            throw std::invalid_argument(fmt::format("axis index {}=all: '{}' is the {} axis, not an index axis", axis, axis,
                                                    axis == 'n' ? "token" : "feature"));
        if (layout.find(axis) == std::string::npos)
            throw InputError(fmt::format("{}: axis index {}=all: axis '{}' is not in layout {} (shape {})", what, axis, axis,
                                         layout, shape));
    }
    for (const auto& [axis, index] : sel.at) {
        const auto pos = layout.find(axis);
        if (axis == 'n' || axis == 'd')
            throw std::invalid_argument(fmt::format("axis index {}={}: '{}' is the {} axis, not an index axis{}", axis, index,
                                                    axis, axis == 'n' ? "token" : "feature",
                                                    axis == 'n' ? " (drop tokens as prefix tokens instead)" : ""));
        if (pos == std::string::npos)
            throw InputError(fmt::format("{}: axis index {}={}: axis '{}' is not in layout {} (shape {})", what, axis, index,
                                         axis, layout, shape));
        if (index < 0)
            throw std::invalid_argument(fmt::format("axis index {}={}: the index must be non-negative", axis, index));
        if (index >= tensor.shape[pos])
            throw InputError(fmt::format("{}: axis index {}={} is out of range: axis {} has size {} (shape {}, layout {})",
                                         what, axis, index, axis, tensor.shape[pos], shape, layout));
    }
    return layout;
}

SelectedMatrix load_selected(const TensorFile& file, std::string_view tensor_name, const AxisSelection& sel,
                             std::string_view what)
{
    const TensorInfo& tensor = file.find(tensor_name);
    if (!sel.all.empty())
        throw std::invalid_argument(fmt::format("axis index {}=all: every index as its own unit is not possible here; "
                                                "choose one index",
                                                *sel.all.begin()));
    SelectedMatrix out;
    out.layout = resolve_layout(tensor, sel, what);
    const std::size_t rank = tensor.shape.size();
    const std::size_t n_axis = out.layout.find('n');
    const std::size_t d_axis = out.layout.find('d');
    const std::int64_t tokens = tensor.shape[n_axis];
    const std::int64_t features = tensor.shape[d_axis];
    const std::string shape = detail::shape_text(tensor.shape);
    if (tokens == 0 || features == 0)
        throw InputError(fmt::format("{}: the tensor has {} tokens and {} features (shape {}, layout {}); nothing to "
                                     "analyse",
                                     what, tokens, features, shape, out.layout));
    if (sel.prefix_tokens < 0)
        throw std::invalid_argument(fmt::format("prefix tokens {}: must be non-negative", sel.prefix_tokens));
    if (sel.prefix_tokens >= tokens)
        throw InputError(fmt::format("{}: {} prefix tokens leave no token (the tensor has {} tokens, shape {}, "
                                     "layout {})",
                                     what, sel.prefix_tokens, tokens, shape, out.layout));

    std::vector<std::int64_t> start(rank, 0), count(rank, 1);
    std::string selection;
    for (std::size_t a = 0; a < rank; ++a) {
        const char axis = out.layout[a];
        if (a == n_axis) {
            start[a] = sel.prefix_tokens;
            count[a] = tokens - sel.prefix_tokens;
        } else if (a == d_axis) {
            count[a] = features;
        } else {
            const auto it = sel.at.find(axis);
            start[a] = it == sel.at.end() ? 0 : it->second;
            out.at[axis] = start[a];
            selection += fmt::format("{}{}={}", selection.empty() ? "" : ",", axis, start[a]);
        }
    }
    out.tokens_in_file = tokens;

    const std::vector<double> values = file.read_box(tensor, start, count);
    const Eigen::Index rows = tokens - sel.prefix_tokens, cols = features;
    if (n_axis < d_axis)
        out.values = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(values.data(), rows, cols);
    else   // stored [d, n] row-major is [n, d] column-major
        out.values = Eigen::Map<const Eigen::MatrixXd>(values.data(), rows, cols);

    if (!out.values.allFinite()) {
        for (Eigen::Index t = 0; t < rows; ++t)
            for (Eigen::Index f = 0; f < cols; ++f)
                if (!std::isfinite(out.values(t, f)))
                    throw InputError(fmt::format("{}: non-finite value {} at token {}, feature {}{}", what,
                                                 value_text(out.values(t, f)), t + sel.prefix_tokens, f,
                                                 selection.empty() ? std::string() : " (selection " + selection + ")"));
    }
    return out;
}

}  // namespace attnscope::io
