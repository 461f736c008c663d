// .npz: a zip archive of .npy members (numpy.savez stores them, numpy.savez_compressed deflates them).
// Opening reads only each member's .npy header; read_box() streams the member once, keeping only the
// bytes inside the box, and reads it to the end so that libzip verifies the CRC.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include <unistd.h>
#include <zip.h>

#include <fmt/format.h>

#include "io/detail.h"
#include "util/error.h"

namespace attnscope::io::detail {

namespace {

std::string zip_code_text(int code)
{
    zip_error_t e;
    zip_error_init_with_code(&e, code);
    std::string text = zip_error_strerror(&e);
    zip_error_fini(&e);
    return text;
}

struct ZipFileCloser {
    void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using ZipFilePtr = std::unique_ptr<zip_file_t, ZipFileCloser>;

// A forward-only view of one member's uncompressed bytes.
class ZipStream final : public ByteSource {
public:
    ZipStream(zip_file_t* file, std::string where) : m_file(file), m_where(std::move(where)) {}

    void read(std::uint64_t offset, std::size_t n, std::byte* dst) override
    {
        if (offset < m_pos)
            throw std::logic_error("ZipStream: backwards read");
        skip(offset - m_pos);
        read_exact(n, dst);
    }

    // Reads up to n bytes; fewer only at the end of the member.
    std::size_t read_some(std::size_t n, std::byte* dst)
    {
        std::size_t done = 0;
        while (done < n) {
            const zip_int64_t got = zip_fread(m_file, dst + done, n - done);
            if (got < 0)
                throw InputError(fmt::format("{}: corrupt archive member ({})", m_where, zip_file_strerror(m_file)));
            if (got == 0)
                break;
            done += static_cast<std::size_t>(got);
        }
        m_pos += done;
        return done;
    }

    void read_exact(std::size_t n, std::byte* dst)
    {
        const std::uint64_t at = m_pos;
        if (read_some(n, dst) != n)
            throw InputError(fmt::format("{}: archive member ends early (at byte {}, needed {})", m_where, m_pos, at + n));
    }

    void skip(std::uint64_t n)
    {
        std::byte scratch[65536];
        while (n > 0) {
            const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(n, sizeof scratch));
            read_exact(want, scratch);
            n -= want;
        }
    }

    // Reads to the end of the member (libzip checks the CRC there); returns the total size seen.
    std::uint64_t drain()
    {
        std::byte scratch[65536];
        while (read_some(sizeof scratch, scratch) == sizeof scratch) {
        }
        return m_pos;
    }

    std::uint64_t position() const { return m_pos; }

private:
    zip_file_t* m_file;
    std::string m_where;
    std::uint64_t m_pos = 0;
};

struct Member {
    zip_uint64_t index = 0;
    std::string member_name;   // as stored, e.g. "q.npy"
    std::uint64_t size = 0;    // declared uncompressed size
    StoredArray array;         // data_offset relative to the member's first byte
};

class NpzFile final : public TensorFile {
public:
    explicit NpzFile(const std::string& path) : TensorFile(path)
    {
        int code = 0;
        {
            FileHandle probe(path);   // distinguishes empty / unreadable files before libzip sees them
            if (probe.size() == 0)
                throw InputError(path + ": empty file (0 bytes), not a .npz archive");
            // libzip reads the descriptor probed as a regular file, never the path again (which could have
            // become a FIFO since). zip_fdopen owns the duplicate from here, also when it fails.
            const int fd = ::dup(probe.fd());
            if (fd < 0)
                throw InputError(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
            m_zip = zip_fdopen(fd, ZIP_CHECKCONS, &code);
            if (!m_zip)
                ::close(fd);
        }
        if (!m_zip)
            throw InputError(fmt::format("{}: not a valid .npz (zip) archive: {}", path, zip_code_text(code)));
        try {
            list_members();
        } catch (...) {
            zip_discard(m_zip);
            m_zip = nullptr;
            throw;
        }
    }

    ~NpzFile() override
    {
        if (m_zip)
            zip_discard(m_zip);
    }

    std::string_view format() const override { return "npz"; }

    std::vector<double> read_box(const TensorInfo& tensor, std::span<const std::int64_t> start,
                                 std::span<const std::int64_t> count) const override
    {
        const std::size_t i = tensor_index(*this, tensor);
        const TensorInfo& t = m_tensors[i];
        const Member& m = m_members[i];
        const std::uint64_t elements = check_box(m_path, t, start, count);
        const std::string w = where(m_path, m.member_name);

        std::lock_guard lock(m_mutex);   // a zip_t is not thread-safe
        ZipFilePtr file(zip_fopen_index(m_zip, m.index, 0));
        if (!file)
            throw InputError(fmt::format("{}: cannot open archive member ({})", w, zip_strerror(m_zip)));
        ZipStream stream(file.get(), w);
        std::vector<double> out = gather_box(stream, m.array, start, count, elements);
        const std::uint64_t total = stream.drain();
        if (total != m.size)
            throw InputError(fmt::format("{}: archive member holds {} bytes but declares {}", w, total, m.size));
        return out;
    }

private:
    void list_members()
    {
        const zip_int64_t n = zip_get_num_entries(m_zip, 0);
        if (n < 0)
            throw InputError(fmt::format("{}: cannot list the archive ({})", m_path, zip_strerror(m_zip)));
        for (zip_uint64_t i = 0; i < static_cast<zip_uint64_t>(n); ++i) {
            zip_stat_t st;
            zip_stat_init(&st);
            if (zip_stat_index(m_zip, i, 0, &st) != 0)
                throw InputError(fmt::format("{}: cannot read archive entry {} ({})", m_path, i, zip_strerror(m_zip)));
            if (!(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE))
                throw InputError(fmt::format("{}: archive entry {} lacks a name or size", m_path, i));
            std::string member = st.name;
            if (!member.empty() && member.back() == '/')
                continue;   // a folder entry
            std::string name = member;
            if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
                name.resize(name.size() - 4);
            const bool duplicate = std::any_of(m_tensors.begin(), m_tensors.end(), [&](const TensorInfo& t) { return t.name == name; });
            if (duplicate) {
                m_skipped.push_back({member, "a second archive member with the same name"});
                continue;
            }
            if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE) {
                m_skipped.push_back({name, "the archive member is encrypted"});
                continue;
            }
            Member m;
            m.index = i;
            m.member_name = member;
            m.size = st.size;
            if (!read_member_header(m)) {
                const bool pickle = name.size() >= 4 && name.compare(name.size() - 4, 4, ".pkl") == 0;
                m_skipped.push_back({name, pickle ? "a pickle (this looks like a PyTorch checkpoint renamed to .npz; "
                                                    "pickles are never loaded)"
                                                  : "the archive member is not a .npy array"});
                continue;
            }
            TensorInfo t;
            t.name = name;
            t.shape = m.array.shape;
            t.dtype = m.array.dtype;
            m_tensors.push_back(std::move(t));
            m_members.push_back(std::move(m));
        }
    }

    // Reads the member's .npy preamble and header (only the first bytes are decompressed) and checks
    // that the declared size matches the header. False when the member is not a .npy at all.
    bool read_member_header(Member& m)
    {
        const std::string w = where(m_path, m.member_name);
        ZipFilePtr file(zip_fopen_index(m_zip, m.index, 0));
        if (!file)
            throw InputError(fmt::format("{}: cannot open archive member ({})", w, zip_strerror(m_zip)));
        ZipStream stream(file.get(), w);
        std::byte first[12] = {};
        const std::size_t got = stream.read_some(sizeof first, first);
        const bool npy_magic = got >= 6 && std::memcmp(first, "\x93NUMPY", 6) == 0;
        const bool npy_name = m.member_name.size() > 4 && m.member_name.compare(m.member_name.size() - 4, 4, ".npy") == 0;
        if (!npy_magic && !npy_name)
            return false;   // some other file stored alongside the arrays
        if (!npy_magic && got == 0)
            throw InputError(w + ": the archive member is empty, not a .npy array");
        const NpyPreamble pre = parse_npy_preamble(std::span(first, got), m.size, w);
        std::string header(static_cast<std::size_t>(pre.header_len), '\0');
        if (got > pre.prefix_len) {   // version 1.0: two bytes of the header were read with the preamble
            const std::size_t extra = std::min(header.size(), got - static_cast<std::size_t>(pre.prefix_len));
            std::memcpy(header.data(), first + pre.prefix_len, extra);
            stream.read_exact(header.size() - extra, reinterpret_cast<std::byte*>(header.data()) + extra);
        } else {
            stream.read_exact(header.size(), reinterpret_cast<std::byte*>(header.data()));
        }
        m.array = parse_npy_header(header, w);
        m.array.data_offset = pre.prefix_len + pre.header_len;
        std::uint64_t elements = 0, bytes = 0, needed = 0;
        if (!checked_product(m.array.shape, elements) || !checked_mul(elements, dtype_size(m.array.dtype), bytes) ||
            !checked_add(bytes, m.array.data_offset, needed))
            throw InputError(fmt::format("{}: header claims shape {} of {}, which overflows 64-bit sizes", w,
                                         shape_text(m.array.shape), dtype_name(m.array.dtype)));
        if (needed != m.size)
            throw InputError(fmt::format("{}: {}: shape {} of {} needs {} of data, the member holds {}", w,
                                         needed > m.size ? "truncated" : "size mismatch", shape_text(m.array.shape),
                                         dtype_name(m.array.dtype), bytes_text(bytes),
                                         bytes_text(m.size - std::min(m.size, m.array.data_offset))));
        return true;
    }

    zip_t* m_zip = nullptr;
    std::vector<Member> m_members;   // parallel to m_tensors
    mutable std::mutex m_mutex;
};

}  // namespace

std::unique_ptr<TensorFile> open_npz(const std::string& path) { return std::make_unique<NpzFile>(path); }

}  // namespace attnscope::io::detail
