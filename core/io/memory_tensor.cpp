#include "io/memory_tensor.h"

#include <stdexcept>

#include "io/detail.h"

namespace attnscope::io {

namespace {

class MemoryTensorFile final : public TensorFile {
public:
    MemoryTensorFile(const std::string& name, const ArrayView& view) : TensorFile(name), m_view(view)
    {
        TensorInfo info;
        info.shape = view.shape;
        info.dtype = view.dtype;
        m_tensors.push_back(std::move(info));
        m_file_attributes = view.attributes;
    }

    std::string_view format() const override { return "memory"; }
    std::string attributes_file() const override { return m_view.origin; }

    // Walks the box in row-major order; each run along the last axis is converted in one call when its
    // elements are adjacent (the common C-contiguous case), element by element otherwise.
    std::vector<double> read_box(const TensorInfo& t, std::span<const std::int64_t> start,
                                 std::span<const std::int64_t> count) const override
    {
        const std::uint64_t elements = detail::check_box(m_path, t, start, count);
        std::vector<double> out(static_cast<std::size_t>(elements));
        if (elements == 0)
            return out;
        const std::size_t rank = count.size();
        const std::int64_t item = static_cast<std::int64_t>(dtype_size(m_view.dtype));
        if (rank == 0) {
            detail::convert_elements(m_view.data, 1, m_view.dtype, false, out.data());
            return out;
        }
        const std::int64_t run = count[rank - 1], step = m_view.strides[rank - 1];
        std::vector<std::int64_t> index(start.begin(), start.end());
        double* dst = out.data();
        for (std::uint64_t done = 0; done < elements; done += static_cast<std::uint64_t>(run)) {
            std::int64_t offset = 0;
            for (std::size_t a = 0; a < rank; ++a)
                offset += index[a] * m_view.strides[a];
            const std::byte* src = m_view.data + offset;
            if (step == item)
                detail::convert_elements(src, static_cast<std::size_t>(run), m_view.dtype, false, dst);
            else
                for (std::int64_t j = 0; j < run; ++j)
                    detail::convert_elements(src + j * step, 1, m_view.dtype, false, dst + j);
            dst += run;
            for (std::size_t a = rank - 1; a-- > 0;) {   // the next run: odometer over the leading axes
                if (++index[a] < start[a] + count[a])
                    break;
                index[a] = start[a];
            }
        }
        return out;
    }

private:
    ArrayView m_view;
};

}  // namespace

std::unique_ptr<TensorFile> open_memory_tensor(const std::string& name, const ArrayView& view)
{
    if (view.shape.size() != view.strides.size())
        throw std::invalid_argument(name + ": " + std::to_string(view.shape.size()) + " axes but " +
                                    std::to_string(view.strides.size()) + " strides");
    return std::make_unique<MemoryTensorFile>(name, view);
}

}  // namespace attnscope::io
