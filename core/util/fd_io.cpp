#include "util/fd_io.h"

#include <cerrno>
#include <cstring>

#include <unistd.h>

#include "util/error.h"

namespace attnscope {

namespace {

struct Moved {
    std::size_t bytes = 0;
    int error = 0;   // errno of the call that failed, EIO for one that moved nothing; 0 when all moved
};

// Calls `op` (::read or ::write) until `size` bytes moved, retrying after EINTR, stopping at the first call
// that moves nothing or fails.
template <class Op, class Byte>
Moved move_bytes(Op op, int fd, Byte* data, std::size_t size)
{
    Moved m;
    while (m.bytes < size) {
        const ssize_t n = op(fd, data + m.bytes, size - m.bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            m.error = n < 0 ? errno : EIO;
            break;
        }
        m.bytes += static_cast<std::size_t>(n);
    }
    return m;
}

}  // namespace

void write_all(int fd, const void* data, std::size_t size, const std::string& destination)
{
    const Moved m = move_bytes(::write, fd, static_cast<const char*>(data), size);
    if (m.bytes < size)
        throw InputError(destination + ": cannot write (" + std::strerror(m.error) + ")");
}

std::size_t read_up_to(int fd, void* data, std::size_t size)
{
    return move_bytes(::read, fd, static_cast<char*>(data), size).bytes;   // short: the end of the file, or an error
}

}  // namespace attnscope
