// Fuzzes the tensor reference, --at and --layout parsers. Input: three lines, "REF\nAT\nLAYOUT",
// the first byte choosing the rank of a fixed tensor.
#include <stdexcept>
#include <string>
#include <string_view>

#include "io/selection.h"
#include "util/error.h"

using namespace attnscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    std::string_view part[3];
    for (int i = 0; i < 3; ++i) {
        const auto nl = in.find('\n');
        part[i] = in.substr(0, nl);
        in = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
    }
    try {
        (void)io::parse_tensor_ref(part[0]);
    } catch (const InputError&) {
    } catch (const std::invalid_argument&) {
    }
    io::AxisSelection sel;
    try {
        sel.at = io::parse_at(part[1]);
    } catch (const InputError&) {
    } catch (const std::invalid_argument&) {
    }
    sel.layout = std::string(part[2]);
    io::TensorInfo t;
    t.name = "/q";
    static const std::int64_t dims[] = {2, 3, 5, 7, 1, 4};
    const int rank = size == 0 ? 3 : data[0] % 7;
    for (int i = 0; i < rank; ++i) t.shape.push_back(dims[i]);
    try {
        (void)io::resolve_layout(t, sel, "--q fuzz.h5:/q");
    } catch (const InputError&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
