#include "util/atomic_file.h"

#include "util/error.h"
#include "util/output.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace attnscope {

namespace fs = std::filesystem;

namespace {

// The live temporaries, for the signal handler: a fixed array (the handler may not allocate or lock),
// each slot free (0), being filled (1) or holding a path (2). Lock-free atomics are async-signal-safe.
constexpr int kTemporarySlots = 128;
constexpr std::size_t kTemporaryPathBytes = 4096;
struct TemporarySlot {
    std::atomic<int> state{0};
    char path[kTemporaryPathBytes];
};
TemporarySlot g_temporaries[kTemporarySlots];
static_assert(std::atomic<int>::is_always_lock_free);

int register_temporary(const std::string& path)
{
    std::error_code ec;
    const std::string absolute = fs::absolute(path, ec).string();   // the handler may run after a chdir
    if (ec || absolute.size() >= kTemporaryPathBytes)
        return -1;
    for (int i = 0; i < kTemporarySlots; ++i) {
        int expected = 0;
        if (g_temporaries[i].state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
            std::memcpy(g_temporaries[i].path, absolute.c_str(), absolute.size() + 1);
            g_temporaries[i].state.store(2, std::memory_order_release);
            return i;
        }
    }
    return -1;   // more than kTemporarySlots outputs at once: this one is only removed on error
}

void unregister_temporary(int slot)
{
    if (slot >= 0)
        g_temporaries[slot].state.store(0, std::memory_order_release);
}

// Removes every live temporary, then lets the signal do what it would have done (SA_RESETHAND restored the
// default action; the signal is blocked in the handler, so it is delivered, and kills, when the handler
// returns). unlink(2) and raise(3) are async-signal-safe.
extern "C" void remove_temporaries_and_reraise(int signal_number)
{
    const int saved = errno;
    for (auto& slot : g_temporaries)
        if (slot.state.load(std::memory_order_acquire) == 2)
            ::unlink(slot.path);
    errno = saved;
    ::raise(signal_number);
}

// What kind of file `path` is when it may not be replaced by a rename: a special file or a descriptor.
std::string unreplaceable(const std::string& path)
{
    if (const auto fd = descriptor_path(path))
        return "a descriptor of this process (" + std::to_string(*fd) + ")";
    if (const char* kind = special_file_kind(path))
        return std::string("a ") + kind;
    return {};
}

}  // namespace

void remove_temporaries_on_signals()
{
    static std::atomic<bool> installed{false};
    if (installed.exchange(true))
        return;
    const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    struct sigaction action {};
    action.sa_handler = remove_temporaries_and_reraise;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    for (const int s : signals)
        sigaddset(&action.sa_mask, s);   // one cleanup at a time
    for (const int s : signals) {
        struct sigaction previous {};
        // A signal ignored by whoever started us (nohup: SIGHUP) stays ignored.
        if (::sigaction(s, nullptr, &previous) == 0 && previous.sa_handler == SIG_IGN)
            continue;
        ::sigaction(s, &action, nullptr);
    }
}

AtomicOutput::AtomicOutput(std::string destination) : m_destination(std::move(destination))
{
    if (m_destination.empty())
        throw InputError("output path is empty");
    const fs::path dest(m_destination);
    std::error_code ec;
    if (fs::is_directory(dest, ec))
        throw InputError(m_destination + ": is a directory");
    // A rename would put a regular file where a device, a FIFO or the shell's redirection was.
    if (const std::string kind = unreplaceable(m_destination); !kind.empty())
        throw InputError(m_destination + ": is " + kind + "; refusing to replace it");
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
    m_slot = register_temporary(m_temp);
}

AtomicOutput::~AtomicOutput()
{
    if (!m_committed)
        ::unlink(m_temp.c_str());
    unregister_temporary(m_slot);
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
