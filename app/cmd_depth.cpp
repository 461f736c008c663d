// `attnscope depth` (docs/cli.md): collapse with depth, the products of one file's layers' attention matrices
// (analysis/depth.h), as a table or JSON.
#include <iostream>
#include <memory>
#include <optional>
#include <regex>
#include <utility>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/depth.h"
#include "analysis/vocabulary.h"
#include "attention/mechanisms.h"
#include "cli_common.h"
#include "cli_options.h"
#include "io/tensor_file.h"
#include "util/json_text.h"
#include "util/names.h"
#include "util/atomic_file.h"
#include "util/output.h"

namespace attnscope::app {

namespace {

using ojson = nlohmann::ordered_json;

struct DepthArgs {
    std::string file;
    std::string q_name, k_name;   // empty: q / k, else the file's lowest per-layer /layers/<i>/q, /layers/<i>/k
    std::string layers = "all";
    std::string heads_mean;   // "mean" (default when no --head)
    double alpha = 0.5;
    std::string mechanisms = attention::default_mechanism_text();
    std::optional<std::string> json_out;
    SelectionArgs selection;
    MechanismArgs mechanism;
    MetricArgs metrics;
    MemoryArgs memory;
};

std::string cell(const ojson& v, int decimals)
{
    if (v.is_number_integer())
        return std::to_string(v.get<long long>());
    if (v.is_number())
        return fmt::format("{:.{}f}", v.get<double>(), decimals);
    return "-";
}

void print_depth(const ojson& doc)
{
    const ojson& in = doc["input"];
    std::cout << "file " << in["file"].get<std::string>() << "   N=" << in["n"] << "  layers " << in["layers"].dump()
              << "   heads " << json_text(in["heads"]) << "   alpha " << in["alpha"] << "\n";
    std::cout << "P_L = (alpha A_L + (1 - alpha) I) ... (alpha A_1 + (1 - alpha) I); residual = ||P_L - 1 pi^T||_F / ||P_L||_F\n\n";
    std::cout << fmt::format("{:>5} {:>5}  {:<9} {:>6} {:>9} {:>8} {:>9} {:>8} {:>10}\n", "depth", "layer", "mechanism",
                             "rank", "eff.rank", "stable", "H mean", "H/ln n", "residual");
    for (const ojson& step : doc["depth"])
        for (const ojson& r : step["results"]) {
            const ojson& e = r.contains("entropy") ? r["entropy"] : ojson();
            std::cout << fmt::format("{:>5} {:>5}  {:<9} {:>6} {:>9} {:>8} {:>9} {:>8} {:>10}\n", step["depth"].get<long long>(),
                                     step["layer"].get<long long>(), r["mechanism"].get<std::string>(),
                                     cell(r.value("rank", ojson()), 0), cell(r.value("effective_rank", ojson()), 2),
                                     cell(r.value("stable_rank", ojson()), 3),
                                     cell(e.is_object() ? e["mean"] : ojson(), 4),
                                     cell(e.is_object() ? e["normalized_mean"] : ojson(), 4),
                                     cell(r["residual_to_uniform"], 6));
        }
    bool any = false;
    for (const ojson& step : doc["depth"])
        for (const ojson& r : step["results"])
            for (const ojson& w : r["warnings"]) {
                std::cout << (any ? "" : "\n") << "warning (" << r["mechanism"].get<std::string>() << ", depth "
                          << step["depth"] << "): " << w.get<std::string>() << "\n";
                any = true;
            }
}

// The queries' and keys' names when --q / --k are not given: q and k when the file holds them (an `l` axis),
// else the lowest-numbered per-layer pair /layers/<i>/q, /layers/<i>/k (as the PyTorch bridge writes them).
std::pair<std::string, std::string> default_names(const std::string& file)
{
    const auto f = io::open_tensor_file(file);
    std::optional<long long> lowest;
    for (const io::TensorInfo& t : f->tensors()) {
        if (t.name == "q" || t.name == "/q")
            return {"q", "k"};
        std::smatch m;
        static const std::regex per_layer(R"(^/?layers/([0-9]{1,9})/q$)");
        if (std::regex_match(t.name, m, per_layer)) {
            const long long i = std::stoll(m[1].str());
            if (!lowest || i < *lowest)
                lowest = i;
        }
    }
    if (!lowest)
        return {"q", "k"};   // the planner names what the file holds
    const std::string prefix = "/layers/" + std::to_string(*lowest) + "/";
    return {prefix + "q", prefix + "k"};
}

int run_depth(const DepthArgs& a)
{
    analysis::DepthRequest req;
    analysis::BatchPlan& plan = req.plan;
    plan.files = {a.file};
    if (a.q_name.empty() || a.k_name.empty()) {
        const auto [q, k] = default_names(a.file);
        plan.q_name = a.q_name.empty() ? q : a.q_name;
        plan.k_name = a.k_name.empty() ? k : a.k_name;
    } else {
        plan.q_name = a.q_name;
        plan.k_name = a.k_name;
    }
    plan.selection = a.selection.resolve();
    plan.layers = analysis::AxisChoice::parse(a.layers, "--layers");
    req.head_mean = !a.selection.head && !plan.selection.at.count('h');
    if (!a.heads_mean.empty() && a.heads_mean != "mean")
        throw std::invalid_argument("--heads " + a.heads_mean + ": only 'mean' (the mean over every head); one head is --head H");
    if (!a.heads_mean.empty() && !req.head_mean)
        throw std::invalid_argument("give --heads mean or --head H, not both");
    plan.heads = req.head_mean ? analysis::AxisChoice::all("--heads") : analysis::AxisChoice::parse("", "--head");
    plan.mechanisms = analysis::parse_mechanisms(a.mechanisms);
    plan.options = a.mechanism.resolve();
    plan.given = explicit_choices(a.selection, a.mechanism);
    plan.metrics = a.metrics.resolve();
    plan.memory_limit = a.memory.resolve();
    io::set_read_limit_bytes(plan.memory_limit);
    req.alpha = a.alpha;
    // As analyze: `--json -` alone on standard output; `--json FILE` published only after the table (a failed run
    // leaves no file), never onto the input or standard output's own file.
    const bool json_to_stdout = a.json_out && descriptor_path(*a.json_out) == 1;
    std::optional<OutputFile> json_file;
    if (a.json_out) {
        std::vector<NamedPath> inputs;
        add_input_refs(inputs, "FILE", {a.file});
        add_mixing_input(inputs, a.mechanism.mixing);
        std::vector<NamedPath> outputs{{"--json", *a.json_out}};
        if (!json_to_stdout)
            outputs.push_back({"standard output", "-"});
        check_output_paths(outputs, inputs);
        if (!json_to_stdout)
            json_file.emplace(*a.json_out, SpecialFiles::write_in_place);
    }
    const ojson doc = analysis::depth_document(req);
    return publish_json(doc, a.json_out, json_to_stdout, json_file, [&] { print_depth(doc); });
}

}  // namespace

Command add_depth_command(CLI::App& app)
{
    auto a = std::make_shared<DepthArgs>();
    auto* cmd = app.add_subcommand("depth", "Collapse with depth: the products of one file's layers' attention matrices "
                                            "(alpha A_L + (1 - alpha) I) ... (alpha A_1 + (1 - alpha) I), their ranks, "
                                            "entropy and residual to a rank-one uniform matrix");
    cmd->add_option("FILE", a->file, "A file with the layers of one model: /layers/<i>/q datasets or an 'l' axis")->required();
    cmd->add_option("--q", a->q_name, "Queries' dataset name in FILE (default q, else the file's first per-layer /layers/<i>/q)");
    cmd->add_option("--k", a->k_name, "Keys' dataset name in FILE (default k, else the first per-layer /layers/<i>/k)");
    cmd->add_option("--layers", a->layers, "all (default) or a comma list of layers, multiplied in ascending order");
    cmd->add_option("--heads", a->heads_mean, "mean: A_l is the mean over the layer's heads (default; one head: --head H)");
    cmd->add_option("--alpha", a->alpha, "Weight of the attention path, in [0, 1] (default 0.5; 1: no residual path)");
    cmd->add_option("--mechanism", a->mechanisms,
                    "Comma list of " + joined(attention::mechanism_names()) + " (default " + attention::default_mechanism_text() + ")");
    cmd->add_option("--json", a->json_out, "Write the depth JSON to this file ('-' for standard output)");
    a->selection.add_to(*cmd);
    a->mechanism.add_to(*cmd);
    a->metrics.add_to(*cmd);
    a->memory.add_to(*cmd);
    return {cmd, [a] { return run_depth(*a); }};
}

}  // namespace attnscope::app
