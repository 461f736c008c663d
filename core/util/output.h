#pragma once
// One writer for every output file (docs/security.md "Outputs"): the command line's subcommands and the
// desktop app's save and export all go through OutputFile, and every subcommand checks its outputs with
// check_output_paths before any work.
//
// A regular file, or a path that does not exist yet, is written atomically (AtomicOutput: a temporary in
// the same folder, fsync, rename; the temporary is removed on error and, once
// remove_temporaries_on_signals() is installed, on SIGINT, SIGTERM, SIGHUP and SIGPIPE). A special file
// is never replaced by a regular one:
//   - a character device or a FIFO (`/dev/null`, a named pipe) is written in place when the output is a
//     stream of text (a JSON document, a CSV, a session: SpecialFiles::write_in_place), and refused for
//     file formats that need a regular file (HDF5, .npy, figures: SpecialFiles::refuse);
//   - `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` and `/proc/self/fd/N` name a descriptor of this process:
//     text goes to that descriptor (what a shell means by them, even when it is redirected to a file);
//   - block devices, sockets and directories are refused.
// Writing has two steps so that a run publishes nothing unless all of it succeeded: write()/write_text()
// prepare (the temporary file; the text kept for an in-place output), commit() publishes (rename; the
// write into the special file). A caller commits its files only after its standard output was written
// and flushed (docs/cli.md "Outputs").
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "util/atomic_file.h"

namespace attnscope {

// The descriptor of this process that `path` names: 1 for "-" (standard output), /dev/stdout and
// /dev/fd/1, and so on, also through symlinks to those names. nullopt for any other path.
std::optional<int> descriptor_path(const std::string& path);

// What kind of special file `path` is ("character device", "FIFO", "block device", "socket"; through
// symlinks), or nullptr for a regular file, a directory or a path that does not exist.
const char* special_file_kind(const std::string& path);

enum class SpecialFiles {
    refuse,           // binary formats: a special file is an error ("is a character device; refusing to replace it")
    write_in_place,   // streams of text: a character device or FIFO is written in place, never replaced
};

class OutputFile {
public:
    // Checks the destination (its folder exists and is writable; what kind of file it is) and throws
    // InputError naming it when it cannot be written under `special`.
    OutputFile(std::string destination, SpecialFiles special);

    const std::string& destination() const { return m_destination; }
    // True when commit() writes into an existing special file or descriptor instead of renaming.
    bool in_place() const { return !m_atomic; }

    // The whole content: written to the temporary file now (regular destinations), kept for commit()
    // (in place). Throws InputError naming the destination.
    void write_text(std::string text);

    // Runs write(path) where path is a temporary file that `write` creates and fills (HDF5, .npy, a
    // figure). Only for regular destinations (OutputFile(..., SpecialFiles::refuse) never writes in place).
    template <class Write>
    void write(Write&& write)
    {
        if (!m_atomic)
            throw std::logic_error("OutputFile::write: " + m_destination + " is written in place; use write_text");
        m_atomic->write(std::forward<Write>(write));
        m_written = true;
    }

    // Publishes what was written: renames the temporary over the destination, or writes the text into
    // the special file / descriptor. Throws InputError naming the destination (nothing is left behind).
    void commit();

private:
    std::string m_destination;
    std::optional<AtomicOutput> m_atomic;
    std::optional<int> m_descriptor;   // in place through a descriptor of this process
    std::string m_text;                // in place: what commit() writes
    bool m_written = false;
};

// Writes `text` to `path` through OutputFile (text: special files are written in place) and commits.
void write_text_output_file(const std::string& path, const std::string& text);

// An output or input of a subcommand, by the option that named it: {"--json", "o.json"}. An output a
// subcommand makes without an option is named by what it is: {"standard output", "-"}.
struct NamedPath {
    std::string option;
    std::string path;
};

// Refuses (std::invalid_argument naming both options) two outputs that resolve to one file, and an
// output that is one of the inputs, before any work. Files that exist are compared by device and inode
// (symlinks, hard links, `./x` and `x`); paths that do not exist yet by their absolute, normalised form
// with symlinks in the existing part resolved. "-" is standard output (two outputs on it are refused too).
// Inputs are file paths (the FILE of a FILE[:NAME] reference); empty paths are skipped.
void check_output_paths(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

}  // namespace attnscope
