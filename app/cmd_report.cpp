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
#include "report_pages.h"
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
    std::string pages = "auto";   // single | layer | auto: ReportPages
};

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

std::string command_line(const ReportArgs& a)
{
    std::string c = "attnscope report";
    for (const std::string& i : a.inputs)
        c += " " + i;
    return c + " --out " + a.out;
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
    const ReportPages mode = a.pages == "single" ? ReportPages::single
                             : a.pages == "layer"  ? ReportPages::layer
                                                   : ReportPages::automatic;
    std::vector<LayerPage> layer_pages = paged(list, mode, out);
    data["inputs"] = list;
    write_pages(out, data, layer_pages, a.title, command_line(a), stamp);
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
