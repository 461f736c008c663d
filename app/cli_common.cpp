#include "cli_common.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>

#include "util/atomic_file.h"

namespace attnscope::app {

void print_error(const std::string& message)
{
    std::string line = message;
    for (char& c : line)
        if (c == '\n' || c == '\r')
            c = ' ';
    std::fprintf(stderr, "error: %s\n", line.c_str());
}

void write_text_output(const std::string& path, const std::string& text)
{
    if (path == "-") {
        errno = 0;
        if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
            throw InputError(std::string("standard output: cannot write (") + std::strerror(errno ? errno : EIO) +
                             "): the output is incomplete");
        return;
    }
    write_file_atomically(path, text);
}

std::string lower(std::string s)
{
    for (char& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool ends_with(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace attnscope::app
