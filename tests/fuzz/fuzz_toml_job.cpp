// Fuzzes the batch job parser: the input is written to job.toml in a private directory and parsed.
// The directory holds a few empty files (a.h5, x.npz, acts/m.h5, more/model_384.h5) and a valid 4x4
// mixing matrix (mix.npy), so that `inputs` globs of the seeds match and parsing goes past them.
// Jobs whose `inputs` or `attention.mixing` name a path outside that directory (absolute, "~" or "..")
// are skipped: globbing the whole file system is slow by request, not a defect.
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "batch_job.h"
#include "fuzz_common.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;

fs::path g_dir;

void touch(const fs::path& p, std::string_view bytes = {}) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string identity_npy() {
    std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 4), }";
    header.append(63 - (10 + header.size()) % 64, ' ');   // 10 + header + '\n': a multiple of 64
    header += '\n';
    std::string out("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    out += header;
    for (int i = 0; i < 16; ++i) {
        const double v = i % 5 == 0 ? 1.0 : 0.0;
        out.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    return out;
}

void remove_dir() {
    std::error_code ec;
    fs::remove_all(g_dir, ec);
}

bool escapes(std::string_view p) {
    return p.empty() || p.front() == '/' || p.front() == '~' || p.find("..") != std::string_view::npos;
}

// True when the job names a path outside the private directory (see the header comment).
bool leaves_dir(std::string_view text) {
    toml::table root;
    try {
        root = toml::parse(text);
    } catch (const toml::parse_error&) {
        return false;   // the parser under test reports it
    }
    if (const toml::node* in = root.get("inputs")) {
        if (const auto* s = in->as_string(); s && escapes(s->get()))
            return true;
        if (const auto* a = in->as_array())
            for (const auto& item : *a)
                if (const auto* s = item.as_string(); s && escapes(s->get()))
                    return true;
    }
    if (const toml::table* att = root["attention"].as_table())
        if (const auto* m = att->get_as<std::string>("mixing"); m && escapes(m->get()))
            return true;
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    g_dir = fs::path(attnscope::fuzz::temp_path("_job"));
    fs::remove_all(g_dir);
    for (const char* f : {"a.h5", "x.npz", "acts/m.h5", "more/model_384.h5"})
        touch(g_dir / f);
    touch(g_dir / "mix.npy", identity_npy());
    std::atexit(remove_dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    if (leaves_dir(text))
        return -1;   // not added to the corpus
    const std::string path = (g_dir / "job.toml").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(size));
    try {
        (void)attnscope::app::parse_batch_job(path);
    } catch (const attnscope::InputError&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
