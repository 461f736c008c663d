#pragma once
// HDF5 attributes and element types (internal to core/io, used by the reader): the numeric type a stored
// type reads as, and every attribute of an object as JSON for `info` and the file defaults.
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "io/detail.h"
#include "io/hdf5_util.h"

namespace attnscope::io::detail {

struct Classified {
    std::optional<DType> dtype;
    bool is_enum = false;
    std::string reason;   // when !dtype
};

// The numeric type `type` reads as, or why it cannot be read as a number.
Classified classify(hid_t type);

// Every attribute of `object` that has a type we show, by name (values capped; others skipped).
nlohmann::json read_attributes(hid_t object);

}  // namespace attnscope::io::detail
