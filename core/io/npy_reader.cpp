// .npy: the format (versions 1.0, 2.0, 3.0), its header (a Python dict literal), and the reader.
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "io/detail.h"
#include "util/error.h"

namespace attnscope::io::detail {

namespace {

// --------------------------------------------------------------------------- Python literal parser
// Just enough of Python's literal syntax for npy headers: dicts, tuples, lists, strings, integers,
// True/False/None. Anything else is an error; nesting is bounded so hostile headers cannot recurse deep.
struct PyValue;
struct PyEntry;   // not std::pair: pair of an incomplete type is ill-formed (clang + libstdc++ reject it)
using PyList = std::vector<PyValue>;
using PyDict = std::vector<PyEntry>;
struct PyValue {
    enum class Kind { none, boolean, integer, string, tuple, list, dict } kind = Kind::none;
    bool b = false;
    std::int64_t i = 0;
    std::string s;
    PyList items;
    PyDict entries;
};
struct PyEntry {
    PyValue key;
    PyValue value;
};

class LiteralParser {
public:
    LiteralParser(std::string_view text, const std::string& where) : m_text(text), m_where(where) {}

    PyValue parse_all()
    {
        PyValue v = value(0);
        skip_ws();
        if (m_pos != m_text.size())
            fail("unexpected text after the header dict");
        return v;
    }

private:
    [[noreturn]] void fail(std::string_view what) const
    {
        throw InputError(fmt::format("{}: malformed .npy header ({} at character {}): {}", m_where, what, m_pos,
                                     excerpt()));
    }
    std::string excerpt() const
    {
        std::string e;
        std::string_view shown = m_text;
        while (!shown.empty() && std::isspace(static_cast<unsigned char>(shown.back())))
            shown.remove_suffix(1);
        for (char c : shown.substr(0, 120))
            e += (static_cast<unsigned char>(c) >= 32 && static_cast<unsigned char>(c) < 127) ? c : '?';
        if (shown.size() > 120)
            e += "...";
        return e;
    }
    void skip_ws()
    {
        while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\t' || m_text[m_pos] == '\n' ||
                                         m_text[m_pos] == '\r'))
            ++m_pos;
    }
    bool eat(char c)
    {
        skip_ws();
        if (m_pos < m_text.size() && m_text[m_pos] == c) {
            ++m_pos;
            return true;
        }
        return false;
    }
    PyValue value(int depth)
    {
        if (depth > 16)
            fail("nesting too deep");
        skip_ws();
        if (m_pos >= m_text.size())
            fail("unexpected end");
        const char c = m_text[m_pos];
        if (c == '{')
            return dict(depth);
        if (c == '(' || c == '[')
            return sequence(depth);
        if (c == '\'' || c == '"')
            return string();
        if (c == '-' || (c >= '0' && c <= '9'))
            return integer();
        return word();
    }
    PyValue dict(int depth)
    {
        ++m_pos;
        PyValue v;
        v.kind = PyValue::Kind::dict;
        while (!eat('}')) {
            PyValue key = value(depth + 1);
            if (!eat(':'))
                fail("expected ':'");
            PyValue val = value(depth + 1);
            v.entries.push_back(PyEntry{std::move(key), std::move(val)});
            if (!eat(',')) {
                if (!eat('}'))
                    fail("expected ',' or '}'");
                break;
            }
        }
        return v;
    }
    PyValue sequence(int depth)
    {
        const char open = m_text[m_pos++];
        const char close = open == '(' ? ')' : ']';
        PyValue v;
        v.kind = open == '(' ? PyValue::Kind::tuple : PyValue::Kind::list;
        while (!eat(close)) {
            v.items.push_back(value(depth + 1));
            if (!eat(',')) {
                if (!eat(close))
                    fail(fmt::format("expected ',' or '{}'", close));
                break;
            }
        }
        return v;
    }
    PyValue string()
    {
        const char quote = m_text[m_pos++];
        PyValue v;
        v.kind = PyValue::Kind::string;
        while (true) {
            if (m_pos >= m_text.size())
                fail("unterminated string");
            const char c = m_text[m_pos++];
            if (c == quote)
                break;
            if (c == '\\') {
                if (m_pos >= m_text.size())
                    fail("unterminated string");
                const char e = m_text[m_pos++];
                v.s += e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else {
                v.s += c;
            }
        }
        return v;
    }
    PyValue integer()
    {
        const std::size_t begin = m_pos;
        if (m_text[m_pos] == '-')
            ++m_pos;
        while (m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9')
            ++m_pos;
        PyValue v;
        v.kind = PyValue::Kind::integer;
        const auto [ptr, ec] = std::from_chars(m_text.data() + begin, m_text.data() + m_pos, v.i);
        if (ec == std::errc::result_out_of_range)
            fail("integer out of range");
        if (ec != std::errc() || ptr != m_text.data() + m_pos)
            fail("bad integer");
        if (m_pos < m_text.size() && (m_text[m_pos] == 'L' || m_text[m_pos] == 'l'))
            ++m_pos;   // Python 2 long suffix, as old NumPy wrote it
        return v;
    }
    PyValue word()
    {
        const std::size_t begin = m_pos;
        while (m_pos < m_text.size() && std::isalpha(static_cast<unsigned char>(m_text[m_pos])))
            ++m_pos;
        const std::string_view w = m_text.substr(begin, m_pos - begin);
        PyValue v;
        if (w == "True" || w == "False") {
            v.kind = PyValue::Kind::boolean;
            v.b = w == "True";
        } else if (w == "None") {
            v.kind = PyValue::Kind::none;
        } else {
            m_pos = begin;
            fail("unexpected token");
        }
        return v;
    }

    std::string_view m_text;
    const std::string& m_where;
    std::size_t m_pos = 0;
};

// A NumPy type string such as '<f4' -> element type and byte order.
void parse_descr(const std::string& descr, const std::string& where_text, StoredArray& out)
{
    auto unsupported = [&](std::string_view what) -> InputError {
        return InputError(fmt::format("{}: unsupported element type {} ('{}'); AttnScope reads float16/32/64, "
                                      "integers and bool",
                                      where_text, what, descr));
    };
    std::string_view d = descr;
    char order = '=';
    if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '='))
        order = d[0], d.remove_prefix(1);
    if (d.empty())
        throw InputError(fmt::format("{}: malformed .npy header: empty dtype", where_text));
    const char kind = d[0];
    d.remove_prefix(1);
    int size = 0;   // bytes per element
    if (!d.empty()) {
        const auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), size);
        if (ec != std::errc() || ptr != d.data() + d.size()) {
            if (kind == 'M' || kind == 'm')
                throw unsupported(kind == 'M' ? "datetime64" : "timedelta64");
            throw InputError(fmt::format("{}: malformed .npy dtype '{}'", where_text, descr));
        }
    }
    const long long bits = static_cast<long long>(size) * 8;   // for messages: '<f499999992' must not overflow int
    auto pick = [&](std::initializer_list<std::pair<int, DType>> options, std::string_view family) {
        for (const auto& [s, t] : options)
            if (s == size) {
                out.dtype = t;
                return;
            }
        throw unsupported(fmt::format("{}{}", family, bits));
    };
    switch (kind) {
    case 'f': pick({{2, DType::f16}, {4, DType::f32}, {8, DType::f64}}, "float"); break;
    case 'i': pick({{1, DType::i8}, {2, DType::i16}, {4, DType::i32}, {8, DType::i64}}, "int"); break;
    case 'u': pick({{1, DType::u8}, {2, DType::u16}, {4, DType::u32}, {8, DType::u64}}, "uint"); break;
    case 'b':
    case '?':
        if (size != 1 && !(kind == '?' && size == 0))
            throw unsupported(fmt::format("bool{}", bits));
        out.dtype = DType::boolean;
        break;
    case 'c': throw unsupported(fmt::format("complex{}", bits));
    case 'O': throw unsupported("object (Python objects)");
    case 'U': throw unsupported("unicode string");
    case 'S':
    case 'a': throw unsupported("byte string");
    case 'V':
        throw unsupported(size == 2 ? "raw 2-byte void (bfloat16 saved through ml_dtypes? save as float32 or "
                                      "safetensors instead)"
                                    : "raw bytes (void)");
    case 'M': throw unsupported("datetime64");
    case 'm': throw unsupported("timedelta64");
    default: throw InputError(fmt::format("{}: unknown element type '{}'", where_text, descr));
    }
    if (order == '|' && dtype_size(out.dtype) > 1)
        throw InputError(fmt::format("{}: dtype '{}' has no byte order", where_text, descr));
    out.big_endian = order == '>' || (order == '=' && std::endian::native == std::endian::big);
}

}  // namespace

NpyPreamble parse_npy_preamble(std::span<const std::byte> first, std::uint64_t total, const std::string& w)
{
    if (total == 0)
        throw InputError(w + ": empty file (0 bytes), not a .npy array");
    if (first.size() < 6 || std::memcmp(first.data(), "\x93NUMPY", 6) != 0) {
        const std::string looks = sniff_format(first);
        throw InputError(fmt::format("{}: not a .npy file (bad magic; expected \\x93NUMPY){}", w,
                                     looks.empty() ? std::string() : "; it looks like " + looks));
    }
    if (first.size() < 10)
        throw InputError(fmt::format("{}: truncated .npy preamble ({} bytes)", w, total));
    NpyPreamble p;
    p.major = static_cast<int>(first[6]);
    p.minor = static_cast<int>(first[7]);
    if (p.major == 1 && p.minor == 0) {
        p.prefix_len = 10;
        p.header_len = static_cast<std::uint64_t>(first[8]) | (static_cast<std::uint64_t>(first[9]) << 8);
    } else if ((p.major == 2 || p.major == 3) && p.minor == 0) {
        if (first.size() < 12)
            throw InputError(fmt::format("{}: truncated .npy preamble ({} bytes)", w, total));
        p.prefix_len = 12;
        p.header_len = 0;
        for (int i = 0; i < 4; ++i)
            p.header_len |= static_cast<std::uint64_t>(first[8 + i]) << (8 * i);
    } else {
        throw InputError(fmt::format("{}: unsupported .npy format version {}.{} (known: 1.0, 2.0, 3.0)", w, p.major,
                                     p.minor));
    }
    if (p.header_len > total - p.prefix_len)
        throw InputError(fmt::format("{}: .npy header length {} runs past the end of the data ({} bytes in all)", w,
                                     p.header_len, total));
    if (p.header_len > kMaxNpyHeader)
        throw InputError(fmt::format("{}: .npy header of {} bytes is implausibly large (limit {})", w, p.header_len,
                                     kMaxNpyHeader));
    return p;
}

StoredArray parse_npy_header(std::string_view header, const std::string& w)
{
    LiteralParser parser(header, w);
    const PyValue top = parser.parse_all();
    if (top.kind != PyValue::Kind::dict)
        throw InputError(w + ": malformed .npy header: not a dict");
    StoredArray out;
    bool have_descr = false, have_order = false, have_shape = false;
    for (const auto& [key, val] : top.entries) {
        if (key.kind != PyValue::Kind::string)
            throw InputError(w + ": malformed .npy header: a key is not a string");
        bool* seen = key.s == "descr" ? &have_descr : key.s == "fortran_order" ? &have_order : key.s == "shape" ? &have_shape : nullptr;
        if (!seen)
            throw InputError(fmt::format("{}: malformed .npy header: unexpected key '{}'", w, key.s));
        if (*seen)
            throw InputError(fmt::format("{}: malformed .npy header: key '{}' appears twice", w, key.s));
        *seen = true;
        if (key.s == "descr") {
            if (val.kind == PyValue::Kind::list)
                throw InputError(w + ": unsupported element type: a structured dtype (record array); save each "
                                     "field as its own array");
            if (val.kind != PyValue::Kind::string)
                throw InputError(w + ": malformed .npy header: 'descr' is not a string");
            parse_descr(val.s, w, out);
        } else if (key.s == "fortran_order") {
            if (val.kind != PyValue::Kind::boolean)
                throw InputError(w + ": malformed .npy header: 'fortran_order' is not True/False");
            out.fortran_order = val.b;
        } else {
            if (val.kind != PyValue::Kind::tuple && val.kind != PyValue::Kind::list)
                throw InputError(w + ": malformed .npy header: 'shape' is not a tuple");
            if (val.items.size() > 64)
                throw InputError(fmt::format("{}: .npy shape has {} axes (at most 64)", w, val.items.size()));
            for (const auto& dim : val.items) {
                if (dim.kind != PyValue::Kind::integer || dim.i < 0)
                    throw InputError(w + ": malformed .npy header: 'shape' holds something other than a "
                                         "non-negative integer");
                out.shape.push_back(dim.i);
            }
        }
    }
    if (!have_descr || !have_order || !have_shape)
        throw InputError(fmt::format("{}: malformed .npy header: missing key '{}'", w,
                                     !have_descr ? "descr" : !have_order ? "fortran_order" : "shape"));
    return out;
}

namespace {

class NpyFile final : public TensorFile {
public:
    explicit NpyFile(const std::string& path) : TensorFile(path), m_file(path)
    {
        const std::uint64_t total = m_file.size();
        std::byte first[12] = {};
        const std::size_t n_first = static_cast<std::size_t>(std::min<std::uint64_t>(total, sizeof first));
        m_file.read_exact(0, n_first, first);
        const NpyPreamble pre = parse_npy_preamble(std::span(first, n_first), total, path);
        std::string header(static_cast<std::size_t>(pre.header_len), '\0');
        m_file.read_exact(pre.prefix_len, header.size(), reinterpret_cast<std::byte*>(header.data()));
        m_array = parse_npy_header(header, path);
        m_array.data_offset = pre.prefix_len + pre.header_len;

        std::uint64_t elements = 0, bytes = 0;
        if (!checked_product(m_array.shape, elements) || !checked_mul(elements, dtype_size(m_array.dtype), bytes))
            throw InputError(fmt::format("{}: header claims shape {} of {}, which overflows 64-bit sizes", path,
                                         shape_text(m_array.shape), dtype_name(m_array.dtype)));
        const std::uint64_t available = total - m_array.data_offset;
        if (bytes > available)
            throw InputError(fmt::format("{}: truncated: shape {} of {} needs {} of data, the file has {}", path,
                                         shape_text(m_array.shape), dtype_name(m_array.dtype), bytes_text(bytes),
                                         bytes_text(available)));
        if (bytes < available)
            throw InputError(fmt::format("{}: {} bytes follow the data of shape {} of {} ({} expected, {} present); "
                                         "the file is not a single .npy array",
                                         path, available - bytes, shape_text(m_array.shape), dtype_name(m_array.dtype),
                                         bytes, available));
        TensorInfo t;
        t.name = "";   // a .npy holds one unnamed tensor
        t.shape = m_array.shape;
        t.dtype = m_array.dtype;
        m_tensors.push_back(std::move(t));
    }

    std::string_view format() const override { return "npy"; }

    std::vector<double> read_box(const TensorInfo& tensor, std::span<const std::int64_t> start,
                                 std::span<const std::int64_t> count) const override
    {
        const TensorInfo& t = m_tensors[tensor_index(*this, tensor)];
        const std::uint64_t elements = check_box(m_path, t, start, count);
        FileSource source(m_file);
        return gather_box(source, m_array, start, count, elements);
    }

private:
    FileHandle m_file;
    StoredArray m_array;
};

}  // namespace

std::unique_ptr<TensorFile> open_npy(const std::string& path) { return std::make_unique<NpyFile>(path); }

}  // namespace attnscope::io::detail
