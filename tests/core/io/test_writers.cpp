// write_npy / write_hdf5 read back by NumPy and h5py (check_written.py), and by our own readers.
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "io/tensor_file.h"
#include "io/writers.h"
#include "io_fixtures.h"
#include "support/test_support.h"
#include "util/error.h"
#include "util/fd_io.h"

namespace {

using namespace attnscope;
using namespace attnscope::test::io;

// The formulas check_written.py evaluates in the same operation order.
double matrix_value(long i, long j) { return ((i * 7 + j * 3) % 11 - 5.5) + i / 3.0 - j * 0.1; }
double flat_value(long k) { return (k % 13 - 6) * 0.37 + k / 7.0; }

Eigen::MatrixXd formula_matrix(long rows, long cols)
{
    Eigen::MatrixXd m(rows, cols);
    for (long i = 0; i < rows; ++i)
        for (long j = 0; j < cols; ++j)
            m(i, j) = matrix_value(i, j);
    return m;
}

io::DatasetOut dataset(std::string name, std::vector<std::int64_t> shape)
{
    io::DatasetOut d;
    d.name = std::move(name);
    d.shape = std::move(shape);
    std::int64_t n = 1;
    for (auto s : d.shape)
        n *= s;
    for (long k = 0; k < n; ++k)
        d.data.push_back(flat_value(k));
    return d;
}

TEST(IoWriters, WriteNpyIsReadByNumpy)
{
    const std::string dir = test::fresh_work_dir("io_write_npy");
    for (const auto& [rows, cols] : std::vector<std::pair<long, long>>{{5, 7}, {1, 1}, {0, 3}, {3, 0}, {64, 33}}) {
        SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
        const std::string path = dir + "/m_" + std::to_string(rows) + "_" + std::to_string(cols) + ".npy";
        const Eigen::MatrixXd m = formula_matrix(rows, cols);
        io::write_npy(path, m);
        EXPECT_NO_THROW(test::run_python("core/io/check_written.py", {"npy", path, std::to_string(rows), std::to_string(cols)}));
        // And by our reader.
        const auto file = io::open_tensor_file(path);
        const auto& t = file->find("");
        EXPECT_EQ(t.shape, (std::vector<std::int64_t>{rows, cols}));
        EXPECT_EQ(t.dtype, io::DType::f64);
        const auto values = file->read_all(t);
        for (long i = 0; i < rows; ++i)
            for (long j = 0; j < cols; ++j)
                EXPECT_EQ(values[static_cast<std::size_t>(i * cols + j)], m(i, j));
    }
}

TEST(IoWriters, WriteNpyKeepsSpecialValuesAndTakesBlocks)
{
    const std::string dir = test::fresh_work_dir("io_write_npy_special");
    Eigen::MatrixXd big = formula_matrix(6, 9);
    big(0, 0) = std::numeric_limits<double>::quiet_NaN();
    big(0, 1) = std::numeric_limits<double>::infinity();
    big(0, 2) = -std::numeric_limits<double>::infinity();
    big(0, 3) = -0.0;
    io::write_npy(dir + "/s.npy", big);
    EXPECT_NO_THROW(test::run_python("core/io/check_written.py", {"npy", dir + "/s.npy", "6", "9", "special"}));
    // A block expression (non-contiguous Ref) is written row by row all the same.
    Eigen::MatrixXd wide = Eigen::MatrixXd::Zero(10, 12);
    wide.block(2, 3, 5, 7) = formula_matrix(5, 7);
    io::write_npy(dir + "/b.npy", wide.block(2, 3, 5, 7));
    EXPECT_NO_THROW(test::run_python("core/io/check_written.py", {"npy", dir + "/b.npy", "5", "7"}));
}

TEST(IoWriters, WriteNpyFailureIsInputError)
{
    expect_throw_with<InputError>([] { io::write_npy("/nonexistent-folder/x.npy", Eigen::MatrixXd::Ones(2, 2)); },
                                  {"/nonexistent-folder/x.npy", "cannot write"});
    if (std::filesystem::exists("/dev/full"))
        expect_throw_with<InputError>([] { io::write_npy("/dev/full", Eigen::MatrixXd::Ones(200, 200)); }, {"/dev/full", "cannot write"});
}

std::vector<io::DatasetOut> sample_datasets()
{
    std::vector<io::DatasetOut> out;
    out.push_back(dataset("/q", {2, 3, 4}));
    out.back().attributes = {{"units", "nats"}, {"umax", std::numeric_limits<std::uint64_t>::max()}};
    out.push_back(dataset("/layers/0/k", {3, 5}));
    out.back().as_float32 = true;
    out.back().compress = true;
    out.push_back(dataset("layers/1/big", {4, 300, 257}));
    out.back().as_float32 = true;
    out.back().compress = true;
    out.push_back(dataset("/s", {}));
    out.back().data = {-1.5};
    out.push_back(dataset("/e", {0, 3}));
    out.back().compress = true;   // zero-size: stored contiguous, no chunks possible
    return out;
}

nlohmann::json sample_root_attributes()
{
    return {{"kind", "synthetic"},
            {"seed", 42},
            {"ratio", 0.25},
            {"grid", {14, 14}},
            {"mixed", {1, 2.5}},
            {"mat", {{1, 2}, {3, 4}}},
            {"flag", true},
            {"names", {"a", "b"}},
            {"params", {{"blocks", 4}, {"mixing", "cos"}}},
            {"ragged", {{1}, {2, 3}}},
            {"nothing", nullptr},
            {"empty_list", nlohmann::json::array()}};
}

TEST(IoWriters, WriteHdf5IsReadByH5py)
{
    const std::string path = test::fresh_work_dir("io_write_h5") + "/out.h5";
    io::write_hdf5(path, sample_datasets(), sample_root_attributes());
    EXPECT_NO_THROW(test::run_python("core/io/check_written.py", {"h5", path}));
}

TEST(IoWriters, WriteHdf5RoundTripsThroughOurReader)
{
    const std::string path = test::fresh_work_dir("io_write_h5_roundtrip") + "/out.h5";
    const auto datasets = sample_datasets();
    io::write_hdf5(path, datasets, sample_root_attributes());
    const auto file = io::open_tensor_file(path);
    for (const auto& d : datasets) {
        const std::string name = d.name.front() == '/' ? d.name : "/" + d.name;
        SCOPED_TRACE(name);
        const auto& t = file->find(name);
        EXPECT_EQ(t.shape, d.shape);
        EXPECT_EQ(t.dtype, d.as_float32 ? io::DType::f32 : io::DType::f64);
        const auto values = file->read_all(t);
        ASSERT_EQ(values.size(), d.data.size());
        for (std::size_t k = 0; k < values.size(); ++k)
            ASSERT_EQ(values[k], d.as_float32 ? static_cast<double>(static_cast<float>(d.data[k])) : d.data[k]);
    }
    EXPECT_EQ(file->find("/q").attributes, datasets[0].attributes);
    const auto& a = file->file_attributes();
    EXPECT_EQ(a.at("kind"), "synthetic");
    EXPECT_EQ(a.at("seed"), 42);
    EXPECT_EQ(a.at("grid"), nlohmann::json({14, 14}));
    EXPECT_EQ(a.at("mat"), nlohmann::json({{1, 2}, {3, 4}}));
    EXPECT_EQ(a.at("flag"), true);
    EXPECT_EQ(a.at("names"), nlohmann::json({"a", "b"}));
    EXPECT_EQ(nlohmann::json::parse(a.at("params").get<std::string>()), nlohmann::json({{"blocks", 4}, {"mixing", "cos"}}));
    EXPECT_TRUE(a.at("nothing").is_null());
}

TEST(IoWriters, WriteHdf5Failures)
{
    expect_throw_with<InputError>([] { io::write_hdf5("/nonexistent-folder/x.h5", {dataset("/q", {2})}); },
                                  {"/nonexistent-folder/x.h5", "cannot create HDF5 file"});
    const std::string dir = test::fresh_work_dir("io_write_h5_bad");
    auto mismatched = dataset("/q", {2, 3});
    mismatched.data.pop_back();
    EXPECT_THROW(io::write_hdf5(dir + "/m.h5", {mismatched}), std::invalid_argument);
    // The same name twice is an HDF5 failure, reported as InputError naming file and dataset.
    expect_throw_with<InputError>([&] { io::write_hdf5(dir + "/dup.h5", {dataset("/q", {2}), dataset("/q", {2})}); },
                                  {"dup.h5", "/q"});
}

// util/fd_io.h, under every writer: whole writes and reads through a pipe, and a full device is an
// InputError naming the destination.
TEST(IoWriters, WholeWritesAndReadsOnDescriptors)
{
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const std::string text(4000, 'x');
    write_all(fds[1], text.data(), text.size(), "the pipe");
    ::close(fds[1]);
    std::string back(8000, '\0');
    back.resize(read_up_to(fds[0], back.data(), back.size()));   // short: the end of the pipe
    ::close(fds[0]);
    EXPECT_EQ(back, text);

    const int full = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (full < 0)
        GTEST_SKIP() << "no /dev/full";
    try {
        write_all(full, text.data(), text.size(), "out.bin");
        ADD_FAILURE() << "a write to /dev/full succeeded";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("out.bin: cannot write ("), std::string::npos) << e.what();
    }
    ::close(full);
}

}  // namespace
