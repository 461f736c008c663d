// The rules of a session document (session_rules.h).
#include "analysis/session_rules.h"

#include <climits>
#include <cmath>
#include <system_error>

#include "util/error.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr long long kMaxIndex = INT_MAX;         // the app's spin boxes and indices are ints
constexpr long long kMaxSize = INT_MAX;          // n, d, heads, grid sides of a recipe (then the memory budget)
constexpr std::size_t kMaxPathBytes = 4096;      // PATH_MAX
constexpr std::size_t kMaxNamePart = 128;        // one part of a recipe's name
constexpr std::size_t kMaxFiles = 1024;          // "files" of one session

// A key or name as JSON writes it (quoted, escaped; bytes that are not UTF-8 replaced), for messages.
std::string quoted(const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); }

[[noreturn]] void refuse(const std::string& key, const std::string& why) { throw InputError(key + ": " + why); }

// An integer in lo..hi (an integral floating-point value too, as Qt's JSON may write one); refused by key.
long long integer(const Json& v, const std::string& key, long long lo, long long hi)
{
    const std::string range = " (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
    if (v.is_number_unsigned()) {
        const auto u = v.get<std::uint64_t>();
        if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo)))
            refuse(key, std::to_string(u) + " is out of range" + range);
        return static_cast<long long>(u);
    }
    if (v.is_number_integer()) {
        const auto i = v.get<std::int64_t>();
        if (i < lo || i > hi)
            refuse(key, std::to_string(i) + " is out of range" + range);
        return i;
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi))
            refuse(key, v.dump() + " is not a whole number in range" + range);
        return static_cast<long long>(d);
    }
    refuse(key, "expected a whole number" + range + ", got " + std::string(v.type_name()));
}

void expect(const Json& v, Json::value_t type, const std::string& key)
{
    if (v.type() != type)
        refuse(key, "expected " + std::string(Json(type).type_name()) + ", got " + std::string(v.type_name()));
}

void expect_object(const Json& v, const std::string& key)
{
    if (!v.is_object())
        refuse(key, "expected an object, got " + std::string(v.type_name()));
}

void expect_path(const Json& v, const std::string& key)
{
    if (!v.is_string())
        refuse(key, "expected a path (a string), got " + std::string(v.type_name()));
    if (const std::string p = session_path_problem(v.get<std::string>()); !p.empty())
        refuse(key, p);
}

// One part of a recipe's name: a letter, digit or '_' first (no dot-files, no "." or "..", nothing that
// reads as an option), then letters, digits, '_', '.', '-'.
bool plain_part(const std::string& part)
{
    if (part.empty() || part.size() > kMaxNamePart)
        return false;
    auto word = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; };
    if (!word(part.front()))
        return false;
    for (char c : part)
        if (!word(c) && c != '.' && c != '-')
            return false;
    return true;
}

SessionRecipe recipe(const std::string& name, const Json& r, std::uint64_t max_bytes)
{
    const std::string key = "generate[" + quoted(name) + "]";
    if (const std::string p = session_recipe_name_problem(name); !p.empty())
        refuse(key, p);
    expect_object(r, key);
    SessionRecipe out;
    out.name = name;
    for (auto it = r.begin(); it != r.end(); ++it) {
        const std::string k = key + "." + it.key();
        const Json& v = it.value();
        if (it.key() == "kind") {
            expect(v, Json::value_t::string, k);
            out.options.kind = v.get<std::string>();
        } else if (it.key() == "n") {
            out.options.n = integer(v, k, 1, kMaxSize);
        } else if (it.key() == "d") {
            out.options.d = integer(v, k, 1, kMaxSize);
        } else if (it.key() == "heads") {
            out.options.heads = integer(v, k, 1, kMaxSize);
        } else if (it.key() == "seed") {   // what `attnscope synth --seed` takes: 0 .. 2^63 - 1
            out.options.seed = static_cast<std::uint64_t>(integer(v, k, 0, LLONG_MAX));
        } else if (it.key() == "grid") {
            if (!v.is_array() || v.size() != 2)
                refuse(k, "expected two sizes [H, W]");
            for (std::size_t i = 0; i < 2; ++i)
                out.options.grid.push_back(integer(v[i], k + "[" + std::to_string(i) + "]", 1, kMaxSize));
        } else {
            refuse(k, "unknown recipe key (kind, n, d, heads, seed, grid)");
        }
    }
    if (!r.contains("n") || !r.contains("d"))
        refuse(key, "a recipe needs n and d (the options of attnscope synth: kind, n, d, heads, seed, grid)");
    try {
        (void)check_synth_options(out.options, max_bytes);
    } catch (const std::exception& e) {
        refuse(key, e.what());
    }
    return out;
}

}  // namespace

std::string session_recipe_name_problem(const std::string& name)
{
    const std::string rule = "a recipe writes a plain name ending in .h5 inside the session's folder (letters, digits, "
                             "'_', '.', '-'; not starting with a dot; at most one subfolder, e.g. generated/data.h5)";
    if (name.empty())
        return "an empty name: " + rule;
    if (name.front() == '/' || name.front() == '\\' || name.front() == '~')
        return "an absolute path: " + rule;
    const std::size_t slash = name.find('/');
    const std::string folder = slash == std::string::npos ? std::string() : name.substr(0, slash);
    const std::string file = slash == std::string::npos ? name : name.substr(slash + 1);
    for (const std::string& part : {folder, file})
        if (part == ".." || part.rfind("../", 0) == 0 || part.find("/..") != std::string::npos)
            return "leads out of the session's folder: " + rule;
    if (file.find('/') != std::string::npos)
        return "more than one folder level: " + rule;
    if ((slash != std::string::npos && !plain_part(folder)) || !plain_part(file))
        return "not a plain name: " + rule;
    if (file.size() <= 3 || file.compare(file.size() - 3, 3, ".h5") != 0)
        return "not an .h5 file: " + rule;
    return {};
}

std::string session_path_problem(const std::string& path)
{
    if (path.find('\0') != std::string::npos)
        return "a path with a NUL character";
    if (path.size() > kMaxPathBytes)
        return "a path longer than " + std::to_string(kMaxPathBytes) + " bytes";
    return {};
}

std::string session_index_problem(const std::string& key, long long value, long long count, bool none_allowed)
{
    const long long lo = none_allowed ? -1 : 0;
    if (value >= lo && value < count)
        return {};
    if (count <= 0)
        return key + " = " + std::to_string(value) + " is out of range (the axis is empty)";
    return key + " = " + std::to_string(value) + " is out of range (" + std::to_string(lo) + ".." + std::to_string(count - 1) +
           (none_allowed ? ", -1: none" : "") + ")";
}

std::vector<SessionRecipe> session_recipes(const Json& session, std::uint64_t max_bytes)
{
    std::vector<SessionRecipe> out;
    if (!session.is_object() || !session.contains("generate"))
        return out;
    const Json& g = session.at("generate");
    expect_object(g, "generate");
    if (g.size() > kMaxSessionRecipes)
        refuse("generate", std::to_string(g.size()) + " recipes; a session makes at most " + std::to_string(kMaxSessionRecipes));
    for (auto it = g.begin(); it != g.end(); ++it)
        out.push_back(recipe(it.key(), it.value(), max_bytes));
    return out;
}

namespace {

// A selection object (the session's own, or an open file's in file_states): keys named under `key`.
void check_selection(const Json& sel, const std::string& key)
{
    expect_object(sel, key);
    if (sel.contains("layout"))
        expect(sel.at("layout"), Json::value_t::string, key + ".layout");
    if (sel.contains("at")) {
        const Json& at = sel.at("at");
        expect_object(at, key + ".at");
        for (auto it = at.begin(); it != at.end(); ++it) {
            const std::string k = key + ".at." + it.key();
            const std::string& axis = it.key();
            if (axis.size() != 1 || !((axis[0] >= 'a' && axis[0] <= 'z') || (axis[0] >= 'A' && axis[0] <= 'Z')))
                refuse(k, "an axis is one letter of the layout (h, b, l, ...)");
            (void)integer(it.value(), k, 0, kMaxIndex);
        }
    }
    if (sel.contains("prefix_tokens"))
        (void)integer(sel.at("prefix_tokens"), key + ".prefix_tokens", 0, kMaxIndex);
    if (sel.contains("token_grid")) {
        const Json& grid = sel.at("token_grid");
        if (!grid.is_array() || grid.size() > 8)
            refuse(key + ".token_grid", "expected up to 8 sizes, e.g. [16, 16]");
        for (std::size_t i = 0; i < grid.size(); ++i)
            (void)integer(grid[i], key + ".token_grid[" + std::to_string(i) + "]", 1, kMaxSize);
    }
}

// A mechanism object (the session's own, or an open file's in file_states).
void check_mechanism(const Json& m, const std::string& key)
{
    expect_object(m, key);
    if (m.contains("mixing_file"))
        expect_path(m.at("mixing_file"), key + ".mixing_file");
    if (m.contains("gates"))   // gated's gates, FILE[:NAME]: a path like the mixing file's
        expect_path(m.at("gates"), key + ".gates");
    for (const char* flag : {"gates_log", "causal"})
        if (m.contains(flag))
            expect(m.at(flag), Json::value_t::boolean, key + "." + flag);
    // The panel's whole numbers, in the ranges its controls take (a value outside was read as the default
    // in silence: seed 2^63 became 0).
    const struct {
        const char* name;
        long long lo, hi;
    } counts[] = {{"seed", 0, INT_MAX}, {"favor_features", 1, 1000000}, {"blocks", 0, 1 << 20}, {"chunk", 1, 1 << 30}};
    for (const auto& c : counts)
        if (m.contains(c.name))
            (void)integer(m.at(c.name), key + "." + c.name, c.lo, c.hi);
    if (m.contains("decay") && !m.at("decay").is_null() &&
        !(m.at("decay").is_number() && m.at("decay").get<double>() > 0.0 && m.at("decay").get<double>() <= 1.0))
        refuse(key + ".decay", "expected null (RetNet's per-head default) or a number in (0, 1]");
    if (m.contains("mechanisms")) {
        const Json& names = m.at("mechanisms");
        if (!names.is_array() || names.size() > 64)
            refuse(key + ".mechanisms", "expected a list of mechanism names");
        for (const Json& n : names)
            if (!n.is_string())
                refuse(key + ".mechanisms", "expected a list of mechanism names");
    }
}

// The other open files' states (the app keeps one per open file): each names a file of the session's `files`
// (entries of other files are ignored by the app) with that file's selection and mechanism, checked as the
// session's own are (a path is a path, an index an int, ...).
void check_file_states(const Json& states)
{
    if (!states.is_array())
        refuse("file_states", "expected an array of the open files' states, got " + std::string(states.type_name()));
    if (states.size() > kMaxFiles)
        refuse("file_states", std::to_string(states.size()) + " states; a session opens at most " + std::to_string(kMaxFiles) + " files");
    for (std::size_t i = 0; i < states.size(); ++i) {
        const std::string key = "file_states[" + std::to_string(i) + "]";
        const Json& st = states[i];
        expect_object(st, key);
        if (st.contains("file"))
            expect_path(st.at("file"), key + ".file");
        if (st.contains("tensors")) {
            const Json& t = st.at("tensors");
            if (!t.is_array() || t.size() > 3)
                refuse(key + ".tensors", "expected up to 3 tensor names (queries, keys, values)");
            for (const Json& name : t)
                if (!name.is_string())
                    refuse(key + ".tensors", "expected up to 3 tensor names (queries, keys, values)");
        }
        if (st.contains("selection"))
            check_selection(st.at("selection"), key + ".selection");
        if (st.contains("mechanism"))
            check_mechanism(st.at("mechanism"), key + ".mechanism");
        if (st.contains("user_changed"))
            expect(st.at("user_changed"), Json::value_t::boolean, key + ".user_changed");
    }
}

}  // namespace

void check_session_document(const Json& s, std::uint64_t max_bytes)
{
    if (!s.is_object())
        throw InputError("not a session (expected a JSON object)");
    if (!s.contains("attnscope_session"))
        throw InputError("not an AttnScope session (no \"attnscope_session\" version)");
    const Json& version = s.at("attnscope_session");
    const bool newer = version.is_number_unsigned() ? version.get<std::uint64_t>() > kSessionVersion
                       : version.is_number_integer() ? version.get<std::int64_t>() > kSessionVersion
                       : version.is_number_float() && version.get<double>() > kSessionVersion;
    if (newer)
        throw InputError("session version " + version.dump() + " is newer than this AttnScope understands (" +
                         std::to_string(kSessionVersion) + ")");
    (void)integer(version, "attnscope_session", 1, kSessionVersion);

    if (s.contains("files")) {
        const Json& files = s.at("files");
        if (!files.is_array())
            refuse("files", "expected an array of paths, got " + std::string(files.type_name()));
        if (files.size() > kMaxFiles)
            refuse("files", std::to_string(files.size()) + " files; a session opens at most " + std::to_string(kMaxFiles));
        for (std::size_t i = 0; i < files.size(); ++i)
            expect_path(files[i], "files[" + std::to_string(i) + "]");
    }
    if (s.contains("tensors")) {
        const Json& t = s.at("tensors");
        expect_object(t, "tensors");
        for (auto it = t.begin(); it != t.end(); ++it) {
            const std::string key = "tensors." + it.key();
            if (it.key() != "q" && it.key() != "k" && it.key() != "v")
                refuse(key, "unknown role (q, k, v)");
            expect_object(it.value(), key);
            if (it.value().contains("file"))
                expect_path(it.value().at("file"), key + ".file");
            if (it.value().contains("name"))
                expect(it.value().at("name"), Json::value_t::string, key + ".name");
        }
    }
    if (s.contains("selection"))
        check_selection(s.at("selection"), "selection");
    if (s.contains("mechanism"))
        check_mechanism(s.at("mechanism"), "mechanism");
    if (s.contains("file_states"))
        check_file_states(s.at("file_states"));
    if (s.contains("view"))
        expect(s.at("view"), Json::value_t::string, "view");
    if (s.contains("query"))
        (void)integer(s.at("query"), "query", -1, kMaxIndex);
    for (const char* key : {"views", "sweeps", "sweep_dialog"})
        if (s.contains(key))
            expect_object(s.at(key), key);
    if (s.contains("views"))
        for (auto it = s.at("views").begin(); it != s.at("views").end(); ++it) {
            expect_object(it.value(), "views." + it.key());
            check_view_state_numbers(it.value(), "views." + it.key());
        }
    if (s.contains("data_note"))
        expect(s.at("data_note"), Json::value_t::string, "data_note");
    (void)session_recipes(s, max_bytes);
}

void check_view_state_numbers(const Json& state, const std::string& key)
{
    if (!state.is_object())
        return;
    const auto strict = [&](const char* name, long long lo) {
        if (!state.contains(name))
            return;
        const Json& v = state.at(name);
        const std::string k = key + "." + name;
        if (!v.is_number_integer())   // 8.0 and "8" included: the state holds whole numbers as integers
            refuse(k, "expected a whole number (" + std::to_string(lo) + ".." + std::to_string(INT_MAX) + "), got " +
                          (v.is_number() ? v.dump() : std::string(v.type_name())));
        (void)integer(v, k, lo, INT_MAX);
    };
    strict("first_head", 0);
    strict("query", -1);
}

std::vector<std::pair<std::string, std::string>> session_input_files(const Json& s, const std::string& session_file)
{
    std::vector<std::pair<std::string, std::string>> out;
    if (!s.is_object())
        return out;
    std::error_code ec;
    const fs::path dir = fs::absolute(fs::path(session_file), ec).parent_path();
    const auto add = [&](const std::string& key, const Json& v, bool reference) {
        if (!v.is_string())
            return;
        std::string p = v.get<std::string>();
        if (reference)   // FILE[:NAME]: the file part (the app splits at the first colon too)
            p = p.substr(0, p.find(':'));
        if (p.empty() || !session_path_problem(p).empty())
            return;
        const fs::path path(p);
        out.emplace_back(key, (path.is_absolute() ? path : dir / path).lexically_normal().string());
    };
    const auto add_mechanism = [&](const Json& m, const std::string& key) {
        if (!m.is_object())
            return;
        if (m.contains("mixing_file"))
            add(key + ".mixing_file", m.at("mixing_file"), false);
        if (m.contains("gates"))
            add(key + ".gates", m.at("gates"), true);
    };
    if (const auto it = s.find("files"); it != s.end() && it->is_array())
        for (std::size_t i = 0; i < it->size(); ++i)
            add("files[" + std::to_string(i) + "]", (*it)[i], false);
    if (const auto it = s.find("tensors"); it != s.end() && it->is_object())
        for (auto t = it->begin(); t != it->end(); ++t)
            if (t.value().is_object() && t.value().contains("file"))
                add("tensors." + t.key() + ".file", t.value().at("file"), false);
    if (const auto it = s.find("mechanism"); it != s.end())
        add_mechanism(*it, "mechanism");
    if (const auto it = s.find("file_states"); it != s.end() && it->is_array())
        for (std::size_t i = 0; i < it->size(); ++i) {
            const Json& st = (*it)[i];
            const std::string key = "file_states[" + std::to_string(i) + "]";
            if (!st.is_object())
                continue;
            if (st.contains("file"))
                add(key + ".file", st.at("file"), false);
            if (st.contains("mechanism"))
                add_mechanism(st.at("mechanism"), key + ".mechanism");
        }
    return out;
}

fs::path session_recipe_target(const fs::path& session_dir, const std::string& name)
{
    const std::string key = "generate[" + quoted(name) + "]";
    if (const std::string p = session_recipe_name_problem(name); !p.empty())
        refuse(key, p);
    std::error_code ec;
    const fs::path dir = fs::canonical(session_dir, ec);
    if (ec)
        refuse(key, "the session's folder " + session_dir.string() + " cannot be resolved (" + ec.message() + ")");
    const fs::path target = dir / name;
    const fs::path parent = target.parent_path();
    if (parent != dir) {
        const fs::file_status st = fs::symlink_status(parent, ec);
        if (fs::is_symlink(st))
            refuse(key, "its folder " + parent.string() + " is a symbolic link: a recipe writes only inside the session's folder");
        if (fs::exists(st) && !fs::is_directory(st))
            refuse(key, parent.string() + " is not a folder");
        if (fs::exists(st) && fs::canonical(parent, ec) != parent)
            refuse(key, "its folder " + parent.string() + " leads out of the session's folder");
    }
    const fs::file_status st = fs::symlink_status(target, ec);
    if (!fs::exists(st) && st.type() != fs::file_type::not_found)
        refuse(key, target.string() + " cannot be inspected (" + ec.message() + ")");
    if (fs::is_symlink(st)) {
        // A link to a regular file is data like any other (read, never written); a dangling one would be
        // replaced by the file the recipe writes.
        if (!fs::is_regular_file(fs::status(target, ec)))
            refuse(key, target.string() + " is a symbolic link to no regular file: a recipe never replaces it");
        return {};
    }
    if (fs::is_regular_file(st))
        return {};
    if (fs::exists(st))
        refuse(key, target.string() + " exists and is not a regular file: a recipe never replaces it");
    return target;
}

std::vector<fs::path> make_session_data(const Json& session, const fs::path& session_dir, std::uint64_t max_bytes)
{
    const std::vector<SessionRecipe> recipes = session_recipes(session, max_bytes);
    struct Job {
        const SessionRecipe* recipe;
        fs::path target;
    };
    std::vector<Job> jobs;
    for (const SessionRecipe& r : recipes)
        if (fs::path target = session_recipe_target(session_dir, r.name); !target.empty())
            jobs.push_back({&r, std::move(target)});
    std::vector<fs::path> made, folders;
    auto undo = [&] {
        std::error_code ec;
        for (const fs::path& p : made)
            fs::remove(p, ec);
        for (auto it = folders.rbegin(); it != folders.rend(); ++it)
            fs::remove(*it, ec);   // only when empty
    };
    for (const Job& job : jobs) {
        const std::string key = "generate[" + quoted(job.recipe->name) + "]";
        try {
            const fs::path parent = job.target.parent_path();
            std::error_code ec;
            if (!fs::exists(fs::symlink_status(parent, ec))) {
                if (!fs::create_directory(parent, ec) || ec)
                    refuse(key, "cannot create the folder " + parent.string() + (ec ? " (" + ec.message() + ")" : std::string()));
                folders.push_back(parent);
            }
            // Checked again just before writing: the target may have appeared meanwhile.
            if (fs::exists(fs::symlink_status(job.target, ec)))
                refuse(key, job.target.string() + " appeared while the session was opened: a recipe never replaces a file");
            write_synthetic_file(job.target.string(), job.recipe->options, max_bytes);
            made.push_back(job.target);
        } catch (const InputError& e) {
            undo();
            const std::string what = e.what();
            throw InputError(what.rfind(key, 0) == 0 ? what : key + ": " + what);
        } catch (const std::exception& e) {
            undo();
            refuse(key, e.what());
        }
    }
    return made;
}

}  // namespace attnscope::analysis
