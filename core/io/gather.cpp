// Element conversion and the strided box gather shared by the .npy, .npz and .safetensors readers.
#include <algorithm>
#include <bit>
#include <cstring>

#include "io/detail.h"

namespace attnscope::io::detail {

double half_to_double(std::uint16_t h)
{
    // IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. Build the binary64 bits
    // directly: every half value (subnormals included) is exactly representable as a double.
    const std::uint64_t sign = static_cast<std::uint64_t>(h >> 15) << 63;
    const int exponent = (h >> 10) & 0x1f;
    std::uint64_t mantissa = h & 0x3ffu;
    std::uint64_t bits = 0;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;   // +-0
        } else {
            // Subnormal: mantissa * 2^-24. Normalise so the leading 1 sits in bit 10.
            int e = -14;
            while ((mantissa & 0x400u) == 0) {
                mantissa <<= 1;
                --e;
            }
            mantissa &= 0x3ffu;
            bits = sign | (static_cast<std::uint64_t>(e + 1023) << 52) | (mantissa << 42);
        }
    } else if (exponent == 0x1f) {
        bits = sign | (0x7ffULL << 52) | (mantissa << 42);   // inf (mantissa 0) or NaN (payload kept)
    } else {
        bits = sign | (static_cast<std::uint64_t>(exponent - 15 + 1023) << 52) | (mantissa << 42);
    }
    return std::bit_cast<double>(bits);
}

double bfloat16_to_double(std::uint16_t h)
{
    // bfloat16 is the upper half of a binary32; widening float -> double is exact.
    return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16));
}

bool needs_swap(bool stored_big_endian) { return stored_big_endian != (std::endian::native == std::endian::big); }

namespace {

template <typename U>
U load(const std::byte* p, bool swap)
{
    U v;
    std::memcpy(&v, p, sizeof v);
    if (swap) {
        if constexpr (sizeof(U) == 2)
            v = __builtin_bswap16(v);
        else if constexpr (sizeof(U) == 4)
            v = __builtin_bswap32(v);
        else if constexpr (sizeof(U) == 8)
            v = __builtin_bswap64(v);
    }
    return v;
}

// T: the stored type; U: an unsigned type of the same size used for the byte swap.
template <typename T, typename U>
void convert_as(const std::byte* src, std::size_t n, bool swap, double* dst)
{
    static_assert(sizeof(T) == sizeof(U));
    for (std::size_t i = 0; i < n; ++i)
        dst[i] = static_cast<double>(std::bit_cast<T>(load<U>(src + i * sizeof(T), swap)));
}

}  // namespace

void convert_elements(const std::byte* src, std::size_t n, DType t, bool swap, double* dst)
{
    switch (t) {
    case DType::f16:
        for (std::size_t i = 0; i < n; ++i)
            dst[i] = half_to_double(load<std::uint16_t>(src + 2 * i, swap));
        return;
    case DType::bf16:
        for (std::size_t i = 0; i < n; ++i)
            dst[i] = bfloat16_to_double(load<std::uint16_t>(src + 2 * i, swap));
        return;
    case DType::f32: convert_as<float, std::uint32_t>(src, n, swap, dst); return;
    case DType::f64: convert_as<double, std::uint64_t>(src, n, swap, dst); return;
    case DType::i8: convert_as<std::int8_t, std::uint8_t>(src, n, false, dst); return;
    case DType::u8: convert_as<std::uint8_t, std::uint8_t>(src, n, false, dst); return;
    case DType::i16: convert_as<std::int16_t, std::uint16_t>(src, n, swap, dst); return;
    case DType::u16: convert_as<std::uint16_t, std::uint16_t>(src, n, swap, dst); return;
    case DType::i32: convert_as<std::int32_t, std::uint32_t>(src, n, swap, dst); return;
    case DType::u32: convert_as<std::uint32_t, std::uint32_t>(src, n, swap, dst); return;
    case DType::i64: convert_as<std::int64_t, std::uint64_t>(src, n, swap, dst); return;
    case DType::u64: convert_as<std::uint64_t, std::uint64_t>(src, n, swap, dst); return;
    case DType::boolean:
        for (std::size_t i = 0; i < n; ++i)
            dst[i] = src[i] != std::byte{0} ? 1.0 : 0.0;
        return;
    }
}

void FileSource::plan(std::uint64_t run_bytes, std::uint64_t stride_bytes, std::uint64_t end)
{
    m_windowed = stride_bytes > 0 && run_bytes < 4096 && stride_bytes <= 16384;
    m_end = std::min(end, m_file.size());
    m_window_len = 0;
}

void FileSource::read(std::uint64_t offset, std::size_t n, std::byte* dst)
{
    constexpr std::size_t window = 1u << 20;
    if (!m_windowed || n > window / 4) {
        m_file.read_exact(offset, n, dst);
        return;
    }
    if (offset < m_window_offset || offset + n > m_window_offset + m_window_len) {
        if (offset + n > m_end) {   // cannot happen for a validated array; read directly to get the error
            m_file.read_exact(offset, n, dst);
            return;
        }
        m_window.resize(window);
        m_window_offset = offset;
        m_window_len = static_cast<std::size_t>(std::min<std::uint64_t>(window, m_end - offset));
        m_file.read_exact(offset, m_window_len, m_window.data());
    }
    std::memcpy(dst, m_window.data() + (offset - m_window_offset), n);
}

std::vector<double> gather_box(ByteSource& source, const StoredArray& array, std::span<const std::int64_t> start,
                               std::span<const std::int64_t> count, std::uint64_t elements)
{
    std::vector<double> out(static_cast<std::size_t>(elements));
    if (elements == 0)
        return out;
    const std::size_t rank = array.shape.size();
    const std::size_t item = dtype_size(array.dtype);
    const bool swap = item > 1 && needs_swap(array.big_endian);
    if (rank == 0) {
        std::byte buf[8];
        source.read(array.data_offset, item, buf);
        convert_elements(buf, 1, array.dtype, swap, out.data());
        return out;
    }

    // Axes from fastest-varying in storage to slowest; element strides in storage and in the output.
    std::vector<std::size_t> order(rank);
    for (std::size_t i = 0; i < rank; ++i)
        order[i] = array.fortran_order ? i : rank - 1 - i;
    std::vector<std::uint64_t> sstride(rank), ostride(rank);
    {
        std::uint64_t s = 1;
        for (const std::size_t a : order) {
            sstride[a] = s;
            s *= static_cast<std::uint64_t>(array.shape[a]);   // fits: the file's size bounds the product
        }
        std::uint64_t o = 1;
        for (std::size_t a = rank; a-- > 0;) {
            ostride[a] = o;
            o *= static_cast<std::uint64_t>(count[a]);
        }
    }

    // The contiguous run: the fastest axis, extended to slower axes while every faster one is taken whole.
    std::size_t run_axes = 1;
    std::uint64_t run_len = static_cast<std::uint64_t>(count[order[0]]);
    while (run_axes < rank && count[order[run_axes - 1]] == array.shape[order[run_axes - 1]]) {
        run_len *= static_cast<std::uint64_t>(count[order[run_axes]]);
        ++run_axes;
    }
    {
        std::uint64_t total = 1;
        for (const auto s : array.shape)
            total *= static_cast<std::uint64_t>(s);
        const std::uint64_t stride = run_axes < rank ? sstride[order[run_axes]] * item : 0;
        source.plan(run_len * item, stride, array.data_offset + total * item);
    }
    // In C order the run's elements are consecutive in the output as well.
    const bool contiguous_out = !array.fortran_order || rank == 1;

    constexpr std::uint64_t piece_elems_max = 1u << 18;
    const std::uint64_t piece_elems = std::min(run_len, piece_elems_max);
    std::vector<std::byte> raw(static_cast<std::size_t>(piece_elems * item));
    std::vector<double> tmp(contiguous_out ? 0 : static_cast<std::size_t>(piece_elems));

    // Odometer over the axes outside the run (slowest last, so storage offsets only grow).
    std::vector<std::int64_t> idx(rank, 0);
    std::vector<std::int64_t> run_idx(run_axes, 0);
    for (;;) {
        std::uint64_t soff = 0, obase = 0;
        for (std::size_t a = 0; a < rank; ++a) {
            soff += static_cast<std::uint64_t>(start[a] + idx[a]) * sstride[a];
            obase += static_cast<std::uint64_t>(idx[a]) * ostride[a];
        }
        std::fill(run_idx.begin(), run_idx.end(), 0);
        for (std::uint64_t done = 0; done < run_len;) {
            const std::uint64_t n = std::min(piece_elems, run_len - done);
            source.read(array.data_offset + (soff + done) * item, static_cast<std::size_t>(n * item), raw.data());
            if (contiguous_out) {
                convert_elements(raw.data(), static_cast<std::size_t>(n), array.dtype, swap, out.data() + obase + done);
            } else {
                convert_elements(raw.data(), static_cast<std::size_t>(n), array.dtype, swap, tmp.data());
                for (std::uint64_t e = 0; e < n; ++e) {
                    std::uint64_t o = obase;
                    for (std::size_t r = 0; r < run_axes; ++r)
                        o += static_cast<std::uint64_t>(run_idx[r]) * ostride[order[r]];
                    out[static_cast<std::size_t>(o)] = tmp[static_cast<std::size_t>(e)];
                    for (std::size_t r = 0; r < run_axes; ++r) {
                        if (++run_idx[r] < count[order[r]])
                            break;
                        run_idx[r] = 0;
                    }
                }
            }
            done += n;
        }
        std::size_t k = run_axes;
        for (; k < rank; ++k) {
            const std::size_t a = order[k];
            if (++idx[a] < count[a])
                break;
            idx[a] = 0;
        }
        if (k == rank)
            break;
    }
    return out;
}

}  // namespace attnscope::io::detail
