// .safetensors: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data buffer (offsets are relative to it). Always little-endian, C order.
// https://github.com/huggingface/safetensors#format
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/detail.h"
#include "util/error.h"

namespace attnscope::io::detail {

namespace {

constexpr std::uint64_t kMaxHeader = 100ULL << 20;   // the reference implementation's limit
constexpr int kMaxJsonDepth = 64;

struct DTypeName {
    const char* name;
    DType type;
};
constexpr DTypeName kDTypes[] = {
    {"F16", DType::f16}, {"BF16", DType::bf16}, {"F32", DType::f32}, {"F64", DType::f64}, {"I8", DType::i8},
    {"I16", DType::i16}, {"I32", DType::i32},   {"I64", DType::i64}, {"U8", DType::u8},   {"U16", DType::u16},
    {"U32", DType::u32}, {"U64", DType::u64},   {"BOOL", DType::boolean},
};

// The header's JSON, parsed strictly: bounded nesting (the metadata is later printed recursively) and no
// key given twice in one object (a JSON parser keeps the last one silently).
nlohmann::json parse_strict_json(const std::string& path, const std::string& text)
{
    try {
        std::vector<std::set<std::string>> keys;   // every open object's keys
        return nlohmann::json::parse(text, [&keys](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
            if (depth > kMaxJsonDepth)
                throw InputError("JSON nested deeper than 64 levels");
            using E = nlohmann::json::parse_event_t;
            if (event == E::object_start)
                keys.emplace_back();
            else if (event == E::object_end && !keys.empty())
                keys.pop_back();
            else if (event == E::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
                throw InputError("the key \"" + parsed.get<std::string>() + "\" appears twice");
            return true;
        });
    } catch (const nlohmann::json::exception& e) {   // parse_error, and out_of_range for a number such as 1e999
        throw InputError(fmt::format("{}: invalid JSON header: {}", path, e.what()));
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: invalid JSON header: {}", path, e.what()));
    }
}

// `w` names the entry in messages (file and tensor).
DType parse_dtype(const std::string& w, const nlohmann::json& dt)
{
    if (!dt.is_string())
        throw InputError(w + ": invalid header entry (dtype is not a string)");
    const std::string dtype = dt.get<std::string>();
    const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const DTypeName& d) { return dtype == d.name; });
    if (known != std::end(kDTypes))
        return known->type;
    if (dtype.rfind("F8", 0) == 0 || dtype.rfind("F6", 0) == 0 || dtype.rfind("F4", 0) == 0)
        throw InputError(fmt::format("{}: unsupported element type {} (8-bit and smaller floats are not "
                                     "read; convert to F16/BF16/F32)",
                                     w, dtype));
    throw InputError(fmt::format("{}: unknown dtype '{}' (known: F16 BF16 F32 F64 I8 I16 I32 I64 U8 U16 "
                                 "U32 U64 BOOL)",
                                 w, dtype));
}

std::vector<std::int64_t> parse_shape(const std::string& w, const nlohmann::json& sh)
{
    if (!sh.is_array() || sh.size() > 64)
        throw InputError(w + ": invalid header entry (shape is not an array of at most 64 sizes)");
    std::vector<std::int64_t> shape;
    for (const auto& d : sh) {
        if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<std::int64_t>() >= 0))
            throw InputError(w + ": invalid header entry (shape holds something other than a non-negative integer)");
        const std::uint64_t u = d.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(INT64_MAX))
            throw InputError(w + ": invalid header entry (a shape entry is too large)");
        shape.push_back(static_cast<std::int64_t>(u));
    }
    return shape;
}

struct Entry {
    TensorInfo info;
    StoredArray array;
    std::uint64_t begin = 0, end = 0;   // data_offsets, relative to the data buffer
};

// One tensor's header entry, checked against the data buffer (data_size bytes from data_start).
Entry parse_entry(const std::string& w, const std::string& key, const nlohmann::json& v, std::uint64_t data_start,
                  std::uint64_t data_size)
{
    if (!v.is_object())
        throw InputError(w + ": invalid header entry (not an object)");
    const auto dt = v.find("dtype");
    const auto sh = v.find("shape");
    const auto off = v.find("data_offsets");
    if (dt == v.end() || sh == v.end() || off == v.end())
        throw InputError(w + ": invalid header entry (needs dtype, shape and data_offsets)");
    Entry e;
    e.info.name = key;
    e.info.dtype = parse_dtype(w, *dt);
    e.info.shape = parse_shape(w, *sh);
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
        throw InputError(w + ": invalid header entry (data_offsets is not [begin, end] of non-negative integers)");
    e.begin = (*off)[0].get<std::uint64_t>();
    e.end = (*off)[1].get<std::uint64_t>();
    if (e.end < e.begin || e.end > data_size)
        throw InputError(fmt::format("{}: data_offsets [{}, {}] lie outside the data buffer of {} bytes", w,
                                     e.begin, e.end, data_size));
    std::uint64_t elements = 0, bytes = 0;
    if (!checked_product(e.info.shape, elements) || !checked_mul(elements, dtype_size(e.info.dtype), bytes))
        throw InputError(fmt::format("{}: shape {} overflows 64-bit sizes", w, shape_text(e.info.shape)));
    if (e.end - e.begin != bytes)
        throw InputError(fmt::format("{}: data_offsets [{}, {}] span {} bytes but shape {} of {} needs {}", w,
                                     e.begin, e.end, e.end - e.begin, shape_text(e.info.shape),
                                     dtype_name(e.info.dtype), bytes));
    e.array.data_offset = data_start + e.begin;
    e.array.dtype = e.info.dtype;
    e.array.big_endian = false;
    e.array.fortran_order = false;
    e.array.shape = e.info.shape;
    return e;
}

class SafetensorsFile final : public TensorFile {
public:
    explicit SafetensorsFile(const std::string& path) : TensorFile(path), m_file(path)
    {
        const std::uint64_t total = m_file.size();
        if (total == 0)
            throw InputError(path + ": empty file (0 bytes), not a .safetensors file");
        if (total < 8)
            throw InputError(fmt::format("{}: {} bytes is too short for a .safetensors file", path, total));
        std::byte len_bytes[8];
        m_file.read_exact(0, 8, len_bytes);
        std::uint64_t n = 0;
        for (int i = 0; i < 8; ++i)
            n |= static_cast<std::uint64_t>(len_bytes[i]) << (8 * i);
        if (n > total - 8) {
            const std::string looks = sniff_format(std::span(len_bytes, 8));
            throw InputError(fmt::format("{}: header length {} runs past the end of the file ({} bytes){}", path, n,
                                         total, looks.empty() ? std::string() : "; it looks like " + looks));
        }
        if (n > kMaxHeader)
            throw InputError(fmt::format("{}: header length {} is above the {} limit", path, n, bytes_text(kMaxHeader)));
        if (n < 2)
            throw InputError(fmt::format("{}: header of {} bytes cannot hold a JSON object", path, n));
        std::string header(static_cast<std::size_t>(n), '\0');
        m_file.read_exact(8, header.size(), reinterpret_cast<std::byte*>(header.data()));
        m_data_start = 8 + n;
        parse_header(header, total - m_data_start);
    }

    std::string_view format() const override { return "safetensors"; }

    std::vector<double> read_box(const TensorInfo& tensor, std::span<const std::int64_t> start,
                                 std::span<const std::int64_t> count) const override
    {
        const std::size_t i = tensor_index(*this, tensor);
        const std::uint64_t elements = check_box(m_path, m_tensors[i], start, count);
        FileSource source(m_file);
        return gather_box(source, m_arrays[i], start, count, elements);
    }

private:
    void parse_header(const std::string& text, std::uint64_t data_size)
    {
        const nlohmann::json header = parse_strict_json(m_path, text);
        if (!header.is_object())
            throw InputError(m_path + ": invalid header: the JSON is not an object");

        std::vector<Entry> entries;
        for (auto it = header.begin(); it != header.end(); ++it) {
            const std::string& key = it.key();
            const nlohmann::json& v = it.value();
            if (key == "__metadata__") {
                if (!v.is_object() && !v.is_null())
                    throw InputError(m_path + ": invalid header: __metadata__ is not an object");
                if (v.is_object())
                    m_file_attributes = v;
                continue;
            }
            entries.push_back(parse_entry(where(m_path, key), key, v, m_data_start, data_size));
        }
        // In file order; tensors may not overlap (the reference implementation requires them to tile the buffer).
        std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
            return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
        });
        for (std::size_t i = 1; i < entries.size(); ++i)
            if (entries[i].begin < entries[i - 1].end)
                throw InputError(fmt::format("{}: tensors {} and {} overlap in the data buffer", m_path,
                                             entries[i - 1].info.name, entries[i].info.name));
        for (auto& e : entries) {
            m_tensors.push_back(std::move(e.info));
            m_arrays.push_back(std::move(e.array));
        }
    }

    FileHandle m_file;
    std::uint64_t m_data_start = 0;
    std::vector<StoredArray> m_arrays;   // parallel to m_tensors
};

}  // namespace

std::unique_ptr<TensorFile> open_safetensors(const std::string& path) { return std::make_unique<SafetensorsFile>(path); }

}  // namespace attnscope::io::detail
