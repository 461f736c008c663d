#pragma once
// Counts and numbers that come from untrusted text (options, job files, headers): products and sums that
// say when they overflow instead of wrapping, and parsers that take plain decimal numbers only
// (docs/security.md, "Counts and sizes"). strtoll and strtold, which CLI11 and std::stoll use, clamp
// out-of-range integers to INT64_MAX, read "0x1" as hexadecimal and "010" as octal, and take "nan" and
// "inf": every one of those would be a value the user did not write.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace attnscope {

// a * b and a + b, or nothing when the result does not fit T.
template <class T>
std::optional<T> checked_mul(T a, T b)
{
    T r{};
    if (__builtin_mul_overflow(a, b, &r))
        return std::nullopt;
    return r;
}

template <class T>
std::optional<T> checked_add(T a, T b)
{
    T r{};
    if (__builtin_add_overflow(a, b, &r))
        return std::nullopt;
    return r;
}

// The product of `values` (1 for none), or nothing when it overflows.
template <class T>
std::optional<T> checked_product(const std::vector<T>& values)
{
    T p{1};
    for (const T v : values) {
        const auto next = checked_mul(p, v);
        if (!next)
            return std::nullopt;
        p = *next;
    }
    return p;
}

// A plain decimal integer: an optional '-', then digits only (no '+', spaces, "0x", exponent or
// fraction), within int64. Nothing otherwise.
inline std::optional<std::int64_t> parse_decimal(std::string_view s)
{
    const std::string_view digits = !s.empty() && s.front() == '-' ? s.substr(1) : s;
    if (digits.empty() || digits.front() < '0' || digits.front() > '9')
        return std::nullopt;
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || ptr != s.data() + s.size())
        return std::nullopt;
    return v;
}

// A finite decimal floating-point number ("0.5", "-2", "1e-3"; no hexadecimal, no "nan" or "inf", no
// value beyond double's range, no leading '+' or space). Nothing otherwise.
inline std::optional<double> parse_finite(std::string_view s)
{
    if (s.empty() || s.front() == '+' || s.front() == ' ')
        return std::nullopt;
    double v = 0;
    const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
    if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
        return std::nullopt;
    return v;
}

}  // namespace attnscope
