#pragma once
// Whole reads and writes on a file descriptor: POSIX read() and write() may move fewer bytes than asked
// and fail with EINTR when a signal arrives; these loop until everything moved, the end of the file, or
// a real error.
#include <cstddef>
#include <string>

namespace attnscope {

// Writes all `size` bytes of `data` to `fd`. Throws InputError "DESTINATION: cannot write (REASON)".
void write_all(int fd, const void* data, std::size_t size, const std::string& destination);

// Reads up to `size` bytes into `data`, stopping early only at the end of the file or on an error; returns
// how many bytes were read.
std::size_t read_up_to(int fd, void* data, std::size_t size);

}  // namespace attnscope
