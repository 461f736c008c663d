#include "io/hdf5_util.h"

#include <vector>

namespace attnscope::io::detail {

std::unique_lock<std::recursive_mutex> hdf5_lock()
{
    static std::recursive_mutex mutex;
    std::unique_lock lock(mutex);
    // A file names its filters by number, and HDF5 would search HDF5_PLUGIN_PATH (or its default folder) for a
    // shared library providing an unknown one and load it: code chosen by the file's author and the environment.
    // Plugins are never loaded (docs/security.md "Data files"); the built-in filters (gzip, shuffle, ...) remain.
    static std::once_flag plugins_off;
    std::call_once(plugins_off, [] { H5PLset_loading_state(0); });
    // Per thread in thread-safe builds, global otherwise: set it every time, it is cheap.
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return lock;
}

std::string hdf5_error_text()
{
    std::vector<std::string> messages;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_DOWNWARD,
        [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
            auto* out = static_cast<std::vector<std::string>*>(data);
            if (e && e->desc && *e->desc)
                out->emplace_back(e->desc);
            return 0;
        },
        &messages);
    H5Eclear2(H5E_DEFAULT);
    if (messages.empty())
        return {};
    // Downward: from the API call to where the failure was detected. The first says what failed,
    // the last says why.
    if (messages.size() == 1 || messages.front() == messages.back())
        return messages.front();
    return messages.front() + ": " + messages.back();
}

H5Id make_fapl()
{
    H5Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#if H5_VERSION_GE(1, 10, 7)
    if (fapl)
        H5Pset_file_locking(fapl.get(), false, true);
#endif
    return fapl;
}

}  // namespace attnscope::io::detail
