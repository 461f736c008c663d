#include "util/atomic_file.h"

#include "util/error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <unistd.h>

namespace attnscope {

namespace fs = std::filesystem;

AtomicOutput::AtomicOutput(std::string destination) : m_destination(std::move(destination))
{
    if (m_destination.empty())
        throw InputError("output path is empty");
    const fs::path dest(m_destination);
    std::error_code ec;
    if (fs::is_directory(dest, ec))
        throw InputError(m_destination + ": is a directory");
    fs::path folder = dest.parent_path();
    if (folder.empty())
        folder = ".";
    if (!fs::is_directory(folder, ec))
        throw InputError(m_destination + ": folder " + folder.string() + " does not exist");
    if (::access(folder.c_str(), W_OK) != 0)
        throw InputError(m_destination + ": folder " + folder.string() + " is not writable (" + std::strerror(errno) + ")");

    std::random_device rd;
    const auto tag = (static_cast<unsigned long long>(rd()) << 32) ^ rd() ^ static_cast<unsigned long long>(::getpid());
    char buf[32];
    std::snprintf(buf, sizeof buf, "%012llx", tag & 0xFFFFFFFFFFFFULL);
    // Keep the extension last so that libraries that look at it (HDF5 does not, NumPy does) are happy.
    std::string name = ".";
    name += dest.filename().string();
    name += ".tmp-";
    name += buf;
    name += dest.extension().string();
    m_temp = (folder / name).string();
}

AtomicOutput::~AtomicOutput()
{
    if (!m_committed)
        ::unlink(m_temp.c_str());
}

std::string AtomicOutput::named(std::string message) const
{
    for (std::size_t at = message.find(m_temp); at != std::string::npos; at = message.find(m_temp, at + m_destination.size()))
        message.replace(at, m_temp.size(), m_destination);
    return message;
}

void AtomicOutput::commit()
{
    const int fd = ::open(m_temp.c_str(), O_RDONLY);
    if (fd < 0) {
        const std::string why = std::strerror(errno);
        throw InputError(m_destination + ": temporary output was not written (" + why + ")");
    }
    const int sync_rc = ::fsync(fd);
    const int sync_errno = errno;
    ::close(fd);
    if (sync_rc != 0)
        throw InputError(m_destination + ": cannot write (" + std::string(std::strerror(sync_errno)) + ")");
    if (::rename(m_temp.c_str(), m_destination.c_str()) != 0)
        throw InputError(m_destination + ": cannot write (" + std::string(std::strerror(errno)) + ")");
    m_committed = true;
}

void write_text_file(const std::string& path, const std::string& text)
{
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f)
        throw InputError(path + ": cannot write (" + std::strerror(errno) + ")");
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    int err = errno;
    const bool closed = std::fclose(f) == 0;
    if (ok)
        err = errno;
    if (!ok || !closed)
        throw InputError(path + ": cannot write (" + std::strerror(err) + ")");
}

void write_file_atomically(const std::string& path, const std::string& text)
{
    AtomicOutput out(path);
    out.write([&](const std::string& temp) { write_text_file(temp, text); });
    out.commit();
}

}  // namespace attnscope
