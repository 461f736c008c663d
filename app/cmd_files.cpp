// The subcommands about files (docs/cli.md): `info` lists what a file holds, `matrix` writes one attention
// matrix, `synth` writes synthetic activations.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/analyze_document.h"
#include "analysis/file_defaults.h"
#include "analysis/info_document.h"
#include "analysis/inputs.h"
#include "analysis/measure.h"
#include "analysis/synth.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "attention/operator.h"
#include "cli_common.h"
#include "cli_options.h"
#include "io/tensor_file.h"
#include "io/writers.h"
#include "util/atomic_file.h"
#include "util/json_text.h"
#include "util/names.h"
#include "util/output.h"

namespace attnscope::app {

namespace {

using ojson = nlohmann::ordered_json;

std::string shape_text(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string compact(const nlohmann::json& j)
{
    std::string s = json_text(j);
    if (s.size() > 120)
        s = s.substr(0, 117) + "...";
    return s;
}

struct InfoArgs {
    std::string file;
    bool json = false;
};

int run_info(const InfoArgs& a)
{
    const auto file = io::open_tensor_file(a.file);
    if (a.json) {
        std::cout << json_text(analysis::info_json(a.file, *file), 2) << "\n";
        return 0;
    }
    std::cout << a.file << " (" << file->format() << ", " << file->tensors().size() << " tensor"
              << (file->tensors().size() == 1 ? "" : "s") << ")\n";
    for (const auto& [key, value] : file->file_attributes().items())
        std::cout << "  @" << key << " = " << compact(value) << "\n";
    const ojson carried = analysis::display_inputs(*file);
    if (carried.contains("tokens")) {
        const ojson& t = carried["tokens"];
        std::string first;
        for (const auto& s : t["first"])
            first += " " + json_text(s);   // JSON-quoted: a newline shows as "\n"
        std::cout << "  tokens: " << t["count"].get<std::size_t>() << " (@" << t["attribute"].get<std::string>()
                  << "):" << first << (t["count"].get<std::size_t>() > t["first"].size() ? " ..." : "") << "\n";
    }
    if (carried.contains("image")) {
        const ojson& im = carried["image"];
        std::string dims;
        for (const auto& n : im["shape"])
            dims += (dims.empty() ? "" : " x ") + std::to_string(n.get<std::int64_t>());
        std::cout << "  image: " << dims << " ("
                  << (im.contains("attribute") ? "@" + im["attribute"].get<std::string>() : im["dataset"].get<std::string>())
                  << ")\n";
    }
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

struct MatrixArgs {
    io::TensorRef q, k;   // parsed as the command line is read (add_tensor_option)
    std::string mechanism;
    std::string out;
    SelectionArgs selection;
    MechanismArgs mechanism_args;
    MemoryArgs memory;
};

int run_matrix(const MatrixArgs& a)
{
    analysis::AnalyzeRequest request;
    request.mechanisms = analysis::parse_mechanisms(a.mechanism);
    if (request.mechanisms.size() != 1)
        throw std::invalid_argument("matrix takes one --mechanism (got " + a.mechanism + ")");
    const std::string ext = lower(a.out);
    const bool npy = ends_with(ext, ".npy");
    const bool h5 = ends_with(ext, ".h5") || ends_with(ext, ".hdf5");
    if (!npy && !h5)
        throw std::invalid_argument("--out " + a.out + ": name a .npy or .h5 file");
    std::vector<NamedPath> inputs;
    add_input_refs(inputs, "--q", {a.q});
    add_input_refs(inputs, "--k", {a.k});
    add_mixing_input(inputs, a.mechanism_args.mixing);
    check_output_paths({{"--out", a.out}}, inputs);
    request.q = a.q;
    request.setup = resolve_setup(request.q, a.selection, a.mechanism_args, &request.from_file);
    request.k = a.k;
    request.memory_limit = a.memory.resolve();
    io::set_read_limit_bytes(request.memory_limit);
    OutputFile out(a.out, SpecialFiles::refuse);   // checks the folder (and refuses a device) before any work

    const analysis::DenseAttention dense = analysis::dense_attention(request, a.mechanism);
    const Eigen::MatrixXd& A = dense.matrix;
    const auto n = A.rows();
    const auto mechanism = request.mechanisms.front();
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
        ds.attributes["params"] = json_text(dense.params);
        ds.attributes["input"] = json_text(dense.input);
        ds.attributes["attnscope_version"] = ATTNSCOPE_VERSION;
        out.write([&](const std::string& temp) { io::write_hdf5(temp, {ds}); });
    }
    out.commit();
    std::cerr << "wrote " << a.out << " (" << n << " x " << n << ", " << attention::to_string(mechanism) << ")\n";
    return 0;
}

struct SynthArgs {
    std::int64_t n = 0, d = 0, heads = 1;
    std::string kind = "gaussian";
    std::string grid;
    std::int64_t seed = 0;
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
    if (a.seed < 0)
        throw std::invalid_argument("--seed " + std::to_string(a.seed) + " must be non-negative");
    o.seed = static_cast<std::uint64_t>(a.seed);
    if (!a.grid.empty())
        o.grid = analysis::parse_sizes(a.grid, "--grid");
    analysis::write_synthetic_file(a.out, o, a.memory.resolve());
    std::cerr << "wrote " << a.out << ": /q /k /v [" << a.heads << ", " << a.n << ", " << a.d << "] kind " << a.kind << "\n";
    return 0;
}

}  // namespace

Command add_info_command(CLI::App& app)
{
    auto a = std::make_shared<InfoArgs>();
    auto* cmd = app.add_subcommand("info", "List every tensor in a file: name, shape, element type, attributes");
    cmd->add_option("FILE", a->file, "An .h5/.hdf5, .npy, .npz or .safetensors file")->required();
    cmd->add_flag("--json", a->json, "Print JSON");
    return {cmd, [a] { return run_info(*a); }};
}

Command add_matrix_command(CLI::App& app)
{
    auto a = std::make_shared<MatrixArgs>();
    auto* cmd = app.add_subcommand("matrix", "Write one N x N attention matrix (float64) to .npy or .h5 (/attention)");
    add_tensor_option(*cmd, "--q", a->q, "Queries FILE[:NAME]")->required();
    add_tensor_option(*cmd, "--k", a->k, "Keys FILE[:NAME]")->required();
    cmd->add_option("--mechanism", a->mechanism, joined(attention::mechanism_names(), " | "))->required();
    cmd->add_option("--out", a->out, "FILE.npy or FILE.h5")->required();
    a->selection.add_to(*cmd);
    a->mechanism_args.add_to(*cmd);
    a->memory.add_to(*cmd);
    return {cmd, [a] { return run_matrix(*a); }};
}

Command add_synth_command(CLI::App& app)
{
    auto a = std::make_shared<SynthArgs>();
    const std::string kinds = [] {
        std::string s;
        for (const auto& k : analysis::synth_kinds())
            s += (s.empty() ? "" : " | ") + k;
        return s;
    }();
    auto* cmd = app.add_subcommand("synth", "Write synthetic activations /q /k /v [H, N, D] to an HDF5 file");
    cmd->add_option("--n", a->n, "Tokens N")->required();
    cmd->add_option("--d", a->d, "Features per head D")->required();
    cmd->add_option("--heads", a->heads, "Heads H (default 1)");
    cmd->add_option("--kind", a->kind, kinds + " (default gaussian)");
    cmd->add_option("--grid", a->grid, "Token grid H,W (local2d; default the square root of N)");
    cmd->add_option("--seed", a->seed, "Seed (default 0)");
    cmd->add_option("--out", a->out, "FILE.h5")->required();
    a->memory.add_to(*cmd);
    return {cmd, [a] { return run_synth(*a); }};
}

}  // namespace attnscope::app
