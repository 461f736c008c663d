/* A stand-in for a hostile HDF5 filter plugin (tests/app/test_security_readers.cpp): HDF5 dlopen()s every
 * lib*.so in HDF5_PLUGIN_PATH when a file names a filter it does not know, and loading runs this constructor,
 * which creates the file named by ATTNSCOPE_PLUGIN_MARKER. AttnScope never loads plugins, so the marker must
 * never appear. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void attnscope_plugin_marker(void)
{
    const char* path = getenv("ATTNSCOPE_PLUGIN_MARKER");
    if (!path || !*path)
        return;
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, "loaded\n", 7);
        close(fd);
    }
}
