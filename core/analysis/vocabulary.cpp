#include "analysis/vocabulary.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <stdexcept>

#include "util/checked.h"

namespace attnscope::analysis {

std::vector<std::string> split_exact(const std::string& text, char sep)
{
    std::vector<std::string> out;
    std::size_t start = 0;
    for (;;) {
        const std::size_t end = text.find(sep, start);
        out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos)
            return out;
        start = end + 1;
    }
}

std::vector<std::string> split_list(const std::string& text, char sep)
{
    std::vector<std::string> out = split_exact(text, sep);
    for (std::string& item : out)
        item.erase(std::remove_if(item.begin(), item.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); }),
                   item.end());
    return out;
}

namespace {

// Integers >= `min` of the comma list `list`; messages quote `text` (as the user wrote it) and say what an
// item must be.
std::vector<Index> parse_integers(const std::string& list, const std::string& text, const std::string& what, long long min,
                                  const char* expected)
{
    std::vector<Index> out;
    for (const std::string& item : split_list(list)) {
        // Plain decimal within int64 (util/checked.h): no clamping, no "0x", no '+'.
        const std::optional<std::int64_t> v = parse_decimal(item);
        if (!v || *v < min)
            throw std::invalid_argument(what + " " + text + ": '" + item + "' is not " + expected);
        out.push_back(static_cast<Index>(*v));
    }
    return out;
}

}  // namespace

std::vector<Index> parse_sizes(const std::string& text, const std::string& what, bool x_too)
{
    std::string list = text;
    if (x_too)
        for (char& c : list)
            if (c == 'x' || c == 'X')
                c = ',';
    return parse_integers(list, text, what, 1, "a positive integer");
}

std::vector<Index> parse_indices(const std::string& text, const std::string& what)
{
    return parse_integers(text, text, what, 0, "an index (or all)");
}

std::string sizes_text(const std::vector<Index>& sizes, const std::string& sep)
{
    std::string s;
    for (std::size_t i = 0; i < sizes.size(); ++i)
        s += (i ? sep : "") + std::to_string(sizes[i]);
    return s;
}

std::vector<attention::Mechanism> parse_mechanisms(const std::string& text, const std::string& what)
{
    std::vector<attention::Mechanism> out;
    for (const std::string& item : split_list(text)) {
        const auto m = attention::parse_mechanism(item);
        for (auto seen : out)
            if (seen == m)
                throw std::invalid_argument(what + " lists " + item + " twice");
        out.push_back(m);
    }
    return out;
}

AxisChoice AxisChoice::all(std::string what) { return {Kind::all, {}, std::move(what)}; }

AxisChoice AxisChoice::list(std::vector<Index> indices, std::string what)
{
    return {Kind::list, std::move(indices), std::move(what)};
}

AxisChoice AxisChoice::parse(const std::string& text, std::string what)
{
    if (text.empty())
        return {Kind::selection, {}, std::move(what)};
    if (text == "all")
        return all(std::move(what));
    std::vector<Index> indices = parse_indices(text, what);
    return list(std::move(indices), std::move(what));
}

}  // namespace attnscope::analysis
