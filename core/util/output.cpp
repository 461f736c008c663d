#include "util/output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/fd_io.h"

namespace attnscope {

namespace fs = std::filesystem;

namespace {

// N when `p` (absolute, normal) is /dev/fd/N, /proc/self/fd/N, /proc/thread-self/fd/N or /proc/PID/fd/N
// for this process's PID; the standard streams by their /dev names.
std::optional<int> descriptor_name(const fs::path& p)
{
    const std::string s = p.string();
    if (s == "/dev/stdin")
        return 0;
    if (s == "/dev/stdout")
        return 1;
    if (s == "/dev/stderr")
        return 2;
    std::string number;
    for (const std::string& prefix : {std::string("/dev/fd/"), std::string("/proc/self/fd/"), std::string("/proc/thread-self/fd/"),
                                     "/proc/" + std::to_string(::getpid()) + "/fd/"})
        if (s.size() > prefix.size() && s.compare(0, prefix.size(), prefix) == 0) {
            number = s.substr(prefix.size());
            break;
        }
    if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
    return std::stoi(number);
}

std::string descriptor_text(int fd)
{
    switch (fd) {
    case 0:
        return "standard input";
    case 1:
        return "standard output";
    case 2:
        return "standard error";
    default:
        return "descriptor " + std::to_string(fd);
    }
}

[[noreturn]] void fail_write(const std::string& destination, int err)
{
    throw InputError(destination + ": cannot write (" + std::strerror(err) + ")");
}

// Who a path is, for comparing outputs with each other and with inputs.
struct Identity {
    std::optional<int> descriptor;   // "-", /dev/stdout, ...
    bool has_inode = false;          // an existing file (for a descriptor: a regular file behind it)
    dev_t dev = 0;
    ino_t ino = 0;
    std::string path;                // a path that does not exist yet: absolute, normal, existing part resolved
};

Identity identify(const std::string& path)
{
    Identity id;
    struct stat st {};
    if ((id.descriptor = descriptor_path(path))) {
        // Only a regular file behind the descriptor can be lost (`--json o.json > o.json`); two
        // descriptors are one output when they are the same descriptor.
        if (::fstat(*id.descriptor, &st) == 0 && S_ISREG(st.st_mode)) {
            id.has_inode = true;
            id.dev = st.st_dev;
            id.ino = st.st_ino;
        }
        return id;
    }
    if (::stat(path.c_str(), &st) == 0) {
        id.has_inode = true;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    std::error_code ec;
    fs::path absolute = fs::absolute(path, ec);
    // A dangling symlink names where it points (`l.out -> x.out` and `x.out` are one output); a bounded chain.
    for (int hop = 0; hop < 40 && fs::is_symlink(absolute, ec); ++hop) {
        const fs::path target = fs::read_symlink(absolute, ec);
        if (ec)
            break;
        absolute = target.is_absolute() ? target : absolute.parent_path() / target;
    }
    fs::path resolved = fs::weakly_canonical(absolute, ec);
    if (ec)
        resolved = absolute.lexically_normal();
    id.path = resolved.string();
    return id;
}

bool same(const Identity& a, const Identity& b)
{
    if (a.descriptor && b.descriptor && *a.descriptor == *b.descriptor)
        return true;
    if (a.has_inode && b.has_inode)
        return a.dev == b.dev && a.ino == b.ino;
    return !a.descriptor && !b.descriptor && !a.has_inode && !b.has_inode && a.path == b.path;
}

}  // namespace

std::optional<int> descriptor_path(const std::string& path)
{
    if (path == "-")
        return 1;
    if (path.empty())
        return std::nullopt;
    std::error_code ec;
    fs::path p = fs::absolute(path, ec).lexically_normal();
    if (ec)
        return std::nullopt;
    // A symlink to /dev/stdout names it too (`ln -s /dev/stdout out.json`); follow a bounded chain.
    for (int hop = 0; hop < 40; ++hop) {
        if (const auto fd = descriptor_name(p))
            return fd;
        if (!fs::is_symlink(p, ec))
            return std::nullopt;
        const fs::path target = fs::read_symlink(p, ec);
        if (ec)
            return std::nullopt;
        p = (target.is_absolute() ? target : p.parent_path() / target).lexically_normal();
    }
    return std::nullopt;
}

const char* special_file_kind(const std::string& path)
{
    struct stat st {};
    if (path.empty() || ::stat(path.c_str(), &st) != 0)
        return nullptr;
    if (S_ISCHR(st.st_mode))
        return "character device";
    if (S_ISBLK(st.st_mode))
        return "block device";
    if (S_ISFIFO(st.st_mode))
        return "FIFO";
    if (S_ISSOCK(st.st_mode))
        return "socket";
    return nullptr;
}

OutputFile::OutputFile(std::string destination, SpecialFiles special) : m_destination(std::move(destination))
{
    if (m_destination.empty())
        throw InputError("output path is empty");
    if (const auto fd = descriptor_path(m_destination)) {
        if (special == SpecialFiles::refuse)
            throw InputError(m_destination + ": is " + descriptor_text(*fd) + ", not a file; name a file to write");
        const int flags = ::fcntl(*fd, F_GETFL);
        if (flags < 0)
            fail_write(m_destination, errno);
        if ((flags & O_ACCMODE) == O_RDONLY)
            throw InputError(m_destination + ": cannot write (" + descriptor_text(*fd) + " is not open for writing)");
        m_descriptor = fd;
        return;
    }
    if (const char* kind = special_file_kind(m_destination)) {
        const bool streamable = std::strcmp(kind, "character device") == 0 || std::strcmp(kind, "FIFO") == 0;
        if (special == SpecialFiles::refuse || !streamable)
            throw InputError(m_destination + ": is a " + kind + "; refusing to replace it" +
                             (special == SpecialFiles::refuse ? " (this output needs a regular file)" : ""));
        if (::access(m_destination.c_str(), W_OK) != 0)
            fail_write(m_destination, errno);
        return;
    }
    m_atomic.emplace(m_destination);
}

void OutputFile::write_text(std::string text)
{
    if (m_atomic)
        m_atomic->write([&](const std::string& temp) { write_text_file(temp, text); });
    else
        m_text = std::move(text);
    m_written = true;
}

void OutputFile::commit()
{
    if (!m_written)
        throw std::logic_error("OutputFile::commit: nothing was written to " + m_destination);
    if (m_atomic) {
        m_atomic->commit();
        return;
    }
    if (m_descriptor) {
        // What the process printed through stdio goes first, as a shell's redirection would order it.
        std::cout.flush();
        std::fflush(nullptr);
        write_all(*m_descriptor, m_text.data(), m_text.size(), m_destination);
        return;
    }
    // No O_CREAT, no O_TRUNC: the special file is opened as it is (a FIFO waits for its reader).
    const int fd = ::open(m_destination.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        fail_write(m_destination, errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw InputError(m_destination + ": was replaced by a regular file or folder while the run lasted; not written");
    }
    try {
        write_all(fd, m_text.data(), m_text.size(), m_destination);
    } catch (...) {
        ::close(fd);
        throw;
    }
    if (::close(fd) != 0)
        fail_write(m_destination, errno);
}

void write_text_output_file(const std::string& path, const std::string& text)
{
    OutputFile out(path, SpecialFiles::write_in_place);
    out.write_text(text);
    out.commit();
}

void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs)
{
    std::vector<Identity> ids;
    ids.reserve(outputs.size());
    for (const NamedPath& o : outputs)
        ids.push_back(identify(o.path));
    // "--json o.json"; an implicit output (a subcommand's printout) is named by its option alone.
    auto shown = [](const NamedPath& o) { return o.option.rfind("--", 0) == 0 ? o.option + " " + o.path : o.option; };
    for (std::size_t i = 0; i < outputs.size(); ++i)
        for (std::size_t j = i + 1; j < outputs.size(); ++j) {
            if (outputs[i].path.empty() || outputs[j].path.empty() || !same(ids[i], ids[j]))
                continue;
            if (ids[i].descriptor && ids[j].descriptor)
                throw std::invalid_argument(outputs[i].option + " and " + outputs[j].option + " both write to " +
                                            descriptor_text(*ids[i].descriptor) + ": give each its own file");
            throw std::invalid_argument(shown(outputs[i]) + " and " + shown(outputs[j]) + " are one file: give each its own file");
        }
    for (const NamedPath& in : inputs) {
        if (in.path.empty())
            continue;
        struct stat st {};
        if (::stat(in.path.c_str(), &st) != 0)
            continue;   // a missing input is the reader's error
        Identity input;
        input.has_inode = true;
        input.dev = st.st_dev;
        input.ino = st.st_ino;
        for (std::size_t i = 0; i < outputs.size(); ++i)
            if (!outputs[i].path.empty() && same(ids[i], input))
                throw std::invalid_argument(shown(outputs[i]) + " is the input " + in.option + " " + in.path +
                                            ": writing it would replace the input; name another file");
    }
}

}  // namespace attnscope
