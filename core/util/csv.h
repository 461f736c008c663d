#pragma once
// One CSV field as the flat files write it (summary.csv, aggregate.csv): as it is, or quoted (RFC 4180) when it
// holds a comma, a quote or a line break (a file name may).
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

}  // namespace attnscope
