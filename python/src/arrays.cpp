// Arrays lent to the core and keyword arguments turned into the command line's options (bridge.h).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "bridge.h"
#include "cli_common.h"
#include "cli_options.h"

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

}  // namespace

LentArray lend_array(const py::array& array, const std::string& role, const py::dict& attributes)
{
    const py::dtype dt = array.dtype();
    LentArray lent;
    lent.view.dtype = dtype_of(dt, role);
    if (!dt.attr("isnative").cast<bool>())
        throw py::value_error(role + ": the array is not in this machine's byte order (convert it with .astype('=" +
                              std::string(py::str(dt.attr("str"))).substr(1) + "'))");
    lent.view.data = static_cast<const std::byte*>(array.data());
    for (py::ssize_t a = 0; a < array.ndim(); ++a) {
        lent.view.shape.push_back(array.shape(a));
        lent.view.strides.push_back(array.strides(a));
    }
    if (!attributes.empty()) {   // a loaded Tensor's attributes: JSON by construction (attnscope.load)
        const std::string text = py::str(py::module_::import("json").attr("dumps")(attributes));
        lent.view.attributes = nlohmann::json::parse(text);
    }
    lent.name = "<" + role + ": " + std::string(py::str(dt.attr("name"))) + " array " + shape_text(lent.view.shape) + ">";
    lent.owner = array;
    return lent;
}

void add_tensor(CallArgs& call, const std::string& role, const py::handle& value)
{
    call.args.push_back("--" + role);
    if (py::isinstance<py::str>(value)) {
        call.args.push_back(value.cast<std::string>());
        return;
    }
    if (!py::isinstance<py::array>(value))
        throw py::value_error(role + ": expected a FILE[:NAME] reference or an array");
    py::dict attributes;
    if (py::hasattr(value, "attrs") && py::isinstance<py::dict>(value.attr("attrs")))
        attributes = value.attr("attrs");
    // Several inputs of one role (a sweep's --q list) go by q, q[1], q[2] ...
    const auto earlier = std::count_if(call.arrays.begin(), call.arrays.end(), [&](const LentArray& l) {
        return l.name.rfind("<" + role + ":", 0) == 0 || l.name.rfind("<" + role + "[", 0) == 0;
    });
    const std::string role_name = earlier == 0 ? role : role + "[" + std::to_string(earlier) + "]";
    call.arrays.push_back(lend_array(py::reinterpret_borrow<py::array>(value), role_name, attributes));
    call.args.push_back(call.arrays.back().name);
}

void parse_options(CallArgs& call, const py::list& options, const std::function<void(CLI::App&)>& register_options)
{
    CLI::App app{"attnscope"};
    register_options(app);
    app::make_numbers_strict(app);
    for (const py::handle item : options) {
        const auto pair = item.cast<py::tuple>();
        const std::string key = pair[0].cast<std::string>();
        std::string flag = "--" + key;
        std::replace(flag.begin(), flag.end(), '_', '-');
        const py::handle value = pair[1];
        if (!app.get_option_no_throw(flag) || key.find('-') != std::string::npos)
            throw py::value_error("unknown option '" + key + "' (the command line has no " + flag + ")");
        if (py::isinstance<py::bool_>(value)) {
            if (value.cast<bool>())
                call.args.push_back(flag);
            else if (app.get_option_no_throw("--no-" + flag.substr(2)))
                call.args.push_back("--no-" + flag.substr(2));
        } else if (py::isinstance<py::array>(value)) {
            add_tensor(call, key, value);
            call.args[call.args.size() - 2] = flag;
        } else {
            call.args.push_back(flag);
            call.args.push_back(value.cast<std::string>());
        }
    }
    std::vector<std::string> reversed(call.args.rbegin(), call.args.rend());   // CLI11 takes them last first
    try {
        app.parse(reversed);
    } catch (const CLI::ParseError& e) {
        throw py::value_error(app::parse_error_text(e));
    }
}

}  // namespace attnscope::python
