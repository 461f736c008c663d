#pragma once
// One CSV field as the flat files write it (summary.csv, aggregate.csv): as it is, or quoted (RFC 4180) when it
// holds a comma, a quote or a line break (a file name may).
#include <cstdint>
#include <map>
#include <string>

namespace attnscope {

inline std::string csv_field(const std::string& s)
{
    if (s.find_first_of(",\"\r\n") == std::string::npos)
        return s;
    std::string q = "\"";
    for (const char c : s) {
        if (c == '"')
            q += '"';
        q += c;
    }
    q += '"';
    return q;
}

// The `at` column of summary.csv and the sweep CSV: a unit's index on each axis given as `all` (`--at b=all`),
// "b=3" (axes joined by ';'), empty for none. Without it the lines of one head over many inputs could not be
// told apart (docs/batch.md, docs/cli.md "sweep").
inline std::string unit_at_field(const std::map<char, std::int64_t>& at)
{
    std::string text;
    for (const auto& [axis, index] : at) {
        if (!text.empty())
            text += ';';
        text += axis;
        text += '=';
        text += std::to_string(index);
    }
    return text;
}

}  // namespace attnscope
