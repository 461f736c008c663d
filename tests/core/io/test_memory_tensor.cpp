// In-memory tensors (io/memory_tensor.h): a strided buffer lent under a name reads like a file through
// open_tensor_file and load_selected, only on the thread that lent it, and only while the scope lasts.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "io/memory_tensor.h"
#include "io/selection.h"
#include "util/error.h"

namespace {

using namespace attnscope;

// A [2, 3, 4] tensor with value 100 h + 10 n + d, stored as float32 in the order [d, n, h] (so that the
// logical C-order strides are not the buffer's): element (h, n, d) sits at d * 6 + n * 2 + h.
struct Transposed {
    std::vector<float> data = std::vector<float>(24);
    Transposed()
    {
        for (int h = 0; h < 2; ++h)
            for (int n = 0; n < 3; ++n)
                for (int d = 0; d < 4; ++d)
                    data[static_cast<std::size_t>(d * 6 + n * 2 + h)] = static_cast<float>(100 * h + 10 * n + d);
    }
    io::ArrayView view() const
    {
        io::ArrayView v;
        v.data = reinterpret_cast<const std::byte*>(data.data());
        v.dtype = io::DType::f32;
        v.shape = {2, 3, 4};
        v.strides = {4, 8, 24};
        return v;
    }
};

TEST(MemoryTensor, StridedBufferReadsLikeAFile)
{
    const Transposed t;
    const io::MemoryTensorScope scope("<q: test>", t.view());
    const auto file = io::open_tensor_file("<q: test>");
    ASSERT_EQ(file->format(), "memory");
    ASSERT_EQ(file->tensors().size(), 1u);
    EXPECT_EQ(file->tensors()[0].shape, (std::vector<std::int64_t>{2, 3, 4}));
    io::AxisSelection sel;
    sel.at['h'] = 1;
    sel.prefix_tokens = 1;
    const io::SelectedMatrix m = io::load_selected(*file, "", sel, "--q <q: test>");
    ASSERT_EQ(m.values.rows(), 2);
    ASSERT_EQ(m.values.cols(), 4);
    for (int n = 0; n < 2; ++n)
        for (int d = 0; d < 4; ++d)
            EXPECT_EQ(m.values(n, d), 100 + 10 * (n + 1) + d);
    // A box read across every axis, in row-major order of the box.
    const std::array<std::int64_t, 3> start{0, 1, 2}, count{2, 2, 2};
    const std::vector<double> box = file->read_box(file->tensors()[0], start, count);
    const std::vector<double> expected{12, 13, 22, 23, 112, 113, 122, 123};
    EXPECT_EQ(box, expected);
}

TEST(MemoryTensor, NonFiniteValuesAreReportedLikeAFiles)
{
    std::vector<double> data(12, 1.0);
    data[7] = std::nan("");   // token 1, feature 3 of a [3, 4] C-order array
    io::ArrayView v;
    v.data = reinterpret_cast<const std::byte*>(data.data());
    v.dtype = io::DType::f64;
    v.shape = {3, 4};
    v.strides = {32, 8};
    const io::MemoryTensorScope scope("<q: nan>", v);
    const auto file = io::open_tensor_file("<q: nan>");
    try {
        io::load_selected(*file, "", {}, "--q <q: nan>");
        FAIL() << "a NaN was read";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--q <q: nan>: non-finite value nan at token 1, feature 3"), std::string::npos)
            << e.what();
    }
}

TEST(MemoryTensor, LentOnlyToItsThreadAndScope)
{
    const Transposed t;
    {
        const io::MemoryTensorScope scope("<k: test>", t.view());
        EXPECT_THROW(io::MemoryTensorScope("<k: test>", t.view()), std::invalid_argument);
        bool seen_elsewhere = true;
        std::thread([&] { seen_elsewhere = io::open_memory_tensor("<k: test>") != nullptr; }).join();
        EXPECT_FALSE(seen_elsewhere);
        // Another thread may lend its own buffer under the same name at the same time.
        std::thread([&] {
            const io::MemoryTensorScope own("<k: test>", t.view());
            EXPECT_NE(io::open_memory_tensor("<k: test>"), nullptr);
        }).join();
        EXPECT_NE(io::open_memory_tensor("<k: test>"), nullptr);
    }
    EXPECT_EQ(io::open_memory_tensor("<k: test>"), nullptr);
    EXPECT_THROW(io::open_tensor_file("<k: test>"), InputError);   // then it is a (missing) file name again
}

}  // namespace
