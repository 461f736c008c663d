#include "cli_common.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>

#include <iostream>

#include "attention/mixing.h"
#include "io/selection.h"
#include "util/output.h"

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
    write_text_output_file(path, text);
}

void flush_standard_output()
{
    std::cout.flush();
    errno = 0;
    const bool flushed = std::fflush(stdout) == 0;
    if (std::cout.good() && flushed && !std::ferror(stdout))
        return;
    throw InputError(std::string("standard output: cannot write (") + std::strerror(errno ? errno : EIO) +
                     "): the output is incomplete");
}

void add_input_refs(std::vector<NamedPath>& inputs, const std::string& option, const std::vector<std::string>& refs)
{
    for (const std::string& ref : refs) {
        try {
            inputs.push_back({option, io::parse_tensor_ref(ref).file});
        } catch (const std::exception&) {
        }
    }
}

void add_mixing_input(std::vector<NamedPath>& inputs, const std::string& mixing)
{
    if (!mixing.empty() && !attention::is_mixing_preset(mixing))
        add_input_refs(inputs, "--mixing", {mixing});
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
