// attnscope: the desktop app when started bare or with file names, a headless tool with a subcommand.
#include "cli.h"
#include "cli_common.h"

#ifdef ATTNSCOPE_WITH_GUI
namespace attnscope::app {
int run_gui(int argc, char** argv);
}
#endif

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "kernels/kernels.h"
#include "util/atomic_file.h"

int main(int argc, char** argv)
{
    // Ctrl-C, a kill or a closed terminal during a write leaves no hidden temporary file (docs/security.md "Outputs").
    attnscope::remove_temporaries_on_signals();
    int status = 2;
    if (attnscope::app::wants_cli(argc, argv)) {
        status = attnscope::app::run_cli(argc, argv);
    } else {
#ifdef ATTNSCOPE_WITH_GUI
        status = attnscope::app::run_gui(argc, argv);
#else
        attnscope::app::print_error(attnscope::app::needs_desktop_app("opening files in a window (attnscope [FILE...])") +
                                    "; or use a subcommand: " + attnscope::app::subcommand_list() + " (attnscope --help)");
#endif
    }
    // Under an address-space limit too small for OpenBLAS's buffers, a thread it started when it was loaded waits for
    // its buffer forever and its exit handler joins that thread: the process ends here instead (everything it
    // wrote is flushed, every output is already in place).
    if (attnscope::kernels::blas_may_wait_at_exit()) {
        std::cout.flush();
        std::fflush(nullptr);
        std::_Exit(status);
    }
    return status;
}
