#pragma once
// Text that goes into JSON: file names are bytes (Linux allows any byte but '/' and NUL), JSON is UTF-8.
//
// nlohmann::json::dump() throws type_error 316 on a string that is not valid UTF-8, so a file named with
// byte 0xff would turn every JSON output that names it into an internal error (or, on a worker thread,
// end the process). Paths are therefore handled as bytes everywhere and shown lossily: json_text() dumps
// with every invalid sequence replaced by U+FFFD, and display_path() gives the same lossy text for keys
// that must compare equal to what a JSON file holds after a round trip (docs/security.md, "Batch and merge").
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace attnscope {

// j.dump(indent) that never throws on invalid UTF-8 (each invalid byte sequence becomes U+FFFD).
template <class Json>
std::string json_text(const Json& j, int indent = -1)
{
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// True when `s` is valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
inline bool is_valid_utf8(std::string_view s)
{
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        std::size_t len = 0;
        unsigned lo = 0x80, hi = 0xBF;   // the allowed range of the second byte
        if (c < 0x80) {
            ++i;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else
            return false;
        if (i + len > s.size())
            return false;
        for (std::size_t k = 1; k < len; ++k) {
            const auto b = static_cast<unsigned char>(s[i + k]);
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF))
                return false;
        }
        i += len;
    }
    return true;
}

// `bytes` as valid UTF-8: unchanged when it is, else each invalid sequence replaced by U+FFFD, exactly as
// json_text() writes it (so a key made from a path equals the key read back from a JSON file). The one
// lossy rule for any text read from a file, paths and names alike (HDF5 object and attribute names too).
inline std::string display_path(std::string_view bytes)
{
    if (is_valid_utf8(bytes))
        return std::string(bytes);
    const std::string quoted = json_text(nlohmann::json(std::string(bytes)));
    return nlohmann::json::parse(quoted).get<std::string>();
}

}  // namespace attnscope
