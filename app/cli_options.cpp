#include "cli_options.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <map>
#include <type_traits>
#include <variant>
#include <stdexcept>

#include "analysis/inputs.h"
#include "analysis/vocabulary.h"
#include "attention/mixing.h"
#include "io/tensor_file.h"
#include "kernels/kernels.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/names.h"

namespace attnscope::app {

namespace {

bool all_digits(std::string_view s)
{
    if (!s.empty() && s.front() == '-')
        s.remove_prefix(1);
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

CLI::Validator strict_integer(bool non_negative)
{
    return CLI::Validator(
        [non_negative](std::string& text) -> std::string {
            const auto v = parse_decimal(text);
            if (!v && all_digits(text))
                return "'" + text + "' is out of range (integers lie in -9223372036854775808..9223372036854775807)";
            if (!v)
                return "'" + text + "' is not a decimal integer";
            if (non_negative && *v < 0)
                return "'" + text + "' must be non-negative";
            return {};
        },
        "");
}

CLI::Validator finite_number()
{
    return CLI::Validator(
        [](std::string& text) -> std::string {
            if (!parse_finite(text))
                return "'" + text + "' is not a finite decimal number";
            return {};
        },
        "");
}

}  // namespace

void make_numbers_strict(CLI::App& app)
{
    for (CLI::Option* opt : app.get_options()) {
        std::string type = opt->get_type_name();
        type = type.substr(0, type.find_first_of(": "));
        if (type == "INT" || type == "UINT")
            opt->check(strict_integer(type == "UINT"));
        else if (type == "FLOAT")
            opt->check(finite_number());
    }
    for (CLI::App* sub : app.get_subcommands({}))
        make_numbers_strict(*sub);
}


void SelectionArgs::add_to(CLI::App& cmd)
{
    add_request_options<analysis::SelectionRequest>(cmd, *this, analysis::selection_options(), "Selection");
    // Set while parsing: the first file is opened before the options are resolved (docs/security.md, "Data files").
    cmd.add_flag_callback("--allow-virtual", [] { io::set_allow_virtual_datasets(true); },
                          "Read HDF5 virtual datasets whose sources all lie in the file's own folder (default: refused)")
        ->group("Selection");
}

void MechanismArgs::add_to(CLI::App& cmd)
{
    add_request_options<analysis::MechanismRequest>(cmd, *this, analysis::mechanism_options(), "Mechanism");
}

void MetricArgs::add_to(CLI::App& cmd)
{
    add_request_options<analysis::MetricRequest>(cmd, *this, analysis::metric_options(), "Metrics");
}

void MemoryArgs::add_to(CLI::App& cmd)
{
    add_request_options<analysis::MemoryRequest>(cmd, *this, analysis::memory_options(), "");
}

std::uint64_t MemoryArgs::resolve() const
{
    const std::uint64_t limit = analysis::memory_limit(*this, analysis::Spelling::flag);
    std::vector<std::string> notes;
    analysis::apply_threads(*this, analysis::Spelling::flag, notes);
    for (const std::string& note : notes)
        std::cerr << "note: " << note << "\n";
    return limit;
}

void MaxMemoryArg::add_to(CLI::App& cmd)
{
    cmd.add_option("--max-memory", max_memory, "The memory budget, e.g. 8G, 512M (default: half the RAM): records take up to 16 "
                                               "times their text, so results files above a sixteenth of it are refused");
}

std::uint64_t MaxMemoryArg::resolve() const { return analysis::parse_memory_size(max_memory, "--max-memory"); }

}  // namespace attnscope::app
