// attnscope: the desktop app when started bare or with file names, a headless tool with a subcommand.
#include "cli.h"

#ifdef ATTNSCOPE_WITH_GUI
namespace attnscope::app {
int run_gui(int argc, char** argv);
}
#endif

#include <cstdio>

int main(int argc, char** argv)
{
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
