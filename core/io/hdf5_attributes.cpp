// HDF5 attributes and element types (internal to core/io): which stored types read as numbers, and the
// attributes `info` shows. Attribute values are capped (kMaxAttributeValues) before they are read.
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "io/hdf5_attributes.h"
#include "util/error.h"
#include "util/json_text.h"

namespace attnscope::io::detail {

namespace {

constexpr hssize_t kMaxAttributeValues = 1 << 16;

// h5py stores numpy bool as an enum over int8 with members FALSE = 0 and TRUE = 1.
bool is_bool_enum(hid_t type)
{
    if (H5Tget_class(type) != H5T_ENUM || H5Tget_nmembers(type) != 2 || H5Tget_size(type) != 1)
        return false;
    for (unsigned i = 0; i < 2; ++i) {
        char* name = H5Tget_member_name(type, i);
        if (!name)
            return false;
        const std::string n = name;
        H5free_memory(name);
        signed char value = -1;
        if (H5Tget_member_value(type, i, &value) < 0)
            return false;
        if (!((n == "FALSE" && value == 0) || (n == "TRUE" && value == 1)))
            return false;
    }
    return true;
}

std::optional<DType> integer_dtype(hid_t type)
{
    const std::size_t size = H5Tget_size(type);
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    switch (size) {
    case 1: return is_signed ? DType::i8 : DType::u8;
    case 2: return is_signed ? DType::i16 : DType::u16;
    case 4: return is_signed ? DType::i32 : DType::u32;
    case 8: return is_signed ? DType::i64 : DType::u64;
    default: return std::nullopt;
    }
}

// Nests a flat row-major list of values into arrays following dims (scalar for rank 0).
nlohmann::json nest(std::vector<nlohmann::json>& values, const std::vector<hsize_t>& dims, std::size_t axis, std::size_t& next)
{
    if (axis == dims.size())
        return std::move(values[next++]);
    nlohmann::json arr = nlohmann::json::array();
    for (hsize_t i = 0; i < dims[axis]; ++i)
        arr.push_back(nest(values, dims, axis + 1, next));
    return arr;
}

// Each reader below appends the n values of `attr` (of type `type`) to `values`; false when HDF5 cannot
// read them.
bool read_integers(hid_t attr, hid_t type, std::size_t n, std::vector<nlohmann::json>& values)
{
    if (H5Tget_sign(type) == H5T_SGN_2) {
        std::vector<long long> v(n);
        if (H5Aread(attr, H5T_NATIVE_LLONG, v.data()) < 0)
            return false;
        for (auto x : v)
            values.emplace_back(static_cast<std::int64_t>(x));
    } else {
        std::vector<unsigned long long> v(n);
        if (H5Aread(attr, H5T_NATIVE_ULLONG, v.data()) < 0)
            return false;
        for (auto x : v)
            values.emplace_back(static_cast<std::uint64_t>(x));
    }
    return true;
}

bool read_floats(hid_t attr, std::size_t n, std::vector<nlohmann::json>& values)
{
    std::vector<double> v(n);
    if (H5Aread(attr, H5T_NATIVE_DOUBLE, v.data()) < 0)
        return false;
    for (auto x : v)
        values.emplace_back(x);
    return true;
}

bool read_enums(hid_t attr, hid_t type, std::size_t n, std::vector<nlohmann::json>& values)
{
    H5Id base(H5Tget_super(type), H5Tclose);
    if (!base || H5Tget_class(base.get()) != H5T_INTEGER)
        return false;
    const bool as_bool = is_bool_enum(type);
    // Read the enum as itself (HDF5 does not convert enums to numbers), then print names/bools.
    H5Id mem(H5Tget_native_type(type, H5T_DIR_ASCEND), H5Tclose);
    if (!mem)
        return false;
    const std::size_t size = H5Tget_size(mem.get());
    std::vector<unsigned char> raw(n * size);
    if (H5Aread(attr, mem.get(), raw.data()) < 0)
        return false;
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char* p = raw.data() + i * size;
        if (as_bool) {
            values.emplace_back(*p != 0);
            continue;
        }
        char name[256] = {};
        if (H5Tenum_nameof(mem.get(), p, name, sizeof name) >= 0)
            values.emplace_back(display_path(name));
        else
            values.emplace_back(nullptr);
    }
    return true;
}

bool read_variable_strings(hid_t attr, hid_t type, hid_t space, std::size_t n, std::vector<nlohmann::json>& values)
{
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type));
    std::vector<char*> ptrs(n, nullptr);
    const bool ok = H5Aread(attr, mem.get(), ptrs.data()) >= 0;
    if (ok)
        for (char* s : ptrs)
            values.emplace_back(display_path(s ? s : ""));
    // Free what HDF5 allocated, also after a failed read (null entries are skipped).
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(mem.get(), space, H5P_DEFAULT, ptrs.data());
#else
    H5Dvlen_reclaim(mem.get(), space, H5P_DEFAULT, ptrs.data());
#endif
    return ok;
}

// Fixed-size strings of `size` bytes each (the caller caps size * n), padding removed.
bool read_fixed_strings(hid_t attr, hid_t type, std::size_t size, std::size_t n, std::vector<nlohmann::json>& values)
{
    const H5T_str_t pad = H5Tget_strpad(type);
    H5Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), size);
    H5Tset_cset(mem.get(), H5Tget_cset(type));
    H5Tset_strpad(mem.get(), pad);
    std::vector<char> raw(n * size);
    if (H5Aread(attr, mem.get(), raw.data()) < 0)
        return false;
    for (std::size_t i = 0; i < n; ++i) {
        std::string s(raw.data() + i * size, size);
        if (pad == H5T_STR_SPACEPAD) {
            s.erase(s.find_last_not_of(' ') + 1);
        } else {
            const auto nul = s.find('\0');
            if (nul != std::string::npos)
                s.resize(nul);
        }
        values.emplace_back(display_path(s));
    }
    return true;
}

// The value of one attribute as JSON; nullopt for types we do not show.
std::optional<nlohmann::json> read_attribute(hid_t attr)
{
    H5Id type(H5Aget_type(attr), H5Tclose);
    H5Id space(H5Aget_space(attr), H5Sclose);
    if (!type || !space)
        return std::nullopt;
    const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
    if (sclass == H5S_NULL)
        return nlohmann::json(nullptr);
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0 || rank > 32)
        return std::nullopt;
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    const hssize_t npoints = H5Sget_simple_extent_npoints(space.get());
    if (npoints < 0)
        return std::nullopt;
    if (npoints > kMaxAttributeValues)
        return nlohmann::json(fmt::format("({} values, not shown)", npoints));
    const std::size_t n = static_cast<std::size_t>(npoints);
    std::vector<nlohmann::json> values;
    values.reserve(n);

    bool ok = false;
    switch (H5Tget_class(type.get())) {
    case H5T_INTEGER: ok = read_integers(attr, type.get(), n, values); break;
    case H5T_FLOAT: ok = read_floats(attr, n, values); break;
    case H5T_ENUM: ok = read_enums(attr, type.get(), n, values); break;
    case H5T_STRING:
        if (H5Tis_variable_str(type.get()) > 0) {
            ok = read_variable_strings(attr, type.get(), space.get(), n, values);
        } else {
            const std::size_t size = H5Tget_size(type.get());
            if (size == 0 || static_cast<std::uint64_t>(size) * n > (16u << 20))
                return nlohmann::json(fmt::format("({} strings of {} bytes, not shown)", n, size));
            ok = read_fixed_strings(attr, type.get(), size, n, values);
        }
        break;
    default: break;
    }
    if (!ok)
        return std::nullopt;
    if (values.size() != n)
        return std::nullopt;
    std::size_t next = 0;
    return nest(values, dims, 0, next);
}

}  // namespace

Classified classify(hid_t type)
{
    Classified c;
    switch (H5Tget_class(type)) {
    case H5T_FLOAT: {
        const std::size_t size = H5Tget_size(type);
        std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
        H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
        if (size == 2)
            c.dtype = esize == 8 ? DType::bf16 : DType::f16;
        else if (size == 4)
            c.dtype = DType::f32;
        else if (size == 8)
            c.dtype = DType::f64;
        else
            c.reason = fmt::format("element type is a {}-bit float (only 16, 32 and 64 bits are read)", size * 8);
        break;
    }
    case H5T_INTEGER:
        c.dtype = integer_dtype(type);
        if (!c.dtype)
            c.reason = fmt::format("element type is a {}-byte integer", H5Tget_size(type));
        break;
    case H5T_ENUM: {
        c.is_enum = true;
        if (is_bool_enum(type)) {
            c.dtype = DType::boolean;
        } else {
            H5Id base(H5Tget_super(type), H5Tclose);
            if (base)
                c.dtype = integer_dtype(base.get());
            if (!c.dtype)
                c.reason = "element type is an enumeration over an unusual base type";
        }
        break;
    }
    case H5T_STRING: c.reason = "element type is a string, not a number"; break;
    case H5T_COMPOUND:
        c.reason = H5Tget_nmembers(type) == 2 ? "element type is a compound (complex numbers or a record); store real "
                                                 "numbers instead"
                                               : "element type is a compound (record) type";
        break;
    case H5T_BITFIELD: c.reason = "element type is a bitfield"; break;
    case H5T_OPAQUE: c.reason = "element type is opaque bytes"; break;
    case H5T_REFERENCE: c.reason = "element type is an object reference"; break;
    case H5T_VLEN: c.reason = "element type is a variable-length sequence"; break;
    case H5T_ARRAY: c.reason = "element type is an array type (store a plain numeric dataset instead)"; break;
    case H5T_TIME: c.reason = "element type is a time type"; break;
    default: c.reason = "element type cannot be determined"; break;
    }
    return c;
}

nlohmann::json read_attributes(hid_t object)
{
    std::vector<std::string> names;
    hsize_t idx = 0;
    H5Aiterate2(
        object, H5_INDEX_NAME, H5_ITER_INC, &idx,
        [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
            static_cast<std::vector<std::string>*>(data)->emplace_back(name);
            return 0;
        },
        &names);
    H5Eclear2(H5E_DEFAULT);
    nlohmann::json out = nlohmann::json::object();
    for (const auto& name : names) {
        H5Id attr(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose);
        if (!attr)
            continue;
        if (auto v = read_attribute(attr.get()))
            out[display_path(name)] = std::move(*v);
    }
    H5Eclear2(H5E_DEFAULT);
    return out;
}

}  // namespace attnscope::io::detail
