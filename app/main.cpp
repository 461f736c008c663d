// attnscope: the desktop app when started bare or with file names, a headless tool with a subcommand.
#include "cli.h"

#ifdef ATTNSCOPE_WITH_GUI
namespace attnscope::app {
int run_gui(int argc, char** argv);
}
#endif

#include <cstdio>

#include "util/atomic_file.h"

int main(int argc, char** argv)
{
    // Ctrl-C, a kill or a closed terminal during a write leaves no hidden temporary file (docs/security.md "Outputs").
    attnscope::remove_temporaries_on_signals();
    if (attnscope::app::wants_cli(argc, argv))
        return attnscope::app::run_cli(argc, argv);
#ifdef ATTNSCOPE_WITH_GUI
    return attnscope::app::run_gui(argc, argv);
#else
    std::fprintf(stderr, "error: this attnscope was built without the desktop app (ATTNSCOPE_BUILD_GUI=OFF); "
                         "use a subcommand: %s (attnscope --help)\n", attnscope::app::subcommand_list().c_str());
    return 2;
#endif
}
