// Fuzzes the kernel-choice cache parser (kernels::parse_gemm_cache, the text of gemm-choice.txt): any bytes
// give a map of "key<TAB>value" lines, each key and value non-empty, free of control characters, from a line
// of at most 1 KiB (docs/security.md, "Environment and caches").
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kernels/kernels.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const auto lines = attnscope::kernels::parse_gemm_cache(text);
    for (const auto& [key, value] : lines) {
        if (key.empty() || value.empty() || key.size() + value.size() + 1 > 1024 || key.find('\t') != std::string::npos ||
            key.find('\n') != std::string::npos || value.find('\n') != std::string::npos)
            std::abort();
        for (const char c : key + value)
            if (static_cast<unsigned char>(c) < 0x20 && c != '\t')
                std::abort();
    }
    if (lines.size() > size / 3 + 1)   // each entry takes at least "k\tv\n"
        std::abort();
    return 0;
}
