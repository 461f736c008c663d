#include "analysis/inputs.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "analysis/measure.h"
#include "attention/mechanisms.h"
#include "io/tensor_file.h"
#include "util/error.h"

namespace attnscope::analysis {

namespace {

// The selection keys or values of rank `rank` are read with: keys or values of another rank with the
// default layout (e.g. keys [N, d] shared by every head) take only the --at indices of the axes they have.
io::AxisSelection selection_for(const io::AxisSelection& sel, std::size_t rank, std::size_t query_rank)
{
    io::AxisSelection own = sel;
    own.kv_head.reset();
    if (sel.layout.empty() && rank != query_rank) {
        static const char* defaults[] = {"", "", "nd", "hnd", "bhnd"};
        const std::string layout = rank < 5 ? defaults[rank] : "";
        std::erase_if(own.at, [&](const auto& kv) { return layout.find(kv.first) == std::string::npos; });
    }
    return own;
}

struct Opened {
    std::unique_ptr<io::TensorFile> file;
    const io::TensorInfo* info = nullptr;
    std::string name;
};

Opened open_ref(const io::TensorRef& ref)
{
    Opened o;
    o.file = io::open_tensor(ref);
    o.info = &o.file->find(ref.name);
    o.name = ref.name;
    return o;
}

// The size of the 'h' axis of a tensor under `sel` (0 without one).
Eigen::Index head_count(const io::TensorInfo& info, const io::AxisSelection& sel, const std::string& what)
{
    io::AxisSelection layout_only = sel;
    layout_only.at.clear();
    const std::string layout = io::resolve_layout(info, layout_only, what);
    const auto pos = layout.find('h');
    return pos == std::string::npos ? 0 : info.shape[pos];
}

nlohmann::ordered_json at_json(const std::map<char, std::int64_t>& at)
{
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [axis, index] : at)
        j[std::string(1, axis)] = index;
    return j;
}

}  // namespace

Eigen::Index selected_tokens(const TensorSource& source)
{
    const io::TensorRef& ref = source.q_ref;
    const auto file = io::open_tensor(ref);
    const io::TensorInfo& info = file->find(ref.name);
    const std::string layout = io::resolve_layout(info, source.selection, "--q " + source.q_ref.text);
    const auto axis = layout.find('n');
    const auto tokens = info.shape[axis] - source.selection.prefix_tokens;
    if (tokens < 1)
        throw InputError("--q " + source.q_ref.text + ": " + std::to_string(source.selection.prefix_tokens) + " prefix tokens" +
                         " leave no token of " + std::to_string(info.shape[axis]));
    return tokens;
}

HeadPairing pair_heads(const io::TensorRef& q_ref, const io::TensorRef& k_ref, const io::AxisSelection& selection)
{
    const Opened q = open_ref(q_ref);
    const Opened k = open_ref(k_ref);
    HeadPairing p;
    p.heads = head_count(*q.info, selection, "--q " + q_ref.text);
    const io::AxisSelection ksel = selection_for(selection, k.info->shape.size(), q.info->shape.size());
    p.kv_heads = head_count(*k.info, ksel, "--k " + k_ref.text);
    if (p.heads > 0) {
        const auto it = selection.at.find('h');
        p.q_head = it == selection.at.end() ? 0 : it->second;
    }
    if (p.kv_heads == 0) {
        if (selection.kv_head)
            throw std::invalid_argument("key/value head " + std::to_string(*selection.kv_head) + ": the keys " + k_ref.text +
                                        " have no head axis");
        return p;
    }
    if (selection.kv_head) {
        if (*selection.kv_head < 0 || *selection.kv_head >= p.kv_heads)
            throw std::invalid_argument("key/value head " + std::to_string(*selection.kv_head) + " is outside 0.." +
                                        std::to_string(p.kv_heads - 1) + " (the keys " + k_ref.text + " have " +
                                        std::to_string(p.kv_heads) + " heads)");
        p.kv_head = *selection.kv_head;
        return p;
    }
    const Eigen::Index h = p.q_head.value_or(0);
    if (p.heads == 0 || p.kv_heads == p.heads) {
        p.kv_head = p.heads == 0 ? std::optional<Eigen::Index>{} : std::optional<Eigen::Index>{h};
        if (!p.kv_head) {   // queries without heads: keys at their own --at h (default 0)
            const auto it = ksel.at.find('h');
            p.kv_head = it == ksel.at.end() ? 0 : it->second;
        }
        return p;
    }
    if (p.kv_heads > p.heads || p.heads % p.kv_heads != 0)
        throw InputError("--q " + q_ref.text + " has " + std::to_string(p.heads) + " heads and --k " + k_ref.text + " has " +
                         std::to_string(p.kv_heads) + ": grouped-query attention needs the query heads to be a multiple "
                         "of the key/value heads (docs/maths.md 1.7); give --kv-head to choose one");
    p.kv_head = h / (p.heads / p.kv_heads);
    return p;
}

namespace {

// The selected slice of one tensor: tokens after the prefix and features, from its header.
std::pair<std::uint64_t, std::uint64_t> slice_size(const Opened& t, const io::AxisSelection& sel, const std::string& what)
{
    io::AxisSelection layout_only = sel;   // the indices are checked (and paired) when the slice is read
    layout_only.at.clear();
    const std::string layout = io::resolve_layout(*t.info, layout_only, what);
    const auto n = t.info->shape[layout.find('n')], d = t.info->shape[layout.find('d')];
    const std::int64_t tokens = std::max<std::int64_t>(0, n - sel.prefix_tokens);
    return {static_cast<std::uint64_t>(tokens), static_cast<std::uint64_t>(d)};
}

std::string byte_text(std::uint64_t b)
{
    char buf[64];
    if (b >= (1ULL << 30))
        std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / static_cast<double>(1ULL << 30));
    else
        std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / static_cast<double>(1ULL << 20));
    return buf;
}

}  // namespace

std::uint64_t input_budget_bytes(const io::TensorRef& q_ref, const io::TensorRef& k_ref, const std::optional<io::TensorRef>& v_ref,
                                 const io::AxisSelection& selection)
{
    const Opened q = open_ref(q_ref);
    const std::size_t q_rank = q.info->shape.size();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> slices{slice_size(q, selection, "--q " + q_ref.text)};
    const Opened k = open_ref(k_ref);
    slices.push_back(slice_size(k, selection_for(selection, k.info->shape.size(), q_rank), "--k " + k_ref.text));
    if (v_ref) {
        const Opened v = open_ref(*v_ref);
        slices.push_back(slice_size(v, selection_for(selection, v.info->shape.size(), q_rank), "--v " + v_ref->text));
    }
    long double total = 0, largest = 0;
    for (const auto& [n, d] : slices) {
        const long double bytes = static_cast<long double>(n) * static_cast<long double>(d) * 8.0L;
        total += bytes;
        largest = std::max(largest, bytes);
    }
    // The least any analysis of them holds besides Q and K (one mechanism's streamed entropy, measure.h: the
    // first default mechanism's, softmax's, the lightest);
    // analyze() checks its own options and metrics before any work.
    const auto [n, d] = slices.front();
    MetricOptions entropy_only;
    entropy_only.spectrum = false;
    const long double light = static_cast<long double>(streaming_memory_bytes(
                                  static_cast<Index>(n), static_cast<Index>(d), {attention::default_mechanisms().front()}, {}, entropy_only)) -
                              2.0L * static_cast<long double>(n) * static_cast<long double>(d) * 8.0L;
    const long double need = total + largest + light;
    return need > 1.8e19L ? UINT64_MAX : static_cast<std::uint64_t>(need);
}

LoadedInputs load_inputs(const io::TensorRef& q_ref, const io::TensorRef& k_ref, const std::optional<io::TensorRef>& v_ref,
                         const io::AxisSelection& selection)
{
    const std::uint64_t need = input_budget_bytes(q_ref, k_ref, v_ref, selection);
    if (need > io::read_limit_bytes())
        throw MemoryLimitError("--q " + q_ref.text + ", --k " + k_ref.text + ": the run needs about " + byte_text(need) +
                               " (the selected queries, keys" + (v_ref ? std::string(" and values") : std::string()) +
                               " as float64 and the analysis' working space), above the memory limit of " +
                               byte_text(io::read_limit_bytes()) + "; nothing was read");
    LoadedInputs in;
    const Opened q = open_ref(q_ref);
    const std::size_t q_rank = q.info->shape.size();
    io::AxisSelection qsel = selection;
    qsel.kv_head.reset();
    in.q = io::load_selected(*q.file, q.name, qsel, "--q " + q_ref.text);
    in.heads = pair_heads(q_ref, k_ref, selection);
    // Keys (and values) at the paired head; values follow keys, unless they have as many heads as queries.
    auto load_kv = [&](const io::TensorRef& ref, const std::string& option) {
        const Opened t = open_ref(ref);
        io::AxisSelection own = selection_for(selection, t.info->shape.size(), q_rank);
        const Eigen::Index count = head_count(*t.info, own, option + " " + ref.text);
        if (in.heads.kv_head && count == in.heads.kv_heads)
            own.at['h'] = *in.heads.kv_head;
        else if (in.heads.q_head && count == in.heads.heads)
            own.at['h'] = *in.heads.q_head;
        return io::load_selected(*t.file, t.name, own, option + " " + ref.text);
    };
    in.k = load_kv(k_ref, "--k");
    const auto n = in.q.values.rows(), d = in.q.values.cols();
    if (in.k.values.rows() != n)
        throw InputError("--k " + k_ref.text + " has " + std::to_string(in.k.values.rows()) + " tokens but --q " + q_ref.text + " has " +
                         std::to_string(n));
    if (in.k.values.cols() != d)
        throw InputError("--k " + k_ref.text + " has " + std::to_string(in.k.values.cols()) + " features but --q " + q_ref.text +
                         " has " + std::to_string(d));
    if (v_ref) {
        in.v = load_kv(*v_ref, "--v");
        if (in.v->values.rows() != n)
            throw InputError("--v " + v_ref->text + " has " + std::to_string(in.v->values.rows()) + " tokens but --q " + q_ref.text +
                             " has " + std::to_string(n));
    }

    auto& j = in.input_json;
    j["q"] = q_ref.text;
    j["k"] = k_ref.text;
    if (v_ref)
        j["v"] = v_ref->text;
    j["layout"] = in.q.layout;
    j["at"] = at_json(in.q.at);
    if (in.heads.kv_head && (in.heads.grouped() || selection.kv_head))
        j["kv_head"] = *in.heads.kv_head;
    if (in.heads.grouped())
        j["grouped_query"] = {{"heads", in.heads.heads}, {"kv_heads", in.heads.kv_heads}};
    if (in.k.layout != in.q.layout)
        j["k_layout"] = in.k.layout;
    j["prefix_tokens"] = selection.prefix_tokens;
    j["n"] = n;
    j["d"] = d;
    if (in.v)
        j["dv"] = in.v->values.cols();
    return in;
}

void load_mixing(attention::MixingSpec& spec, const io::TensorRef& ref, const std::string& what)
{
    const std::string& ref_text = ref.text;
    const auto file = io::open_tensor(ref);
    const io::TensorInfo& t = file->find(ref.name);
    spec.preset = ref_text;
    spec.matrix.reset();
    spec.head_matrices.clear();
    spec.head.reset();
    if (t.shape.size() == 2) {
        spec.matrix = load_matrix(ref, what);
        return;
    }
    if (t.shape.size() != 3)
        throw InputError(what + " " + ref_text + ": expected an M x M matrix or one per head (H x M x M), found rank " +
                         std::to_string(t.shape.size()));
    const std::int64_t h = t.shape[0], rows = t.shape[1], cols = t.shape[2];
    if (h < 1 || h > 4096 || rows > 4096 || cols > 4096 || h * rows * cols > (std::int64_t(1) << 26))
        throw InputError(what + " " + ref_text + ": " + std::to_string(h) + " x " + std::to_string(rows) + " x " +
                         std::to_string(cols) + " is too large (at most 4096 heads of 4096 x 4096, 2^26 entries)");
    const std::vector<double> values = file->read_all(t);
    for (std::int64_t i = 0; i < h; ++i) {
        Eigen::MatrixXd m(rows, cols);
        for (Eigen::Index r = 0; r < rows; ++r)
            for (Eigen::Index c = 0; c < cols; ++c)
                m(r, c) = values[static_cast<std::size_t>((i * rows + r) * cols + c)];
        if (!m.allFinite())
            throw InputError(what + " " + ref_text + ": head " + std::to_string(i) + "'s matrix has non-finite entries");
        spec.head_matrices.push_back(std::move(m));
    }
}

attention::AttentionOptions with_head_mixing(const attention::AttentionOptions& options, const HeadPairing& heads)
{
    attention::AttentionOptions o = options;
    o.query_head = heads.q_head.value_or(0);
    const auto& stack = options.mixing.head_matrices;
    if (stack.empty())
        return o;
    const std::string what = "the mixing matrices " + options.mixing.preset + " (one per head, " +
                             std::to_string(stack.size()) + " heads)";
    if (!heads.q_head)
        throw InputError(what + ": the queries have no head axis to choose one by");
    if (static_cast<std::size_t>(heads.heads) != stack.size())
        throw InputError(what + " do not match the queries' " + std::to_string(heads.heads) + " heads");
    o.mixing.matrix = stack[static_cast<std::size_t>(*heads.q_head)];
    o.mixing.head = *heads.q_head;
    return o;
}

Eigen::MatrixXd load_matrix(const io::TensorRef& ref, const std::string& what)
{
    const std::string& ref_text = ref.text;
    const auto file = io::open_tensor(ref);
    const io::TensorInfo& t = file->find(ref.name);
    if (t.shape.size() != 2)
        throw InputError(what + " " + ref_text + ": expected a 2-D M x M matrix, found rank " + std::to_string(t.shape.size()));
    if (t.shape[0] > 4096 || t.shape[1] > 4096)
        throw InputError(what + " " + ref_text + ": " + std::to_string(t.shape[0]) + " x " + std::to_string(t.shape[1]) +
                         " is larger than 4096 x 4096");
    const std::vector<double> values = file->read_all(t);
    Eigen::MatrixXd m(t.shape[0], t.shape[1]);
    for (Eigen::Index i = 0; i < m.rows(); ++i)
        for (Eigen::Index j = 0; j < m.cols(); ++j)
            m(i, j) = values[static_cast<std::size_t>(i * m.cols() + j)];
    if (!m.allFinite())
        throw InputError(what + " " + ref_text + ": the matrix has non-finite entries");
    return m;
}

}  // namespace attnscope::analysis
