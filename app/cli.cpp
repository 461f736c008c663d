// The headless command line (docs/cli.md): the parser and the dispatch to the subcommands, each in its
// own file (cmd_*.cpp).
#include "cli.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "cli_options.h"
#include "kernels/kernels.h"

namespace attnscope::app {

namespace {

constexpr const char* kSubcommands[] = {"info",  "analyze",   "matrix", "synth",  "sweep", "batch",
                                        "merge", "aggregate", "depth",  "figure", "report"};

bool is_subcommand(const char* word)
{
    return std::any_of(std::begin(kSubcommands), std::end(kSubcommands), [&](const char* s) { return std::strcmp(s, word) == 0; });
}

// The desktop app's own flags (app/gui.cpp, docs/cli.md "Desktop app from the command line"), also as --flag=value.
bool is_gui_flag(const std::string& arg)
{
    for (const char* flag : {"--session", "--screenshot", "--save-session", "--view", "--size"})
        if (arg == flag || arg.rfind(std::string(flag) + "=", 0) == 0)
            return true;
    return false;
}

// A subcommand that succeeded but whose standard output could not be written (a full device, a closed
// stream) has not done its job: exit 2 instead of reporting success with the output lost.
int check_standard_output()
{
    std::cout.flush();
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    if (std::cout.good() && flushed && !std::ferror(stdout))
        return 0;
    const int err = errno ? errno : EIO;
    print_error(std::string("standard output: cannot write (") + std::strerror(err) + "): the output is incomplete");
    return 2;
}

}  // namespace

std::string subcommand_list()
{
    std::string s;
    for (const char* c : kSubcommands) {
#ifndef ATTNSCOPE_WITH_GUI
        if (std::strcmp(c, "figure") == 0)   // still routed here, to say which package has it (run_cli)
            continue;
#endif
        s += (s.empty() ? "" : ", ") + std::string(c);
    }
    return s;
}

bool wants_cli(int argc, char** argv)
{
    if (argc < 2)
        return false;
    const std::string first = argv[1];
    if (is_subcommand(argv[1]))
        return true;
    // Without a subcommand, the desktop app's flags anywhere route there (`attnscope FILE --screenshot OUT.png`,
    // and a missing FILE is then reported by the app); every other flag is the command line's.
    for (int i = 1; i < argc; ++i)
        if (is_gui_flag(argv[i]))
            return false;
    if (!first.empty() && first[0] == '-')
        return true;
    // A word that is not a file is a mistyped subcommand: let the parser say so.
    std::error_code ec;
    return !std::filesystem::exists(first, ec);
}

int run_cli(int argc, char** argv)
{
#ifndef ATTNSCOPE_WITH_GUI
    if (argc >= 2 && std::strcmp(argv[1], "figure") == 0) {
        print_error(needs_desktop_app("figure"));
        return 2;
    }
#endif
    if (argc >= 2 && argv[1][0] != '-' && !is_subcommand(argv[1])) {
        print_error(std::string("'") + argv[1] + "' is neither a subcommand (" + subcommand_list() + ") nor an existing file");
        return 2;
    }
#ifdef ATTNSCOPE_WITH_GUI
    CLI::App app{"AttnScope: how expressive are softmax, linear and MHLA attention on your activations?\n"
                 "Without a subcommand (or with file names) attnscope opens the desktop app.",
                 "attnscope"};
#else
    CLI::App app{"AttnScope: how expressive are softmax, linear and MHLA attention on your activations?\n"
                 "This attnscope is the headless one (built without Qt): the desktop app and figure are in the package "
                 "attnscope.",
                 "attnscope"};
#endif
    app.set_version_flag("--version", std::string("attnscope ") + ATTNSCOPE_VERSION);
    app.require_subcommand(1);
    app.option_defaults()->always_capture_default();
    app.footer("Desktop app: attnscope [FILE...]; attnscope --session S.attnscope; attnscope FILE... --screenshot OUT.png "
               "[--view NAME]; attnscope FILE... --save-session OUT.attnscope (docs/cli.md, \"Desktop app from the "
               "command line\").");
    std::vector<Command> commands = {add_info_command(app),  add_analyze_command(app), add_matrix_command(app),
                                     add_synth_command(app), add_sweep_command(app)};
#ifdef ATTNSCOPE_WITH_GUI
    commands.push_back(add_figure_command(app));
#endif
    commands.push_back(add_batch_command(app));
    commands.push_back(add_merge_command(app));
    commands.push_back(add_aggregate_command(app));
    commands.push_back(add_depth_command(app));
    commands.push_back(add_report_command(app));
    make_numbers_strict(app);   // every numeric option, plain decimal only (app/cli_options.h)

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0)
            return app.exit(e);
        const std::string m = e.what();
        if (m.rfind("A subcommand is required", 0) == 0 || m.rfind("Requires at least 1 subcommands", 0) == 0)
            print_error(std::string("give a subcommand: ") + subcommand_list() +
                        " (attnscope --help), or file names for the desktop app");
        else
            print_error(parse_error_text(e));
        return 2;
    }
    for (const Command& c : commands)
        if (c.cmd->parsed()) {
            // A misspelt ATTNSCOPE_* override is refused before any work (docs/security.md, "Environment and caches").
            const int status = guarded([&] {
                kernels::check_environment();
                return c.run();
            });
            return status == 0 ? check_standard_output() : status;
        }
    return 2;
}

}  // namespace attnscope::app
