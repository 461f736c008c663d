#pragma once
// Option groups shared by the subcommands (docs/cli.md): tensor selection, mechanism options, metric
// options, resources. Each is registered on a CLI11 subcommand, then mapped onto the core's structs; the
// validation, the vocabulary and the file-attribute rule are the core's (analysis/vocabulary.h,
// analysis/file_defaults.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "analysis/measure.h"
#include "analysis/requests.h"
#include "attention/options.h"
#include "io/selection.h"

namespace attnscope::app {

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
inline analysis::AnalysisSetup resolve_setup(const std::string& q_ref, const SelectionArgs& selection,
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
