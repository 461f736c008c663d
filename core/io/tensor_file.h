#pragma once
// One interface over every activation file format AttnScope reads.
//
// open_tensor_file() picks a reader from the file's extension (.h5/.hdf5, .npy, .npz, .safetensors),
// validates the container's structure and lists its tensors WITHOUT reading tensor data. read_box()
// reads one axis-aligned box of one tensor (an HDF5 hyperslab, a strided gather from .npy/.safetensors),
// widened to double. Every size the file claims is checked against the file's real size before
// anything is allocated from it. Malformed files throw InputError naming the file (and tensor).
//
// A file is data, never a way to reach other files or run code (docs/security.md "Data files"): only a
// regular file is opened (never a FIFO, device or socket, which could block or never end); HDF5 datasets
// whose bytes live outside the file (external raw storage, external links) are listed as skipped and
// refused when named; virtual datasets likewise, unless set_allow_virtual_datasets(true) and every source
// is a plain dataset in a regular file inside the file's own folder that covers its mapping; HDF5 filter
// plugins are never loaded.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnscope::io {

enum class DType { f16, bf16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, boolean };

// "float16", "bfloat16", "float32", "float64", "int8", ..., "uint64", "bool".
std::string_view dtype_name(DType t);
std::size_t dtype_size(DType t);

// An object in the file that is not a readable numeric tensor (an HDF5 string or compound dataset,
// a zip member that is not a .npy array), with the reason. Listed so that `info` can show it and
// find() can say why it cannot be selected.
struct SkippedObject {
    std::string name;
    std::string reason;   // e.g. "element type is a variable-length string"
};

struct TensorInfo {
    std::string name;                  // HDF5: absolute dataset path "/layer3/q"; npz: member "q" (without
                                       // ".npy"); safetensors: key; .npy: "" (one unnamed tensor)
    std::vector<std::int64_t> shape;   // row-major (C order) logical shape, as NumPy reports it
    DType dtype = DType::f32;
    nlohmann::json attributes = nlohmann::json::object();   // HDF5 dataset attributes (numbers, strings, arrays)
};

class TensorFile {
public:
    virtual ~TensorFile() = default;

    const std::string& path() const { return m_path; }
    virtual std::string_view format() const = 0;   // "hdf5", "npy", "npz", "safetensors"
    const std::vector<TensorInfo>& tensors() const { return m_tensors; }
    // File-level attributes: HDF5 root-group attributes, safetensors "__metadata__".
    const nlohmann::json& file_attributes() const { return m_file_attributes; }
    // Objects present in the file but not readable as numeric tensors (not in tensors()).
    const std::vector<SkippedObject>& skipped() const { return m_skipped; }
    // The file that the references in its attributes mean (a `mixing` attribute naming `m.npy` beside it,
    // or a dataset `/mixing` of it; analysis/file_defaults.h): the file itself. A tensor held in memory
    // answers with the file it was loaded from, or an empty path when it was not loaded from one.
    virtual std::string attributes_file() const { return m_path; }

    // The tensor called `name`; an empty name means "the only tensor" (error if there are several).
    // HDF5 names match with or without the leading '/', npz members with or without ".npy".
    // Throws InputError listing the available names (or saying why a skipped object is unreadable).
    const TensorInfo& find(std::string_view name) const;

    // Reads the box [start, start + count) of `tensor` (one entry per axis), widened to double, in
    // row-major order of the box. Throws InputError if the data cannot be read (truncated, corrupt)
    // and std::invalid_argument if the box is out of range.
    virtual std::vector<double> read_box(const TensorInfo& tensor, std::span<const std::int64_t> start,
                                         std::span<const std::int64_t> count) const = 0;

    // Reads the whole tensor (convenience for small tensors such as a mixing matrix).
    std::vector<double> read_all(const TensorInfo& tensor) const;

protected:
    explicit TensorFile(std::string path) : m_path(std::move(path)) {}
    std::string m_path;
    std::vector<TensorInfo> m_tensors;
    nlohmann::json m_file_attributes = nlohmann::json::object();
    std::vector<SkippedObject> m_skipped;
};

// Opens by extension. Throws InputError for a missing/unreadable file, an unknown or refused
// extension (.pt/.pth/.ckpt/.bin/.pkl are refused with advice: pickles are never loaded), or a
// malformed container.
std::unique_ptr<TensorFile> open_tensor_file(const std::string& path);

// Upper bound on the bytes one read_box may produce (default 8 GiB); reads beyond it throw InputError.
void set_read_limit_bytes(std::uint64_t bytes);
std::uint64_t read_limit_bytes();

// Whether HDF5 virtual datasets may be read (default false: the command line's --allow-virtual). Even then a
// virtual dataset is read only when each source file lies inside the virtual file's own folder (no `..`, no
// absolute path or symlink leading out), exists, and holds a plain dataset covering what is mapped from it.
void set_allow_virtual_datasets(bool allow);
bool allow_virtual_datasets();

// The two reading settings above, as one value (the process starts with these defaults).
struct ReadSettings {
    std::uint64_t read_limit_bytes = 8ULL << 30;
    bool allow_virtual_datasets = false;
};

// While one lives, this thread reads with its own settings, starting from `start`: read_limit_bytes() and
// allow_virtual_datasets() answer from it, and set_read_limit_bytes() / set_allow_virtual_datasets() on this
// thread change it instead of the process's. For a process that runs many analyses, side by side on
// several threads, each with its own options (the Python module, docs/python.md "No state between calls"):
// nothing a call sets outlives it or reaches another call. Scopes nest (the inner one wins until it ends).
// Reads happen on the thread that runs an analysis (the kernels' threads read no file), so one scope
// on that thread covers the whole call.
class ReadSettingsScope {
public:
    explicit ReadSettingsScope(ReadSettings start = {});
    ~ReadSettingsScope();
    ReadSettingsScope(const ReadSettingsScope&) = delete;
    ReadSettingsScope& operator=(const ReadSettingsScope&) = delete;
    const ReadSettings& settings() const { return m_settings; }

private:
    ReadSettings m_settings;
    ReadSettings* m_outer;
};

}  // namespace attnscope::io
