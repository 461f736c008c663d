#pragma once
// Enum <-> name tables: one table per enum, in declaration order, gives its names for output, parsing with
// a message that lists the valid names, and the list itself for help texts and widgets.
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attnscope {

template <class E, std::size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

template <class E, std::size_t N>
std::vector<std::string_view> names_of(const NameTable<E, N>& table)
{
    std::vector<std::string_view> out;
    for (const auto& entry : table)
        out.push_back(entry.second);
    return out;
}

template <class E, std::size_t N>
std::string_view name_of(const NameTable<E, N>& table, E value)
{
    for (const auto& [v, name] : table)
        if (v == value)
            return name;
    return "?";
}

// "a, b, c".
inline std::string joined(const std::vector<std::string_view>& names, std::string_view separator = ", ")
{
    std::string out;
    for (const std::string_view n : names) {
        if (!out.empty())
            out += separator;
        out += n;
    }
    return out;
}

// The value named `s`; else std::invalid_argument "<what> <s> is not one of a, b, c" (`what` names the
// option, e.g. "--method").
template <class E, std::size_t N>
E value_named(const NameTable<E, N>& table, std::string_view s, std::string_view what)
{
    for (const auto& [v, name] : table)
        if (name == s)
            return v;
    throw std::invalid_argument(std::string(what) + " " + std::string(s) + " is not one of " + joined(names_of(table)));
}

}  // namespace attnscope
