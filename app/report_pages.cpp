// The files of `attnscope report`'s page: app/report_pages.h.
#include "report_pages.h"

#include <cctype>
#include <cstdint>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "report_assets.h"
#include "util/output.h"

namespace attnscope::app {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

std::string html_escape(const std::string& s)
{
    std::string out;
    for (const char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        default: out += c;
        }
    }
    return out;
}

// The page template with each @KEY@ of `values` replaced, in one pass (a value holding "@KEY@" stays as it is).
std::string filled(std::string_view text, const std::map<std::string, std::string>& values)
{
    std::string out;
    std::size_t p = 0;
    while (p < text.size()) {
        const std::size_t at = text.find('@', p);
        const std::size_t end = at == std::string_view::npos ? at : text.find('@', at + 1);
        const auto it =
            end == std::string_view::npos ? values.end() : values.find(std::string(text.substr(at + 1, end - at - 1)));
        if (it == values.end()) {
            const std::size_t upto = at == std::string_view::npos ? text.size() : at + 1;
            out.append(text.substr(p, upto - p));
            p = upto;
            continue;
        }
        out.append(text.substr(p, at - p));
        out += it->second;
        p = end + 1;
    }
    return out;
}

// A file name as a relative URL (a script's src): every byte but the unreserved ones percent-encoded.
std::string url_escape(const std::string& s)
{
    std::string out;
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~')
            out += c;
        else
            out += fmt::format("%{:02X}", u);
    }
    return out;
}

bool page_by_layer(ReportPages mode, std::size_t heads, std::size_t data_bytes)
{
    if (mode != ReportPages::automatic)
        return mode == ReportPages::layer;
    return heads > kPagedAboveHeads || data_bytes > kPagedAboveBytes;
}


// The curves each head's charts draw: on the layer pages only when paged (the overview needs the scalars).
constexpr const char* kCurves[] = {"singular_values", "row_entropy", "past_profile"};

// Moves an input's heads to one page per layer: each unit of the overview keeps its numbers and names its page
// ("page"); the input lists its pages ("pages": [{layer, page}]) for the links between them.
std::vector<LayerPage> split_by_layer(ojson& input)
{
    const std::string name = input["name"];
    const auto base = [&](std::int64_t layer) { return fmt::format("{}-layer-{}", name, layer); };
    std::map<std::int64_t, ojson> by_layer;
    for (const ojson& u : input["units"])
        by_layer[u["layer"].get<std::int64_t>()].push_back(u);
    std::vector<LayerPage> pages;
    ojson list = ojson::array();
    for (auto& [layer, units] : by_layer) {
        pages.push_back({base(layer) + ".html", base(layer) + ".js", fmt::format("{}, layer {}", name, layer),
                         {{"input", name}, {"layer", layer}, {"units", std::move(units)}}});
        list.push_back({{"layer", layer}, {"page", pages.back().html}});
    }
    for (ojson& u : input["units"]) {
        u["page"] = base(u["layer"].get<std::int64_t>()) + ".html";
        for (ojson& m : u["mechanisms"])
            for (const char* c : kCurves)
                m.erase(c);
    }
    input["pages"] = list;
    return pages;
}

// Removes the layer pages an earlier report wrote into this folder that this one does not (it was paged and this one
// is not, or its input had more layers): DIR/<input>-layer-<L>.html and .js of this report's inputs, regular files
// only (a link or anything else is left alone), so no stale page links into the new overview.
void remove_stale_layer_pages(const fs::path& out, const ojson& data, const std::vector<LayerPage>& layer_pages)
{
    std::set<std::string> keep;
    for (const LayerPage& p : layer_pages)
        keep.insert(p.html), keep.insert(p.script);
    std::set<std::string> prefixes;
    for (const ojson& input : data["inputs"])
        prefixes.insert(input["name"].get<std::string>() + "-layer-");
    std::error_code ec;
    for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string file = it->path().filename().string();
        const std::string ext = it->path().extension().string();
        if (keep.count(file) || (ext != ".html" && ext != ".js") || !it->is_regular_file(ec) || it->is_symlink(ec))
            continue;
        for (const std::string& prefix : prefixes) {
            const std::string layer = file.substr(0, file.size() - ext.size());
            if (layer.rfind(prefix, 0) == 0 && layer.size() > prefix.size() &&
                layer.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
                fs::remove(it->path(), ec);
                break;
            }
        }
    }
}

}  // namespace

// Pages the inputs by layer when --pages says so (page_by_layer): their layer pages, to be written.
std::vector<LayerPage> paged(ojson& inputs, ReportPages mode, const fs::path& out)
{
    std::size_t heads = 0, bytes = 0;
    for (const ojson& input : inputs)
        heads += input["units"].size(), bytes += input["units"].dump().size();
    std::vector<LayerPage> layer_pages;
    if (!page_by_layer(mode, heads, bytes))
        return layer_pages;
    for (ojson& input : inputs) {
        std::vector<LayerPage> pages = split_by_layer(input);
        std::cerr << fmt::format("report: {} paged by layer: {} pages {}\n", input["name"].get<std::string>(), pages.size(),
                                 (out / (input["name"].get<std::string>() + "-layer-<L>.html")).string());
        std::move(pages.begin(), pages.end(), std::back_inserter(layer_pages));
    }
    std::cerr << fmt::format("report: {} heads, {:.1f} MiB of per-head data: index.html holds the overviews{}\n", heads,
                             bytes / 1048576.0, mode == ReportPages::automatic ? " (--pages auto)" : "");
    return layer_pages;
}

// The page's files: the scripts, data.js, the layer pages with their data, and index.html last.
void write_pages(const fs::path& out, const ojson& data, const std::vector<LayerPage>& layer_pages,
                 const std::string& title, const std::string& command, const std::string& stamp)
{
    for (const ReportAsset& asset : report_assets()) {
        fs::create_directories((out / std::string(asset.path)).parent_path());
        write_text_output_file((out / std::string(asset.path)).string(), std::string(asset.data));
    }
    write_text_output_file((out / "data.js").string(), "window.ATTNSCOPE_REPORT = " + data.dump() + ";\n");
    const std::string about = html_escape(fmt::format("Made by attnscope {} on {}: {}. Every number is a record of the "
                                                      "batch job shown with its input; the maths: docs/maths.md.",
                                                      ATTNSCOPE_VERSION, stamp, command));
    const std::string footer = html_escape("Charts: Vega-Lite 5.23 (BSD-3-Clause, vendor/). Structural numbers (true by "
                                           "construction) are marked \"by construction\" in the tables.");
    const auto script = [](const std::string& file) { return "<script src=\"" + url_escape(file) + "\"></script>"; };
    for (const LayerPage& p : layer_pages) {
        write_text_output_file((out / p.script).string(), "window.ATTNSCOPE_LAYER = " + p.data.dump() + ";\n");
        write_text_output_file((out / p.html).string(),
                               filled(report_page_template(), {{"TITLE", html_escape(title + " — " + p.heading)},
                                                               {"ABOUT", about}, {"FOOTER", footer},
                                                               {"SCRIPTS", script("data.js") + "\n" + script(p.script)}}));
    }
    remove_stale_layer_pages(out, data, layer_pages);
    write_text_output_file((out / "index.html").string(),
                           filled(report_page_template(), {{"TITLE", html_escape(title)}, {"ABOUT", about},
                                                           {"FOOTER", footer}, {"SCRIPTS", script("data.js")}}));
}

}  // namespace attnscope::app
