// `import attnscope` (docs/python.md): the extension module attnscope._attnscope. python/attnscope/__init__.py
// passes keyword arguments as (name, value) pairs and arrays as NumPy arrays, then calls these functions.
#include <cstring>
#include <functional>
#include <optional>
#include <type_traits>
#include <variant>
#include <vector>

#include "bridge.h"
#include "analysis/requests.h"
#include "analysis/sweep_request.h"
#include "calls.h"
#include "keywords.h"
#include "util/json_text.h"

namespace attnscope::python {

namespace {

// The `mechanism` keyword (a comma list or a list of names) into `target`; any other unknown keyword is refused.
std::function<bool(const std::string&, const py::handle&)> mechanism_keyword(std::string& target)
{
    return [&target](const std::string& key, const py::handle& value) {
        if (key != "mechanism")
            return false;
        target = keyword_text(key, value, true);
        return true;
    };
}

py::str analyze(const py::object& q, const py::object& k, const py::object& v, const py::list& options,
                const py::object& progress)
{
    CallArgs call;
    AnalyzeCall c;
    c.q = tensor_ref(call, "q", q);
    c.k = tensor_ref(call, "k", k);
    if (!v.is_none())
        c.v = tensor_ref(call, "v", v);
    const auto mechanism = mechanism_keyword(c.mechanisms);
    bind_keywords(call, c.requests, selection_group | mechanism_group | metrics_group | memory_group, options,
                  [&](const std::string& key, const py::handle& value) {
                      if (key == "metric") {   // analyze --metric: a comma list or a list of names
                          if (!value.is_none())
                              c.metric = keyword_text(key, value, true);
                          return true;
                      }
                      if (key == "no_baseline") {   // analyze --no-baseline
                          if (!py::isinstance<py::bool_>(value))
                              throw py::type_error("no_baseline: expected True or False, got " + std::string(py::str(value.get_type().attr("__name__"))));
                          c.no_baseline = value.cast<bool>();
                          return true;
                      }
                      return mechanism(key, value);
                  });
    std::string text;
    run_released(call, [&](const analysis::JobContext& ctx) { text = c.run(ctx); }, progress);
    return text;
}

// The matrix as a C-ordered float64 array, and the params and input objects as JSON text.
py::tuple matrix(const py::object& q, const py::object& k, const py::list& options, const py::object& progress)
{
    CallArgs call;
    MatrixCall c;
    c.q = tensor_ref(call, "q", q);
    c.k = tensor_ref(call, "k", k);
    bind_keywords(call, c.requests, selection_group | mechanism_group | memory_group, options,
                  mechanism_keyword(c.mechanism_text));
    analysis::DenseAttention dense;
    run_released(call, [&](const analysis::JobContext& ctx) { dense = c.run(ctx); }, progress);
    const auto n = dense.matrix.rows(), m = dense.matrix.cols();
    py::array_t<double> out(std::vector<py::ssize_t>{n, m});
    auto w = out.mutable_unchecked<2>();
    for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < m; ++j)
            w(i, j) = dense.matrix(i, j);
    return py::make_tuple(out, json_text(dense.params), json_text(dense.input));
}

py::str sweep(const py::list& qs, const py::list& ks, const py::list& options, const py::object& progress)
{
    CallArgs call;
    SweepCall c;
    for (const py::handle q : qs)
        c.q.push_back(tensor_ref(call, "q", q));
    for (const py::handle k : ks)
        c.k.push_back(tensor_ref(call, "k", k));
    bind_keywords(call, c.requests, selection_group | mechanism_group | metrics_group | memory_group | sweep_group, options,
                  mechanism_keyword(c.mechanisms));
    std::string text;
    run_released(call, [&](const analysis::JobContext& ctx) { text = c.run(ctx); }, progress);
    return text;
}

// The values as a float64 array of the tensor's (or the slice's) shape, and the attributes as JSON text.
py::tuple load(const py::object& ref, const py::list& options)
{
    CallArgs call;
    LoadCall c;
    checked_text(ref, "ref");   // a str: an array has no file to load
    c.ref = tensor_ref(call, "ref", ref);
    bind_keywords(call, c.requests, selection_group, options, [&](const std::string& key, const py::handle& value) {
        if (key != "whole")
            return false;
        c.whole = value.cast<bool>();
        return true;
    });
    LoadCall::Loaded loaded;
    run_released(call, [&](const analysis::JobContext&) { loaded = c.run(); }, py::none());
    py::array_t<double> out(std::vector<py::ssize_t>(loaded.shape.begin(), loaded.shape.end()));
    if (!loaded.values.empty())
        std::memcpy(out.mutable_data(), loaded.values.data(), loaded.values.size() * sizeof(double));
    // The path as os.fsdecode gives it (a name that is not UTF-8 keeps its bytes through surrogateescape).
    const py::str origin = py::reinterpret_steal<py::str>(
        PyUnicode_DecodeFSDefaultAndSize(loaded.origin.data(), static_cast<Py_ssize_t>(loaded.origin.size())));
    if (!origin)
        throw py::error_already_set();
    return py::make_tuple(out, json_text(loaded.attributes), origin);
}

// The descriptors of one request (analysis/requests.h) as (keyword, type, default, help, excludes, help of False)
// tuples: the
// Python keywords, their signatures and their help are generated from them (python/attnscope/__init__.py).
template <class Request>
py::list describe(const std::vector<analysis::OptionDescriptor<Request>>& table)
{
    const Request defaults{};
    py::list out;
    for (const auto& d : table) {
        py::object value = py::none();
        std::string type;
        std::visit(
            [&](auto field) {
                const auto& v = defaults.*field;
                using T = std::remove_cv_t<std::remove_reference_t<decltype(v)>>;
                if constexpr (std::is_same_v<T, bool>) {
                    type = "bool";
                    value = py::bool_(v);
                } else if constexpr (std::is_same_v<T, std::optional<bool>>) {
                    type = "bool | None";
                } else if constexpr (std::is_same_v<T, std::int64_t>) {
                    type = "int";
                    value = py::int_(v);
                } else if constexpr (std::is_same_v<T, std::optional<std::int64_t>>) {
                    type = "int | None";
                } else if constexpr (std::is_same_v<T, double>) {
                    type = "float";
                    value = py::float_(v);
                } else if constexpr (std::is_same_v<T, std::optional<double>>) {
                    type = "float | None";
                } else {
                    bool optional = true;
                    if constexpr (std::is_same_v<T, std::string>)
                        if (!v.empty()) {
                            value = py::str(v);
                            optional = false;
                        }
                    type = std::string(d.list ? "str | list" : "str") + (optional ? " | None" : "");
                }
            },
            d.field);
        py::list excludes;
        for (const std::string_view other : d.excludes)
            excludes.append(analysis::option_name(other, analysis::Spelling::keyword));
        out.append(py::make_tuple(analysis::option_name(d.name, analysis::Spelling::keyword), type, value, d.help,
                                  excludes, d.help_off));
    }
    return out;
}

py::dict option_table()
{
    py::dict groups;
    groups["selection"] = describe(analysis::selection_options());
    groups["mechanism"] = describe(analysis::mechanism_options());
    groups["metrics"] = describe(analysis::metric_options());
    groups["resources"] = describe(analysis::memory_options());
    groups["sweep"] = describe(analysis::sweep_options());
    groups["aggregate"] = describe(analysis::aggregate_options());
    groups["depth"] = describe(analysis::depth_options());
    return groups;
}

py::str aggregate(const py::object& dir, const py::list& options)
{
    CallArgs call;
    AggregateCall c;
    c.dir = checked_text(dir, "results_dir");
    bind_keywords(call, c.requests, aggregate_group | memory_group, options,
                  [](const std::string&, const py::handle&) { return false; });
    std::string text;
    run_released(call, [&](const analysis::JobContext&) { text = c.run(); }, py::none());
    return text;
}

py::str depth(const py::object& file, const py::list& options, const py::object& progress)
{
    CallArgs call;
    DepthCall c;
    c.file = checked_text(file, "file");
    bind_keywords(call, c.requests, depth_group | selection_group | mechanism_group | metrics_group | memory_group, options,
                  mechanism_keyword(c.mechanisms));
    std::string text;
    run_released(call, [&](const analysis::JobContext& ctx) { text = c.run(ctx); }, progress);
    return text;
}

py::str info(const py::object& path_object)
{
    const std::string path = checked_text(path_object, "path");
    std::string text;
    run_released({}, [&](const analysis::JobContext&) { text = info_text(path); }, py::none());
    return text;
}

}  // namespace

PYBIND11_MODULE(_attnscope, m)
{
    m.doc() = "AttnScope's core (docs/python.md); use the functions of the attnscope package";
    m.attr("__version__") = ATTNSCOPE_VERSION;
    m.attr("default_mechanisms") = attention::default_mechanism_text();
    {
        py::list names;
        for (const std::string_view n : attention::mechanism_names())
            names.append(std::string(n));
        m.attr("mechanism_names") = names;
    }
    m.def("analyze", &analyze, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("options"), py::arg("progress"));
    m.def("matrix", &matrix, py::arg("q"), py::arg("k"), py::arg("options"), py::arg("progress"));
    m.def("sweep", &sweep, py::arg("q"), py::arg("k"), py::arg("options"), py::arg("progress"));
    m.def("load", &load, py::arg("ref"), py::arg("options"));
    m.def("info", &info, py::arg("path"));
    m.def("depth", &depth, py::arg("file"), py::arg("options"), py::arg("progress"));
    m.def("aggregate", &aggregate, py::arg("results_dir"), py::arg("options"));
    m.def("option_table", &option_table);
}

}  // namespace attnscope::python
