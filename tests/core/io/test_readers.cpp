// The readers against NumPy / h5py: every fixture tensor of make_io_fixtures.py read whole and as a
// box must equal numpy's float64 widening of the stored values, bit for bit (NaN for NaN).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "io/tensor_file.h"
#include "io_fixtures.h"
#include "support/test_support.h"
#include "util/error.h"

namespace {

using namespace attnscope;
using namespace attnscope::test::io;
namespace fs = std::filesystem;

// Checks every manifest tensor of `format`; returns how many were checked.
int check_format(const std::string& format)
{
    std::map<std::string, std::unique_ptr<io::TensorFile>> open;
    int checked = 0;
    for (const auto& t : manifest().at("tensors")) {
        if (t.at("format") != format)
            continue;
        const std::string rel = t.at("file").get<std::string>();
        const std::string name = t.at("name").get<std::string>();
        if (manifest().at("files").at(rel).contains("lzf"))
            continue;   // filter availability varies; see Hdf5LzfFilterIsNamed
        SCOPED_TRACE(rel + ":" + name);
        auto& file = open[rel];
        if (!file)
            file = io::open_tensor_file(fixture(rel));
        EXPECT_EQ(file->format(), format);
        const io::TensorInfo& info = file->find(name);
        EXPECT_EQ(info.shape, t.at("shape").get<std::vector<std::int64_t>>());
        EXPECT_EQ(io::dtype_name(info.dtype), t.at("dtype").get<std::string>());
        if (format == "hdf5") {
            EXPECT_EQ(info.attributes, t.at("attributes"));
        }

        const std::vector<double> expected = read_f8(t.at("expected").get<std::string>());
        const std::vector<double> all = file->read_all(info);
        if (all.size() != expected.size()) {
            ADD_FAILURE() << "read " << all.size() << " values, numpy has " << expected.size();
            continue;
        }
        const auto diff = first_difference(all, expected);
        EXPECT_EQ(diff, -1) << "first difference at flat index " << diff << ": read " << all[std::max<std::ptrdiff_t>(diff, 0)]
                            << ", numpy " << expected[std::max<std::ptrdiff_t>(diff, 0)];

        const auto start = t.at("box_start").get<std::vector<std::int64_t>>();
        const auto count = t.at("box_count").get<std::vector<std::int64_t>>();
        const std::vector<double> box = file->read_box(info, start, count);
        const std::vector<double> expected_box = read_f8(t.at("expected_box").get<std::string>());
        EXPECT_EQ(box.size(), expected_box.size());
        EXPECT_EQ(first_difference(box, expected_box), -1) << "box differs";
        ++checked;
    }
    return checked;
}

TEST(IoReaders, NpyAllVersionsByteOrdersLayoutsAndTypesMatchNumpy)
{
    EXPECT_GE(check_format("npy"), 3 * 2 * 2 * 12 + 7);
}

TEST(IoReaders, NpzStoredDeflatedAndHandMadeMatchNumpy) { EXPECT_GE(check_format("npz"), 20); }

TEST(IoReaders, Hdf5NestedChunkedCompressedAndTypedMatchH5py) { EXPECT_GE(check_format("hdf5"), 20); }

TEST(IoReaders, SafetensorsAllDtypesMatchNumpy) { EXPECT_GE(check_format("safetensors"), 16); }

TEST(IoReaders, ListingNamesAttributesAndSkippedObjects)
{
    for (const auto& [rel, f] : manifest().at("files").items()) {
        SCOPED_TRACE(rel);
        const auto file = io::open_tensor_file(fixture(rel));
        EXPECT_EQ(file->format(), f.at("format").get<std::string>());
        std::vector<std::string> names;
        for (const auto& t : file->tensors())
            names.push_back(t.name);
        auto expected = f.at("names").get<std::vector<std::string>>();
        if (f.at("format") != "safetensors") {   // safetensors keeps file order, which the script knows
            std::sort(names.begin(), names.end());
            std::sort(expected.begin(), expected.end());
        }
        EXPECT_EQ(names, expected);
        if (f.contains("attributes")) {
            EXPECT_EQ(file->file_attributes(), f.at("attributes"));
        }
        std::vector<std::string> skipped;
        for (const auto& s : file->skipped())
            skipped.push_back(s.name);
        std::sort(skipped.begin(), skipped.end());
        EXPECT_EQ(skipped, f.value("skipped", std::vector<std::string>{}));
    }
}

TEST(IoReaders, FindAcceptsNameVariantsAndListsNamesOtherwise)
{
    const auto h5 = io::open_tensor_file(fixture("h5/nested.h5"));
    EXPECT_EQ(h5->find("q").name, "/q");
    EXPECT_EQ(h5->find("/q").name, "/q");
    EXPECT_EQ(h5->find("layer1/v").name, "/layer1/v");
    expect_throw_with<InputError>([&] { h5->find(""); }, {"nested.h5", "name one", "/q"});
    expect_throw_with<InputError>([&] { h5->find("/nope"); }, {"nested.h5", "no tensor '/nope'", "/layer1/v"});

    const auto npz = io::open_tensor_file(fixture("npz/stored.npz"));
    EXPECT_EQ(npz->find("q").name, "q");
    EXPECT_EQ(npz->find("q.npy").name, "q");
    EXPECT_EQ(npz->find("layer0/q.npy").name, "layer0/q");
    expect_throw_with<InputError>([&] { npz->find("v"); }, {"stored.npz", "'v'", "arr_0"});

    const auto npy = io::open_tensor_file(fixture("npy/vector.npy"));
    EXPECT_EQ(npy->find("").shape, std::vector<std::int64_t>{17});

    const auto st = io::open_tensor_file(fixture("st/single.safetensors"));
    EXPECT_EQ(st->find("").name, "only");
    const auto model = io::open_tensor_file(fixture("st/model.safetensors"));
    EXPECT_EQ(model->find("model.layers.0.q").shape, (std::vector<std::int64_t>{2, 3, 4}));
    expect_throw_with<InputError>([&] { model->find(""); }, {"model.safetensors", "holds 17 tensors"});
}

TEST(IoReaders, Hdf5NonNumericDatasetsAreListedAsSkippedAndRefusedClearly)
{
    const auto h5 = io::open_tensor_file(fixture("h5/nested.h5"));
    expect_throw_with<InputError>([&] { h5->find("/text/names"); }, {"nested.h5:/text/names", "string"});
    expect_throw_with<InputError>([&] { h5->find("text/fixed"); }, {"nested.h5:text/fixed", "string"});
    expect_throw_with<InputError>([&] { h5->find("/complex"); }, {"nested.h5:/complex", "compound"});
    const auto only_strings = io::open_tensor_file(fixture("bad/strings_only.h5"));
    EXPECT_TRUE(only_strings->tensors().empty());
    ASSERT_EQ(only_strings->skipped().size(), 1u);
    expect_throw_with<InputError>([&] { only_strings->find(""); }, {"strings_only.h5", "no readable numeric tensor", "/names"});
}

TEST(IoReaders, Hdf5WalkSurvivesCyclesAndSoftLinks)
{
    const auto h5 = io::open_tensor_file(fixture("h5/nested.h5"));
    std::set<std::string> names;
    for (const auto& t : h5->tensors())
        EXPECT_TRUE(names.insert(t.name).second) << "listed twice: " << t.name;
    EXPECT_TRUE(names.count("/q"));
}

TEST(IoReaders, Hdf5LzfFilterIsNamedWhenUnavailable)
{
    const auto h5 = io::open_tensor_file(fixture("h5/lzf.h5"));
    const auto& t = h5->find("/x");
    try {
        const auto values = h5->read_all(t);
        // A plugin provided lzf: then the values must be right.
        for (const auto& e : manifest().at("tensors"))
            if (e.at("file") == "h5/lzf.h5") {
                EXPECT_EQ(first_difference(values, read_f8(e.at("expected").get<std::string>())), -1);
            }
    } catch (const InputError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("lzf.h5:/x"), std::string::npos) << msg;
        EXPECT_NE(msg.find("lzf"), std::string::npos) << msg;
        EXPECT_NE(msg.find("filter"), std::string::npos) << msg;
    }
}

TEST(IoReaders, BoxOutOfRangeIsInvalidArgument)
{
    for (const char* rel : {"npy/rank5_C.npy", "npz/deflated.npz", "h5/nested.h5", "st/model.safetensors"}) {
        SCOPED_TRACE(rel);
        const auto file = io::open_tensor_file(fixture(rel));
        const auto& t = file->tensors().front();
        std::vector<std::int64_t> start(t.shape.size(), 0), count = t.shape;
        if (!count.empty()) {
            count[0] += 1;
            EXPECT_THROW(file->read_box(t, start, count), std::invalid_argument);
            count[0] -= 1;
            start[0] = -1;
            EXPECT_THROW(file->read_box(t, start, count), std::invalid_argument);
        }
        std::vector<std::int64_t> wrong_rank(t.shape.size() + 1, 0);
        EXPECT_THROW(file->read_box(t, wrong_rank, wrong_rank), std::invalid_argument);
        io::TensorInfo stranger = t;
        stranger.name = "not-in-this-file";
        EXPECT_THROW(file->read_all(stranger), std::invalid_argument);
    }
}

TEST(IoReaders, EmptyBoxesAndZeroSizeTensorsReadAsNothing)
{
    const auto npy = io::open_tensor_file(fixture("npy/empty_rows.npy"));
    EXPECT_TRUE(npy->read_all(npy->find("")).empty());
    const auto h5 = io::open_tensor_file(fixture("h5/nested.h5"));
    EXPECT_TRUE(h5->read_all(h5->find("/empty")).empty());
    const auto& q = h5->find("/q");
    EXPECT_TRUE(h5->read_box(q, std::vector<std::int64_t>{1, 0, 0}, std::vector<std::int64_t>{1, 0, 3}).empty());
    const auto st = io::open_tensor_file(fixture("st/model.safetensors"));
    EXPECT_TRUE(st->read_all(st->find("empty")).empty());
}

TEST(IoReaders, ReadLimitRefusesLargeBoxesBeforeReading)
{
    const std::uint64_t saved = io::read_limit_bytes();
    EXPECT_EQ(saved, 8ULL << 30);
    io::set_read_limit_bytes(100);
    for (const auto& [rel, name] : std::vector<std::pair<std::string, std::string>>{
             {"npz/stored.npz", "q"}, {"h5/nested.h5", "/q"}, {"st/model.safetensors", "model.layers.0.q"}, {"npy/v1_le_C_f4.npy", ""}}) {
        SCOPED_TRACE(rel);
        const auto file = io::open_tensor_file(fixture(rel));
        const auto& t = file->find(name);
        expect_throw_with<InputError>([&] { file->read_all(t); }, {rel, "read limit", "100 bytes"});
        // A box inside the limit still reads.
        std::vector<std::int64_t> start(t.shape.size(), 0), count(t.shape.size(), 1);
        EXPECT_EQ(file->read_box(t, start, count).size(), 1u);
    }
    io::set_read_limit_bytes(saved);
    EXPECT_EQ(io::read_limit_bytes(), saved);
}

TEST(IoReaders, ConcurrentReadsOfOneFileAgree)
{
    for (const auto& [rel, name] : std::vector<std::pair<std::string, std::string>>{
             {"npz/deflated.npz", "big"}, {"h5/nested.h5", "/big"}, {"npy/large.npy", ""}}) {
        SCOPED_TRACE(rel);
        const auto file = io::open_tensor_file(fixture(rel));
        const auto& t = file->find(name);
        const std::vector<double> reference = file->read_all(t);
        std::vector<std::vector<double>> results(4);
        std::vector<std::thread> threads;
        for (auto& r : results)
            threads.emplace_back([&] { r = file->read_all(t); });
        for (auto& th : threads)
            th.join();
        for (const auto& r : results)
            EXPECT_EQ(first_difference(r, reference), -1);
    }
}

TEST(IoReaders, Hdf5PrintsNothingToStderr)
{
    // HDF5's automatic error printing must be off: only our own `error:` line may reach the terminal.
    const std::string capture = test::fresh_work_dir("io_stderr") + "/stderr.txt";
    std::fflush(stderr);
    const int saved = ::dup(2);
    const int fd = ::open(capture.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ::dup2(fd, 2);
    ::close(fd);
    int failures = 0;
    for (const char* rel : {"bad/garbage.h5", "bad/truncated.h5", "bad/npy_named.h5"}) {
        try {
            io::open_tensor_file(fixture(rel));
        } catch (const InputError&) {
            ++failures;
        }
    }
    try {
        const auto h5 = io::open_tensor_file(fixture("h5/lzf.h5"));
        h5->read_all(h5->find("/x"));
    } catch (const InputError&) {
    }
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    EXPECT_EQ(failures, 3);
    EXPECT_EQ(test::read_text(capture), "");
}

TEST(IoReaders, ExtensionsAreCaseInsensitive)
{
    const std::string dir = test::fresh_work_dir("io_case");
    fs::copy_file(fixture("npy/vector.npy"), dir + "/VECTOR.NPY");
    fs::copy_file(fixture("h5/nested.h5"), dir + "/Acts.H5");
    EXPECT_EQ(io::open_tensor_file(dir + "/VECTOR.NPY")->format(), "npy");
    EXPECT_EQ(io::open_tensor_file(dir + "/Acts.H5")->format(), "hdf5");
}

TEST(IoReaders, DtypeNamesAndSizes)
{
    EXPECT_EQ(io::dtype_name(io::DType::bf16), "bfloat16");
    EXPECT_EQ(io::dtype_name(io::DType::boolean), "bool");
    EXPECT_EQ(io::dtype_name(io::DType::u64), "uint64");
    EXPECT_EQ(io::dtype_size(io::DType::f16), 2u);
    EXPECT_EQ(io::dtype_size(io::DType::boolean), 1u);
    EXPECT_EQ(io::dtype_size(io::DType::i64), 8u);
}

}  // namespace
