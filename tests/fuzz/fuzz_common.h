#pragma once
// Shared helpers for the libFuzzer targets (docs/hardening.md): write the input to a private temp file
// with the extension the reader dispatches on, remove it afterwards.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

namespace attnscope::fuzz {

inline std::string temp_path(const char* ext) {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/attnscope_fuzz_" + std::to_string(::getpid()) + ext;
}

struct TempFile {
    std::string path;
    TempFile(const std::uint8_t* data, std::size_t size, const char* ext) : path(temp_path(ext)) {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    }
    ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace attnscope::fuzz
