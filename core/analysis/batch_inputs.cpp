// A batch job's inputs (analysis/batch.h): its glob patterns expanded to regular files, and a name per input
// for its figures that stays unique per input path and the same in every shard (docs/batch.md).
#include "analysis/batch.h"
#include "analysis/batch_store.h"
#include "analysis/vocabulary.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <glob.h>

#include <fmt/format.h>

#include "util/error.h"
#include "util/json_text.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns, const std::string& base_dir)
{
    std::set<std::string> files;
    for (const std::string& pattern : patterns) {
        const std::string full = fs::path(pattern).is_absolute() || base_dir.empty() ? pattern : (fs::path(base_dir) / pattern).string();
        glob_t g{};
        const int rc = ::glob(full.c_str(), 0, nullptr, &g);
        std::size_t found = 0;
        if (rc == 0)
            for (std::size_t i = 0; i < g.gl_pathc; ++i)
                if (std::error_code ec; fs::is_regular_file(g.gl_pathv[i], ec)) {   // a symlink loop or unreadable entry: not a file, no throw
                    files.insert(g.gl_pathv[i]);
                    ++found;
                }
        ::globfree(&g);
        if (found == 0)
            throw InputError("inputs: '" + pattern + "' matches no file" + (base_dir.empty() ? "" : " (relative to " + base_dir + ")"));
    }
    return {files.begin(), files.end()};
}

namespace {

// The path's components as shown, without empty and "." ones ("./a//m.h5" -> a, m.h5).
std::vector<std::string> path_parts(const std::string& display)
{
    std::vector<std::string> parts;
    for (std::string& part : split_exact(display, '/'))
        if (!part.empty() && part != ".")
            parts.push_back(std::move(part));
    if (parts.empty())
        parts.push_back(display);
    return parts;
}

std::string short_hash(const std::string& text) { return sha256_hex_prefix(text, 4); }

// At most `max` bytes of `s`, not cutting a UTF-8 sequence.
std::string utf8_prefix(const std::string& s, std::size_t max)
{
    if (s.size() <= max)
        return s;
    std::size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80)
        --n;
    return s.substr(0, n);
}

}  // namespace

std::vector<std::string> input_names(const std::vector<std::string>& files)
{
    constexpr std::size_t kMaxName = 100;
    const std::size_t n = files.size();
    std::vector<std::string> shown(n), names(n);
    std::vector<std::vector<std::string>> parts(n);
    std::map<std::string, std::vector<std::size_t>> by_stem;
    for (std::size_t i = 0; i < n; ++i) {
        shown[i] = display_path(files[i]);
        parts[i] = path_parts(shown[i]);
        std::string stem = fs::path(parts[i].back()).stem().string();
        names[i] = stem.empty() ? parts[i].back() : stem;
        by_stem[names[i]].push_back(i);
    }
    for (const auto& entry : by_stem) {
        const std::string& stem = entry.first;   // (not a structured binding: lambdas below capture it; clang 14)
        const std::vector<std::size_t>& group = entry.second;
        if (group.size() < 2)
            continue;
        // The folders every file of this stem shares are left out of its name.
        std::size_t common = parts[group.front()].size() - 1;
        for (const std::size_t i : group)
            common = std::min(common, parts[i].size() - 1);
        std::size_t shared = 0;
        while (shared < common && std::all_of(group.begin(), group.end(), [&](std::size_t i) {
                   return parts[i][shared] == parts[group.front()][shared];
               }))
            ++shared;
        const auto joined = [&](std::size_t i, bool extension) {
            std::string name;
            for (std::size_t c = shared; c + 1 < parts[i].size(); ++c)
                name += parts[i][c] + "_";
            return name + (extension ? parts[i].back() : stem);
        };
        std::map<std::string, int> uses;
        for (const std::size_t i : group)
            ++uses[joined(i, false)];
        for (const std::size_t i : group)
            names[i] = joined(i, uses[joined(i, false)] > 1);
    }
    // A figure name never starts with '.' (a hidden file, which merge leaves out); anything still shared or
    // too long for a file name gets a short hash of the path.
    for (std::string& name : names)
        if (!name.empty() && name.front() == '.')
            name = "_" + name;
    std::map<std::string, int> uses;
    for (const std::string& name : names)
        ++uses[name];
    for (std::size_t i = 0; i < n; ++i)
        if (uses[names[i]] > 1 || names[i].size() > kMaxName || names[i].empty())
            names[i] = utf8_prefix(names[i], 60) + "-" + short_hash(shown[i]);
    return names;
}

}  // namespace attnscope::analysis
