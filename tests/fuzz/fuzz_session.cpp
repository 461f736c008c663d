// Fuzzes the rules of an .attnscope session (core/analysis/session_rules.h): the input is parsed as JSON
// and checked by check_session_document, which the app runs on every session before acting on it; then its
// recipes are made in a private folder by make_session_data, with a memory budget of 64 KiB so that a
// recipe writes at most a tiny file. The folder holds a symlink out of it (`out` -> the system's temp
// folder), a regular file (`exists.h5`) and a subfolder (`generated/`), as a hostile session would find.
// A property is checked on top of "no crash": every file made lies directly in the folder or in one real
// subfolder of it, and is removed again.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "analysis/session_rules.h"
#include "fuzz_common.h"
#include "util/error.h"

namespace {

namespace fs = std::filesystem;

fs::path g_dir;

void remove_dir()
{
    std::error_code ec;
    fs::remove_all(g_dir, ec);
}

// The private folder as LLVMFuzzerInitialize made it: everything else is removed.
void restore_dir()
{
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(g_dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name != "out" && name != "exists.h5" && name != "generated")
            fs::remove_all(e.path(), ec);
    }
    for (const auto& e : fs::directory_iterator(g_dir / "generated", ec))
        fs::remove_all(e.path(), ec);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
    g_dir = fs::path(attnscope::fuzz::temp_path("_session"));
    fs::remove_all(g_dir);
    fs::create_directories(g_dir / "generated");
    std::ofstream(g_dir / "exists.h5") << "not hdf5";
    fs::create_directory_symlink(fs::temp_directory_path(), g_dir / "out");
    g_dir = fs::canonical(g_dir);
    std::atexit(remove_dir);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded())
        return -1;   // not JSON: the session reader refuses it before these rules
    try {
        attnscope::analysis::check_session_document(doc, 64 * 1024);
    } catch (const attnscope::InputError&) {
        return 0;   // refused: the app acts on nothing of it
    }
    if (doc.contains("generate") && doc.at("generate").is_object())
        for (const auto& [name, recipe] : doc.at("generate").items())
            if (!attnscope::analysis::session_recipe_name_problem(name).empty())
                std::abort();   // check_session_document let a name through that the rule refuses
    try {
        for (const fs::path& made : attnscope::analysis::make_session_data(doc, g_dir, 64 * 1024)) {
            const fs::path parent = made.parent_path();
            if (parent != g_dir && parent.parent_path() != g_dir)
                std::abort();   // written outside the session's folder
            if (fs::is_symlink(parent) || fs::canonical(parent) != parent)
                std::abort();   // written through a link
        }
    } catch (const attnscope::InputError&) {
    } catch (const std::invalid_argument&) {
    }
    restore_dir();
    return 0;
}
