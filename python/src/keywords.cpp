// Keyword arguments onto the core's typed requests (keywords.h).
#include "keywords.h"

#include <cmath>
#include <type_traits>
#include <variant>

namespace attnscope::python {

namespace {

std::string type_name(const py::handle& value) { return py::str(value.get_type().attr("__name__")); }

bool is_int(const py::handle& value) { return py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value); }

// A Python int as a 64-bit integer, or the command line's refusal of one past 64 bits.
std::int64_t integer_of(const std::string& key, const py::handle& value)
{
    if (!is_int(value))
        throw py::type_error(key + ": expected an integer, got " +
                             (py::isinstance<py::bool_>(value) ? std::string(py::str(value)) : type_name(value) + " " + std::string(py::repr(value))));
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow != 0)
        throw py::value_error(key + ": '" + std::string(py::str(value)) +
                              "' is out of range (integers lie in -9223372036854775808..9223372036854775807)");
    return static_cast<std::int64_t>(v);
}

double number_of(const std::string& key, const py::handle& value)
{
    if (!is_int(value) && !py::isinstance<py::float_>(value))
        throw py::type_error(key + ": expected a number, got " +
                             (py::isinstance<py::bool_>(value) ? std::string(py::str(value)) : type_name(value)));
    const double v = value.cast<double>();
    if (!std::isfinite(v))
        throw py::value_error(key + ": '" + std::string(py::repr(value)) + "' is not a finite decimal number");
    return v;
}

bool switch_of(const std::string& key, const py::handle& value)
{
    if (!py::isinstance<py::bool_>(value))
        throw py::type_error(key + ": expected True or False, got " + type_name(value) + " " + std::string(py::repr(value)));
    return value.cast<bool>();
}

// Sets the field of `d` in `request`; lends an array given for a text option that names a tensor (mixing, gates).
template <class Request>
void set_field(CallArgs& call, Request& request, const analysis::OptionDescriptor<Request>& d, const std::string& key,
               const py::handle& value)
{
    std::visit(
        [&](auto field) {
            auto& target = request.*field;
            using T = std::remove_reference_t<decltype(target)>;
            if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::optional<bool>>) {
                target = switch_of(key, value);
            } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::optional<std::int64_t>>) {
                target = integer_of(key, value);
            } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, std::optional<double>>) {
                target = number_of(key, value);
            } else {
                if constexpr (std::is_same_v<Request, analysis::MechanismRequest>)
                    if (py::isinstance<py::array>(value) && (key == "mixing" || key == "gates")) {
                        // A learned mixing matrix, the gates: lent like q and k; the option holds the array's name.
                        call.arrays.push_back(lend_array(py::reinterpret_borrow<py::array>(value), key, py::dict(), ""));
                        const io::TensorRef& ref = call.arrays.back().ref;
                        target = ref.text;
                        (key == "mixing" ? request.mixing_tensor : request.gates_tensor) = std::make_shared<const io::TensorRef>(ref);
                        return;
                    }
                target = keyword_text(key, value, d.list);
            }
        },
        d.field);
}

template <class Request>
bool bind_one(CallArgs& call, Request& request, const std::vector<analysis::OptionDescriptor<Request>>& table,
              const std::string& key, const py::handle& value)
{
    for (const auto& d : table)
        if (analysis::option_name(d.name, analysis::Spelling::keyword) == key) {
            set_field(call, request, d, key, value);
            return true;
        }
    return false;
}

}  // namespace

std::string keyword_text(const std::string& key, const py::handle& value, bool list_ok)
{
    if (py::isinstance<py::str>(value))
        return checked_text(value, key);
    if (py::hasattr(value, "__fspath__") && !py::isinstance<py::bytes>(value))
        return checked_text(py::module_::import("os").attr("fsdecode")(value), key);
    if (is_int(value) && list_ok)   // past_splits=8, grid=16 (one size)
        return std::to_string(integer_of(key, value));
    if (key == "at" && py::isinstance<py::dict>(value)) {   // at={"h": 2, "b": "all"}
        std::string out;
        for (const auto& [axis, index] : value.cast<py::dict>()) {
            // An index as its digits, whatever its size: the selection refuses one it cannot hold, as it does on
            // the command line.
            const std::string text = is_int(index) ? std::string(py::str(index)) : keyword_text(key, index, false);
            out += (out.empty() ? "" : ",") + keyword_text(key, axis, false) + "=" + text;
        }
        return out;
    }
    if (list_ok && (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value))) {
        std::string out;
        for (const py::handle item : value) {
            if (py::isinstance<py::bool_>(item))
                throw py::type_error(key + ": a list of True/False is not an option's value");
            if (!is_int(item) && !py::isinstance<py::str>(item))
                throw py::type_error(key + ": a list holding a value of type " + type_name(item) +
                                     " is not an option's value (a list or tuple of str or int)");
            out += (out.empty() ? "" : ",") + keyword_text(key, item, true);
        }
        return out;
    }
    throw py::type_error(key + ": a value of type " + type_name(value) + " is not an option's value (" +
                         (list_ok ? "str, int, or a list or tuple of them" : key == "at" ? "str or a dict of axes" : "str") + ")");
}

void bind_keywords(CallArgs& call, Requests& requests, unsigned groups, const py::list& options,
                   const std::function<bool(const std::string&, const py::handle&)>& other)
{
    call.read = io::ReadSettings{};   // the reading settings a command line starts from
    for (const py::handle item : options) {
        const auto pair = item.cast<py::tuple>();
        const std::string key = pair[0].cast<std::string>();
        const py::handle value = pair[1];
        const bool taken =
            ((groups & selection_group) && bind_one(call, requests.selection, analysis::selection_options(), key, value)) ||
            ((groups & mechanism_group) && bind_one(call, requests.mechanism, analysis::mechanism_options(), key, value)) ||
            ((groups & metrics_group) && bind_one(call, requests.metrics, analysis::metric_options(), key, value)) ||
            ((groups & memory_group) && bind_one(call, requests.memory, analysis::memory_options(), key, value)) ||
            ((groups & sweep_group) && bind_one(call, requests.sweep, analysis::sweep_options(), key, value)) ||
            ((groups & aggregate_group) && bind_one(call, requests.aggregate, analysis::aggregate_options(), key, value)) ||
            ((groups & depth_group) && bind_one(call, requests.depth, analysis::depth_options(), key, value));
        if (taken) {
            if (key == "threads")
                call.sets_threads = true;
            continue;
        }
        if ((groups & selection_group) && key == "allow_virtual") {
            requests.allow_virtual = switch_of(key, value);
            call.read.allow_virtual_datasets = requests.allow_virtual;
            continue;
        }
        if (!other(key, value))
            throw py::type_error("got an unexpected keyword argument '" + key + "'");
    }
}

}  // namespace attnscope::python
