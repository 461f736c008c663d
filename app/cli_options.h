#pragma once
// Option groups shared by the subcommands (docs/cli.md): tensor selection, mechanism options, metric
// options, resources. Each is registered on a CLI11 subcommand, then mapped onto the core's structs; the
// validation, the vocabulary and the file-attribute rule are the core's (analysis/vocabulary.h,
// analysis/file_defaults.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "analysis/measure.h"
#include "analysis/requests.h"
#include "attention/options.h"
#include "io/selection.h"

namespace attnscope::app {

// The flags of a request's descriptors (analysis/requests.h), in their order, under `group`: an option per
// field, a switch per bool, a pair of switches (--NAME, --no-NAME) per optional bool; then the exclusions.
template <class Request>
inline void add_request_options(CLI::App& cmd, Request& request, const std::vector<analysis::OptionDescriptor<Request>>& table,
                         const std::string& group)
{
    std::map<std::string_view, CLI::Option*> made;
    const auto place = [&group](CLI::Option* o) { return group.empty() ? o : o->group(group); };   // "": CLI11's own
    for (const auto& d : table) {
        const std::string flag = analysis::option_name(d.name, analysis::Spelling::flag);
        std::visit(
            [&](auto field) {
                auto& value = request.*field;
                using T = std::remove_reference_t<decltype(value)>;
                if constexpr (std::is_same_v<T, bool>) {
                    made[d.name] = place(cmd.add_flag(flag, value, d.help));
                } else if constexpr (std::is_same_v<T, std::optional<bool>>) {
                    CLI::Option* on = place(cmd.add_flag_callback(flag, [&value] { value = true; }, d.help));
                    CLI::Option* off =
                        place(cmd.add_flag_callback("--no-" + std::string(d.name), [&value] { value = false; }, d.help_off));
                    on->excludes(off);
                    made[d.name] = on;
                } else {
                    made[d.name] = place(cmd.add_option(flag, value, d.help));
                }
            },
            d.field);
    }
    for (const auto& d : table)
        for (const std::string_view other : d.excludes)
            made.at(d.name)->excludes(made.at(other));
}

// The core's typed requests (analysis/requests.h), with their command-line flags generated from the requests'
// descriptors, in the descriptors' order; resolve() names options as flags (--favor-features).
struct SelectionArgs : analysis::SelectionRequest {
    void add_to(CLI::App& cmd);
    io::AxisSelection resolve() const { return analysis::resolve(*this, analysis::Spelling::flag); }
};

struct MechanismArgs : analysis::MechanismRequest {
    void add_to(CLI::App& cmd);
    // Validates and converts; loads a mixing matrix named by --mixing FILE[:DATASET].
    attention::AttentionOptions resolve() const { return analysis::resolve(*this, analysis::Spelling::flag); }
};

// Which of the options a file's attributes could set were given on the command line.
inline analysis::ExplicitChoices explicit_choices(const SelectionArgs& selection, const MechanismArgs& mechanism)
{
    return analysis::explicit_choices(selection, mechanism);
}

// The setup of one analysis of the queries `q_ref`: the options as given, the file's attributes for the
// rest (analysis/file_defaults.h). `from_file` receives what came from the file.
inline analysis::AnalysisSetup resolve_setup(const io::TensorRef& q_ref, const SelectionArgs& selection,
                                             const MechanismArgs& mechanism, nlohmann::ordered_json* from_file = nullptr)
{
    return analysis::resolve_setup(q_ref, selection, mechanism, analysis::Spelling::flag, from_file);
}

struct MetricArgs : analysis::MetricRequest {
    void add_to(CLI::App& cmd);
    analysis::MetricOptions resolve() const { return analysis::resolve(*this, analysis::Spelling::flag); }
};

// Every integer and floating-point option of `app` and of its subcommands, found by the type CLI11 gives it
// (INT, UINT, FLOAT), takes plain decimal text only: CLI11's own conversion (strtoll, strtold) clamps
// 99999999999999999999 to INT64_MAX, reads 0x1 as hexadecimal and 010 as octal, and takes nan and inf.
// Refusals name the option (docs/security.md, "Counts and sizes"); each option's own range is checked
// where it is resolved.
void make_numbers_strict(CLI::App& app);

// Resources: --max-memory and --threads (analysis::MemoryRequest).
struct MemoryArgs : analysis::MemoryRequest {
    void add_to(CLI::App& cmd);
    // Validates both, applies --threads (capped at the cores this process may run on, with a note on
    // standard error: kernels::usable_cores), returns the memory limit in bytes.
    std::uint64_t resolve() const;
};

// --max-memory alone, for the commands that read records rather than tensors (aggregate, merge).
struct MaxMemoryArg {
    std::string max_memory;
    void add_to(CLI::App& cmd);
    std::uint64_t resolve() const;   // the limit in bytes (the default budget when not given)
};

}  // namespace attnscope::app
