#include "cli_common.h"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>

#include <iostream>

#include "analysis/requests.h"
#include "io/selection.h"
#include "util/json_text.h"
#include "util/output.h"

namespace attnscope::app {

// CLI11's messages in the words of the rest of the command line (docs/cli.md): the option at fault and
// what it takes, never the parser's phrasing.
std::string parse_error_text(const CLI::ParseError& e)
{
    std::string m = e.what();
    auto starts = [&](const std::string& prefix) { return m.rfind(prefix, 0) == 0; };
    auto after = [&](const std::string& prefix) { return m.substr(prefix.size()); };
    for (const char* p : {"The following arguments were not expected: ", "The following argument was not expected: "})
        if (starts(p))
            return "unexpected argument(s) " + after(p) + " (the subcommand's --help lists its options)";
    if (starts("Could not convert: ")) {
        const std::string rest = after("Could not convert: ");
        const auto eq = rest.find(" = ");
        if (eq != std::string::npos)
            return rest.substr(0, eq) + ": '" + rest.substr(eq + 3) + "' is not a value it takes";
    }
    if (const auto at = m.find(": At Most "); at != std::string::npos)
        return m.substr(0, at) + ": given more values than it takes";
    if (const auto at = m.find(": At least "); at != std::string::npos)
        return m.substr(0, at) + ": needs a value";
    if (const auto at = m.find(" excludes "); at != std::string::npos)
        return m.substr(0, at) + " and " + m.substr(at + 10) + " cannot be given together";
    if (const auto at = m.find(": Value "); at != std::string::npos) {
        const std::string rest = m.substr(at + 8);
        const auto range = rest.find(" not in range ");
        if (range != std::string::npos)
            return m.substr(0, at) + ": " + rest.substr(0, range) + " is outside " + rest.substr(range + 14);
    }
    return m;
}

std::string needs_desktop_app(const std::string& what)
{
    return what + " needs the desktop app, and this attnscope is the headless one (built without Qt): "
                  "install the package attnscope (the desktop app) beside attnscope-cli, or build with "
                  "ATTNSCOPE_BUILD_GUI=ON";
}

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

namespace {

io::TensorRef reference_value(const std::string& flag, const std::string& text)
{
    try {
        return io::parse_tensor_ref(text);
    } catch (const std::exception& e) {
        throw CLI::ValidationError(flag, e.what());   // one `error:` line naming the option (parse_error_text)
    }
}

// One value (a reference, or an optional one).
template <class Target>
CLI::Option* add_one_tensor_option(CLI::App& cmd, const std::string& flag, Target& ref, const std::string& help)
{
    return cmd.add_option_function<std::string>(
        flag, [&ref, flag](const std::string& text) { ref = reference_value(flag, text); }, help);
}

}  // namespace

CLI::Option* add_tensor_option(CLI::App& cmd, const std::string& flag, io::TensorRef& ref, const std::string& help)
{
    return add_one_tensor_option(cmd, flag, ref, help);
}

CLI::Option* add_tensor_option(CLI::App& cmd, const std::string& flag, std::optional<io::TensorRef>& ref,
                               const std::string& help)
{
    return add_one_tensor_option(cmd, flag, ref, help);
}

CLI::Option* add_tensor_option(CLI::App& cmd, const std::string& flag, std::vector<io::TensorRef>& refs,
                               const std::string& help)
{
    return cmd.add_option_function<std::vector<std::string>>(
        flag,
        [&refs, flag](const std::vector<std::string>& texts) {
            refs.clear();
            for (const std::string& text : texts)
                refs.push_back(reference_value(flag, text));
        },
        help);
}

void add_input_refs(std::vector<NamedPath>& inputs, const std::string& option, const std::vector<io::TensorRef>& refs)
{
    for (const io::TensorRef& ref : refs)
        if (!ref.array)
            inputs.push_back({option, ref.file});
}

void add_mixing_input(std::vector<NamedPath>& inputs, const std::string& mixing)
{
    try {
        if (const auto ref = analysis::mixing_reference(mixing))
            add_input_refs(inputs, "--mixing", {*ref});
    } catch (const std::exception&) {
    }
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

int publish_json(const nlohmann::ordered_json& doc, const std::optional<std::string>& json_out, bool json_to_stdout,
                 std::optional<OutputFile>& json_file, const std::function<void()>& print)
{
    if (json_to_stdout) {
        write_text_output("-", json_text(doc, 2) + "\n");
        return 0;
    }
    if (json_file)
        json_file->write_text(json_text(doc, 2) + "\n");
    print();
    flush_standard_output();
    if (json_file) {
        json_file->commit();
        std::cout << "\nwrote " << *json_out << "\n";
    }
    return 0;
}

}  // namespace attnscope::app
