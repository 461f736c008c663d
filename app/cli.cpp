#include "cli.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/analyze.h"
#include "analysis/inputs.h"
#include "analysis/sweep.h"
#include "batch_job.h"
#include "analysis/synth.h"
#include "attention/operator.h"
#include "cli_options.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "io/writers.h"
#include "util/atomic_file.h"
#include "util/error.h"

#ifdef ATTNSCOPE_WITH_GUI
#include "analysis/explore.h"
#include "figure.h"
#endif

namespace attnscope::app {

namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kSubcommands[] = {"info", "analyze", "matrix", "synth", "sweep", "batch", "merge", "figure"};

bool ends_with(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s)
{
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// One line, whatever the message holds.
void print_error(const std::string& message)
{
    std::string line = message;
    for (char& c : line)
        if (c == '\n' || c == '\r')
            c = ' ';
    std::fprintf(stderr, "error: %s\n", line.c_str());
}

std::string shape_text(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string compact(const nlohmann::json& j)
{
    std::string s = j.dump();
    if (s.size() > 120)
        s = s.substr(0, 117) + "...";
    return s;
}

// Writes text to `path` atomically, or to stdout for "-".
void write_text_output(const std::string& path, const std::string& text)
{
    if (path == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return;
    }
    AtomicOutput out(path);
    FILE* f = std::fopen(out.temp_path().c_str(), "wb");
    if (!f)
        throw InputError(path + ": cannot write (" + std::strerror(errno) + ")");
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    int err = errno;
    const bool closed = std::fclose(f) == 0;
    if (ok)
        err = errno;
    if (!ok || !closed)
        throw InputError(path + ": cannot write (" + std::strerror(err) + ")");
    out.commit();
}

// ---------------------------------------------------------------------------------------------- info
struct InfoArgs {
    std::string file;
    bool json = false;
};

int run_info(const InfoArgs& a)
{
    const auto file = io::open_tensor_file(a.file);
    if (a.json) {
        ojson j;
        j["file"] = a.file;
        j["format"] = std::string(file->format());
        j["attributes"] = file->file_attributes();
        ojson tensors = ojson::array();
        for (const auto& t : file->tensors()) {
            ojson e;
            e["name"] = t.name;
            e["shape"] = t.shape;
            e["dtype"] = std::string(io::dtype_name(t.dtype));
            e["attributes"] = t.attributes;
            tensors.push_back(std::move(e));
        }
        j["tensors"] = std::move(tensors);
        ojson skipped = ojson::array();
        for (const auto& s : file->skipped())
            skipped.push_back(ojson{{"name", s.name}, {"reason", s.reason}});
        j["skipped"] = std::move(skipped);
        std::cout << j.dump(2) << "\n";
        return 0;
    }
    std::cout << a.file << " (" << file->format() << ", " << file->tensors().size() << " tensor"
              << (file->tensors().size() == 1 ? "" : "s") << ")\n";
    for (const auto& [key, value] : file->file_attributes().items())
        std::cout << "  @" << key << " = " << compact(value) << "\n";
    // A .npy file's one tensor has no name.
    auto shown = [](const std::string& name) { return name.empty() ? std::string("(array)") : name; };
    std::size_t width = 7;
    for (const auto& t : file->tensors())
        width = std::max(width, shown(t.name).size());
    for (const auto& t : file->tensors()) {
        std::cout << fmt::format("  {:<{}}  {:<8}  {}\n", shown(t.name), width, io::dtype_name(t.dtype), shape_text(t.shape));
        for (const auto& [key, value] : t.attributes.items())
            std::cout << fmt::format("  {:<{}}    @{} = {}\n", "", width, key, compact(value));
    }
    for (const auto& s : file->skipped())
        std::cout << "  (not a tensor) " << s.name << ": " << s.reason << "\n";
    return 0;
}

// ------------------------------------------------------------------------------------------- analyze
struct AnalyzeArgs {
    std::string q, k;
    std::optional<std::string> v;
    std::string mechanisms = "softmax,linear,mhla";
    std::optional<std::string> json_out;
    SelectionArgs selection;
    MechanismArgs mechanism;
    MetricArgs metrics;
    MemoryArgs memory;
};

std::vector<attention::Mechanism> parse_mechanisms(const std::string& text)
{
    std::vector<attention::Mechanism> out;
    for (const std::string& item : split_list(text)) {
        const auto m = attention::parse_mechanism(item);
        for (auto seen : out)
            if (seen == m)
                throw std::invalid_argument("--mechanism lists " + item + " twice");
        out.push_back(m);
    }
    return out;
}

std::string fmt_opt(double v, int precision)
{
    return std::isfinite(v) ? fmt::format("{:.{}f}", v, precision) : std::string("-");
}

void print_summary(const ojson& doc)
{
    const ojson& in = doc["input"];
    std::string at;
    for (const auto& [axis, index] : in["at"].items())
        at += (at.empty() ? "" : ",") + axis + "=" + std::to_string(index.get<long long>());
    std::cout << "q " << in["q"].get<std::string>() << "   k " << in["k"].get<std::string>() << "\n";
    std::cout << "layout " << in["layout"].get<std::string>() << (at.empty() ? "" : "  at " + at) << "   N=" << in["n"]
              << "  d=" << in["d"];
    if (in["prefix_tokens"].get<long long>() > 0)
        std::cout << "  (dropped " << in["prefix_tokens"] << " prefix tokens)";
    if (in.contains("defaults_from_file")) {
        std::string used;
        for (const auto& [key, value] : in["defaults_from_file"].items())
            used += (used.empty() ? "" : " ") + key + "=" + value.dump();
        std::cout << "\nfrom the file's attributes: " << used << "  (override with the options)";
    }
    std::cout << "\n\n";
    std::cout << fmt::format("{:<9} {:>6} {:>9} {:>10} {:>8} {:>9} {:>9} {:>9}   {}\n", "mechanism", "rank", "rel.rank",
                             "eff.rank", "stable", "H mean", "H std", "H/ln n", "params");
    for (const auto& r : doc["results"]) {
        auto num = [&](const char* key, int precision) {
            return r.contains(key) && r[key].is_number() ? fmt_opt(r[key].get<double>(), precision) : std::string("-");
        };
        std::string rank = r.contains("rank") && r["rank"].is_number() ? std::to_string(r["rank"].get<long long>()) : "-";
        if (rank == "-" && r.contains("rank_bounds"))   // randomized: the bracket it proved
            rank = std::to_string(r["rank_bounds"]["lower"].get<long long>()) + ".." +
                   std::to_string(r["rank_bounds"]["upper"].get<long long>());
        std::string hm = "-", hs = "-", hn = "-";
        if (r.contains("entropy") && r["entropy"].is_object()) {
            hm = fmt_opt(r["entropy"]["mean"].get<double>(), 4);
            hs = fmt_opt(r["entropy"]["std"].get<double>(), 4);
            hn = fmt_opt(r["entropy"]["normalized_mean"].get<double>(), 4);
        }
        std::string params;
        for (const auto& [key, value] : r["params"].items())
            params += (params.empty() ? "" : " ") + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
        std::cout << fmt::format("{:<9} {:>6} {:>9} {:>10} {:>8} {:>9} {:>9} {:>9}   {}\n", r["mechanism"].get<std::string>(),
                                 rank, num("relative_rank", 4), num("effective_rank", 2), num("stable_rank", 3), hm, hs, hn,
                                 params);
    }
    bool any_warning = false;
    for (const auto& r : doc["results"])
        for (const auto& w : r["warnings"]) {
            if (!any_warning)
                std::cout << "\n";
            any_warning = true;
            std::cout << "warning (" << r["mechanism"].get<std::string>() << "): " << w.get<std::string>() << "\n";
        }
    if (!doc["results"].empty() && doc["results"][0].contains("rank_tol") && doc["results"][0]["rank_tol"].is_number()) {
        std::cout << "\nrank = #{singular values > tol}; tol per mechanism:";
        for (const auto& r : doc["results"])
            if (r.contains("rank_tol") && r["rank_tol"].is_number())
                std::cout << fmt::format(" {}={:.3g}", r["mechanism"].get<std::string>(), r["rank_tol"].get<double>());
        std::cout << "\n";
    }
}

int run_analyze(const AnalyzeArgs& a)
{
    const auto mechanisms = parse_mechanisms(a.mechanisms);
    SelectionArgs selection_args = a.selection;
    MechanismArgs mechanism_args = a.mechanism;
    const ojson from_file = apply_file_defaults(a.q, selection_args, mechanism_args);
    const io::AxisSelection selection = selection_args.resolve();
    const attention::AttentionOptions options = mechanism_args.resolve();
    const analysis::MetricOptions metric_options = a.metrics.resolve();
    const std::uint64_t memory_limit = a.memory.resolve();
    io::set_read_limit_bytes(memory_limit);
    if (a.json_out && *a.json_out != "-")
        AtomicOutput probe(*a.json_out);   // fail on an unwritable destination before the work

    const analysis::LoadedInputs in = analysis::load_inputs(a.q, a.k, a.v, selection);
    const auto results = analysis::analyze(in.q.values, in.k.values, mechanisms, options, metric_options, memory_limit);

    ojson doc;
    doc["attnscope_version"] = ATTNSCOPE_VERSION;
    doc["input"] = in.input_json;
    if (!from_file.empty())
        doc["input"]["defaults_from_file"] = from_file;
    ojson list = ojson::array();
    for (const auto& r : results)
        list.push_back(analysis::result_json(r, metric_options));
    doc["results"] = std::move(list);

    if (a.json_out) {
        write_text_output(*a.json_out, doc.dump(2) + "\n");
        if (*a.json_out == "-")
            return 0;
    }
    print_summary(doc);
    if (a.json_out)
        std::cout << "\nwrote " << *a.json_out << "\n";
    return 0;
}

// -------------------------------------------------------------------------------------------- matrix
struct MatrixArgs {
    std::string q, k;
    std::string mechanism;
    std::string out;
    SelectionArgs selection;
    MechanismArgs mechanism_args;
    MemoryArgs memory;
};

int run_matrix(const MatrixArgs& a)
{
    const auto mechanisms = parse_mechanisms(a.mechanism);
    if (mechanisms.size() != 1)
        throw std::invalid_argument("matrix takes one --mechanism (got " + a.mechanism + ")");
    const std::string ext = lower(a.out);
    const bool npy = ends_with(ext, ".npy");
    const bool h5 = ends_with(ext, ".h5") || ends_with(ext, ".hdf5");
    if (!npy && !h5)
        throw std::invalid_argument("--out " + a.out + ": name a .npy or .h5 file");
    SelectionArgs selection_args = a.selection;
    MechanismArgs mechanism_args = a.mechanism_args;
    const ojson from_file = apply_file_defaults(a.q, selection_args, mechanism_args);
    const io::AxisSelection selection = selection_args.resolve();
    attention::AttentionOptions options = mechanism_args.resolve();
    const std::uint64_t memory_limit = a.memory.resolve();
    io::set_read_limit_bytes(memory_limit);
    AtomicOutput out(a.out);   // checks the folder before any work

    const analysis::LoadedInputs in = analysis::load_inputs(a.q, a.k, std::nullopt, selection);
    const auto n = in.q.values.rows();
    const long double need = static_cast<long double>(n) * n * 8.0L * 1.1L;
    if (need > static_cast<long double>(memory_limit))
        throw InputError("N=" + std::to_string(n) + " tokens: the " + std::to_string(n) + " x " + std::to_string(n) +
                         " matrix needs " + std::to_string(static_cast<unsigned long long>(need / 1048576.0L)) +
                         " MiB, over the memory limit (--max-memory)");
    const auto mechanism = mechanisms.front();
    options = analysis::options_for(mechanism, options);   // attention.md 1.3: linear is row-normalised
    const ojson params = analysis::mechanism_params(mechanism, options, n, in.q.values.cols());
    const auto op = attention::make_operator(mechanism, in.q.values, in.k.values, options);
    const Eigen::MatrixXd A = op->dense();

    if (npy) {
        out.write([&](const std::string& temp) { io::write_npy(temp, A); });
    } else {
        io::DatasetOut ds;
        ds.name = "/attention";
        ds.shape = {n, n};
        ds.data.resize(static_cast<std::size_t>(n * n));
        for (Eigen::Index t = 0; t < n; ++t)
            for (Eigen::Index j = 0; j < n; ++j)
                ds.data[static_cast<std::size_t>(t * n + j)] = A(t, j);
        ds.attributes["mechanism"] = std::string(attention::to_string(mechanism));
        ds.attributes["params"] = params.dump();
        ojson input = in.input_json;
        if (!from_file.empty())
            input["defaults_from_file"] = from_file;
        ds.attributes["input"] = input.dump();
        ds.attributes["attnscope_version"] = ATTNSCOPE_VERSION;
        out.write([&](const std::string& temp) { io::write_hdf5(temp, {ds}); });
    }
    out.commit();
    std::cerr << "wrote " << a.out << " (" << n << " x " << n << ", " << attention::to_string(mechanism) << ")\n";
    return 0;
}

// --------------------------------------------------------------------------------------------- synth
struct SynthArgs {
    std::int64_t n = 0, d = 0, heads = 1;
    std::string kind = "gaussian";
    std::string grid;
    std::uint64_t seed = 0;
    std::string out;
    MemoryArgs memory;
};

int run_synth(const SynthArgs& a)
{
    const std::string ext = lower(a.out);
    if (!ends_with(ext, ".h5") && !ends_with(ext, ".hdf5"))
        throw std::invalid_argument("--out " + a.out + ": synth writes HDF5, name a .h5 file");
    analysis::SynthOptions o;
    o.n = a.n;
    o.d = a.d;
    o.heads = a.heads;
    o.kind = a.kind;
    o.seed = a.seed;
    if (!a.grid.empty())
        o.grid = parse_sizes(a.grid, "--grid");
    AtomicOutput out(a.out);
    analysis::SynthData data = analysis::synthesize(o, a.memory.resolve());
    std::vector<io::DatasetOut> datasets;
    for (auto [name, values] : {std::pair{"/q", &data.q}, std::pair{"/k", &data.k}, std::pair{"/v", &data.v}}) {
        io::DatasetOut ds;
        ds.name = name;
        ds.shape = {a.heads, a.n, a.d};
        ds.data = std::move(*values);
        ds.as_float32 = true;
        ds.compress = true;
        datasets.push_back(std::move(ds));
    }
    out.write([&](const std::string& temp) { io::write_hdf5(temp, datasets, data.attributes); });
    out.commit();
    std::cerr << "wrote " << a.out << ": /q /k /v [" << a.heads << ", " << a.n << ", " << a.d << "] kind " << a.kind << "\n";
    return 0;
}

// --------------------------------------------------------------------------------------------- sweep
// "all" or a comma list of non-negative indices.
void parse_axis_list(const std::string& text, const std::string& option, std::optional<std::vector<Eigen::Index>>& list,
                     bool& all)
{
    if (text.empty())
        return;
    if (text == "all") {
        all = true;
        return;
    }
    std::vector<Eigen::Index> v;
    for (const std::string& item : split_list(text)) {
        std::size_t used = 0;
        long long x = -1;
        try {
            x = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || x < 0)
            throw std::invalid_argument(option + " " + text + ": '" + item + "' is not an index (or use all)");
        v.push_back(x);
    }
    list = std::move(v);
}

// The options of `attnscope sweep`, registered on `sweep` and on `figure` (whose explore views use the
// inputs, selection and mechanism options too), and resolved into the core's SweepSpec.
struct SweepOptions {
    std::vector<std::string> q, k;
    std::string synth_kind;
    std::int64_t d = 64, seeds = 1, n = 0;
    std::string vary;
    std::string subsample = "first";
    std::int64_t draws = 1;
    std::uint64_t subsample_seed = 0;
    std::string heads, layers;
    std::string mechanisms = "softmax,linear,mhla";
    SelectionArgs selection;
    MechanismArgs mechanism;
    MetricArgs metrics;
    MemoryArgs memory;

    void add_to(CLI::App& cmd, bool vary_required)
    {
        cmd.add_option("--q", q, "Queries FILE[:NAME] (repeat with --k for several inputs)")->take_all()->allow_extra_args(false);
        cmd.add_option("--k", k, "Keys FILE[:NAME]")->take_all()->allow_extra_args(false);
        cmd.add_option("--synth", synth_kind, "Synthetic data instead of inputs: gaussian | lowrank | local1d | local2d");
        cmd.add_option("--d", d, "Synthetic features per head (default 64)");
        cmd.add_option("--seeds", seeds, "Synthetic draws, seeds S..S+K-1 (default 1)");
        cmd.add_option("--n", n, "Synthetic tokens for --vary m");
        auto* v = cmd.add_option("--vary", vary, "n=LIST (sequence lengths) or m=LIST (block counts; block-grid sides for grid data)");
        if (vary_required)
            v->required();
        cmd.add_option("--subsample", subsample, "Token subsets for --vary n: first | random | crop (default first)");
        cmd.add_option("--draws", draws, "Random subsets per N (--subsample random)");
        cmd.add_option("--subsample-seed", subsample_seed, "Seed of random subsets and of synthetic draws (default 0)");
        cmd.add_option("--heads", heads, "all or a comma list of heads (default: the selection's)");
        cmd.add_option("--layers", layers, "all or a comma list of layers (axis l; default: the selection's)");
        cmd.add_option("--mechanism", mechanisms, "Comma list of softmax, linear, mhla (default all three)");
        selection.add_to(cmd);
        mechanism.add_to(cmd);
        metrics.add_to(cmd);
        memory.add_to(cmd);
    }

    // The spec of `attnscope sweep` (validates every option; the core validates the points).
    analysis::SweepSpec resolve() const
    {
        analysis::SweepSpec spec;
        if (vary.size() < 2 || (vary[0] != 'n' && vary[0] != 'm') || (vary.size() > 1 && vary[1] != '='))
            throw std::invalid_argument("--vary " + vary + ": expected n=LIST or m=LIST, e.g. n=256,1024,4096");
        spec.vary = vary[0];
        if (vary.size() > 2)
            spec.values = parse_sizes(vary.substr(2), "--vary");
        spec.subsample = analysis::parse_subsample(subsample);
        if (draws < 1)
            throw std::invalid_argument("--draws must be at least 1");
        if (draws > 1 && spec.subsample != analysis::Subsample::random)
            throw std::invalid_argument("--draws needs --subsample random");
        spec.draws = draws;
        spec.seed = subsample_seed;
        parse_axis_list(heads, "--heads", spec.heads, spec.all_heads);
        parse_axis_list(layers, "--layers", spec.layers, spec.all_layers);
        spec.mechanisms = parse_mechanisms(mechanisms);
        spec.options = mechanism.resolve();
        spec.metrics = metrics.resolve();
        spec.memory_limit = memory.resolve();
        io::set_read_limit_bytes(spec.memory_limit);

        if (!synth_kind.empty()) {
            if (!q.empty() || !k.empty())
                throw std::invalid_argument("give either --synth or --q/--k inputs, not both");
            if (d < 1 || seeds < 1)
                throw std::invalid_argument("--d and --seeds must be at least 1");
            spec.synth = analysis::SynthSource{synth_kind, d, seeds, n};
        } else {
            if (q.empty() || q.size() != k.size())
                throw std::invalid_argument("give --q and --k in pairs (got " + std::to_string(q.size()) + " --q and " +
                                            std::to_string(k.size()) + " --k), or --synth KIND");
            const io::AxisSelection sel = selection.resolve();
            for (std::size_t i = 0; i < q.size(); ++i)
                spec.inputs.push_back({q[i], k[i], std::nullopt, sel});
        }
        return spec;
    }
};

struct SweepArgs {
    SweepOptions sweep;
    std::string csv_out = "-";
    std::optional<std::string> json_out;
    std::optional<std::string> plot_out;
    std::optional<std::string> metric;
};

std::vector<analysis::SweepRecord> run_sweep_with_progress(const analysis::SweepSpec& spec)
{
    analysis::JobContext ctx;
    const bool tty = ::isatty(2);
    ctx.on_progress = [&](double f, const std::string& stage) {
        if (tty)
            std::fprintf(stderr, "\r[%3.0f%%] %-70.70s", 100.0 * f, stage.c_str());
    };
    auto records = analysis::run_sweep(spec, ctx);
    if (tty)
        std::fprintf(stderr, "\r%-80s\r", "");
    return records;
}

int run_sweep(const SweepArgs& a)
{
    const analysis::SweepSpec spec = a.sweep.resolve();

    // Refuse unwritable destinations (and a bad figure name) before the work.
    std::optional<AtomicOutput> csv_out, json_out, plot_out;
    if (a.csv_out != "-")
        csv_out.emplace(a.csv_out);
    if (a.json_out && *a.json_out != "-")
        json_out.emplace(*a.json_out);
#ifdef ATTNSCOPE_WITH_GUI
    FigureTarget target;
    FigureLook look;
    if (a.plot_out) {
        target.path = *a.plot_out;
        check_figure_target("curves", target);
        check_figure_metric(a.metric);
        look.metric = a.metric;
        plot_out.emplace(*a.plot_out);
    }
#else
    if (a.plot_out)
        throw std::invalid_argument("--plot: this attnscope was built without the desktop app's views (ATTNSCOPE_BUILD_GUI=OFF)");
#endif
    if (a.metric && !a.plot_out)
        throw std::invalid_argument("--metric chooses what --plot shows; give --plot OUT.png too");

    auto records = run_sweep_with_progress(spec);
    // The figure first (it is the step most likely to fail), then the text outputs; every file is
    // renamed into place only when all of them are written.
    const std::string csv = analysis::sweep_csv(records);
    const std::string summary = a.json_out ? analysis::sweep_summary(spec, records).dump(2) + "\n" : std::string();
#ifdef ATTNSCOPE_WITH_GUI
    if (plot_out) {
        auto sweep = std::make_shared<const analysis::SweepResult>(analysis::SweepResult{spec, std::move(records)});
        plot_out->write([&](const std::string& temp) { render_sweep_figure_to(sweep, "curves", look, target, temp); });
        records = sweep->records;
    }
#endif
    if (csv_out)
        csv_out->write([&](const std::string& temp) { write_text_output(temp, csv); });
    if (json_out)
        json_out->write([&](const std::string& temp) { write_text_output(temp, summary); });
    if (csv_out)
        csv_out->commit();
    if (json_out)
        json_out->commit();
    if (plot_out)
        plot_out->commit();
    if (a.csv_out == "-")
        write_text_output("-", csv);
    if (a.json_out && *a.json_out == "-")
        write_text_output("-", summary);
    if (a.csv_out != "-")
        std::cerr << "wrote " << a.csv_out << " (" << records.size() << " records)\n";
    if (a.plot_out)
        std::cerr << "wrote " << *a.plot_out << "\n";
    return 0;
}

// -------------------------------------------------------------------------------------------- figure
#ifdef ATTNSCOPE_WITH_GUI
struct FigureArgs {
    std::string view;
    std::optional<std::string> session;
    SweepOptions sweep;   // inputs, selection, mechanism options (every view); sweep options (curves)
    std::optional<std::string> v;
    std::string token_grid;
    FigureTarget target;
    std::optional<std::string> colormap, metric, view_state;
    std::optional<int> query;
    bool log = false;
};

int run_figure(FigureArgs a)
{
    check_figure_target(a.view, a.target);
    FigureLook look;
    look.colormap = a.colormap;
    look.log = a.log;
    look.query = a.query;
    look.metric = a.metric;
    if (a.view_state) {
        try {
            look.state = nlohmann::json::parse(*a.view_state);
        } catch (const std::exception&) {
            throw std::invalid_argument("--view-state " + *a.view_state + ": not valid JSON");
        }
        if (!look.state.is_object())
            throw std::invalid_argument("--view-state must be a JSON object, e.g. {\"cumulative\": true}");
    }
    if (a.metric && !is_sweep_view(a.view))
        throw std::invalid_argument("--metric applies to --view curves and overview (not " + a.view + ")");
    check_figure_metric(a.metric);

    if (a.session) {
        if (a.colormap || a.log || a.query || a.metric || a.view_state || !a.sweep.q.empty() || !a.sweep.synth_kind.empty() ||
            !a.sweep.vary.empty())
            throw std::invalid_argument("--session renders the session's own data and view state: give only --view, --out "
                                        "and the size options with it");
        render_session_figure(*a.session, a.view, a.target);
        std::cerr << "wrote " << a.target.path << " (" << a.view << " of " << *a.session << ")\n";
        return 0;
    }

    if (a.view == "curves") {
        if (a.sweep.vary.empty())
            throw std::invalid_argument("--view curves needs --vary n=LIST or m=LIST (and --q/--k or --synth KIND)");
        const analysis::SweepSpec spec = a.sweep.resolve();
        auto records = run_sweep_with_progress(spec);
        render_sweep_figure(std::make_shared<const analysis::SweepResult>(analysis::SweepResult{spec, std::move(records)}),
                            a.view, look, a.target);
    } else {
        if (!a.sweep.vary.empty() || !a.sweep.synth_kind.empty())
            throw std::invalid_argument("--vary and --synth make curves: use --view curves (not " + a.view + ")");
        if (a.sweep.q.size() != 1 || a.sweep.k.size() != 1)
            throw std::invalid_argument("--view " + a.view + " needs one --q and one --k (got " + std::to_string(a.sweep.q.size()) +
                                        " and " + std::to_string(a.sweep.k.size()) + "), or --session S.attnscope");
        SelectionArgs selection_args = a.sweep.selection;
        MechanismArgs mechanism_args = a.sweep.mechanism;
        apply_file_defaults(a.sweep.q[0], selection_args, mechanism_args);   // as analyze does
        analysis::TensorSource source{a.sweep.q[0], a.sweep.k[0], a.v, selection_args.resolve()};
        const attention::AttentionOptions options = mechanism_args.resolve();
        const std::uint64_t memory_limit = a.sweep.memory.resolve();
        io::set_read_limit_bytes(memory_limit);
        if (a.view == "overview") {
            if (a.v || a.query || !a.token_grid.empty())
                throw std::invalid_argument("--view overview takes no --v, --query or --token-grid");
            analysis::SweepSpec spec = analysis::overview_spec(source, options, a.sweep.metrics.resolve());
            spec.mechanisms = parse_mechanisms(a.sweep.mechanisms);
            spec.memory_limit = memory_limit;
            auto records = run_sweep_with_progress(spec);
            render_sweep_figure(std::make_shared<const analysis::SweepResult>(analysis::SweepResult{spec, std::move(records)}),
                                a.view, look, a.target);
        } else {
            analysis::ExploreRequest request;
            request.source = source;
            request.mechanisms = parse_mechanisms(a.sweep.mechanisms);
            request.options = options;
            request.rank_rtol = a.sweep.metrics.resolve().rank_rtol;
            request.memory_limit = memory_limit;
            if (!a.token_grid.empty())
                request.token_grid = parse_sizes(a.token_grid, "--token-grid");
            render_explore_figure(request, a.view, look, a.target);
        }
    }
    std::cerr << "wrote " << a.target.path << " (" << a.view << ")\n";
    return 0;
}
#endif

// --------------------------------------------------------------------------------------------- batch
struct BatchArgs {
    std::string job;
    std::string out;
    int jobs = 1;
    std::string shard = "0/1";
};

std::string duration_text(double seconds)
{
    if (seconds < 0)
        return "?";
    const long s = std::lround(seconds);
    if (s >= 3600)
        return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
    if (s >= 60)
        return fmt::format("{}m{:02}s", s / 60, s % 60);
    return fmt::format("{}s", s);
}

int run_batch(const BatchArgs& a)
{
    analysis::BatchRunOptions opt;
    const auto slash = a.shard.find('/');
    try {
        if (slash == std::string::npos)
            throw std::invalid_argument("");
        opt.shard_index = std::stoi(a.shard.substr(0, slash));
        opt.shard_count = std::stoi(a.shard.substr(slash + 1));
    } catch (const std::exception&) {
        throw std::invalid_argument("--shard " + a.shard + ": expected I/N, e.g. 0/4 (I from 0 to N-1)");
    }
    opt.jobs = a.jobs;
    const BatchJob job = parse_batch_job(a.job);
    const analysis::BatchPlan& plan = job.plan;
    opt.out_dir = a.out.empty() ? (std::filesystem::path(a.job).stem().string() + "_results") : a.out;
    const bool tty = ::isatty(2);
    opt.on_progress = [&](const analysis::BatchProgress& p) {
        const double pct = p.total ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : 100.0;
        if (tty)
            std::fprintf(stderr, "\r[%zu/%zu] %3.0f%% ETA %-7s %-60.60s", p.done, p.total, pct, duration_text(p.eta_seconds).c_str(),
                         p.label.c_str());
        else
            std::fprintf(stderr, "progress %zu/%zu (%.0f%%) eta %s: %s\n", p.done, p.total, pct,
                         duration_text(p.eta_seconds).c_str(), p.label.c_str());
    };
    // (Declared here: the hooks below run inside analysis::run_batch, after this block.)
    const std::filesystem::path figures = std::filesystem::path(opt.out_dir) / "figures";
    // A figure already on disk is kept (resume); each is written atomically by the export.
    auto render_if_missing = [&figures](const std::filesystem::path& path, const auto& render) {
        if (std::filesystem::exists(path))
            return;
        std::error_code ec;
        std::filesystem::create_directories(figures, ec);
        if (!std::filesystem::is_directory(figures))
            throw InputError(figures.string() + ": cannot create the folder (" + ec.message() + ")");
        render(path.string());
    };
    if (!job.figures.empty()) {
#ifdef ATTNSCOPE_WITH_GUI
        opt.on_unit_figures = [&](const analysis::BatchUnit& u) {
            for (const BatchFigure& f : job.figures) {
                if (!is_explore_view(f.view) && f.view != "overview")
                    continue;
                const std::string stem = std::filesystem::path(u.file).stem().string();
                if (f.view == "overview") {
                    // One overview per file (its name does not depend on the unit: drawn once).
                    const std::string name = stem + "_overview_" + f.look.metric.value_or("rank") + "." + f.format;
                    render_if_missing(figures / name, [&](const std::string& out) {
                        analysis::TensorSource src{u.file + ":" + plan.q_name, u.file + ":" + plan.k_name, std::nullopt,
                                                   plan.selection};
                        auto sweep = std::make_shared<analysis::SweepResult>();
                        sweep->spec = analysis::overview_spec(src, plan.options, plan.metrics);
                        sweep->spec.mechanisms = plan.mechanisms;
                        sweep->records = analysis::run_sweep(sweep->spec, analysis::JobContext{});
                        FigureTarget t = f.size;
                        t.path = out;
                        render_sweep_figure(sweep, "overview", f.look, t);
                    });
                    continue;
                }
                if (f.heads && (!u.head || std::find(f.heads->begin(), f.heads->end(), *u.head) == f.heads->end()))
                    continue;
                std::string name = stem;
                if (u.layer)
                    name += "_l" + std::to_string(*u.layer);
                if (u.head)
                    name += "_h" + std::to_string(*u.head);
                name += "_" + f.view + "." + f.format;
                render_if_missing(figures / name, [&](const std::string& out) {
                    analysis::ExploreRequest req;
                    req.source = {u.file + ":" + plan.q_name, u.file + ":" + plan.k_name, std::nullopt, plan.selection};
                    if (u.layer)
                        req.source.selection.at['l'] = *u.layer;
                    if (u.head)
                        req.source.selection.at['h'] = *u.head;
                    req.mechanisms = plan.mechanisms;
                    req.options = plan.options;
                    req.rank_rtol = plan.metrics.rank_rtol;
                    req.memory_limit = plan.memory_limit;
                    FigureTarget t = f.size;
                    t.path = out;
                    render_explore_figure(req, f.view, f.look, t);
                });
            }
        };
        opt.on_sweep_figures = [&](const analysis::BatchSweep& sw, const analysis::SweepResult& result) {
            auto shared = std::make_shared<const analysis::SweepResult>(result);
            for (const BatchFigure& f : job.figures) {
                if (f.view != "curves" || !f.sweep || *f.sweep != sw.name)
                    continue;
                const std::string name = sw.name + "_" + f.look.metric.value_or("rank") + "." + f.format;
                render_if_missing(figures / name, [&](const std::string& out) {
                    FigureTarget t = f.size;
                    t.path = out;
                    render_sweep_figure(shared, "curves", f.look, t);
                });
            }
        };
#else
        (void)render_if_missing;
        throw std::invalid_argument(a.job + ": [[figure]] needs the desktop app's views; this attnscope was built "
                                    "without them (ATTNSCOPE_BUILD_GUI=OFF)");
#endif
    }
    const analysis::BatchReport report = analysis::run_batch(plan, opt);
    if (tty)
        std::fprintf(stderr, "\n");
    std::cerr << fmt::format("batch {}: {} units ({} already recorded, {} analysed), {} new records, {} sweeps -> {}\n", a.job,
                             report.units, report.skipped, report.analysed, report.records, report.sweeps, opt.out_dir);
    if (!report.failures.empty()) {
        for (const auto& f : report.failures)
            std::cerr << "failed: " << f << "\n";
        // The one error line says what went wrong first (a full disk, a bad file), not only how often.
        const bool listed = std::filesystem::exists(std::filesystem::path(opt.out_dir) / "failures.txt");
        print_error(std::to_string(report.failures.size()) + " failure(s), the first: " + report.failures.front() +
                    " (all listed above" + (listed ? " and in " + opt.out_dir + "/failures.txt" : std::string()) +
                    "); rerun to retry them");
        return 2;
    }
    return 0;
}

int run_merge(const std::vector<std::string>& dirs, const std::string& out)
{
    analysis::merge_batches(dirs, out);
    std::cerr << "merged " << dirs.size() << " folders into " << out << "\n";
    return 0;
}

template <class F>
int guarded(F&& body)
{
    try {
        return body();
    } catch (const InputError& e) {
        print_error(e.what());
        return 2;
    } catch (const std::invalid_argument& e) {
        print_error(e.what());
        return 2;
    } catch (const std::out_of_range& e) {
        print_error(e.what());
        return 2;
    } catch (const std::bad_alloc&) {
        print_error("out of memory (select fewer tokens or lower --max-memory)");
        return 1;
    } catch (const std::exception& e) {
        print_error(std::string("internal: ") + e.what());
        return 1;
    }
}

}  // namespace

bool wants_cli(int argc, char** argv)
{
    if (argc < 2)
        return false;
    const std::string first = argv[1];
    for (const char* s : kSubcommands)
        if (first == s)
            return true;
    // Flags the GUI understands are routed there; every other flag is the command line's.
    if (first == "--session" || first == "--screenshot")
        return false;
    if (!first.empty() && first[0] == '-')
        return true;
    // A word that is not a file is a mistyped subcommand: let the parser say so.
    std::error_code ec;
    return !std::filesystem::exists(first, ec);
}

int run_cli(int argc, char** argv)
{
    if (argc >= 2 && argv[1][0] != '-' &&
        std::none_of(std::begin(kSubcommands), std::end(kSubcommands), [&](const char* s) { return std::strcmp(s, argv[1]) == 0; })) {
        print_error(std::string("'") + argv[1] + "' is neither a subcommand (info, analyze, matrix, synth, sweep, batch, merge, figure) nor an existing file");
        return 2;
    }
    CLI::App app{"AttnScope: how expressive are softmax, linear and MHLA attention on your activations?\n"
                 "Without a subcommand (or with file names) attnscope opens the desktop app.",
                 "attnscope"};
    app.set_version_flag("--version", std::string("attnscope ") + ATTNSCOPE_VERSION);
    app.require_subcommand(1);

    InfoArgs info;
    auto* info_cmd = app.add_subcommand("info", "List every tensor in a file: name, shape, element type, attributes");
    info_cmd->add_option("FILE", info.file, "An .h5/.hdf5, .npy, .npz or .safetensors file")->required();
    info_cmd->add_flag("--json", info.json, "Print JSON");

    AnalyzeArgs an;
    auto* an_cmd = app.add_subcommand("analyze", "Rank, singular spectrum and entropy of softmax, linear and MHLA attention");
    an_cmd->add_option("--q", an.q, "Queries FILE[:NAME]")->required();
    an_cmd->add_option("--k", an.k, "Keys FILE[:NAME]")->required();
    an_cmd->add_option("--v", an.v, "Values FILE[:NAME] (optional; checked and recorded)");
    an_cmd->add_option("--mechanism", an.mechanisms, "Comma list of softmax, linear, mhla (default all three)");
    an_cmd->add_option("--json", an.json_out, "Write the JSON document to OUT, or - for standard output");
    an.selection.add_to(*an_cmd);
    an.mechanism.add_to(*an_cmd);
    an.metrics.add_to(*an_cmd);
    an.memory.add_to(*an_cmd);

    MatrixArgs mx;
    auto* mx_cmd = app.add_subcommand("matrix", "Write one N x N attention matrix (float64) to .npy or .h5 (/attention)");
    mx_cmd->add_option("--q", mx.q, "Queries FILE[:NAME]")->required();
    mx_cmd->add_option("--k", mx.k, "Keys FILE[:NAME]")->required();
    mx_cmd->add_option("--mechanism", mx.mechanism, "softmax | linear | mhla")->required();
    mx_cmd->add_option("--out", mx.out, "FILE.npy or FILE.h5")->required();
    mx.selection.add_to(*mx_cmd);
    mx.mechanism_args.add_to(*mx_cmd);
    mx.memory.add_to(*mx_cmd);

    SynthArgs sy;
    auto* sy_cmd = app.add_subcommand("synth", "Write synthetic activations /q /k /v [H, N, D] to an HDF5 file");
    sy_cmd->add_option("--n", sy.n, "Tokens N")->required();
    sy_cmd->add_option("--d", sy.d, "Features per head D")->required();
    sy_cmd->add_option("--heads", sy.heads, "Heads H (default 1)");
    sy_cmd->add_option("--kind", sy.kind, "gaussian | lowrank | local1d | local2d (default gaussian)");
    sy_cmd->add_option("--grid", sy.grid, "Token grid H,W (local2d; default the square root of N)");
    sy_cmd->add_option("--seed", sy.seed, "Seed (default 0)");
    sy_cmd->add_option("--out", sy.out, "FILE.h5")->required();
    sy.memory.add_to(*sy_cmd);

    SweepArgs sw;
    auto* sw_cmd = app.add_subcommand("sweep", "Rank and entropy against sequence length N or block count M (CSV + JSON summary)");
    sw.sweep.add_to(*sw_cmd, true);
    sw_cmd->add_option("--csv", sw.csv_out, "Long-format CSV (default - : standard output)");
    sw_cmd->add_option("--json", sw.json_out, "JSON summary: mean and std per point");
    sw_cmd->add_option("--plot", sw.plot_out, "Also render the curves figure: OUT.png, OUT.pdf or OUT.svg");
    sw_cmd->add_option("--metric", sw.metric, "Metric the --plot figure shows (default rank)");

#ifdef ATTNSCOPE_WITH_GUI
    FigureArgs fg;
    auto* fg_cmd = app.add_subcommand("figure", "Render a view of the desktop app headless to PNG, PDF or SVG");
    fg_cmd->add_option("--view", fg.view, "maps | query | spectrum | entropy | mixing | metrics | curves | overview")->required();
    fg_cmd->add_option("--out", fg.target.path, "FIG.png, FIG.pdf or FIG.svg")->required();
    fg_cmd->add_option("--session", fg.session, "Render the view of an .attnscope session (its data and view state)");
    fg_cmd->add_option("--v", fg.v, "Values FILE[:NAME] (optional; checked)");
    fg_cmd->add_option("--token-grid", fg.token_grid, "Token grid H,W for display (default: the MHLA --grid, if any)");
    fg_cmd->add_option("--query", fg.query, "Selected query token (maps, query, entropy)");
    fg_cmd->add_option("--colormap", fg.colormap, "viridis | magma | cividis (maps, overview)");
    fg_cmd->add_flag("--log", fg.log, "Log scale (maps: colours; query, curves: y axis; spectrum: x axis)");
    fg_cmd->add_option("--metric", fg.metric, "curves/overview: rank | relative_rank | effective_rank | stable_rank | "
                                               "entropy_mean | entropy_normalized_mean | seconds");
    fg_cmd->add_option("--view-state", fg.view_state, "More view-state keys as a JSON object (as sessions store them)");
    fg_cmd->add_option("--width", fg.target.width, "Width in logical pixels (default: the view's preferred size)")->group("Figure size");
    fg_cmd->add_option("--height", fg.target.height, "Height in logical pixels")->group("Figure size");
    fg_cmd->add_option("--dpi", fg.target.dpi, "PNG pixels = size * dpi / 96 (default 300)")->group("Figure size");
    fg_cmd->add_option("--font-scale", fg.target.font_scale, "Multiplies every font (default 1)")->group("Figure size");
    fg.sweep.add_to(*fg_cmd, false);
#endif

    BatchArgs ba;
    auto* ba_cmd = app.add_subcommand("batch", "Run a TOML job over many files, layers and heads (resumable, shardable)");
    ba_cmd->add_option("JOB", ba.job, "The job file (docs/batch.md)")->required();
    ba_cmd->add_option("--out", ba.out, "Output folder (default: <job name>_results)");
    ba_cmd->add_option("--jobs", ba.jobs, "Units analysed in parallel (default 1)");
    ba_cmd->add_option("--shard", ba.shard, "I/N: run only units with index % N == I (Slurm arrays, GNU parallel)");

    std::vector<std::string> merge_dirs;
    std::string merge_out;
    auto* me_cmd = app.add_subcommand("merge", "Combine the output folders of batch shards");
    me_cmd->add_option("DIR", merge_dirs, "Shard output folders")->required();
    me_cmd->add_option("--out", merge_out, "Merged output folder")->required();

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0)
            return app.exit(e);
        print_error(e.what());
        return 2;
    }

    if (info_cmd->parsed())
        return guarded([&] { return run_info(info); });
    if (an_cmd->parsed())
        return guarded([&] { return run_analyze(an); });
    if (mx_cmd->parsed())
        return guarded([&] { return run_matrix(mx); });
    if (sy_cmd->parsed())
        return guarded([&] { return run_synth(sy); });
    if (sw_cmd->parsed())
        return guarded([&] { return run_sweep(sw); });
#ifdef ATTNSCOPE_WITH_GUI
    if (fg_cmd->parsed())
        return guarded([&] { return run_figure(fg); });
#endif
    if (ba_cmd->parsed())
        return guarded([&] { return run_batch(ba); });
    if (me_cmd->parsed())
        return guarded([&] { return run_merge(merge_dirs, merge_out); });
    return 2;
}

}  // namespace attnscope::app
