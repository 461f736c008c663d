#pragma once
// The typed requests of one analysis (issue 33): the tensor selection, the mechanism options and the metric
// options as a front end receives them, each with one descriptor per option (its name, its field, its help,
// the options it cannot be given with). The command line's flags (app/cli_options.cpp) and the batch job's keys
// ([attention] and [metrics], app/batch_job.cpp) are generated from the descriptors, in their order; the default of each option is the value of its field in a default-constructed
// request, so it is written once. Each request validates itself (`resolve`) with messages that name the
// option as the caller spells it: `--favor-features` on the command line, `favor_features` for a keyword or a
// job key (Spelling).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "analysis/measure.h"
#include "attention/options.h"
#include "io/selection.h"

namespace attnscope::analysis {

// How a message names an option: `flag` as the command line does (--favor-features), `keyword` as a Python
// keyword or a job key does (favor_features).
enum class Spelling { flag, keyword };
std::string option_name(std::string_view name, Spelling spelling);

// Which tensor slice: docs/cli.md "Selection".
struct SelectionRequest {
    std::string layout;
    std::string at;
    std::optional<std::int64_t> head;
    std::optional<std::int64_t> kv_head;         // unset: the grouped-query pairing (docs/maths.md 1.7)
    std::optional<std::int64_t> prefix_tokens;   // unset: the file's `prefix_tokens` attribute, else 0
};

// The mechanisms' options: docs/cli.md "Mechanism options".
struct MechanismRequest {
    std::optional<double> scale;
    std::optional<bool> causal;   // unset: the file's `causal` attribute, else not causal
    std::string feature_map = "relu";
    std::int64_t favor_features = 256;
    std::int64_t seed = 0;
    std::optional<std::int64_t> blocks;
    std::optional<std::int64_t> chunk;
    std::string grid;
    std::string block_grid;
    std::string token_order = "raster";
    std::string mixing;
    double mixing_sigma = 3.0;
    double mixing_threshold = 1.5;
    std::string normalize = "row";
    std::optional<double> decay;
    std::string gates;
    bool gates_log = false;
    // A mixing matrix or gates given as arrays in memory (the Python module): `mixing` / `gates` then hold
    // their names (for messages and reports), and these are read instead of parsing them.
    std::shared_ptr<const io::TensorRef> mixing_tensor, gates_tensor;
};

// The metrics' options: docs/cli.md "Metric options".
struct MetricRequest {
    std::string metrics = "spectrum,entropy";
    std::string method = "auto";
    std::optional<double> rank_rtol;
    std::optional<std::int64_t> top_k;
    bool row_entropy = false;
    std::optional<std::int64_t> past_split;
    std::optional<std::string> past_splits;   // K or "all"
};

// Resources: docs/cli.md "--max-memory", "--threads".
struct MemoryRequest {
    std::string max_memory;      // e.g. "8G", "512M", bytes; empty = half the RAM
    std::int64_t threads = 0;    // BLAS and kernel threads; 0 = all cores
};

// The four option groups every analysis takes (analyze, sweep, depth), as a front end holds them.
struct AnalysisRequests {
    SelectionRequest selection;
    MechanismRequest mechanism;
    MetricRequest metrics;
    MemoryRequest memory;
};

// One option of a request. A std::optional<bool> field is a pair of switches on the command line (--causal,
// --no-causal: `help_off` is the second's help); a bool field is one switch.
template <class Request>
struct OptionDescriptor {
    using Field = std::variant<bool Request::*, std::int64_t Request::*, double Request::*, std::string Request::*,
                               std::optional<bool> Request::*, std::optional<std::int64_t> Request::*,
                               std::optional<double> Request::*, std::optional<std::string> Request::*>;
    OptionDescriptor(std::string_view name_, Field field_, std::string help_, std::vector<std::string_view> excludes_ = {},
                     std::string help_off_ = {})
        : name(name_), field(field_), help(std::move(help_)), excludes(std::move(excludes_)), help_off(std::move(help_off_)),
          list(false)
    {
    }
    // A text that is a comma list ("16,16"): a job may give it as an array ([16, 16]) or a single integer.
    OptionDescriptor as_list() const
    {
        OptionDescriptor d = *this;
        d.list = true;
        return d;
    }
    std::string_view name;   // as on the command line without the dashes: "favor-features"
    Field field;
    std::string help;
    std::vector<std::string_view> excludes;   // options that cannot be given with this one
    std::string help_off;                     // std::optional<bool> fields: the "--no-NAME" switch's help
    bool list;                                // as_list()
};

// The descriptors, in the order the command line's help lists them; group names for help: "Selection",
// "Mechanism", "Metrics".
const std::vector<OptionDescriptor<SelectionRequest>>& selection_options();
const std::vector<OptionDescriptor<MechanismRequest>>& mechanism_options();
const std::vector<OptionDescriptor<MetricRequest>>& metric_options();
const std::vector<OptionDescriptor<MemoryRequest>>& memory_options();

// The tensor a mixing text names (FILE[:DATASET]); none for an empty text or a preset (attention/mixing.h).
// The one reading of mixing text: the options, the app's Mechanism dock and the output-path checks use it.
std::optional<io::TensorRef> mixing_reference(std::string_view mixing);

// Validation and conversion. Throw std::invalid_argument naming the option in `spelling`.
io::AxisSelection resolve(const SelectionRequest& r, Spelling spelling);
// Loads a mixing matrix named by `mixing` (FILE[:DATASET]).
attention::AttentionOptions resolve(const MechanismRequest& r, Spelling spelling);
MetricOptions resolve(const MetricRequest& r, Spelling spelling);
// Checks the thread count (0..1024) and returns the memory limit in bytes (the default budget when not given);
// applying the thread count is the front end's (it may say what it did).
std::uint64_t memory_limit(const MemoryRequest& r, Spelling spelling);
// Sets the thread count a request asks for (0: leave it), capped at the cores this process may run on and at
// the OpenBLAS buffers the address-space limit leaves room for; `notes` receives what was changed and why.
void apply_threads(const MemoryRequest& r, Spelling spelling, std::vector<std::string>& notes);
// A size such as 8G, 512M, 1000000 (B, K/KiB/k, M/MiB, G/GiB, T/TiB): strict decimal, so "0x10G" and "nanG" are
// refused; empty: the default budget. Throws std::invalid_argument naming `what`.
std::uint64_t parse_memory_size(const std::string& text, const std::string& what);

// What a sweep or a depth run resolves from the groups and its mechanism list (empty: the default list), options
// named in `spelling`; the selection is the caller's (each resolves it where its messages need it). Checks the
// memory request and sets the read limit; applying the thread count is the front end's (apply_threads).
struct ResolvedAnalysis {
    std::vector<attention::Mechanism> mechanisms;
    attention::AttentionOptions options;
    ExplicitChoices given;
    MetricOptions metrics;
    std::uint64_t memory_limit = 0;
};
ResolvedAnalysis resolve_analysis(const std::string& mechanisms, const AnalysisRequests& r, Spelling spelling);

// Moves `r` into a spec or plan that names these fields alike (SweepSpec, BatchPlan).
template <class Target>
void assign_analysis(Target& to, ResolvedAnalysis&& r)
{
    to.mechanisms = std::move(r.mechanisms);
    to.options = std::move(r.options);
    to.given = r.given;
    to.metrics = std::move(r.metrics);
    to.memory_limit = r.memory_limit;
}

// Which of the options a file's attributes could set were given.
ExplicitChoices explicit_choices(const SelectionRequest& selection, const MechanismRequest& mechanism);

// The setup of one analysis of the queries `q_ref`: the options as given, the file's attributes for the rest
// (analysis/file_defaults.h). `from_file` receives what came from the file.
AnalysisSetup resolve_setup(const io::TensorRef& q_ref, const SelectionRequest& selection, const MechanismRequest& mechanism,
                            Spelling spelling, nlohmann::ordered_json* from_file = nullptr);

}  // namespace attnscope::analysis
