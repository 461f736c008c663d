#pragma once
// Running the real attnscope executable from a test: for the test targets that define ATTNSCOPE_BINARY
// (its path, from $<TARGET_FILE:attnscope>).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/test_support.h"

#ifndef ATTNSCOPE_BINARY
#error "support/attnscope_binary.h needs ATTNSCOPE_BINARY: target_compile_definitions(... ATTNSCOPE_BINARY=...)"
#endif

namespace attnscope::test {

// The environment of a machine without any display: attnscope must choose the offscreen platform itself.
inline const std::string kNoDisplay = "env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM ";

// `attnscope ARGS`, after `env_prefix` (e.g. kNoDisplay), with its exit status and output.
inline CommandResult run_attnscope(const std::string& args, const std::string& env_prefix = {})
{
    return run_command(env_prefix + ATTNSCOPE_BINARY + " " + args);
}

// One refusal as the command line promises it (docs/cli.md): exit 2 and exactly one line on stderr, starting
// "error: " and naming every needle; `what` says which case failed.
inline void expect_one_error(const CommandResult& r, const std::vector<std::string>& needles, const std::string& what)
{
    EXPECT_EQ(r.status, 2) << what << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << what << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\nstderr: " << r.err;
    for (const auto& n : needles)
        EXPECT_NE(r.err.find(n), std::string::npos) << what << ": missing '" << n << "' in " << r.err;
}

// Runs `python3 tests/SCRIPT ATTNSCOPE WORKDIR EXTRA...` in a fresh work folder named `work`: the script
// compares attnscope's output with its own NumPy answers and exits non-zero saying what differs.
inline void expect_script_passes(const std::string& script, const std::string& work,
                                 const std::vector<std::string>& extra = {})
{
    std::vector<std::string> args{ATTNSCOPE_BINARY, fresh_work_dir(work)};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_NO_THROW(run_python(script, args));
}

}  // namespace attnscope::test
