#include "io/writers.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "io/detail.h"
#include "io/hdf5_util.h"
#include "util/error.h"
#include "util/fd_io.h"
#include "util/json_text.h"

namespace attnscope::io {

// ------------------------------------------------------------------------------------------- .npy
void write_npy(const std::string& path, const Eigen::Ref<const Eigen::MatrixXd>& matrix)
{
    const auto rows = matrix.rows(), cols = matrix.cols();
    std::string header = fmt::format("{{'descr': '<f8', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
    // Pad with spaces and a final newline so that the data starts on a 64-byte boundary, as NumPy does.
    const std::size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    if (header.size() > 65535)
        throw std::logic_error("write_npy: header too long");

    std::string preamble("\x93NUMPY\x01\x00", 8);   // a literal NUL: give the length
    preamble += static_cast<char>(header.size() & 0xff);
    preamble += static_cast<char>((header.size() >> 8) & 0xff);

    struct Closer {
        void operator()(std::FILE* f) const { std::fclose(f); }
    };
    std::unique_ptr<std::FILE, Closer> f(std::fopen(path.c_str(), "wb"));
    if (!f)
        throw InputError(fmt::format("{}: cannot write ({})", path, std::strerror(errno)));
    auto put = [&](const void* data, std::size_t n) {
        if (n && std::fwrite(data, 1, n, f.get()) != n)
            throw InputError(fmt::format("{}: cannot write ({})", path, std::strerror(errno)));
    };
    put(preamble.data(), preamble.size());
    put(header.data(), header.size());
    std::vector<double> row(static_cast<std::size_t>(cols));
    for (Eigen::Index i = 0; i < rows; ++i) {
        for (Eigen::Index j = 0; j < cols; ++j) {
            double v = matrix(i, j);
            if constexpr (std::endian::native == std::endian::big)
                v = std::bit_cast<double>(__builtin_bswap64(std::bit_cast<std::uint64_t>(v)));
            row[static_cast<std::size_t>(j)] = v;
        }
        put(row.data(), row.size() * sizeof(double));
    }
    std::FILE* raw = f.release();
    if (std::fflush(raw) != 0 || std::ferror(raw)) {
        const int err = errno;
        std::fclose(raw);
        throw InputError(fmt::format("{}: cannot write ({})", path, std::strerror(err)));
    }
    if (std::fclose(raw) != 0)
        throw InputError(fmt::format("{}: cannot write ({})", path, std::strerror(errno)));
}

// -------------------------------------------------------------------------------------------- HDF5
namespace {

using detail::H5Id;

[[noreturn]] void h5_fail(const std::string& path, std::string_view what)
{
    const std::string why = detail::hdf5_error_text();
    throw InputError(fmt::format("{}: {}{}", path, what, why.empty() ? std::string() : " (" + why + ")"));
}

H5Id bool_type()
{
    // The enum h5py writes for numpy bool, so h5py reads the attribute back as bool.
    H5Id t(H5Tenum_create(H5T_NATIVE_INT8), H5Tclose);
    signed char v = 0;
    H5Tenum_insert(t.get(), "FALSE", &v);
    v = 1;
    H5Tenum_insert(t.get(), "TRUE", &v);
    return t;
}

H5Id utf8_string_type()
{
    H5Id t(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(t.get(), H5T_VARIABLE);
    H5Tset_cset(t.get(), H5T_CSET_UTF8);
    return t;
}

// Shape of a rectangular nested JSON array (taken along the first elements) whose leaves all satisfy
// `leaf`; false if the array is ragged or a leaf does not fit.
template <typename Leaf>
bool rectangular(const nlohmann::json& j, std::vector<hsize_t>& dims, Leaf leaf)
{
    dims.clear();
    for (const nlohmann::json* p = &j; p->is_array(); p = &p->front()) {
        dims.push_back(p->size());
        if (p->empty())
            break;
    }
    auto verify = [&](auto&& self, const nlohmann::json& e, std::size_t axis) -> bool {
        if (axis == dims.size())
            return !e.is_array() && leaf(e);
        if (!e.is_array() || e.size() != dims[axis])
            return false;
        for (const auto& x : e)
            if (!self(self, x, axis + 1))
                return false;
        return true;
    };
    return verify(verify, j, 0);
}

template <typename T>
void flatten(const nlohmann::json& j, std::vector<T>& out)
{
    if (j.is_array()) {
        for (const auto& e : j)
            flatten(e, out);
    } else {
        out.push_back(j.get<T>());
    }
}

void write_attribute(const std::string& path, hid_t object, const std::string& object_name, const std::string& key,
                     const nlohmann::json& value)
{
    const std::string what = fmt::format("cannot write attribute '{}' of {}", key, object_name);
    auto create_and_write = [&](hid_t type, hid_t space, hid_t mem_type, const void* data) {
        H5Id attr(H5Acreate2(object, key.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
        if (!attr)
            h5_fail(path, what);
        if (data && H5Awrite(attr.get(), mem_type, data) < 0)
            h5_fail(path, what);
    };
    auto simple_space = [&](const std::vector<hsize_t>& dims) {
        H5Id s(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
        if (!s)
            h5_fail(path, what);
        return s;
    };

    if (value.is_null()) {
        H5Id space(H5Screate(H5S_NULL), H5Sclose);   // h5py reads this as h5py.Empty
        create_and_write(H5T_IEEE_F64LE, space.get(), H5T_NATIVE_DOUBLE, nullptr);
        return;
    }
    if (value.is_object()) {
        write_attribute(path, object, object_name, key, nlohmann::json(json_text(value)));
        return;
    }
    std::vector<hsize_t> dims;
    const auto is_int = [](const nlohmann::json& e) {
        return e.is_number_integer() && !(e.is_number_unsigned() && e.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX));
    };
    const auto is_uint = [](const nlohmann::json& e) { return e.is_number_unsigned(); };
    const auto is_number = [](const nlohmann::json& e) { return e.is_number(); };
    const auto is_bool = [](const nlohmann::json& e) { return e.is_boolean(); };
    const auto is_string = [](const nlohmann::json& e) { return e.is_string(); };

    if (value.is_array() && value.empty()) {
        const H5Id space = simple_space({0});
        create_and_write(H5T_IEEE_F64LE, space.get(), H5T_NATIVE_DOUBLE, nullptr);
        return;
    }
    if (rectangular(value, dims, is_int)) {
        std::vector<std::int64_t> v;
        flatten(value, v);
        const H5Id space = simple_space(dims);
        create_and_write(H5T_STD_I64LE, space.get(), H5T_NATIVE_INT64, v.empty() ? nullptr : v.data());
    } else if (rectangular(value, dims, is_uint)) {
        std::vector<std::uint64_t> v;
        flatten(value, v);
        const H5Id space = simple_space(dims);
        create_and_write(H5T_STD_U64LE, space.get(), H5T_NATIVE_UINT64, v.empty() ? nullptr : v.data());
    } else if (rectangular(value, dims, is_number)) {
        std::vector<double> v;
        flatten(value, v);
        const H5Id space = simple_space(dims);
        create_and_write(H5T_IEEE_F64LE, space.get(), H5T_NATIVE_DOUBLE, v.empty() ? nullptr : v.data());
    } else if (rectangular(value, dims, is_bool)) {
        std::vector<bool> b;
        flatten(value, b);
        std::vector<signed char> v(b.begin(), b.end());
        const H5Id space = simple_space(dims);
        const H5Id type = bool_type();
        create_and_write(type.get(), space.get(), type.get(), v.empty() ? nullptr : v.data());
    } else if (rectangular(value, dims, is_string)) {
        std::vector<std::string> s;
        flatten(value, s);
        std::vector<const char*> ptrs;
        for (const auto& x : s)
            ptrs.push_back(x.c_str());
        const H5Id space = simple_space(dims);
        const H5Id type = utf8_string_type();
        create_and_write(type.get(), space.get(), type.get(), ptrs.empty() ? nullptr : ptrs.data());
    } else {
        // Mixed or ragged arrays: keep them readable as JSON text.
        write_attribute(path, object, object_name, key, nlohmann::json(json_text(value)));
    }
}

void write_attributes(const std::string& path, hid_t object, const std::string& object_name, const nlohmann::json& attributes)
{
    if (attributes.is_null())
        return;
    if (!attributes.is_object())
        throw std::invalid_argument(fmt::format("write_hdf5: attributes of {} must be a JSON object", object_name));
    for (auto it = attributes.begin(); it != attributes.end(); ++it)
        write_attribute(path, object, object_name, it.key(), it.value());
}

// Chunks of at most ~1 MiB, splitting the outermost axes first, so that one head of [H, N, d] is one chunk.
std::vector<hsize_t> chunk_dims(const std::vector<std::int64_t>& shape, std::size_t item)
{
    std::vector<hsize_t> c(shape.begin(), shape.end());
    constexpr std::uint64_t target = 1u << 20;
    for (std::size_t axis = 0; axis < c.size(); ++axis) {
        auto bytes = [&] {
            std::uint64_t b = item;
            for (auto d : c)
                b *= d;
            return b;
        };
        while (bytes() > target && c[axis] > 1)
            c[axis] = (c[axis] + 1) / 2;
    }
    return c;
}

}  // namespace

void write_hdf5(const std::string& path, const std::vector<DatasetOut>& datasets, const nlohmann::json& root_attributes)
{
    for (const auto& ds : datasets) {
        std::uint64_t n = 0;
        if (!detail::checked_product(ds.shape, n) || n != ds.data.size())
            throw std::invalid_argument(fmt::format("write_hdf5: dataset {} has shape {} but {} values", ds.name,
                                                    detail::shape_text(ds.shape), ds.data.size()));
        if (ds.name.empty() || ds.name == "/")
            throw std::invalid_argument("write_hdf5: a dataset needs a name");
    }

    // The file is built in memory (HDF5's core driver, no backing store) and written out by the loop at
    // the end: HDF5 1.10 never sees a failing write. (With the sec2 driver a full disk made H5Fclose
    // fail half-way; the file then stayed open and the library crashed at exit, SIGSEGV instead of
    // exit status 2.) Costs one image of the file in memory, twice while it is copied out.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        throw InputError(fmt::format("{}: cannot create HDF5 file ({})", path, std::strerror(errno)));
    struct FdCloser {
        int fd;
        ~FdCloser()
        {
            if (fd >= 0)
                ::close(fd);
        }
    } fd_guard{fd};
    std::uint64_t payload = 0;
    for (const auto& ds : datasets)
        payload += ds.data.size() * (ds.as_float32 ? 4u : 8u);

    std::vector<char> image;
    {
        auto lock = detail::hdf5_lock();
        const H5Id fapl = detail::make_fapl();
        const std::uint64_t increment = std::clamp<std::uint64_t>(payload + (1u << 16), 1u << 20, 1ull << 30);
        if (!fapl || H5Pset_fapl_core(fapl.get(), static_cast<std::size_t>(increment), false) < 0)
            h5_fail(path, "cannot set up the in-memory file");
        H5Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
        if (!file)
            h5_fail(path, "cannot create HDF5 file");
        {
            H5Id root(H5Oopen(file.get(), "/", H5P_DEFAULT), H5Oclose);
            if (!root)
                h5_fail(path, "cannot open the root group");
            write_attributes(path, root.get(), "/", root_attributes);
        }
        H5Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
        if (!lcpl || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0)
            h5_fail(path, "cannot create a link property list");

        for (const auto& ds : datasets) {
            const std::string name = ds.name.front() == '/' ? ds.name : "/" + ds.name;
            const std::vector<hsize_t> dims(ds.shape.begin(), ds.shape.end());
            H5Id space(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                       H5Sclose);
            if (!space)
                h5_fail(path, fmt::format("cannot create the dataspace of {}", name));
            H5Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
            const bool any_zero = std::any_of(ds.shape.begin(), ds.shape.end(), [](std::int64_t d) { return d == 0; });
            if (ds.compress && !dims.empty() && !any_zero) {
                const auto chunks = chunk_dims(ds.shape, ds.as_float32 ? 4 : 8);
                if (H5Pset_chunk(dcpl.get(), static_cast<int>(chunks.size()), chunks.data()) < 0 || H5Pset_shuffle(dcpl.get()) < 0 ||
                    H5Pset_deflate(dcpl.get(), 4) < 0)
                    h5_fail(path, fmt::format("cannot set up compression of {}", name));
            }
            const hid_t file_type = ds.as_float32 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
            H5Id d(H5Dcreate2(file.get(), name.c_str(), file_type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT), H5Dclose);
            if (!d)
                h5_fail(path, fmt::format("cannot create dataset {}", name));
            if (!ds.data.empty() &&
                H5Dwrite(d.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, ds.data.data()) < 0)
                h5_fail(path, fmt::format("cannot write dataset {}", name));
            write_attributes(path, d.get(), name, ds.attributes);
        }
        if (H5Fflush(file.get(), H5F_SCOPE_LOCAL) < 0)
            h5_fail(path, "cannot finish the file");
        const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
        if (size < 0)
            h5_fail(path, "cannot finish the file");
        image.resize(static_cast<std::size_t>(size));
        if (size > 0 && H5Fget_file_image(file.get(), image.data(), image.size()) != size)
            h5_fail(path, "cannot finish the file");
        if (H5Fclose(file.release()) < 0)
            h5_fail(path, "cannot close the file");
    }

    write_all(fd, image.data(), image.size(), path);
    fd_guard.fd = -1;
    if (::close(fd) != 0)
        throw InputError(fmt::format("{}: cannot write ({})", path, std::strerror(errno)));
}

}  // namespace attnscope::io
