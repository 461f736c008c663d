// `attnscope depth` (docs/cli.md): collapse with depth, the products of one file's layers' attention matrices
// (analysis/depth.h), as a table or JSON.
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "analysis/depth.h"
#include "analysis/depth_request.h"
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

struct DepthArgs : analysis::DepthSettings {
    std::string file;
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

int run_depth(const DepthArgs& a)
{
    const analysis::DepthRequests requests{a.file, a.mechanisms, a, {a.selection, a.mechanism, a.metrics, a.memory}};
    const analysis::DepthRequest req = analysis::resolve_depth(requests, analysis::Spelling::flag);
    a.memory.resolve();   // the thread count, with its notes
    // As analyze: `--json -` alone on standard output; `--json FILE` published only after the table (a failed run
    // leaves no file), never onto the input or standard output's own file.
    const bool json_to_stdout = a.json_out && descriptor_path(*a.json_out) == 1;
    std::optional<OutputFile> json_file;
    if (a.json_out) {
        std::vector<NamedPath> inputs;
        inputs.push_back({"FILE", a.file});   // a file, not a reference
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
    add_request_options<analysis::DepthSettings>(*cmd, *a, analysis::depth_options(), "");
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
