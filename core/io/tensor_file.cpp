#include "io/tensor_file.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "io/detail.h"
#include "util/error.h"

namespace attnscope::io {

namespace {

std::atomic<std::uint64_t> g_read_limit{ReadSettings{}.read_limit_bytes};
std::atomic<bool> g_allow_virtual{ReadSettings{}.allow_virtual_datasets};
thread_local ReadSettings* t_settings = nullptr;   // the innermost ReadSettingsScope of this thread

std::string lower(std::string_view s)
{
    std::string out(s);
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// The extension of the file name (after the last '/'), lower case, with the dot; empty if none.
std::string extension_of(const std::string& path)
{
    const auto slash = path.find_last_of('/');
    const std::string_view base = slash == std::string::npos ? std::string_view(path) : std::string_view(path).substr(slash + 1);
    const auto dot = base.find_last_of('.');
    if (dot == std::string_view::npos || dot == 0)
        return {};
    return lower(base.substr(dot));
}

std::string list_names(const std::vector<TensorInfo>& tensors)
{
    constexpr std::size_t shown = 20;
    std::string out;
    for (std::size_t i = 0; i < tensors.size() && i < shown; ++i) {
        if (i)
            out += ", ";
        out += tensors[i].name.empty() ? std::string("(the unnamed array)") : tensors[i].name;
    }
    if (tensors.size() > shown)
        out += fmt::format(", ... ({} more)", tensors.size() - shown);
    return out;
}

}  // namespace

std::string_view dtype_name(DType t)
{
    switch (t) {
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i8: return "int8";
    case DType::i16: return "int16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::u32: return "uint32";
    case DType::u64: return "uint64";
    case DType::boolean: return "bool";
    }
    return "unknown";
}

std::size_t dtype_size(DType t)
{
    switch (t) {
    case DType::i8:
    case DType::u8:
    case DType::boolean: return 1;
    case DType::f16:
    case DType::bf16:
    case DType::i16:
    case DType::u16: return 2;
    case DType::f32:
    case DType::i32:
    case DType::u32: return 4;
    case DType::f64:
    case DType::i64:
    case DType::u64: return 8;
    }
    return 0;
}

const TensorInfo& TensorFile::find(std::string_view name) const
{
    if (name.empty()) {
        if (m_tensors.size() == 1)
            return m_tensors.front();
        if (m_tensors.empty()) {
            std::string why;
            if (!m_skipped.empty())
                why = fmt::format(" ({} is skipped: {})", m_skipped.front().name, m_skipped.front().reason);
            throw InputError(fmt::format("{}: holds no readable numeric tensor{}", m_path, why));
        }
        throw InputError(fmt::format("{}: holds {} tensors ({}); name one as {}:NAME", m_path, m_tensors.size(),
                                     list_names(m_tensors), m_path));
    }
    const std::string_view fmt_name = format();
    // Canonical form for the lenient comparisons: HDF5 without leading '/', npz without ".npy".
    auto canonical = [&](std::string_view s) {
        if (fmt_name == "hdf5") {
            while (!s.empty() && s.front() == '/')
                s.remove_prefix(1);
        } else if (fmt_name == "npz" && s.size() > 4 && s.substr(s.size() - 4) == ".npy") {
            s.remove_suffix(4);
        }
        return s;
    };
    for (const auto& t : m_tensors)
        if (t.name == name)
            return t;
    const std::string_view wanted = canonical(name);
    for (const auto& t : m_tensors)
        if (canonical(t.name) == wanted)
            return t;
    for (const auto& s : m_skipped)
        if (s.name == name || canonical(s.name) == wanted)
            throw InputError(fmt::format("{}:{}: cannot be read as a numeric tensor: {}", m_path, name, s.reason));
    if (m_tensors.empty())
        throw InputError(fmt::format("{}: no tensor '{}' (the file holds no readable numeric tensor)", m_path, name));
    throw InputError(fmt::format("{}: no tensor '{}'; available: {}", m_path, name, list_names(m_tensors)));
}

std::vector<double> TensorFile::read_all(const TensorInfo& tensor) const
{
    const std::vector<std::int64_t> start(tensor.shape.size(), 0);
    return read_box(tensor, start, tensor.shape);
}

std::unique_ptr<TensorFile> open_tensor_file(const std::string& path)
{
    if (path.empty())
        throw InputError("empty file name");
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        const int err = errno;
        if (err == ENOENT || err == ENOTDIR)
            throw MissingFileError(path + ": no such file");
        throw InputError(fmt::format("{}: cannot open ({})", path, std::strerror(err)));
    }
    if (S_ISDIR(st.st_mode))
        throw InputError(path + ": is a directory, not a tensor file");
    if (!S_ISREG(st.st_mode))
        throw InputError(path + ": is not a regular file (a FIFO, device or socket is never read as data)");

    const std::string ext = extension_of(path);
    if (ext == ".h5" || ext == ".hdf5")
        return detail::open_hdf5(path);
    if (ext == ".npy")
        return detail::open_npy(path);
    if (ext == ".npz")
        return detail::open_npz(path);
    if (ext == ".safetensors")
        return detail::open_safetensors(path);
    if (ext == ".pt" || ext == ".pth" || ext == ".ckpt" || ext == ".bin" || ext == ".pkl" || ext == ".pickle")
        throw InputError(fmt::format(
            "{}: {} files are Python pickles and are never loaded (unpickling can run arbitrary code). Convert the "
            "tensors first, e.g. numpy.save('q.npy', t.float().numpy()), safetensors.torch.save_file({{'q': t}}, "
            "'acts.safetensors') or h5py.File('acts.h5', 'w')['q'] = t.float().numpy()",
            path, ext));
    throw InputError(fmt::format("{}: unknown file type '{}'; supported: .h5 .hdf5 (HDF5), .npy, .npz (NumPy), "
                                 ".safetensors",
                                 path, ext.empty() ? std::string("(no extension)") : ext));
}

void set_read_limit_bytes(std::uint64_t bytes)
{
    if (t_settings)
        t_settings->read_limit_bytes = bytes;
    else
        g_read_limit.store(bytes);
}

std::uint64_t read_limit_bytes() { return t_settings ? t_settings->read_limit_bytes : g_read_limit.load(); }

void set_allow_virtual_datasets(bool allow)
{
    if (t_settings)
        t_settings->allow_virtual_datasets = allow;
    else
        g_allow_virtual.store(allow);
}

bool allow_virtual_datasets() { return t_settings ? t_settings->allow_virtual_datasets : g_allow_virtual.load(); }

ReadSettingsScope::ReadSettingsScope(ReadSettings start) : m_settings(start), m_outer(t_settings)
{
    t_settings = &m_settings;
}

ReadSettingsScope::~ReadSettingsScope() { t_settings = m_outer; }

// ------------------------------------------------------------------------------------------ detail
namespace detail {

bool checked_product(std::span<const std::int64_t> shape, std::uint64_t& out)
{
    std::uint64_t p = 1;
    for (const auto s : shape) {
        if (s < 0 || !checked_mul(p, static_cast<std::uint64_t>(s), p))
            return false;
    }
    out = p;
    return true;
}

std::string shape_text(std::span<const std::int64_t> shape)
{
    std::string out = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + "]";
}

std::string bytes_text(std::uint64_t bytes)
{
    static const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024)
        return fmt::format("{} bytes", bytes);
    double v = static_cast<double>(bytes);
    int u = -1;
    while (v >= 1024.0 && u < 5) {
        v /= 1024.0;
        ++u;
    }
    return fmt::format("{} bytes ({:.1f} {})", bytes, v, units[u]);
}

std::string where(const std::string& path, std::string_view tensor_name)
{
    if (tensor_name.empty())
        return path;
    return fmt::format("{}:{}", path, tensor_name);
}

std::uint64_t check_box(const std::string& path, const TensorInfo& tensor, std::span<const std::int64_t> start,
                        std::span<const std::int64_t> count)
{
    const std::size_t rank = tensor.shape.size();
    const std::string w = where(path, tensor.name);
    if (start.size() != rank || count.size() != rank)
        throw std::invalid_argument(fmt::format("{}: a box of rank {} was requested from a tensor of rank {}", w,
                                                std::max(start.size(), count.size()), rank));
    for (std::size_t a = 0; a < rank; ++a) {
        if (start[a] < 0 || count[a] < 0 || start[a] > tensor.shape[a] || count[a] > tensor.shape[a] - start[a])
            throw std::invalid_argument(fmt::format("{}: box start {} count {} exceeds shape {} on axis {}", w,
                                                    shape_text(start), shape_text(count), shape_text(tensor.shape), a));
    }
    std::uint64_t elements = 0, bytes = 0;
    if (!checked_product(count, elements) || !checked_mul(elements, sizeof(double), bytes))
        throw InputError(fmt::format("{}: the box {} is too large to address", w, shape_text(count)));
    const std::uint64_t limit = read_limit_bytes();
    if (bytes > limit)
        throw MemoryLimitError(fmt::format("{}: reading {} values as float64 needs {}, above the read limit of {} (the "
                                           "memory limit)",
                                           w, shape_text(count), bytes_text(bytes), bytes_text(limit)));
    return elements;
}

std::size_t tensor_index(const TensorFile& file, const TensorInfo& tensor)
{
    const auto& all = file.tensors();
    if (!all.empty() && &tensor >= all.data() && &tensor < all.data() + all.size())
        return static_cast<std::size_t>(&tensor - all.data());
    for (std::size_t i = 0; i < all.size(); ++i)
        if (all[i].name == tensor.name)
            return i;
    throw std::invalid_argument(fmt::format("{}: holds no tensor '{}'", file.path(), tensor.name));
}

FileHandle::FileHandle(const std::string& path) : m_path(path)
{
    // O_NONBLOCK: should the path have become a FIFO since the caller's stat, open() returns at once instead
    // of waiting for a writer, and the fstat below refuses it (reads of a regular file ignore the flag).
    m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (m_fd < 0) {
        const int err = errno;
        if (err == ENOENT)
            throw MissingFileError(path + ": no such file");
        throw InputError(fmt::format("{}: cannot open ({})", path, std::strerror(err)));
    }
    struct stat st {};
    if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(m_fd);
        m_fd = -1;
        throw InputError(path + ": is not a regular file (a FIFO, device or socket is never read as data)");
    }
    m_size = static_cast<std::uint64_t>(st.st_size);
}

FileHandle::~FileHandle()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

void FileHandle::read_exact(std::uint64_t offset, std::size_t n, std::byte* dst) const
{
    std::size_t done = 0;
    while (done < n) {
        const ssize_t got = ::pread(m_fd, dst + done, n - done, static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR)
                continue;
            throw InputError(fmt::format("{}: read error at byte {} ({})", m_path, offset + done, std::strerror(errno)));
        }
        if (got == 0)
            throw InputError(fmt::format("{}: unexpected end of file at byte {} (was the file truncated while open?)",
                                         m_path, offset + done));
        done += static_cast<std::size_t>(got);
    }
}

std::string sniff_format(std::span<const std::byte> first)
{
    auto starts = [&](std::string_view magic) {
        return first.size() >= magic.size() && std::memcmp(first.data(), magic.data(), magic.size()) == 0;
    };
    if (starts("\x89HDF\r\n\x1a\n"))
        return "an HDF5 file (use the .h5 extension)";
    if (starts("\x93NUMPY"))
        return "a .npy file";
    if (starts("PK\x03\x04") || starts("PK\x05\x06"))
        return "a zip archive (.npz, or a PyTorch .pt checkpoint)";
    if (first.size() >= 2 && first[0] == std::byte{0x80} && static_cast<int>(first[1]) >= 2 && static_cast<int>(first[1]) <= 5)
        return "a Python pickle (never loaded)";
    if (starts("\x1f\x8b"))
        return "a gzip-compressed file";
    if (first.size() >= 9 && first[8] == std::byte{'{'})
        return "a .safetensors file";
    return {};
}

}  // namespace detail

}  // namespace attnscope::io
