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

namespace {

// The flags of a request's descriptors (analysis/requests.h), in their order, under `group`: an option per
// field, a switch per bool, a pair of switches (--NAME, --no-NAME) per optional bool; then the exclusions.
template <class Request>
void add_request_options(CLI::App& cmd, Request& request, const std::vector<analysis::OptionDescriptor<Request>>& table,
                         const std::string& group)
{
    std::map<std::string_view, CLI::Option*> made;
    for (const auto& d : table) {
        const std::string flag = analysis::option_name(d.name, analysis::Spelling::flag);
        std::visit(
            [&](auto field) {
                auto& value = request.*field;
                using T = std::remove_reference_t<decltype(value)>;
                if constexpr (std::is_same_v<T, bool>) {
                    made[d.name] = cmd.add_flag(flag, value, d.help)->group(group);
                } else if constexpr (std::is_same_v<T, std::optional<bool>>) {
                    CLI::Option* on = cmd.add_flag_callback(flag, [&value] { value = true; }, d.help)->group(group);
                    CLI::Option* off = cmd.add_flag_callback("--no-" + std::string(d.name), [&value] { value = false; }, d.help_off)
                                           ->group(group);
                    on->excludes(off);
                    made[d.name] = on;
                } else {
                    made[d.name] = cmd.add_option(flag, value, d.help)->group(group);
                }
            },
            d.field);
    }
    for (const auto& d : table)
        for (const std::string_view other : d.excludes)
            made.at(d.name)->excludes(made.at(other));
}

}  // namespace

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
    cmd.add_option("--max-memory", max_memory, "Refuse dense work above this size, e.g. 8G, 512M (default: half the RAM)");
    cmd.add_option("--threads", threads, "Threads for products, SVDs and attention tiles: AttnScope's kernels and OpenBLAS (default: all cores)");
}

namespace {

// --max-memory's text: a finite decimal and a unit, e.g. 8G, 512M, 1000000.
std::uint64_t parse_max_memory(const std::string& max_memory)
{
    if (max_memory.empty())
        return analysis::default_memory_limit();
    // The number (digits, a point, an exponent) and a unit; strict decimal, so "0x10G" and "nanG" are refused.
    std::size_t used = max_memory.find_first_not_of("0123456789.eE+-");
    if (used == std::string::npos)
        used = max_memory.size();
    const std::optional<double> number = parse_finite(std::string_view(max_memory).substr(0, used));
    const double v = number.value_or(0.0);
    if (!number)
        used = 0;
    double mult = 1.0;
    const std::string suffix = max_memory.substr(used);
    if (suffix == "" || suffix == "B")
        mult = 1.0;
    else if (suffix == "K" || suffix == "KiB" || suffix == "k")
        mult = 1024.0;
    else if (suffix == "M" || suffix == "MiB")
        mult = 1024.0 * 1024;
    else if (suffix == "G" || suffix == "GiB")
        mult = 1024.0 * 1024 * 1024;
    else if (suffix == "T" || suffix == "TiB")
        mult = 1024.0 * 1024 * 1024 * 1024;
    else
        used = 0;
    if (used == 0 || !(v > 0) || !std::isfinite(v * mult) || v * mult > 1.8e19)
        throw std::invalid_argument("--max-memory " + max_memory + ": expected a size such as 8G, 512M or 1000000");
    return static_cast<std::uint64_t>(v * mult);
}

}  // namespace

std::uint64_t MemoryArgs::resolve() const
{
    if (threads < 0 || threads > 1024)
        throw std::invalid_argument("--threads must lie in 0..1024 (0: all cores)");
    const std::uint64_t limit = parse_max_memory(max_memory);
    int wanted = 0;   // OpenBLAS's own count
    if (threads > 0) {
        // More threads than cores only queue, and each OpenBLAS thread maps its own buffer: --threads 32 under an
        // address-space limit (ulimit -v) made OpenBLAS retry a failing mmap forever.
        const int cores = kernels::usable_cores();
        if (threads > cores)
            std::cerr << "note: --threads " << threads << " is more than the " << cores << " core" << (cores == 1 ? "" : "s")
                      << " this process may run on: using " << cores << "\n";
        wanted = std::min(threads, cores);
    }
    const int asked = wanted > 0 ? wanted : kernels::threads();
    if (const int used = kernels::reserve_blas_buffers(wanted); used < asked)
        std::cerr << "note: using " << used << " thread" << (used == 1 ? "" : "s") << ": the address-space limit (ulimit -v) "
                  << "leaves room for " << used << " of OpenBLAS's per-thread buffers\n";
    return limit;
}

void MaxMemoryArg::add_to(CLI::App& cmd)
{
    cmd.add_option("--max-memory", max_memory, "The memory budget, e.g. 8G, 512M (default: half the RAM): records take up to 16 "
                                               "times their text, so results files above a sixteenth of it are refused");
}

std::uint64_t MaxMemoryArg::resolve() const { return parse_max_memory(max_memory); }

}  // namespace attnscope::app
