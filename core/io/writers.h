#pragma once
// Writers for the files AttnScope produces: .npy (float64, C order) and HDF5 datasets with attributes.
// They write exactly the path given (creating or truncating it); callers give them the temporary file of
// an OutputFile (util/output.h) so that a failing run leaves nothing behind and a special file is never
// replaced.
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

namespace attnscope::io {

// Writes a float64 C-order .npy (format 1.0) holding `matrix` (rows x cols). Throws InputError on I/O failure.
void write_npy(const std::string& path, const Eigen::Ref<const Eigen::MatrixXd>& matrix);

struct DatasetOut {
    std::string name;                      // absolute path, e.g. "/q" or "/layers/0/q" (groups are created)
    std::vector<std::int64_t> shape;       // row-major
    std::vector<double> data;              // row-major, product(shape) values
    bool as_float32 = false;               // store as float32 (activations) instead of float64
    bool compress = false;                 // chunked + shuffle + gzip
    nlohmann::json attributes = nlohmann::json::object();   // numbers, strings, arrays of numbers
};

// Creates (truncates) an HDF5 file with the given datasets and root attributes. Throws InputError on failure.
void write_hdf5(const std::string& path, const std::vector<DatasetOut>& datasets,
                const nlohmann::json& root_attributes = nlohmann::json::object());

}  // namespace attnscope::io
