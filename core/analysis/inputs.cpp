#include "analysis/inputs.h"

#include <stdexcept>

#include "io/tensor_file.h"
#include "util/error.h"

namespace attnscope::analysis {

namespace {

// `query_rank`: rank of the queries' tensor, or 0 when loading the queries themselves. Keys or values
// of another rank with the default layout (e.g. keys [N, d] shared by every head, multi-query
// attention) take only the --at indices of the axes they have.
io::SelectedMatrix load_one(const std::string& ref_text, const io::AxisSelection& sel, const std::string& option,
                            std::size_t query_rank, std::size_t* rank_out = nullptr)
{
    const io::TensorRef ref = io::parse_tensor_ref(ref_text);
    const auto file = io::open_tensor_file(ref.file);
    const io::TensorInfo& info = file->find(ref.name);
    if (rank_out)
        *rank_out = info.shape.size();
    io::AxisSelection own = sel;
    if (query_rank != 0 && sel.layout.empty() && info.shape.size() != query_rank) {
        static const char* defaults[] = {"", "", "nd", "hnd", "bhnd"};
        const std::string layout = info.shape.size() < 5 ? defaults[info.shape.size()] : "";
        std::erase_if(own.at, [&](const auto& kv) { return layout.find(kv.first) == std::string::npos; });
    }
    return io::load_selected(*file, ref.name, own, option + " " + ref_text);
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
    const io::TensorRef ref = io::parse_tensor_ref(source.q_ref);
    const auto file = io::open_tensor_file(ref.file);
    const io::TensorInfo& info = file->find(ref.name);
    const std::string layout = io::resolve_layout(info, source.selection, "--q " + source.q_ref);
    const auto axis = layout.find('n');
    const auto tokens = info.shape[axis] - source.selection.prefix_tokens;
    if (tokens < 1)
        throw InputError("--q " + source.q_ref + ": --prefix-tokens " + std::to_string(source.selection.prefix_tokens) +
                         " leaves no token of " + std::to_string(info.shape[axis]));
    return tokens;
}

LoadedInputs load_inputs(const std::string& q_ref, const std::string& k_ref, const std::optional<std::string>& v_ref,
                         const io::AxisSelection& selection)
{
    LoadedInputs in;
    std::size_t q_rank = 0;
    in.q = load_one(q_ref, selection, "--q", 0, &q_rank);
    in.k = load_one(k_ref, selection, "--k", q_rank);
    const auto n = in.q.values.rows(), d = in.q.values.cols();
    if (in.k.values.rows() != n)
        throw InputError("--k " + k_ref + " has " + std::to_string(in.k.values.rows()) + " tokens but --q " + q_ref + " has " +
                         std::to_string(n));
    if (in.k.values.cols() != d)
        throw InputError("--k " + k_ref + " has " + std::to_string(in.k.values.cols()) + " features but --q " + q_ref +
                         " has " + std::to_string(d));
    if (v_ref) {
        in.v = load_one(*v_ref, selection, "--v", q_rank);
        if (in.v->values.rows() != n)
            throw InputError("--v " + *v_ref + " has " + std::to_string(in.v->values.rows()) + " tokens but --q " + q_ref +
                             " has " + std::to_string(n));
    }

    auto& j = in.input_json;
    j["q"] = q_ref;
    j["k"] = k_ref;
    if (v_ref)
        j["v"] = *v_ref;
    j["layout"] = in.q.layout;
    j["at"] = at_json(in.q.at);
    if (in.k.layout != in.q.layout)
        j["k_layout"] = in.k.layout;
    j["prefix_tokens"] = selection.prefix_tokens;
    j["n"] = n;
    j["d"] = d;
    if (in.v)
        j["dv"] = in.v->values.cols();
    return in;
}

Eigen::MatrixXd load_matrix(const std::string& ref_text, const std::string& what)
{
    const io::TensorRef ref = io::parse_tensor_ref(ref_text);
    const auto file = io::open_tensor_file(ref.file);
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
