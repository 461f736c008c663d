// In-memory tensors (io/memory_tensor.h): a tensor reference holding a strided buffer (io::array_ref) reads like
// a file through open_tensor and load_selected, on any thread; its name is only a name (no registry: text naming
// it is a file name like any other).
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
    const auto file = io::open_tensor(io::array_ref("<q: test>", t.view()));
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
    const auto file = io::open_tensor(io::array_ref("<q: nan>", v));
    try {
        io::load_selected(*file, "", {}, "--q <q: nan>");
        FAIL() << "a NaN was read";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--q <q: nan>: non-finite value nan at token 1, feature 3"), std::string::npos)
            << e.what();
    }
}

TEST(MemoryTensor, TheReferenceHoldsTheArrayNotItsName)
{
    const Transposed t;
    const io::TensorRef ref = io::array_ref("<k: test>", t.view());
    EXPECT_EQ(ref.text, "<k: test>");
    // Read on another thread (a worker) through the reference it was given.
    bool read_elsewhere = false;
    std::thread([&] { read_elsewhere = io::open_tensor(ref)->tensors().size() == 1; }).join();
    EXPECT_TRUE(read_elsewhere);
    // The name as text is a (missing) file, never the array.
    EXPECT_THROW(io::open_tensor(io::parse_tensor_ref("<k: test>")), InputError);
    EXPECT_THROW(io::open_tensor_file("<k: test>"), InputError);
    // Shape and strides of different ranks are refused.
    io::ArrayView bad = t.view();
    bad.strides.pop_back();
    EXPECT_THROW(io::open_tensor(io::array_ref("<k: bad>", bad)), std::invalid_argument);
}

}  // namespace
