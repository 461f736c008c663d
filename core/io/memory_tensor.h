#pragma once
// Tensors that live in memory (a NumPy array handed over by the Python module, python/), read through the
// same TensorFile interface as a file: a caller lends a strided buffer under a name for the duration of a
// MemoryTensorScope, and every open_tensor_file() on that thread that names it gets a view of the buffer.
// So the selection (--layout, --at, prefix tokens, grouped-query pairing), the checks (finite values, sizes)
// and the messages are exactly those of a file; nothing is copied before the selected slice is widened.
//
// The registry is per thread: two threads may lend buffers under the same name at once, and a lent buffer
// is seen only by the thread that lent it (the analyses read their inputs on the thread that runs them).
// The lender keeps the buffer alive and unchanged until the scope ends.
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

// Lends `view` under `name` (a tensor reference with no NAME part) on this thread until destroyed. Throws
// std::invalid_argument when the name is already lent on this thread, or shape and strides disagree in rank.
class MemoryTensorScope {
public:
    MemoryTensorScope(std::string name, ArrayView view);
    ~MemoryTensorScope();
    MemoryTensorScope(const MemoryTensorScope&) = delete;
    MemoryTensorScope& operator=(const MemoryTensorScope&) = delete;

private:
    std::string m_name;
};

// The view lent under `path` on this thread, as a TensorFile of one unnamed tensor (format "memory"), or
// null when nothing is lent under that name. Called by open_tensor_file() before it looks at the disk.
std::unique_ptr<TensorFile> open_memory_tensor(const std::string& path);

}  // namespace attnscope::io
