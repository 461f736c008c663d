#pragma once
// Error kinds shared by the whole core.
//
// InputError: the user's data or files are at fault (malformed file, wrong shape, NaN in a tensor,
// a size that does not fit). std::invalid_argument: an option or argument is impossible ("blocks M=300
// exceeds tokens N=196"). Both become exit status 2 and one `error:` line on the command line; any
// other exception is an internal failure (exit 1). Messages name the file, tensor, option or shape.
#include <stdexcept>
#include <string>

namespace attnscope {

class InputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Work that does not fit the memory limit (an InputError). Core messages name options by what they mean
// ("the memory limit", "top-k", "the rank tolerance"), never by a command-line flag, since the desktop app
// shows them too; the command line adds how it sets this limit (app/cli_common.h: "--max-memory").
class MemoryLimitError : public InputError {
public:
    using InputError::InputError;
};

// A named input file that does not exist (an InputError: the command line's exit 2; the Python module raises
// FileNotFoundError).
class MissingFileError : public InputError {
public:
    using InputError::InputError;
};

}  // namespace attnscope
