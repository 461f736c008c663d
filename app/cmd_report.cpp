// `attnscope report INPUT... --out DIR` (docs/cli.md, "Added for round 5"): every layer and head of every input in
// one page, DIR/index.html, that works offline from a file:// URL. Each input is measured by a batch job written to
// DIR/runs/<name>/job.toml (every layer and head, each row's entropy, the semiseparable profile, the depth products,
// a maps figure per head) and run as `attnscope batch` runs it, so a rerun resumes and every number can be
// reproduced by that job or by the `analyze` command shown beside it. The page (app/report/report.js) draws the
// records with Vega-Lite (vendored, written to DIR/vendor/); its data is DIR/data.js. index.html is written last.
// A report of many heads is paged by layer (--pages, the rule at page_by_layer): index.html keeps every input's
// overview, statistics and depth curves, and each layer's heads are on DIR/<name>-layer-<L>.html with their data in
// DIR/<name>-layer-<L>.js (a script, not JSON: a file:// page may not fetch).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "analysis/batch_store.h"
#include "analysis/file_defaults.h"
#include "analysis/measure.h"
#include "attention/mechanisms.h"
#include "cli_common.h"
#include "io/tensor_file.h"
#include "report_assets.h"
#include "util/error.h"
#include "util/output.h"

namespace attnscope::app {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;   // the records as analysis::read_batch_records gives them
using ojson = nlohmann::ordered_json;

struct ReportArgs {
    std::vector<std::string> inputs;
    std::string out;
    int jobs = 1;
    std::string title = "AttnScope report";
    std::string pages = "auto";   // single | layer | auto: Pages
};

// How the heads are laid out (--pages): all on index.html, on one page per input layer, or by page_by_layer's rule.
enum class Pages { single, layer, automatic };

// One input file and the datasets its job reads: per-layer /layers/<i>/q (the PyTorch bridge's layout) or /q.
struct ReportInput {
    std::string path;   // absolute
    std::string name;   // unique in the report: the file's stem
    std::string q, k;
    bool layered = false;
    bool batch_folder = false;   // a folder `attnscope batch` wrote: its records are drawn, nothing is run
};

ReportInput plan_input(const std::string& given, std::set<std::string>& names)
{
    ReportInput in;
    in.path = fs::absolute(given).lexically_normal().string();
    if (fs::is_directory(in.path)) {
        if (!fs::is_regular_file(fs::path(in.path) / "results.jsonl"))
            throw InputError(given + ": a folder without results.jsonl (report takes files of activations, or the "
                                     "folder of an attnscope batch)");
        in.batch_folder = true;
        in.name = fs::path(in.path).filename().string();
        return in;
    }
    const auto file = io::open_tensor_file(in.path);
    const auto has = [&](const std::string& n) {
        return std::any_of(file->tensors().begin(), file->tensors().end(), [&](const io::TensorInfo& t) { return t.name == n; });
    };
    if (has("/layers/0/q") && has("/layers/0/k")) {
        in.q = "/layers/0/q", in.k = "/layers/0/k", in.layered = true;
    } else if (has("/q") && has("/k")) {
        in.q = "/q", in.k = "/k";
    } else {
        throw InputError(given + ": neither /layers/<i>/q and /k datasets (the PyTorch bridge's layout, docs/pytorch.md 9) "
                                 "nor /q and /k: report reads those; for other names write a batch job (docs/batch.md)");
    }
    const std::string stem = fs::path(given).stem().string();
    in.name = stem;
    for (int i = 2; names.count(in.name); ++i)
        in.name = stem + "_" + std::to_string(i);
    names.insert(in.name);
    return in;
}

std::string toml_string(const std::string& s)
{
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\')
            out += '\\';
        if (static_cast<unsigned char>(c) < 0x20)
            throw InputError("a file name with a control character: " + s);
        out += c;
    }
    return out + "\"";
}

// The batch job that measures one input for the page.
std::string job_text(const ReportInput& in)
{
    std::string t = "# Written by attnscope report: every layer and head of one input (docs/cli.md, report).\n";
    t += "inputs = [" + toml_string(in.path) + "]\n";
    t += "q = " + toml_string(in.q) + "\nk = " + toml_string(in.k) + "\n";
    if (in.layered)
        t += "layers = \"all\"\n";
    t += "heads = \"all\"\n\n[metrics]\nrow_entropy = true\npast_splits = 16\n";
    if (in.layered)
        t += "\n[depth]\n";
#ifdef ATTNSCOPE_WITH_GUI
    t += "\n[[figure]]\nview = \"maps\"\nwidth = 640\nheight = 270\n";   // drawn by the desktop app's views
#endif
    return t;
}

// A batch folder's records, read as `aggregate` reads them (analysis::read_batch_records: no symbolic link, at most
// the default memory budget / k_results_memory_factor bytes, a torn last line refused).
std::vector<json> read_records(const fs::path& folder) { return analysis::read_batch_records(folder.string()); }

// A JSON file of a batch folder (its aggregate or a depth document): absent (null) unless a regular file, not a
// link; refused above the size records may have.
ojson read_json(const fs::path& p)
{
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(p, ec)))
        return nullptr;
    const std::uint64_t cap = analysis::default_memory_limit() / analysis::k_results_memory_factor;
    if (fs::file_size(p, ec) > cap)
        throw InputError(p.string() + ": larger than the " + std::to_string(cap >> 20) + " MiB a batch's files may hold");
    std::ifstream f(p);
    return ojson::parse(f);
}

json at(const json& j, const std::string& dotted)
{
    const json* p = &j;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = dotted.find('.', start);
        const std::string key = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (!p->is_object() || !p->contains(key))
            return nullptr;
        p = &(*p)[key];
        if (dot == std::string::npos)
            return *p;
        start = dot + 1;
    }
}

// The measures of the overview's selector and of the numbers tables: key in the page, field of the record, label.
struct Measure {
    const char* key;
    const char* field;
    const char* label;
    bool overview;
};
constexpr Measure kMeasures[] = {
    {"rank", "rank", "rank", true},
    {"relative_rank", "relative_rank", "relative rank", false},
    {"effective_rank", "effective_rank", "effective rank", true},
    {"excess_effective_rank", "excess_effective_rank", "excess effective rank (over the baseline)", true},
    {"stable_rank", "stable_rank", "stable rank", false},
    {"past_rank", "past_block.rank", "past-block rank", true},
    {"semiseparable_rank", "semiseparable_rank", "semiseparable rank", true},
    {"entropy_mean", "entropy.mean", "entropy (mean, nats)", false},
    {"entropy_normalized", "entropy.normalized_mean", "entropy / ln n", true},
    {"entropy_below_baseline", "entropy_below_baseline", "entropy below the baseline", true},
    {"mean_distance", "mean_distance", "mean attention distance", true},
};

// The curves' values to 6 significant digits (what a chart can show; results.jsonl keeps them whole): the page's
// data of 12 layers x 12 heads at N = 1024 is then 8 MiB instead of 15 (bench/report_scale.py).
json rounded(const json& values)
{
    if (!values.is_array())
        return values;
    json out = json::array();
    for (const json& v : values)
        out.push_back(v.is_number() ? json(std::stod(fmt::format("{:.6g}", v.get<double>()))) : v);
    return out;
}

// One mechanism's numbers of one head for the page.
ojson mechanism_entry(const json& r, bool causal)
{
    ojson m;
    m["mechanism"] = r.at("mechanism");
    for (const Measure& meas : kMeasures)
        m[meas.key] = at(r, meas.field);
    m["singular_values"] = rounded(at(r, "singular_values"));
    m["row_entropy"] = rounded(at(r, "row_entropy"));
    ojson profile = ojson::array();
    if (const json p = at(r, "past_profile"); p.is_array())
        for (const json& s : p)
            profile.push_back({{"h", s.at("h")}, {"rank", s.at("rank")}});
    m["past_profile"] = profile;
    m["warnings"] = at(r, "warnings");
    // Structural bounds (true by construction, docs/maths.md): linear attention's matrix, or its past block when
    // causal, is a product through its d features.
    ojson bounds = ojson::object();
    const json d = at(r, "input.d");
    const json fm = at(r, "params.feature_map");
    if (r.at("mechanism") == "linear" && d.is_number() && (!fm.is_string() || fm != "favor"))
        bounds[causal ? "past_rank" : "rank"] = d;
    m["bounds"] = bounds;
    return m;
}

// A PNG's width and height (its IHDR chunk, bytes 16-23 big-endian), or {0, 0}: the page gives each maps image its
// size before it loads, so a layer page opened at a head's anchor does not move while the images above it arrive.
std::pair<std::uint32_t, std::uint32_t> png_size(const fs::path& p)
{
    unsigned char b[24] = {};
    std::ifstream f(p, std::ios::binary);
    if (!f.read(reinterpret_cast<char*>(b), sizeof b) || std::string_view(reinterpret_cast<char*>(b) + 1, 3) != "PNG" ||
        std::string_view(reinterpret_cast<char*>(b) + 12, 4) != "IHDR")
        return {0, 0};
    const auto be32 = [&](int i) {
        return std::uint32_t{b[i]} << 24 | std::uint32_t{b[i + 1]} << 16 | std::uint32_t{b[i + 2]} << 8 | b[i + 3];
    };
    return {be32(16), be32(20)};
}

std::string unit_command(const json& first, std::int64_t head)
{
    return fmt::format("attnscope analyze --q {} --k {} --head {} --row-entropy --past-splits 16",
                       at(first, "input.q").get<std::string>(), at(first, "input.k").get<std::string>(), head);
}

// Where an input's records and files are: the batch folder, the input's name in it (figures and depth are named
// by the file's stem, as analysis::input_names names them) and how to reproduce them.
struct RunFolder {
    fs::path folder;
    std::string stem;
    std::string reproduce;
    bool own_job = true;   // the report's own job: the unit commands reproduce the numbers
};

// The analysed tokens' strings of an input the report measured itself (the file the user named; a batch folder's
// records name files the report does not open): the file's `tokens` attribute, else its `text` one token per
// character (analysis::file_defaults_from, the core's rule), listing every token of the file or only the analysed
// ones, as the maps view reads them. Null when the file has none that fit.
ojson analysed_tokens(const std::string& file, const json& first)
{
    try {
        const auto tensors = io::open_tensor_file(file);
        std::vector<std::string> tokens = analysis::file_defaults_from(tensors->file_attributes()).tokens;
        const json& n = at(first, "input.n");
        const json& prefix = at(first, "input.prefix_tokens");
        if (!n.is_number_integer())
            return nullptr;
        const auto analysed = n.get<std::size_t>();
        const std::size_t all = analysed + (prefix.is_number_integer() ? prefix.get<std::size_t>() : 0);
        if (tokens.size() == all && all >= analysed)
            tokens.erase(tokens.begin(), tokens.end() - static_cast<std::ptrdiff_t>(analysed));
        if (tokens.size() != analysed || tokens.empty())
            return nullptr;
        return tokens;
    } catch (const std::exception&) {
        return nullptr;   // the tokens are for display: a file that cannot be read again gives none
    }
}

// The page's data for one input (its records, all of one file, in the batch's order).
ojson input_entry(const std::string& name, const std::string& file, const std::vector<const json*>& records,
                  const RunFolder& run, const fs::path& out)
{
    std::map<std::pair<std::int64_t, std::int64_t>, std::vector<const json*>> units;
    std::vector<std::string> mechanisms;
    std::set<std::int64_t> layers, heads;
    bool layered = false;
    for (const json* r : records) {
        layered = layered || (r->contains("layer") && (*r)["layer"].is_number());
        const std::int64_t layer = r->value("layer", json(0)).is_number() ? r->value("layer", std::int64_t{0}) : 0;
        const std::int64_t head = r->value("head", json(0)).is_number() ? r->value("head", std::int64_t{0}) : 0;
        std::vector<const json*>& unit = units[{layer, head}];
        if (!unit.empty() && unit.front()->value("unit", json(0)) != r->value("unit", json(0)))
            throw InputError(file + ": the batch has several units per layer and head (an axis chosen as all): the page "
                                    "draws one per layer and head; use attnscope aggregate for those");
        unit.push_back(r);
        layers.insert(layer), heads.insert(head);
        const std::string m = r->at("mechanism");
        if (std::find(mechanisms.begin(), mechanisms.end(), m) == mechanisms.end())
            mechanisms.push_back(m);
    }
    const json& first = *records.front();
    const bool causal = at(first, "params.causal") == true;
    const json d = at(first, "input.d");
    ojson e;
    e["name"] = name;
    e["file"] = file;
    e["sha256"] = at(first, "input.sha256");
    e["n"] = at(first, "input.n");
    e["d"] = d;
    e["causal"] = causal;
    e["layers"] = std::vector<std::int64_t>(layers.begin(), layers.end());
    e["heads"] = std::vector<std::int64_t>(heads.begin(), heads.end());
    e["mechanisms"] = mechanisms;
    const std::string dtext = d.is_number() ? std::to_string(d.get<std::int64_t>()) : std::string("d");
    e["sentence"] = causal ? "Causal: every matrix is lower triangular with a non-zero diagonal, so its rank is near N whatever "
                             "the mechanism; read the past-block rank A[h:N, 0:h] (linear's is at most d = " + dtext +
                                 " by construction) and the semiseparable rank (its largest over the splits)."
                           : "Linear attention's rank is at most d = " + dtext +
                                 " by construction, whatever N; softmax's is not bounded by d, and MHLA's by M d.";
    e["batch_command"] = run.reproduce;
    // What was measured and how: the job's text (its options; the file's attributes fill the rest, as each record's
    // input.defaults_from_file says) and the parameters each mechanism ran with.
    std::ifstream job(run.folder / "job.toml");
    e["job"] = run.own_job && job ? std::string(std::istreambuf_iterator<char>(job), {}) : std::string();
    ojson params = ojson::object();
    for (const json* r : records)
        if (!params.contains(r->at("mechanism").get<std::string>()))
            params[r->at("mechanism").get<std::string>()] = at(*r, "params");
    e["params"] = params;
    e["defaults_from_file"] = at(first, "input.defaults_from_file");
    e["tokens"] = run.own_job ? analysed_tokens(file, first) : ojson(nullptr);
    ojson list = ojson::array();
    for (const auto& [key, recs] : units) {
        ojson u;
        u["layer"] = key.first;
        u["head"] = key.second;
        u["anchor"] = fmt::format("{}-l{}-h{}", name, key.first, key.second);
        const std::string fig = layered ? fmt::format("{}_l{}_h{}_maps.png", run.stem, key.first, key.second)
                                        : fmt::format("{}_h{}_maps.png", run.stem, key.second);
        const fs::path figure = run.folder / "figures" / fig;
        std::error_code ec;   // a figure that is a link (to anywhere) is not linked from the page
        const bool has_figure = fs::is_regular_file(fs::symlink_status(figure, ec));
        u["figure"] = has_figure ? json(fs::relative(figure, out).string()) : json(nullptr);
        if (const auto [w, h] = has_figure ? png_size(figure) : std::pair<std::uint32_t, std::uint32_t>{}; w > 0 && h > 0)
            u["figure_size"] = {w, h};
        u["command"] = run.own_job ? unit_command(*recs.front(), key.second)
                                   : "the batch's record " + recs.front()->value("key", std::string()) +
                                         " (" + fs::relative(run.folder / "results.jsonl", out).string() + ")";
        ojson ms = ojson::array();
        for (const json* r : recs)
            ms.push_back(mechanism_entry(*r, causal));
        u["mechanisms"] = ms;
        list.push_back(u);
    }
    e["units"] = list;
    // The batch's statistics are over all its units: they are this input's when the folder holds it alone.
    e["aggregate"] = run.own_job ? read_json(run.folder / "aggregate.json") : ojson(nullptr);
    ojson depth = read_json(run.folder / "depth" / (run.stem + ".json"));
    if (depth.is_object()) {   // the curves only: the page draws effective rank and residual per depth
        ojson slim = ojson::array();
        for (const auto& step : depth["depth"]) {
            ojson results = ojson::array();
            for (const auto& r : step["results"])
                results.push_back({{"mechanism", r["mechanism"]}, {"effective_rank", r["effective_rank"]},
                                   {"residual_to_uniform", r["residual_to_uniform"]}});
            slim.push_back({{"depth", step["depth"]}, {"layer", step["layer"]}, {"results", results}});
        }
        depth = {{"depth", slim}};
    }
    e["depth"] = depth;
    return e;
}

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

// --pages auto's rule: the report's inputs are paged by layer when they hold more than kPagedAboveHeads heads, or
// more than kPagedAboveBytes of per-head data (the units as data.js would hold them), in all. Measured with
// bench/report_scale.py (docs/performance.md): one page takes about 0.45 s + 0.17 s per MiB of data.js to its
// overviews in headless Chromium (384 heads at N = 256, 5.8 MiB: 1.4 s; 768 heads, 11.5 MiB: 2.4 s), so 8 MiB
// keeps it under 2 s; and past about 200 heads one page is a long scroll (each head's section is about 650 px
// high) that loads every head's maps (0.1 MiB each), though it still opens quickly.
constexpr std::size_t kPagedAboveHeads = 192;
constexpr std::size_t kPagedAboveBytes = std::size_t{8} << 20;

bool page_by_layer(Pages mode, std::size_t heads, std::size_t data_bytes)
{
    if (mode != Pages::automatic)
        return mode == Pages::layer;
    return heads > kPagedAboveHeads || data_bytes > kPagedAboveBytes;
}

// One page of one input layer's heads: DIR/<html> loads data.js (the overview's data: the input's facts, the
// layers' pages for the links) and DIR/<script>, which sets window.ATTNSCOPE_LAYER = {input, layer, units}, the
// units exactly as a single page would hold them.
struct LayerPage {
    std::string html, script;
    std::string heading;
    ojson data;
};

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

std::string command_line(const ReportArgs& a)
{
    std::string c = "attnscope report";
    for (const std::string& i : a.inputs)
        c += " " + i;
    return c + " --out " + a.out;
}

// Pages the inputs by layer when --pages says so (page_by_layer): their layer pages, to be written.
std::vector<LayerPage> paged(ojson& inputs, Pages mode, const fs::path& out)
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
                             bytes / 1048576.0, mode == Pages::automatic ? " (--pages auto)" : "");
    return layer_pages;
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

// The page's files: the scripts, data.js, the layer pages with their data, and index.html last.
void write_pages(const fs::path& out, const ojson& data, const std::vector<LayerPage>& layer_pages, const ReportArgs& a,
                 const std::string& stamp)
{
    for (const ReportAsset& asset : report_assets()) {
        fs::create_directories((out / std::string(asset.path)).parent_path());
        write_text_output_file((out / std::string(asset.path)).string(), std::string(asset.data));
    }
    write_text_output_file((out / "data.js").string(), "window.ATTNSCOPE_REPORT = " + data.dump() + ";\n");
    const std::string about = html_escape(fmt::format("Made by attnscope {} on {}: {}. Every number is a record of the "
                                                      "batch job shown with its input; the maths: docs/maths.md.",
                                                      ATTNSCOPE_VERSION, stamp, command_line(a)));
    const std::string footer = html_escape("Charts: Vega-Lite 5.23 (BSD-3-Clause, vendor/). Structural numbers (true by "
                                           "construction) are marked \"by construction\" in the tables.");
    const auto script = [](const std::string& file) { return "<script src=\"" + url_escape(file) + "\"></script>"; };
    for (const LayerPage& p : layer_pages) {
        write_text_output_file((out / p.script).string(), "window.ATTNSCOPE_LAYER = " + p.data.dump() + ";\n");
        write_text_output_file((out / p.html).string(),
                               filled(report_page_template(), {{"TITLE", html_escape(a.title + " — " + p.heading)},
                                                               {"ABOUT", about}, {"FOOTER", footer},
                                                               {"SCRIPTS", script("data.js") + "\n" + script(p.script)}}));
    }
    remove_stale_layer_pages(out, data, layer_pages);
    write_text_output_file((out / "index.html").string(),
                           filled(report_page_template(), {{"TITLE", html_escape(a.title)}, {"ABOUT", about},
                                                           {"FOOTER", footer}, {"SCRIPTS", script("data.js")}}));
}

int run_report(const ReportArgs& a)
{
    if (a.jobs < 1)
        throw std::invalid_argument("--jobs must be at least 1");
    const fs::path out = fs::absolute(a.out).lexically_normal();
    if (fs::exists(out) && !fs::is_directory(out))
        throw InputError("--out " + a.out + ": exists and is not a folder");
    std::set<std::string> names;
    std::vector<ReportInput> inputs;
    for (const std::string& i : a.inputs)
        inputs.push_back(plan_input(i, names));   // every input checked before anything is written
    ojson data;
    data["attnscope_version"] = ATTNSCOPE_VERSION;
    const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
    data["generated"] = stamp;
    data["command"] = command_line(a);
#ifndef ATTNSCOPE_WITH_GUI
    // The headless attnscope (attnscope-cli) measures everything but draws no map images: the page says why.
    data["maps_missing"] = "No attention maps: " + needs_desktop_app("the maps figure") + ".";
#endif
    ojson measures = ojson::array(), table = ojson::array();
    for (const Measure& m : kMeasures) {
        table.push_back({{"key", m.key}, {"label", m.label}});
        if (m.overview)
            measures.push_back({{"key", m.key}, {"label", m.label}});
    }
    data["measures"] = measures;
    ojson labels = ojson::object();   // the legend's names, as the desktop app's plots label them
    for (const attention::MechanismInfo& m : attention::mechanism_table())
        labels[std::string(m.name)] = std::string(m.label);
    data["mechanism_labels"] = labels;
    data["table"] = table;
    data["aggregate_metrics"] = {"rank", "effective_rank", "excess_effective_rank", "past_block.rank", "semiseparable_rank",
                                 "entropy.normalized_mean", "entropy_below_baseline", "mean_distance"};
    ojson list = ojson::array();
    std::vector<std::vector<json>> kept;   // the records of batch folders, alive until the page is written
    for (const ReportInput& in : inputs) {
        if (in.batch_folder) {
            std::cerr << "report: the records of " << in.path << "\n";
            kept.push_back(read_records(in.path));
            std::map<std::string, std::vector<const json*>> by_file;
            for (const json& r : kept.back())
                by_file[at(r, "input.file").is_string() ? at(r, "input.file").get<std::string>() : std::string()].push_back(&r);
            if (by_file.empty())
                throw InputError(in.path + "/results.jsonl: no records");
            for (const auto& [file, records] : by_file) {
                std::string name = fs::path(file).stem().string();
                for (int i = 2; names.count(name); ++i)
                    name = fs::path(file).stem().string() + "_" + std::to_string(i);
                names.insert(name);
                list.push_back(input_entry(name, file, records,
                                           {in.path, fs::path(file).stem().string(),
                                            "attnscope aggregate " + in.path + " (the records of this batch folder)", false},
                                           out));
            }
            continue;
        }
        const fs::path run = out / "runs" / in.name;
        fs::create_directories(run);
        write_text_output_file((run / "job.toml").string(), job_text(in));
        std::cerr << "report: " << in.path << " (" << (in.layered ? "every layer and head" : "every head") << ")\n";
        if (const int status = run_batch_job((run / "job.toml").string(), run.string(), a.jobs); status != 0)
            return status;
        std::vector<json> records = read_records(run);
        std::vector<const json*> pointers;
        for (const json& r : records)
            pointers.push_back(&r);
        if (pointers.empty())
            throw InputError(in.path + ": the batch recorded nothing");
        list.push_back(input_entry(in.name, in.path, pointers,
                                   {run, fs::path(in.path).stem().string(),
                                    "attnscope batch " + fs::relative(run / "job.toml", out).string() + " --out " +
                                        fs::relative(run, out).string(),
                                    true},
                                   out));
    }
    const Pages mode = a.pages == "single" ? Pages::single : a.pages == "layer" ? Pages::layer : Pages::automatic;
    std::vector<LayerPage> layer_pages = paged(list, mode, out);
    data["inputs"] = list;
    write_pages(out, data, layer_pages, a, stamp);
    std::cerr << "report: " << (out / "index.html").string() << "\n";
    return 0;
}

}  // namespace

Command add_report_command(CLI::App& app)
{
    auto a = std::make_shared<ReportArgs>();
    auto* cmd = app.add_subcommand("report", "One offline web page of every layer and head of every input: overview "
                                             "grids, maps, spectra, profiles, statistics over heads, depth");
    cmd->add_option("INPUT", a->inputs, "Files of activations (/layers/<i>/q and /k, or /q and /k), or folders "
                                        "attnscope batch wrote (their records are drawn)")->required();
    cmd->add_option("--out", a->out, "The report's folder (index.html, data.js, runs/ with each input's batch)")->required();
    cmd->add_option("--jobs", a->jobs, "Units analysed in parallel (default 1)");
    cmd->add_option("--title", a->title, "The page's title");
    cmd->add_option("--pages", a->pages,
                    fmt::format("single: every head on index.html; layer: each input's heads on one page per layer "
                                "(DIR/<name>-layer-<L>.html), index.html keeping the overviews; auto (default): by layer "
                                "when the inputs hold more than {} heads or {} MiB of per-head data in all",
                                kPagedAboveHeads, kPagedAboveBytes >> 20))
        ->check(CLI::IsMember({"single", "layer", "auto"}));
    return {cmd, [a] { return run_report(*a); }};
}

}  // namespace attnscope::app
