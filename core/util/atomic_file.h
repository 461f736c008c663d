#pragma once
// Writes that never leave a partial file and never clobber an existing one on failure.
//
// AtomicOutput picks a temporary name in the destination's folder (so the final rename(2) is atomic
// on the same file system). Write to temp_path(); commit() renames it over the destination. If the
// object is destroyed without commit() (an exception, an early return) the temporary file is removed
// and the destination is untouched; remove_temporaries_on_signals() removes it when a signal ends the
// process too. A destination that is a special file (a device, a FIFO, a socket, /dev/stdout) is
// refused: a rename would replace it with a regular file (util/output.h writes text into those in place).
#include <string>

#include "util/error.h"

namespace attnscope {

class AtomicOutput {
public:
    // Throws InputError when the destination's folder does not exist or is not writable, or the
    // destination is a directory or a special file.
    explicit AtomicOutput(std::string destination);
    ~AtomicOutput();
    AtomicOutput(const AtomicOutput&) = delete;
    AtomicOutput& operator=(const AtomicOutput&) = delete;

    const std::string& temp_path() const { return m_temp; }
    const std::string& destination() const { return m_destination; }

    // Runs write(temp_path()). An InputError it throws is thrown again naming the destination instead of
    // the temporary file (a user never sees the hidden temporary name in a message).
    template <class Write>
    void write(Write&& write)
    {
        try {
            write(m_temp);
        } catch (const InputError& e) {
            throw InputError(named(e.what()));
        }
    }

    // `message` with every mention of the temporary file replaced by the destination.
    std::string named(std::string message) const;

    // Flushes the temporary file to disk and renames it to the destination. Throws InputError on failure
    // (the temporary file is then removed).
    void commit();

private:
    std::string m_destination;
    std::string m_temp;
    bool m_committed = false;
    int m_slot = -1;   // in the registry of live temporaries (-1: not registered)
};

// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGPIPE that remove every live temporary file of an
// AtomicOutput, then end the process by the signal's default action. Signals ignored at the time of the
// call stay ignored. Call once, early in main (the process's handlers are process-wide).
void remove_temporaries_on_signals();

// Writes `text` to `path` as it is (a temporary file of an AtomicOutput, say). Throws InputError naming the
// path and the cause.
void write_text_file(const std::string& path, const std::string& text);

// Writes `text` to `path` atomically (AtomicOutput).
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace attnscope
