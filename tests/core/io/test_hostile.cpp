// Malformed and hostile files (written by make_io_fixtures.py under bad/): each must raise InputError
// naming the file (and the tensor where there is one), never crash, never allocate what a header
// merely claims, never print anything itself.
#include <gtest/gtest.h>

#include "io/tensor_file.h"
#include "io_fixtures.h"
#include "util/error.h"

namespace {

using namespace attnscope;
using namespace attnscope::test::io;

// Opens `rel` and reads every tensor; the InputError must name the file and contain `parts`.
std::string expect_bad(const std::string& rel, std::initializer_list<std::string> parts)
{
    const std::string path = fixture(rel);
    std::string msg = expect_throw_with<InputError>(
        [&] {
            const auto file = io::open_tensor_file(path);
            for (const auto& t : file->tensors())
                file->read_all(t);
        },
        parts);
    EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
    return msg;
}

// ----------------------------------------------------------------------------------------- general
TEST(IoHostile, MissingFile) { expect_throw_with<InputError>([] { io::open_tensor_file(fixture("bad/nope.h5")); }, {"nope.h5: no such file"}); }
TEST(IoHostile, MissingFolder)
{
    expect_throw_with<InputError>([] { io::open_tensor_file(fixture("no/such/folder/acts.npz")); }, {"acts.npz: no such file"});
}
TEST(IoHostile, Directory) { expect_bad("bad/folder.npy", {"is a directory"}); }
TEST(IoHostile, PickleIsRefusedWithAdvice) { expect_bad("bad/model.pt", {"never loaded", "numpy.save", "safetensors", "h5py"}); }
TEST(IoHostile, UnknownExtensionListsSupportedOnes) { expect_bad("bad/acts.mat", {"'.mat'", ".h5", ".npy", ".npz", ".safetensors"}); }
TEST(IoHostile, EmptyFiles)
{
    for (const char* rel : {"bad/empty.npy", "bad/empty.npz", "bad/empty.h5", "bad/empty.safetensors"}) {
        SCOPED_TRACE(rel);
        expect_bad(rel, {"empty file"});
    }
}

// -------------------------------------------------------------------------------------------- .npy
TEST(IoHostile, NpyBadMagic) { expect_bad("bad/bad_magic.npy", {"not a .npy file"}); }
TEST(IoHostile, NpyShortPreamble) { expect_bad("bad/short.npy", {"truncated .npy preamble"}); }
TEST(IoHostile, NpyTruncatedDataNamesExpectedAndActualBytes) { expect_bad("bad/truncated.npy", {"truncated", "800 bytes", "700 bytes"}); }
TEST(IoHostile, NpyTrailingBytes) { expect_bad("bad/two_arrays.npy", {"follow the data"}); }
TEST(IoHostile, NpyHugeShapeWithTinyFileDoesNotAllocate)
{
    // 10^12 x 10^6 float64 = 8e18 bytes claimed, 16 present.
    expect_bad("bad/huge_shape.npy", {"truncated", "[1000000000000, 1000000]", "8000000000000000000 bytes", "16 bytes"});
}
TEST(IoHostile, NpyShapeOverflowing64Bits) { expect_bad("bad/overflow_shape.npy", {"overflows"}); }
TEST(IoHostile, NpyHeaderLengthBeyondFile) { expect_bad("bad/header_beyond.npy", {"header length 60000", "past the end"}); }
TEST(IoHostile, NpyV2HeaderLengthBeyondFile) { expect_bad("bad/header_beyond_v2.npy", {"header length", "past the end"}); }
TEST(IoHostile, NpyUnknownVersion) { expect_bad("bad/version4.npy", {"version 4.0"}); }
TEST(IoHostile, NpyHeaderNotADict) { expect_bad("bad/not_dict.npy", {"malformed .npy header", "not a dict"}); }
TEST(IoHostile, NpyHeaderWithCode) { expect_bad("bad/garbage_header.npy", {"malformed .npy header"}); }
TEST(IoHostile, NpyHeaderExtraKey) { expect_bad("bad/extra_key.npy", {"unexpected key 'evil'"}); }
TEST(IoHostile, NpyHeaderMissingKey) { expect_bad("bad/missing_key.npy", {"missing key 'fortran_order'"}); }
TEST(IoHostile, NpyNegativeShape) { expect_bad("bad/negative_shape.npy", {"non-negative"}); }
TEST(IoHostile, NpyDeeplyNestedHeader) { expect_bad("bad/deep_header.npy", {"nesting too deep"}); }
TEST(IoHostile, NpyUnterminatedString) { expect_bad("bad/unterminated.npy", {"malformed .npy header"}); }
TEST(IoHostile, NpyComplexRefused) { expect_bad("bad/complex.npy", {"unsupported element type complex64"}); }
TEST(IoHostile, NpyObjectRefused) { expect_bad("bad/object.npy", {"unsupported element type object"}); }
TEST(IoHostile, NpyUnicodeRefused) { expect_bad("bad/unicode.npy", {"unsupported element type unicode string"}); }
TEST(IoHostile, NpyBytesRefused) { expect_bad("bad/bytes.npy", {"unsupported element type byte string"}); }
TEST(IoHostile, NpyStructuredRefused) { expect_bad("bad/structured.npy", {"structured dtype"}); }
TEST(IoHostile, NpyDatetimeRefused) { expect_bad("bad/datetime.npy", {"datetime64"}); }
TEST(IoHostile, NpyHugeItemSizeRefused)   // fuzz_npy: '<f499999992' overflowed int computing the bit count
{
    expect_bad("bad/huge_itemsize.npy", {"unsupported element type float3999999936"});
}
TEST(IoHostile, NpyLongDoubleRefused) { expect_bad("bad/longdouble.npy", {"unsupported element type float128"}); }

TEST(IoHostile, NpyUnusualKeyOrderAndSpacingAreAccepted)
{
    // {"shape": (2,3), 'fortran_order': True, 'descr': '>i2'} with the data of arange(6).reshape(2,3).
    const auto file = io::open_tensor_file(fixture("bad/odd_spacing.npy"));
    const auto& t = file->find("");
    EXPECT_EQ(t.shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(t.dtype, io::DType::i16);
    EXPECT_EQ(file->read_all(t), (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

// -------------------------------------------------------------------------------------------- .npz
TEST(IoHostile, NpzCorruptDeflateStreamNamesMember) { expect_bad("bad/corrupt_deflate.npz", {"corrupt_deflate.npz:q.npy"}); }
TEST(IoHostile, NpzCorruptStoredDataFailsTheCrc) { expect_bad("bad/corrupt_stored.npz", {"corrupt_stored.npz:q.npy", "CRC"}); }
TEST(IoHostile, NpzCorruptCentralDirectory) { expect_bad("bad/corrupt_directory.npz", {}); }
TEST(IoHostile, NpzTruncatedArchive) { expect_bad("bad/truncated_archive.npz", {"not a valid .npz"}); }
TEST(IoHostile, NpzMemberTruncated) { expect_bad("bad/member_truncated.npz", {"member_truncated.npz:q.npy", "truncated", "80000 bytes"}); }
TEST(IoHostile, NpzMemberHugeShape) { expect_bad("bad/member_huge_shape.npz", {"member_huge_shape.npz:q.npy", "truncated"}); }
TEST(IoHostile, NpzMemberUnsupportedType) { expect_bad("bad/member_bad_header.npz", {"member_bad_header.npz:q.npy", "complex128"}); }
TEST(IoHostile, NpzMemberNotNpy) { expect_bad("bad/member_not_npy.npz", {"member_not_npy.npz:q.npy", "not a .npy"}); }
TEST(IoHostile, NpzThatIsAPyTorchCheckpointLoadsNoPickle)
{
    const auto file = io::open_tensor_file(fixture("bad/torch_renamed.npz"));
    EXPECT_TRUE(file->tensors().empty());
    EXPECT_EQ(file->skipped().size(), 3u);
    expect_throw_with<InputError>([&] { file->find(""); }, {"torch_renamed.npz", "no readable numeric tensor", "PyTorch"});
}
TEST(IoHostile, NpzNotAZip) { expect_bad("bad/not_zip.npz", {"not a valid .npz (zip) archive"}); }

// ------------------------------------------------------------------------------------ .safetensors
TEST(IoHostile, SafetensorsAbsurdHeaderLength) { expect_bad("bad/header_absurd.safetensors", {"header length 9223372036854775808", "past the end"}); }
TEST(IoHostile, SafetensorsHeaderPastEnd) { expect_bad("bad/header_past_end.safetensors", {"header length 5000"}); }
TEST(IoHostile, SafetensorsHeaderOverTheLimit) { expect_bad("bad/header_over_limit.safetensors", {"header length 125829120", "limit"}); }
TEST(IoHostile, SafetensorsOffsetsOutOfRange) { expect_bad("bad/offsets_out_of_range.safetensors", {"offsets_out_of_range.safetensors:x", "[0, 240]", "outside"}); }
TEST(IoHostile, SafetensorsOffsetsInconsistentWithShape)
{
    expect_bad("bad/offsets_inconsistent.safetensors", {"offsets_inconsistent.safetensors:x", "span 20 bytes", "needs 24"});
}
TEST(IoHostile, SafetensorsOffsetsReversed) { expect_bad("bad/offsets_reversed.safetensors", {"offsets_reversed.safetensors:x", "[20, 4]"}); }
TEST(IoHostile, SafetensorsOverlappingTensors) { expect_bad("bad/offsets_overlap.safetensors", {"overlap"}); }
TEST(IoHostile, SafetensorsHugeShape) { expect_bad("bad/huge_shape.safetensors", {"huge_shape.safetensors:x", "overflows"}); }
TEST(IoHostile, SafetensorsUnknownDtype) { expect_bad("bad/unknown_dtype.safetensors", {"unknown_dtype.safetensors:x", "unknown dtype 'Q7'"}); }
TEST(IoHostile, SafetensorsFloat8Refused) { expect_bad("bad/f8_dtype.safetensors", {"f8_dtype.safetensors:x", "unsupported element type F8_E4M3"}); }
TEST(IoHostile, SafetensorsInvalidJson) { expect_bad("bad/invalid_json.safetensors", {"invalid JSON header"}); }
TEST(IoHostile, SafetensorsJsonNumberOverflow) { expect_bad("bad/number_overflow.safetensors", {"invalid JSON header"}); }
TEST(IoHostile, SafetensorsJsonNotAnObject) { expect_bad("bad/json_array.safetensors", {"not an object"}); }
TEST(IoHostile, SafetensorsMissingField) { expect_bad("bad/missing_field.safetensors", {"missing_field.safetensors:x", "data_offsets"}); }
TEST(IoHostile, SafetensorsNegativeShape) { expect_bad("bad/negative_shape.safetensors", {"negative_shape.safetensors:x", "non-negative"}); }
TEST(IoHostile, SafetensorsDeeplyNestedJson) { expect_bad("bad/deep_json.safetensors", {"nested deeper"}); }
TEST(IoHostile, SafetensorsTooShort) { expect_bad("bad/short.safetensors", {"too short"}); }

// -------------------------------------------------------------------------------------------- HDF5
TEST(IoHostile, Hdf5Truncated) { expect_bad("bad/truncated.h5", {"not a readable HDF5 file"}); }
TEST(IoHostile, Hdf5Garbage) { expect_bad("bad/garbage.h5", {"not a readable HDF5 file", "signature"}); }
TEST(IoHostile, Hdf5ThatIsReallyNpySaysSo) { expect_bad("bad/npy_named.h5", {"not a readable HDF5 file", "looks like a .npy file"}); }
TEST(IoHostile, Hdf5CorruptChunkFailsTheReadNamingTheDataset)
{
    const auto file = io::open_tensor_file(fixture("bad/corrupt_chunk.h5"));
    const auto& t = file->find("q");
    // Chunk 0 is intact; the row in chunk 1 is not.
    EXPECT_EQ(file->read_box(t, std::vector<std::int64_t>{0, 0}, std::vector<std::int64_t>{1, 256}).size(), 256u);
    expect_throw_with<InputError>([&] { file->read_all(t); }, {"corrupt_chunk.h5:/q", "cannot read"});
}
TEST(IoHostile, Hdf5StringDatasetSelectedByName)
{
    const auto file = io::open_tensor_file(fixture("bad/strings_only.h5"));
    expect_throw_with<InputError>([&] { file->find("/names"); }, {"strings_only.h5:/names", "string"});
}

}  // namespace
