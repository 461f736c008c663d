#pragma once
// HDF5 plumbing shared by the reader and the writer (internal to core/io): owning handles, one lock
// for every call into the library (the Debian build is not thread-safe), automatic error printing
// switched off, plugins never loaded, and the library's error stack turned into our message text.
#include <mutex>
#include <string>
#include <utility>

#include <hdf5.h>

namespace attnscope::io::detail {

// Locks the HDF5 library for the calling scope and makes sure HDF5 never prints to stderr. The first call
// also switches off HDF5's dynamic plugin loading for the whole process.
std::unique_lock<std::recursive_mutex> hdf5_lock();

// The innermost messages of the current HDF5 error stack (e.g. "unable to open file: file signature
// not found"), then clears the stack. Empty when the stack is empty.
std::string hdf5_error_text();

// An owning hid_t with the matching close function.
class H5Id {
public:
    using Closer = herr_t (*)(hid_t);
    H5Id() = default;
    H5Id(hid_t id, Closer closer) : m_id(id), m_closer(closer) {}
    ~H5Id() { reset(); }
    H5Id(H5Id&& o) noexcept : m_id(std::exchange(o.m_id, H5I_INVALID_HID)), m_closer(o.m_closer) {}
    H5Id& operator=(H5Id&& o) noexcept
    {
        if (this != &o) {
            reset();
            m_id = std::exchange(o.m_id, H5I_INVALID_HID);
            m_closer = o.m_closer;
        }
        return *this;
    }
    H5Id(const H5Id&) = delete;
    H5Id& operator=(const H5Id&) = delete;

    hid_t get() const { return m_id; }
    bool valid() const { return m_id >= 0; }
    explicit operator bool() const { return valid(); }
    // Gives up ownership (the caller closes the id).
    hid_t release() { return std::exchange(m_id, H5I_INVALID_HID); }
    void reset()
    {
        if (m_id >= 0 && m_closer)
            m_closer(m_id);
        m_id = H5I_INVALID_HID;
    }

private:
    hid_t m_id = H5I_INVALID_HID;
    Closer m_closer = nullptr;
};

// A file-access property list with file locking off: reading must work on cluster file systems
// (NFS, Lustre) where HDF5's locks fail, and we never write a file another process reads.
H5Id make_fapl();

}  // namespace attnscope::io::detail
