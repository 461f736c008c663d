// HDF5 (.h5/.hdf5): every numeric dataset at any group depth, with its attributes. Reading a box is
// one hyperslab read into native double (HDF5 converts float16, integers and the byte order).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include <sys/stat.h>

#include <fmt/format.h>

#include "io/detail.h"
#include "io/hdf5_attributes.h"
#include "io/hdf5_util.h"
#include "util/error.h"
#include "util/json_text.h"

namespace attnscope::io::detail {

namespace {

// More mappings than this in one virtual dataset are refused: each is checked against its source.
constexpr std::size_t kMaxVirtualMappings = 4096;

#if H5_VERSION_GE(1, 12, 0)
herr_t collect_datasets(hid_t, const char* name, const H5O_info2_t* info, void* data)
#else
herr_t collect_datasets(hid_t, const char* name, const H5O_info_t* info, void* data)
#endif
{
    if (info && info->type == H5O_TYPE_DATASET)
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
    return 0;
}

// Links whose target lies in another file (external links, user-defined link classes): listed as skipped,
// never followed. H5Lvisit walks groups reached by hard links only, as H5Ovisit does.
herr_t collect_foreign_links(hid_t group, const char* name, const H5L_info_t* info, void* data)
{
    if (!info || info->type == H5L_TYPE_HARD || info->type == H5L_TYPE_SOFT)
        return 0;
    std::string target;
    if (info->type == H5L_TYPE_EXTERNAL && info->u.val_size > 0 && info->u.val_size < (1u << 16)) {
        std::vector<char> buf(info->u.val_size);
        const char* file = nullptr;
        const char* object = nullptr;
        unsigned flags = 0;
        if (H5Lget_val(group, name, buf.data(), buf.size(), H5P_DEFAULT) >= 0 &&
            H5Lunpack_elink_val(buf.data(), buf.size(), &flags, &file, &object) >= 0 && file && object)
            target = fmt::format(" to {}:{}", display_path(file), display_path(object));
    }
    auto* out = static_cast<std::vector<SkippedObject>*>(data);
    // fmt rather than "literal" + std::string: g++ 12 at -O3 reports a false -Wrestrict on the latter.
    const char* kind = info->type == H5L_TYPE_EXTERNAL ? "an external link" : "a user-defined link";
    out->push_back({fmt::format("/{}", display_path(name)),
                    fmt::format("{}{} (an object of another file); links to other files are never followed: refused", kind, target)});
    return 0;
}

// A string property read with HDF5's two-call convention (size first), at most 64 KiB.
template <class Get>
std::optional<std::string> string_property(Get&& get)
{
    const ssize_t n = get(nullptr, 0);
    if (n < 0 || n > (1 << 16))
        return std::nullopt;
    std::string out(static_cast<std::size_t>(n) + 1, '\0');
    if (get(out.data(), out.size()) < 0)
        return std::nullopt;
    out.resize(static_cast<std::size_t>(n));
    return out;
}

// True when `path` (canonical) lies strictly inside `folder` (canonical).
bool inside_folder(const std::filesystem::path& path, const std::filesystem::path& folder)
{
    const auto rel = path.lexically_relative(folder);
    return !rel.empty() && rel != "." && *rel.begin() != "..";
}

// A virtual dataset's mapped region: the bounding box (first and last index per axis) of its selection.
using Box = std::pair<std::vector<hsize_t>, std::vector<hsize_t>>;

// True when no two boxes overlap: with as many points mapped as the shape holds, every element is then
// mapped exactly once.
bool disjoint(const std::vector<Box>& boxes)
{
    auto overlap = [](const Box& a, const Box& b) {
        for (std::size_t k = 0; k < a.first.size(); ++k)
            if (a.second[k] < b.first[k] || b.second[k] < a.first[k])
                return false;
        return true;
    };
    for (std::size_t a = 0; a < boxes.size(); ++a)
        for (std::size_t b = a + 1; b < boxes.size(); ++b)
            if (overlap(boxes[a], boxes[b]))
                return false;
    return true;
}

// The checks on each mapping of a virtual dataset of rank `rank` in `file`, whose canonical folder is
// `folder`. Each returns why the mapping is refused, or an empty string.
struct VirtualSources {
    hid_t file;
    std::filesystem::path folder;
    int rank;

    // Mapping i of `dcpl`: its source, then its virtual side, whose box is added to `boxes` and whose
    // points to `mapped`.
    std::string mapping_refusal(hid_t dcpl, std::size_t i, std::vector<Box>& boxes, hsize_t& mapped) const
    {
        const auto name = string_property([&](char* b, std::size_t n) { return H5Pget_virtual_filename(dcpl, i, b, n); });
        const auto dset = string_property([&](char* b, std::size_t n) { return H5Pget_virtual_dsetname(dcpl, i, b, n); });
        H5Id vsel(H5Pget_virtual_vspace(dcpl, i), H5Sclose);
        H5Id ssel(H5Pget_virtual_srcspace(dcpl, i), H5Sclose);
        if (!name || !dset || !vsel || !ssel) {
            H5Eclear2(H5E_DEFAULT);
            return fmt::format("a virtual dataset whose mapping {} cannot be read; refused", i);
        }
        const std::string source = fmt::format("{}:{}", display_path(*name), display_path(*dset));
        if (name->find('%') != std::string::npos || dset->find('%') != std::string::npos)
            return "a virtual dataset with a printf-style source (" + source + "); refused";
        H5Id other;
        hssize_t src_points = 0;
        if (std::string why = source_file_refusal(*name, source, other); !why.empty())
            return why;
        if (std::string why = source_dataset_refusal(other ? other.get() : file, *dset, ssel.get(), source, src_points);
            !why.empty())
            return why;
        // The virtual side: its bounding box, for the coverage check.
        const hssize_t points = H5Sget_select_npoints(vsel.get());
        if (points < 0 || points != src_points || H5Sget_simple_extent_ndims(vsel.get()) != rank) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset with an inconsistent mapping (" + source + "); refused";
        }
        if (points == 0)
            return {};
        Box box{std::vector<hsize_t>(static_cast<std::size_t>(rank)), std::vector<hsize_t>(static_cast<std::size_t>(rank))};
        if (H5Sget_select_bounds(vsel.get(), box.first.data(), box.second.data()) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset whose mapping cannot be read (" + source + "); refused";
        }
        mapped += static_cast<hsize_t>(points);
        boxes.push_back(std::move(box));
        return {};
    }

    // The source file: "." is this file (`other` stays empty); anything else must resolve inside this file's
    // folder, be a regular file and open as HDF5 (into `other`).
    std::string source_file_refusal(const std::string& name, const std::string& source, H5Id& other) const
    {
        namespace fs = std::filesystem;
        if (name == ".")
            return {};
        std::error_code ec;
        const fs::path named = fs::path(name).is_absolute() ? fs::path(name) : folder / name;
        const fs::path real = fs::canonical(named, ec);
        if (ec)
            return "a virtual dataset whose source file is missing (" + source + "); refused";
        if (!inside_folder(real, folder))
            return "a virtual dataset whose source file lies outside the file's folder (" + source + "); refused";
        try {
            if (!fs::is_regular_file(real, ec))
                throw InputError(real.string());
            FileHandle probe(real.string());   // still a regular file once open, not a FIFO or device
        } catch (const InputError&) {
            return "a virtual dataset whose source is not a regular file (" + source + "); refused";
        }
        const H5Id fapl = make_fapl();
        other = H5Id(H5Fopen(real.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
        if (!other) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset whose source file is not readable HDF5 (" + source + "); refused";
        }
        return {};
    }

    // The source dataset: plain storage (not virtual, not external) and large enough for its selection
    // `ssel`, whose number of points goes to `src_points`.
    static std::string source_dataset_refusal(hid_t src_file, const std::string& dset, hid_t ssel,
                                              const std::string& source, hssize_t& src_points)
    {
        H5Id src(H5Dopen2(src_file, dset.c_str(), H5P_DEFAULT), H5Dclose);
        H5Id src_dcpl(src ? H5Dget_create_plist(src.get()) : H5I_INVALID_HID, H5Pclose);
        H5Id src_space(src ? H5Dget_space(src.get()) : H5I_INVALID_HID, H5Sclose);
        if (!src || !src_dcpl || !src_space) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset whose source dataset is missing (" + source + "); refused";
        }
        if (H5Pget_layout(src_dcpl.get()) == H5D_VIRTUAL || H5Pget_external_count(src_dcpl.get()) != 0)
            return "a virtual dataset whose source is itself virtual or external (" + source + "); refused";
        const int src_rank = H5Sget_simple_extent_ndims(src_space.get());
        const hssize_t src_total = H5Sget_simple_extent_npoints(src_space.get());
        if (src_rank < 0 || src_rank > 32 || src_total < 0) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset whose source's shape cannot be read (" + source + "); refused";
        }
        // A whole-source mapping (H5S_SEL_ALL) is stored without the source's extent: it maps every element
        // the source has. A selection must lie within the source's extent.
        src_points = src_total;
        if (H5Sget_select_type(ssel) == H5S_SEL_ALL)
            return {};
        if (src_rank != H5Sget_simple_extent_ndims(ssel))
            return "a virtual dataset whose source has another rank than its mapping (" + source + "); refused";
        std::vector<hsize_t> dims(static_cast<std::size_t>(src_rank)), lo(dims.size()), hi(dims.size());
        H5Sget_simple_extent_dims(src_space.get(), dims.data(), nullptr);
        src_points = H5Sget_select_npoints(ssel);
        if (src_points > 0 && H5Sget_select_bounds(ssel, lo.data(), hi.data()) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset whose source selection cannot be read (" + source + "); refused";
        }
        for (std::size_t a = 0; src_points > 0 && a < dims.size(); ++a)
            if (hi[a] >= dims[a])
                return "a virtual dataset that maps more of its source than the source holds (" + source +
                       "); refused";
        return {};
    }
};

class Hdf5File final : public TensorFile {
public:
    explicit Hdf5File(const std::string& path) : TensorFile(path)
    {
        std::byte first[8] = {};
        std::size_t n_first = 0;
        struct stat probed {};
        {
            FileHandle probe(path);   // clear messages for empty / unreadable files; refuses FIFOs and devices
            if (probe.size() == 0)
                throw InputError(path + ": empty file (0 bytes), not an HDF5 file");
            n_first = static_cast<std::size_t>(std::min<std::uint64_t>(probe.size(), sizeof first));
            probe.read_exact(0, n_first, first);
            ::fstat(probe.fd(), &probed);
        }
        auto lock = hdf5_lock();
        const H5Id fapl = make_fapl();
        m_file = H5Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
        if (!m_file) {
            std::string why = hdf5_error_text();
            const std::string looks = sniff_format(std::span(first, n_first));
            if (!looks.empty() && looks.find("HDF5") == std::string::npos)
                why += "; it looks like " + looks;
            throw InputError(fmt::format("{}: not a readable HDF5 file ({})", path, why));
        }
        // HDF5 opened the path again: it must still be the regular file probed above, not one swapped in since.
        void* handle = nullptr;
        struct stat opened {};
        if (H5Fget_vfd_handle(m_file.get(), fapl.get(), &handle) >= 0 && handle &&
            (::fstat(*static_cast<int*>(handle), &opened) != 0 || !S_ISREG(opened.st_mode) ||
             opened.st_dev != probed.st_dev || opened.st_ino != probed.st_ino)) {
            m_file.reset();
            throw InputError(path + ": the file changed while it was being opened; refused");
        }
        H5Eclear2(H5E_DEFAULT);
        try {
            list();
        } catch (...) {
            m_file.reset();
            H5Eclear2(H5E_DEFAULT);
            throw;
        }
    }

    ~Hdf5File() override
    {
        auto lock = hdf5_lock();
        m_file.reset();
    }

    std::string_view format() const override { return "hdf5"; }

    std::vector<double> read_box(const TensorInfo& tensor, std::span<const std::int64_t> start,
                                 std::span<const std::int64_t> count) const override
    {
        const std::size_t i = tensor_index(*this, tensor);
        const TensorInfo& t = m_tensors[i];
        const std::uint64_t elements = check_box(m_path, t, start, count);
        const std::string w = where(m_path, t.name);
        std::vector<double> out(static_cast<std::size_t>(elements));
        if (elements == 0)
            return out;

        auto lock = hdf5_lock();
        auto fail = [&](std::string_view what) -> InputError {
            const std::string why = hdf5_error_text();
            return InputError(fmt::format("{}: {}{}", w, what, why.empty() ? std::string() : " (" + why + ")"));
        };
        H5Id ds(H5Dopen2(m_file.get(), t.name.c_str(), H5P_DEFAULT), H5Dclose);
        if (!ds)
            throw fail("cannot open dataset");
        check_filters(ds.get(), w);
        H5Id file_type(H5Dget_type(ds.get()), H5Tclose);
        H5Id file_space(H5Dget_space(ds.get()), H5Sclose);
        if (!file_type || !file_space)
            throw fail("cannot read the dataset's type or shape");
        const std::size_t rank = t.shape.size();
        if (H5Sget_simple_extent_ndims(file_space.get()) != static_cast<int>(rank))
            throw InputError(w + ": the dataset changed shape since the file was opened");
        H5Id mem_space;
        if (rank == 0) {
            mem_space = H5Id(H5Screate(H5S_SCALAR), H5Sclose);
        } else {
            std::vector<hsize_t> hstart(start.begin(), start.end()), hcount(count.begin(), count.end());
            if (H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, hstart.data(), nullptr, hcount.data(), nullptr) < 0)
                throw fail("cannot select the box");
            mem_space = H5Id(H5Screate_simple(static_cast<int>(rank), hcount.data(), nullptr), H5Sclose);
        }
        if (!mem_space)
            throw fail("cannot create the memory space");

        if (!m_is_enum[i]) {
            if (H5Dread(ds.get(), H5T_NATIVE_DOUBLE, mem_space.get(), file_space.get(), H5P_DEFAULT, out.data()) < 0)
                throw fail("cannot read the data");
            return out;
        }
        // Enumerations (h5py's bool) do not convert to double: read them as themselves, then widen the base integer.
        H5Id mem_type(H5Tget_native_type(file_type.get(), H5T_DIR_ASCEND), H5Tclose);
        if (!mem_type)
            throw fail("cannot map the enumeration type");
        const std::size_t size = H5Tget_size(mem_type.get());
        if (size != dtype_size(t.dtype))
            throw InputError(w + ": unexpected enumeration size");
        std::vector<std::byte> raw(static_cast<std::size_t>(elements) * size);
        if (H5Dread(ds.get(), mem_type.get(), mem_space.get(), file_space.get(), H5P_DEFAULT, raw.data()) < 0)
            throw fail("cannot read the data");
        convert_elements(raw.data(), out.size(), t.dtype, false, out.data());
        return out;
    }

private:
    void list()
    {
        H5Id root(H5Oopen(m_file.get(), "/", H5P_DEFAULT), H5Oclose);
        if (!root)
            throw InputError(fmt::format("{}: cannot open the root group ({})", m_path, hdf5_error_text()));
        m_file_attributes = read_attributes(root.get());

        // H5Ovisit follows hard links only and visits every object once, so cycles cannot loop.
        std::vector<std::string> names;
#if H5_VERSION_GE(1, 12, 0)
        const herr_t rc = H5Ovisit3(root.get(), H5_INDEX_NAME, H5_ITER_INC, collect_datasets, &names, H5O_INFO_BASIC);
#else
        const herr_t rc = H5Ovisit2(root.get(), H5_INDEX_NAME, H5_ITER_INC, collect_datasets, &names, H5O_INFO_BASIC);
#endif
        if (rc < 0)
            throw InputError(fmt::format("{}: cannot walk the groups of the file ({})", m_path, hdf5_error_text()));
        H5Lvisit(root.get(), H5_INDEX_NAME, H5_ITER_INC, collect_foreign_links, &m_skipped);
        H5Eclear2(H5E_DEFAULT);

        for (const auto& rel : names) {
            const std::string name = "/" + rel;
            H5Id ds(H5Dopen2(m_file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
            if (!ds) {
                m_skipped.push_back({name, "cannot be opened (" + hdf5_error_text() + ")"});
                continue;
            }
            if (std::string refused = storage_refusal(ds.get()); !refused.empty()) {
                m_skipped.push_back({name, std::move(refused)});
                continue;
            }
            H5Id type(H5Dget_type(ds.get()), H5Tclose);
            H5Id space(H5Dget_space(ds.get()), H5Sclose);
            if (!type || !space) {
                m_skipped.push_back({name, "its type or shape cannot be read (" + hdf5_error_text() + ")"});
                continue;
            }
            const Classified c = classify(type.get());
            if (!c.dtype) {
                m_skipped.push_back({name, c.reason});
                continue;
            }
            const H5S_class_t sclass = H5Sget_simple_extent_type(space.get());
            if (sclass == H5S_NULL) {
                m_skipped.push_back({name, "the dataset is empty (null dataspace)"});
                continue;
            }
            const int rank = H5Sget_simple_extent_ndims(space.get());
            if (rank < 0 || rank > 32) {
                m_skipped.push_back({name, "its shape cannot be read"});
                continue;
            }
            std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
            H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
            TensorInfo t;
            t.name = name;
            bool too_big = false;
            for (const hsize_t d : dims) {
                too_big = too_big || d > static_cast<hsize_t>(INT64_MAX);
                t.shape.push_back(static_cast<std::int64_t>(d));
            }
            if (too_big) {
                m_skipped.push_back({name, "a dimension exceeds 2^63"});
                continue;
            }
            t.dtype = *c.dtype;
            t.attributes = read_attributes(ds.get());
            m_tensors.push_back(std::move(t));
            m_is_enum.push_back(c.is_enum);
        }
        H5Eclear2(H5E_DEFAULT);
    }

    // Why the dataset's bytes may not be read, or "" when they lie in this file (docs/security.md "Data
    // files"): external raw storage names any file on the machine (a FIFO blocks forever, /etc/passwd
    // leaks into the output), and a virtual dataset reads other datasets, possibly of other files.
    std::string storage_refusal(hid_t ds) const
    {
        H5Id dcpl(H5Dget_create_plist(ds), H5Pclose);
        if (!dcpl)
            return "its storage properties cannot be read (" + hdf5_error_text() + "); refused";
        const int external = H5Pget_external_count(dcpl.get());
        if (external != 0) {
            char first[512] = {};
            off_t offset = 0;
            hsize_t size = 0;
            if (external > 0)
                H5Pget_external(dcpl.get(), 0, sizeof first, first, &offset, &size);
            H5Eclear2(H5E_DEFAULT);
            return fmt::format("a dataset that stores its data in external file(s) outside this file ({}{}); refused",
                               first[0] ? display_path(first) : std::string("unnamed"),
                               external > 1 ? fmt::format(" and {} more", external - 1) : std::string());
        }
        const H5D_layout_t layout = H5Pget_layout(dcpl.get());
        if (layout == H5D_VIRTUAL)
            return virtual_refusal(ds, dcpl.get());
        if (layout < 0) {
            H5Eclear2(H5E_DEFAULT);
            return "its storage layout cannot be read; refused";
        }
        return {};
    }

    // A virtual dataset is read only on request (--allow-virtual) and when every mapping reads a plain
    // dataset that lies in a regular file inside this file's folder and holds what is mapped, and the
    // mappings cover the whole dataset (an element no mapping covers would read as the fill value).
    std::string virtual_refusal(hid_t ds, hid_t dcpl) const
    {
        namespace fs = std::filesystem;
        if (!allow_virtual_datasets())
            return "a virtual dataset (its data is read from other datasets, possibly of other files); "
                   "refused unless --allow-virtual is given";
        if (const char* prefix = std::getenv("HDF5_VDS_PREFIX"); prefix && *prefix)
            return "a virtual dataset and HDF5_VDS_PREFIX is set (it changes where HDF5 looks for the "
                   "source files); refused";
        std::size_t count = 0;
        if (H5Pget_virtual_count(dcpl, &count) < 0 || count == 0) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset without mappings; refused";
        }
        if (count > kMaxVirtualMappings)
            return fmt::format("a virtual dataset of {} mappings (at most {} are read); refused", count,
                               kMaxVirtualMappings);
        H5Id space(H5Dget_space(ds), H5Sclose);
        const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
        const hssize_t total = space ? H5Sget_simple_extent_npoints(space.get()) : -1;
        if (rank < 1 || rank > 32 || total < 0) {
            H5Eclear2(H5E_DEFAULT);
            return "a virtual dataset whose shape cannot be read; refused";
        }
        std::error_code ec;
        const fs::path folder = fs::canonical(fs::absolute(fs::path(m_path)).parent_path(), ec);
        if (ec)
            return "a virtual dataset, and the file's folder cannot be resolved; refused";

        const VirtualSources sources{m_file.get(), folder, rank};
        std::vector<Box> boxes;
        hsize_t mapped = 0;
        for (std::size_t i = 0; i < count; ++i)
            if (std::string why = sources.mapping_refusal(dcpl, i, boxes, mapped); !why.empty())
                return why;
        if (!disjoint(boxes) || mapped != static_cast<hsize_t>(total))
            return fmt::format("a virtual dataset whose mappings do not cover each of its {} elements exactly "
                               "once (the rest would read as the fill value); refused",
                               total);
        return {};
    }

    // A dataset compressed with a filter this HDF5 cannot decode (lzf, blosc, ... never loaded as plugins)
    // gets a message saying so instead of a generic read error.
    static void check_filters(hid_t ds, const std::string& w)
    {
        H5Id dcpl(H5Dget_create_plist(ds), H5Pclose);
        if (!dcpl)
            return;
        const int n = H5Pget_nfilters(dcpl.get());
        for (int k = 0; k < n; ++k) {
            unsigned flags = 0, config = 0;
            std::size_t nelmts = 0;
            char name[256] = {};
            const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(k), &flags, &nelmts, nullptr,
                                                   sizeof name, name, &config);
            if (id < 0)
                continue;
            if (H5Zfilter_avail(id) <= 0) {
                H5Eclear2(H5E_DEFAULT);
                throw InputError(fmt::format("{}: compressed with HDF5 filter '{}' (id {}), which this HDF5 library "
                                             "does not provide (filter plugins are never loaded); rewrite the dataset "
                                             "with gzip (h5py compression='gzip')",
                                             w, name[0] ? name : "unknown", static_cast<long>(id)));
            }
        }
    }

    H5Id m_file;
    std::vector<bool> m_is_enum;   // parallel to m_tensors
};

}  // namespace

std::unique_ptr<TensorFile> open_hdf5(const std::string& path) { return std::make_unique<Hdf5File>(path); }

}  // namespace attnscope::io::detail
