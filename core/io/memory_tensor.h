#pragma once
// Tensors that live in memory (a NumPy array handed over by the Python module, python/), read through the
// same TensorFile interface as a file: a tensor reference (io/selection.h TensorRef) may hold an ArrayView
// instead of naming a file, and open_tensor() on it gives a view of the buffer. So the selection (--layout,
// --at, prefix tokens, grouped-query pairing), the checks (finite values, sizes) and the messages are exactly
// those of a file; nothing is copied before the selected slice is widened. The owner of the buffer keeps it
// alive and unchanged while any reference to it is in use.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/tensor_file.h"

namespace attnscope::io {

// A strided, native-byte-order buffer: element (i0, i1, ...) is at data + sum(i_a * strides[a]) (bytes,
// may be negative), of type dtype.
struct ArrayView {
    const std::byte* data = nullptr;
    DType dtype = DType::f64;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;                       // in bytes, one per axis
    nlohmann::json attributes = nlohmann::json::object();    // the file-level attributes the tensor carries
    std::string origin;   // the file the tensor and its attributes were loaded from (absolute), or empty
};

// A TensorFile of one unnamed tensor (format "memory") viewing `view`, called `name` in messages. Throws
// std::invalid_argument when shape and strides disagree in rank.
std::unique_ptr<TensorFile> open_memory_tensor(const std::string& name, const ArrayView& view);

}  // namespace attnscope::io
