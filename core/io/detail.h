#pragma once
// Internals shared by the readers in core/io (not part of the public API): checked size arithmetic,
// element conversion (float16/bfloat16 by hand, byte swapping), box validation against the read
// limit, and one strided gather used by every format whose bytes we address ourselves (.npy, .npz
// members, .safetensors). HDF5 has its own path (hyperslabs).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensor_file.h"

namespace attnscope::io::detail {

// ------------------------------------------------------------------------------ checked arithmetic
// a * b, or false on overflow of uint64.
inline bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_mul_overflow(a, b, &out); }
inline bool checked_add(std::uint64_t a, std::uint64_t b, std::uint64_t& out) { return !__builtin_add_overflow(a, b, &out); }

// Product of a shape (every entry >= 0), false on overflow.
bool checked_product(std::span<const std::int64_t> shape, std::uint64_t& out);

// "[3, 4, 5]"
std::string shape_text(std::span<const std::int64_t> shape);
// "12345 bytes (12.1 KiB)"
std::string bytes_text(std::uint64_t bytes);
// The text to put before ": message" for a tensor: "FILE:NAME" (or "FILE" for an unnamed .npy tensor).
std::string where(const std::string& path, std::string_view tensor_name);

// --------------------------------------------------------------------------------------- elements
double half_to_double(std::uint16_t bits);
double bfloat16_to_double(std::uint16_t bits);

// Widens n stored elements of type t (byte-swapped first when `swap`) into dst.
void convert_elements(const std::byte* src, std::size_t n, DType t, bool swap, double* dst);

// True when data stored with the given byte order must be swapped on this machine.
bool needs_swap(bool stored_big_endian);

// ---------------------------------------------------------------------------------------- boxes
// Validates a read_box request against `tensor` (rank, range: std::invalid_argument) and the read
// limit (InputError naming the sizes); returns the number of elements in the box.
std::uint64_t check_box(const std::string& path, const TensorInfo& tensor, std::span<const std::int64_t> start,
                        std::span<const std::int64_t> count);

// Index of `tensor` in file.tensors() (by identity, else by exact name); std::invalid_argument if absent.
std::size_t tensor_index(const TensorFile& file, const TensorInfo& tensor);

// ---------------------------------------------------------------------------------- byte sources
// Random or forward-only access to the bytes of a file or a zip member. Offsets passed to read()
// by gather_box() never decrease, so a forward-only stream can serve them.
class ByteSource {
public:
    virtual ~ByteSource() = default;
    // Reads exactly n bytes at `offset` into dst or throws InputError.
    virtual void read(std::uint64_t offset, std::size_t n, std::byte* dst) = 0;
    // Told once before the reads: each run is run_bytes long, consecutive runs start stride_bytes
    // apart (0: a single run), and no byte at or after `end` belongs to the array.
    virtual void plan(std::uint64_t run_bytes, std::uint64_t stride_bytes, std::uint64_t end) {}
};

// An open file descriptor (closed on destruction).
class FileHandle {
public:
    // Opens read-only; throws InputError "PATH: cannot open (reason)".
    explicit FileHandle(const std::string& path);
    ~FileHandle();
    FileHandle(const FileHandle&) = delete;
    FileHandle& operator=(const FileHandle&) = delete;

    int fd() const { return m_fd; }
    std::uint64_t size() const { return m_size; }
    const std::string& path() const { return m_path; }
    // Reads exactly n bytes at offset (pread, safe from several threads) or throws InputError.
    void read_exact(std::uint64_t offset, std::size_t n, std::byte* dst) const;

private:
    std::string m_path;
    int m_fd = -1;
    std::uint64_t m_size = 0;
};

// Reads a file with pread. Many short runs close together (a Fortran-order head slice, an index
// axis stored fastest) are served from a window of the file instead of one system call each.
class FileSource final : public ByteSource {
public:
    explicit FileSource(const FileHandle& file) : m_file(file) {}
    void read(std::uint64_t offset, std::size_t n, std::byte* dst) override;
    void plan(std::uint64_t run_bytes, std::uint64_t stride_bytes, std::uint64_t end) override;

private:
    const FileHandle& m_file;
    bool m_windowed = false;
    std::uint64_t m_end = 0;
    std::vector<std::byte> m_window;
    std::uint64_t m_window_offset = 0;
    std::size_t m_window_len = 0;
};

// Where and how an array's elements are stored in a byte source.
struct StoredArray {
    std::uint64_t data_offset = 0;          // first element's byte offset in the source
    DType dtype = DType::f64;
    bool big_endian = false;
    bool fortran_order = false;             // column-major storage of the (row-major) logical shape
    std::vector<std::int64_t> shape;
};

// Reads the box [start, start + count) of `array` (already validated by check_box) and returns it
// widened to double in row-major box order. Bytes are requested in increasing offset order, in
// runs as long as the storage allows (a C-order head slice of [H, N, d] is one run).
std::vector<double> gather_box(ByteSource& source, const StoredArray& array, std::span<const std::int64_t> start,
                               std::span<const std::int64_t> count, std::uint64_t elements);

// ------------------------------------------------------------------------------------------ .npy
// The fixed part of a .npy file: magic, version, header length.
struct NpyPreamble {
    int major = 0, minor = 0;
    std::uint64_t header_len = 0;   // bytes of the header dict (after the preamble)
    std::uint64_t prefix_len = 0;   // 10 (version 1) or 12 (versions 2, 3)
};

// Parses the first bytes of a .npy stream (`first` holds min(12, total) bytes). `total` is the
// number of bytes in the stream (file or member). Throws InputError prefixed with `where_text`.
NpyPreamble parse_npy_preamble(std::span<const std::byte> first, std::uint64_t total, const std::string& where_text);

// The header dict ({'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }) as a StoredArray
// with data_offset = 0. Rejects object/structured/complex/string dtypes with a clear message.
StoredArray parse_npy_header(std::string_view header, const std::string& where_text);

// The largest npy header we accept (NumPy itself refuses more than 10000 bytes by default).
inline constexpr std::uint64_t kMaxNpyHeader = 1u << 20;

// What the first bytes of a file look like, for hints in error messages ("an HDF5 file", ...); empty if unknown.
std::string sniff_format(std::span<const std::byte> first);

// --------------------------------------------------------------------------------- reader factories
std::unique_ptr<TensorFile> open_npy(const std::string& path);
std::unique_ptr<TensorFile> open_npz(const std::string& path);
std::unique_ptr<TensorFile> open_safetensors(const std::string& path);
std::unique_ptr<TensorFile> open_hdf5(const std::string& path);

}  // namespace attnscope::io::detail
