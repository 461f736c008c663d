#pragma once
// What every subcommand of the command line shares (docs/cli.md): its registration shape, the one
// `error:` line, exit statuses from exceptions, writing text to a file or standard output, and the
// check of its outputs against each other and its inputs (util/output.h).
#include <filesystem>
#include <functional>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "analysis/aggregate.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "util/error.h"
#include "util/output.h"

namespace attnscope::app {

// A subcommand registered on the top-level parser, and what runs it once parsed (its exit status).
struct Command {
    CLI::App* cmd = nullptr;
    std::function<int()> run;
};

Command add_info_command(CLI::App& app);
Command add_analyze_command(CLI::App& app);
Command add_depth_command(CLI::App& app);
Command add_matrix_command(CLI::App& app);
Command add_synth_command(CLI::App& app);
Command add_sweep_command(CLI::App& app);
Command add_figure_command(CLI::App& app);   // builds with the desktop app only
Command add_batch_command(CLI::App& app);
Command add_merge_command(CLI::App& app);
Command add_aggregate_command(CLI::App& app);
Command add_report_command(CLI::App& app);

// Runs the batch job at `job_path` into `out_dir` with `jobs` units in parallel, as `attnscope batch` does (its
// progress and summary on standard error, its figures when built with the desktop app's views); the exit status.
int run_batch_job(const std::string& job_path, const std::string& out_dir, int jobs);

// The statistics over units as the aggregate subcommand prints them (app/cmd_aggregate.cpp): one block per
// metric with the mechanisms under it, then the paired differences. `metrics`: only these (empty = all).
void print_aggregate(const analysis::Aggregate& stats, const std::vector<std::string>& metrics);

// CLI11's messages in the words of the rest of the command line (docs/cli.md): the option at fault and
// what it takes, never the parser's phrasing (the missing subcommand is the caller's: app/cli.cpp).
std::string parse_error_text(const CLI::ParseError& e);

// "error: MESSAGE" on stderr, on one line whatever the message holds.
void print_error(const std::string& message);

// What a headless attnscope (built without Qt: the package attnscope-cli, or ATTNSCOPE_BUILD_GUI=OFF) says when
// asked for something only the desktop app's views draw: "WHAT draws with the desktop app's views, ...".
std::string needs_desktop_app(const std::string& what);

// Writes text to `path` (util/output.h: atomically; a device or FIFO in place), or to standard output for "-".
void write_text_output(const std::string& path, const std::string& text);

// Flushes standard output and throws InputError when anything written to it was lost (a full device, a
// closed stream). Subcommands call it before they commit their files: a run whose standard output
// failed leaves no file behind.
void flush_standard_output();

// Writes a command's JSON document: alone on standard output when `json_to_stdout` (`--json -`), else the summary
// `print` writes and then, with `json_file`, the file, committed only once the summary reached standard output (a
// failed run leaves no file; "wrote PATH" follows the summary). Returns the exit status.
int publish_json(const nlohmann::ordered_json& doc, const std::optional<std::string>& json_out, bool json_to_stdout,
                 std::optional<OutputFile>& json_file, const std::function<void()>& print);

// A FILE[:NAME] option (--q, --k, --v), parsed as the command line is read: the command holds io::TensorRef
// from then on, and a malformed reference is refused there with its option named ("--q: q.npy:x: a .npy file
// holds one unnamed tensor; ..."). The app's one reading of reference text (a --mixing text is the core's:
// analysis::mixing_reference). The repeatable form collects every occurrence (sweep's --q/--k inputs).
CLI::Option* add_tensor_option(CLI::App& cmd, const std::string& flag, io::TensorRef& ref, const std::string& help);
CLI::Option* add_tensor_option(CLI::App& cmd, const std::string& flag, std::optional<io::TensorRef>& ref,
                               const std::string& help);
CLI::Option* add_tensor_option(CLI::App& cmd, const std::string& flag, std::vector<io::TensorRef>& refs,
                               const std::string& help);

// The input files of references, by option, for check_output_paths. A --mixing preset names no file, and a
// mixing text that does not parse is left to the reader's message.
void add_input_refs(std::vector<NamedPath>& inputs, const std::string& option, const std::vector<io::TensorRef>& refs);
void add_mixing_input(std::vector<NamedPath>& inputs, const std::string& mixing);

std::string lower(std::string s);
bool ends_with(const std::string& s, const std::string& suffix);

// Runs a subcommand, turning what it throws into the exit status (0 success, 2 bad usage or input, 1
// internal failure) and one `error:` line.
template <class F>
int guarded(F&& body)
{
    try {
        return body();
    } catch (const MemoryLimitError& e) {
        print_error(std::string(e.what()) + "; set the limit with --max-memory");
        return 2;
    } catch (const InputError& e) {
        print_error(e.what());
        return 2;
    } catch (const std::invalid_argument& e) {
        print_error(e.what());
        return 2;
    } catch (const std::out_of_range& e) {
        print_error(e.what());
        return 2;
    } catch (const std::filesystem::filesystem_error& e) {   // a path the system refuses (too long, ...)
        std::string where = e.path1().string();
        if (!e.path2().empty())
            where += ", " + e.path2().string();
        print_error((where.empty() ? std::string() : where + ": ") + e.code().message());
        return 2;
    } catch (const std::bad_alloc&) {
        print_error("out of memory (select fewer tokens or lower --max-memory)");
        return 1;
    } catch (const std::exception& e) {
        print_error(std::string("internal: ") + e.what());
        return 1;
    }
}

}  // namespace attnscope::app
