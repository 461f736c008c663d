#pragma once
// The headless command line (docs/cli.md): info, analyze, matrix, synth, sweep, figure, batch, merge, aggregate.

#include <string>

namespace attnscope::app {

// "info, analyze, matrix, ...": every subcommand, for messages.
std::string subcommand_list();

// True when argv names a subcommand or a command-line-only flag (then run_cli handles it).
bool wants_cli(int argc, char** argv);

// Parses and runs one subcommand. Returns the exit status: 0 success, 2 bad usage or bad input
// (one `error:` line on stderr), 1 internal failure.
int run_cli(int argc, char** argv);

}  // namespace attnscope::app
