// Arrays lent to the core (bridge.h).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "bridge.h"

namespace attnscope::python {

namespace {

io::DType dtype_of(const py::dtype& dt, const std::string& role)
{
    const std::string name = py::str(dt.attr("name"));
    const char kind = dt.kind();
    const auto size = dt.itemsize();
    using io::DType;
    if (name == "bfloat16" && size == 2)
        return DType::bf16;
    if (kind == 'f' && (size == 2 || size == 4 || size == 8))
        return size == 2 ? DType::f16 : size == 4 ? DType::f32 : DType::f64;
    if (kind == 'i' && (size == 1 || size == 2 || size == 4 || size == 8))
        return size == 1 ? DType::i8 : size == 2 ? DType::i16 : size == 4 ? DType::i32 : DType::i64;
    if (kind == 'u' && (size == 1 || size == 2 || size == 4 || size == 8))
        return size == 1 ? DType::u8 : size == 2 ? DType::u16 : size == 4 ? DType::u32 : DType::u64;
    if (kind == 'b' && size == 1)
        return DType::boolean;
    throw py::value_error(role + ": arrays of dtype " + name +
                          " are not read (float16, bfloat16, float32, float64 or an integer type)");
}

std::string shape_text(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// A Tensor's attributes as the JSON a file's attributes are read into (io::TensorInfo::attributes): numbers,
// strings, booleans, lists and dicts of them. A NaN or an infinity stays a number, as a file's NaN attribute
// does, so that it is refused with the command line's message (a JSON text round trip cannot hold NaN).
// Nesting deeper than 64 levels (or a list that holds itself) is refused before it recurses further.
nlohmann::json attribute_json(const py::handle& v, const std::string& where, int depth)
{
    constexpr int kMaxDepth = 64;
    if (depth > kMaxDepth)
        throw py::value_error(where + ": nested more than " + std::to_string(kMaxDepth) + " levels deep");
    const py::module_ np = py::module_::import("numpy");
    if (py::isinstance(v, np.attr("generic")) || py::isinstance<py::array>(v))
        return attribute_json(v.attr("tolist")(), where, depth);   // NumPy scalars and arrays: their Python values
    if (v.is_none())
        return nullptr;
    if (py::isinstance<py::bool_>(v))
        return v.cast<bool>();
    if (py::isinstance<py::int_>(v)) {
        int overflow = 0;
        const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
        if (overflow == 0)
            return static_cast<std::int64_t>(i);
        const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
        if (!PyErr_Occurred())
            return static_cast<std::uint64_t>(u);
        PyErr_Clear();
        const double d = PyLong_AsDouble(v.ptr());   // as a JSON reader keeps a larger integer: a float
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return v.cast<py::int_>() > py::int_(0) ? HUGE_VAL : -HUGE_VAL;
        }
        return d;
    }
    if (py::isinstance<py::float_>(v))
        return v.cast<double>();
    if (py::isinstance<py::str>(v)) {
        Py_ssize_t size = 0;
        const char* text = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
        if (!text) {
            PyErr_Clear();
            throw py::value_error(where + ": a string that is not valid Unicode");
        }
        return std::string(text, static_cast<std::size_t>(size));
    }
    if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
        nlohmann::json out = nlohmann::json::array();
        for (const py::handle item : v)
            out.push_back(attribute_json(item, where, depth + 1));
        return out;
    }
    if (py::isinstance<py::dict>(v)) {
        nlohmann::json out = nlohmann::json::object();
        for (const auto& [key, value] : v.cast<py::dict>()) {
            if (!py::isinstance<py::str>(key))
                throw py::value_error(where + ": a key of type " + std::string(py::str(key.get_type().attr("__name__"))) +
                                      " (attribute names are strings)");
            const std::string name = attribute_json(key, where, depth + 1).get<std::string>();
            out[name] = attribute_json(value, where + "." + name, depth + 1);
        }
        return out;
    }
    throw py::value_error(where + ": a value of type " + std::string(py::str(v.get_type().attr("__name__"))) +
                          " (attributes are numbers, strings, booleans, and lists and dicts of them)");
}

}  // namespace

std::string checked_text(const py::handle& value, const std::string& what)
{
    std::string text;
    if (py::isinstance<py::str>(value)) {
        // The file system's encoding with surrogateescape (os.fsencode): a name that is not UTF-8, as
        // os.listdir gives it, names the same bytes.
        const py::bytes encoded = py::reinterpret_steal<py::bytes>(PyUnicode_EncodeFSDefault(value.ptr()));
        if (!encoded)
            throw py::error_already_set();
        text = encoded.cast<std::string>();
    } else if (py::isinstance<py::bytes>(value)) {
        text = value.cast<std::string>();
    } else {
        throw py::type_error(what + ": expected a str, got " + std::string(py::str(value.get_type().attr("__name__"))));
    }
    if (text.find('\0') != std::string::npos)
        throw py::value_error(what + ": a text holding a NUL character (no path or option holds one)");
    return text;
}

LentArray lend_array(const py::array& array, const std::string& role, const py::dict& attributes,
                     const std::string& origin)
{
    const py::dtype dt = array.dtype();
    io::ArrayView view;
    view.dtype = dtype_of(dt, role);
    if (!dt.attr("isnative").cast<bool>())
        throw py::value_error(role + ": the array is not in this machine's byte order (convert it with .astype('=" +
                              std::string(py::str(dt.attr("str"))).substr(1) + "'))");
    view.data = static_cast<const std::byte*>(array.data());
    for (py::ssize_t a = 0; a < array.ndim(); ++a) {
        view.shape.push_back(array.shape(a));
        view.strides.push_back(array.strides(a));
    }
    if (!attributes.empty())   // a loaded Tensor's attributes (attnscope.load), or any the caller gave it
        view.attributes = attribute_json(attributes, role + ": attribute", 0);
    view.origin = origin;
    std::string name = "<" + role + ": " + std::string(py::str(dt.attr("name"))) + " array " + shape_text(view.shape) + ">";
    LentArray lent;
    lent.ref = io::array_ref(std::move(name), std::move(view));
    lent.owner = array;
    return lent;
}

io::TensorRef tensor_ref(CallArgs& call, const std::string& role, const py::handle& value)
{
    if (py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value)) {
        const std::string text = checked_text(value, role);
        try {
            return io::parse_tensor_ref(text);
        } catch (...) {
            raise_mapped(std::current_exception());   // ValueError, with the command line's message
        }
    }
    if (!py::isinstance<py::array>(value))
        throw py::value_error(role + ": expected a FILE[:NAME] reference or an array");
    // An attnscope.Tensor: its file's attributes, and that file, against which the attributes' references
    // (a learned mixing matrix, gates) resolve as on the command line. None for any other array.
    py::dict attributes;
    std::string origin;
    if (py::hasattr(value, "attrs") && py::isinstance<py::dict>(value.attr("attrs")))
        attributes = value.attr("attrs");
    if (py::hasattr(value, "origin") && py::isinstance<py::str>(value.attr("origin")))
        origin = checked_text(value.attr("origin"), role + ".origin");
    // Several inputs of one role (a sweep's --q list) go by q, q[1], q[2] ...
    const auto earlier = std::count_if(call.arrays.begin(), call.arrays.end(), [&](const LentArray& l) {
        return l.ref.text.rfind("<" + role + ":", 0) == 0 || l.ref.text.rfind("<" + role + "[", 0) == 0;
    });
    const std::string role_name = earlier == 0 ? role : role + "[" + std::to_string(earlier) + "]";
    call.arrays.push_back(lend_array(py::reinterpret_borrow<py::array>(value), role_name, attributes, origin));
    return call.arrays.back().ref;
}

}  // namespace attnscope::python
