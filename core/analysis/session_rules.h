#pragma once
// The rules an .attnscope session obeys before the app acts on it (docs/security.md "Sessions"). A session
// is data that may come from anyone: it names files to read, relative to its own folder, and it may carry a
// "generate" recipe that synthesises data the repository does not ship. It never names a file to write:
// a recipe writes only a plain name of ours (`[A-Za-z0-9_][A-Za-z0-9_.-]*.h5`, optionally in one
// subfolder of the same kind) inside the session's own folder, resolved through the folder's real path, and
// never over an existing file; its sizes are checked against the memory budget before anything is written.
//
// Qt-free, so that libFuzzer drives it (tests/fuzz/fuzz_session.cpp); widgets/session.cpp calls it on the
// document it read. Every function throws InputError naming the session key at fault, in the path notation
// of the document (`generate["../x.h5"]`, `selection.at.h`).
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/synth.h"

namespace attnscope::analysis {

// The newest session format this build reads ("attnscope_session": 1 .. kSessionVersion).
inline constexpr int kSessionVersion = 1;

// At most this many recipes in one session (each writes one file).
inline constexpr std::size_t kMaxSessionRecipes = 16;

// One "generate" entry, checked: the stored name (a key of the session's "generate" object) and the
// options of `attnscope synth` it asks for.
struct SessionRecipe {
    std::string name;          // "generated/local1d_n8192.h5": relative to the session's folder
    SynthOptions options;
};

// Checks the structure of a session document: a JSON object with a positive integer "attnscope_session"
// no newer than kSessionVersion, and, where present, the value types and ranges the app reads ("files",
// "tensors", "selection", "mechanism", "view", "query", "views", "sweeps", "generate" and its recipes, as
// session_recipes() checks them with `max_bytes`). Unknown keys are left alone (newer sessions may add
// some). Throws InputError naming the key.
void check_session_document(const nlohmann::json& session, std::uint64_t max_bytes);

// The session's recipes, checked (names by session_recipe_name_problem, values against `max_bytes` by the
// checks of `attnscope synth`). Throws InputError naming the recipe's key.
std::vector<SessionRecipe> session_recipes(const nlohmann::json& session, std::uint64_t max_bytes);

// Why `name` may not be written by a recipe ("" when it may): the rule of the header paragraph.
std::string session_recipe_name_problem(const std::string& name);

// Why a stored path (a data file, a tensor's file, the learned mixing file) cannot be used ("" when it
// can): an embedded NUL, or more than 4096 bytes.
std::string session_path_problem(const std::string& path);

// Where recipe `name` writes in the folder `session_dir` of the session: the folder's real path (symlinks
// resolved) joined with `name`, after checking on the file system that its subfolder, when it exists, is
// a real folder (not a symlink) and that nothing (a file, a folder, a dangling symlink) exists at the
// target yet. Returns an empty path when the target exists as a regular file (or a link to one): it is
// read as it is, never written again. Throws InputError naming the recipe.
std::filesystem::path session_recipe_target(const std::filesystem::path& session_dir, const std::string& name);

// Makes the session's missing recipe files in `session_dir`: checks every recipe and every target first
// (nothing is written when one is refused), then creates the subfolders that do not exist (one level) and
// writes each file (analysis::write_synthetic_file, atomically). Returns the paths written. A failure while
// writing removes the files and folders this call made, and throws InputError naming the recipe.
std::vector<std::filesystem::path> make_session_data(const nlohmann::json& session, const std::filesystem::path& session_dir,
                                                     std::uint64_t max_bytes);

// The whole numbers of a view's saved state (a session's "views.NAME", `figure --view-state`): "first_head"
// (the Heads view's page, 0 .. 2^31 - 1) and "query" (-1: none, .. 2^31 - 1) must be JSON integers in range
// (a string "8", 8.5, -8 or 2^31 was read as 0 or clamped in silence). Throws InputError naming `key`.KEY.
void check_view_state_numbers(const nlohmann::json& state, const std::string& key);

// The files a session reads, each with the key that names it: every entry of "files", each tensor's file
// ("tensors.q.file"), the learned mixing file and gated's gates file (the FILE of FILE[:NAME]) of the session's
// mechanism and of every file_states entry, and file_states' files. Relative paths are resolved against the
// folder of `session_file` as the app resolves them (lexically: `a/../b` is `b`). Keys or values of the wrong
// type are skipped (check_session_document refuses them). For check_output_paths: an output of a scripted
// run (`--screenshot`, `figure --session`) must be none of them (docs/security.md "Outputs").
std::vector<std::pair<std::string, std::string>> session_input_files(const nlohmann::json& session,
                                                                     const std::string& session_file);

// "selection.at.h = 99 is out of range (0..3)" for a session index outside 0 .. count-1 (or -1 .. count-1
// when `none_allowed`: the query); "" when it lies inside.
std::string session_index_problem(const std::string& key, long long value, long long count, bool none_allowed = false);

}  // namespace attnscope::analysis
