// Tensor references, --at parsing, layouts and load_selected against NumPy slicing of the same arrays
// (make_io_fixtures.py, "selection" cases: nd, hnd, bhnd, bnhd, dn, lbhnd, ndh; C and Fortran .npy, chunked HDF5).
#include <gtest/gtest.h>

#include "io/selection.h"
#include "io_fixtures.h"
#include "util/error.h"

namespace {

using namespace attnscope;
using namespace attnscope::test::io;

io::TensorInfo info_of(std::vector<std::int64_t> shape)
{
    io::TensorInfo t;
    t.name = "/q";
    t.shape = std::move(shape);
    return t;
}

TEST(IoSelection, ParseTensorRefSplitsAtTheFirstKnownExtension)
{
    EXPECT_EQ(io::parse_tensor_ref("acts.h5:/layer3/q").text, "acts.h5:/layer3/q");
    struct Case {
        const char* text;
        const char* file;
        const char* name;   // nullptr: not checked
    };
    for (const Case& c : {
             Case{"acts.h5:/layer3/q", "acts.h5", "/layer3/q"},
             Case{"acts.npz:q", "acts.npz", "q"},
             Case{"m.safetensors:model.layers.0.q", "m.safetensors", "model.layers.0.q"},
             Case{"/data/run:7/acts.hdf5:grp/k", "/data/run:7/acts.hdf5", "grp/k"},   // a folder with ':' in its name
             Case{"q.npy", "q.npy", ""},
             Case{"run.h5.d/acts.npz:x.y", "run.h5.d/acts.npz", "x.y"},   // ".h5" not followed by ':' or the end
             Case{"ACTS.H5:q", "ACTS.H5", "q"},
             Case{"acts.h5", "acts.h5", ""},
             Case{"model.pt:q", "model.pt", nullptr},   // split so that opening refuses the pickle with advice
             Case{"acts.mat:q", "acts.mat:q", ""},      // unknown: the whole text is the file, opening explains
         }) {
        const auto r = io::parse_tensor_ref(c.text);
        EXPECT_EQ(r.file, c.file) << c.text;
        if (c.name) {
            EXPECT_EQ(r.name, c.name) << c.text;
        }
    }
    expect_throw_with<InputError>([] { io::parse_tensor_ref(""); }, {"empty tensor reference"});
    expect_throw_with<InputError>([] { io::parse_tensor_ref("q.npy:x"); }, {"q.npy:x", "one unnamed tensor"});
}

TEST(IoSelection, ParseAt)
{
    EXPECT_TRUE(io::parse_at("").empty());
    const auto at = io::parse_at("h=2,b=0");
    EXPECT_EQ(at, (std::map<char, std::int64_t>{{'h', 2}, {'b', 0}}));
    EXPECT_EQ(io::parse_at(" l = 11 , h=3 "), (std::map<char, std::int64_t>{{'l', 11}, {'h', 3}}));
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=-1"); }, {"'h=-1'", "non-negative"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=2,hh=1"); }, {"'hh=1'", "single letter"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h2"); }, {"'h2'", "LETTER=INDEX"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=x"); }, {"'h=x'"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=1.5"); }, {"'h=1.5'"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h="); }, {"'h='"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("1=2"); }, {"'1=2'"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=1,h=2"); }, {"'h' is given twice"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=1,"); }, {"empty item"});
    expect_throw_with<std::invalid_argument>([] { io::parse_at("h=99999999999999999999"); }, {"'h=99999999999999999999'"});
}

TEST(IoSelection, ResolveLayoutDefaultsByRank)
{
    EXPECT_EQ(io::resolve_layout(info_of({7, 4}), {}, "--q"), "nd");
    EXPECT_EQ(io::resolve_layout(info_of({3, 7, 4}), {}, "--q"), "hnd");
    EXPECT_EQ(io::resolve_layout(info_of({2, 3, 7, 4}), {}, "--q"), "bhnd");
    expect_throw_with<InputError>([] { io::resolve_layout(info_of({2, 2, 3, 7, 4}), {}, "--q a.h5:/q"); },
                                  {"--q a.h5:/q", "rank 5", "give a layout"});
    expect_throw_with<InputError>([] { io::resolve_layout(info_of({7}), {}, "--q a.h5:/q"); }, {"rank 1"});
}

TEST(IoSelection, ResolveLayoutValidates)
{
    const auto t = info_of({2, 3, 7, 4});
    auto sel = [](std::string layout, std::map<char, std::int64_t> at = {}) {
        io::AxisSelection s;
        s.layout = std::move(layout);
        s.at = std::move(at);
        return s;
    };
    EXPECT_EQ(io::resolve_layout(t, sel("bnhd", {{'h', 3}, {'b', 1}}), "--q"), "bnhd");
    expect_throw_with<std::invalid_argument>([&] { io::resolve_layout(t, sel("bhnn"), "--q"); }, {"bhnn", "twice"});
    expect_throw_with<std::invalid_argument>([&] { io::resolve_layout(t, sel("bhxy"), "--q"); }, {"bhxy", "'n'"});
    expect_throw_with<std::invalid_argument>([&] { io::resolve_layout(t, sel("b1nd"), "--q"); }, {"b1nd", "not a letter"});
    expect_throw_with<InputError>([&] { io::resolve_layout(t, sel("hnd"), "--q a.h5:/q"); },
                                  {"--q a.h5:/q", "hnd has 3 letters", "rank 4", "[2, 3, 7, 4]"});
    expect_throw_with<InputError>([&] { io::resolve_layout(t, sel("bhnd", {{'l', 0}}), "--q a.h5:/q"); },
                                  {"--q a.h5:/q", "'l'", "not in layout bhnd"});
    expect_throw_with<InputError>([&] { io::resolve_layout(t, sel("bhnd", {{'h', 3}}), "--q a.h5:/q"); },
                                  {"--q a.h5:/q", "h=3", "out of range", "size 3"});
    expect_throw_with<InputError>([&] { io::resolve_layout(t, sel("", {{'b', 2}}), "--q"); }, {"b=2", "size 2"});
    expect_throw_with<std::invalid_argument>([&] { io::resolve_layout(t, sel("bhnd", {{'n', 1}}), "--q"); },
                                             {"token axis", "prefix tokens"});
    expect_throw_with<std::invalid_argument>([&] { io::resolve_layout(t, sel("bhnd", {{'d', 1}}), "--q"); }, {"feature axis"});
}

TEST(IoSelection, LoadSelectedMatchesNumpySlicing)
{
    int checked = 0;
    for (const auto& c : manifest().at("selection")) {
        const std::string ref_text = c.at("ref").get<std::string>();
        io::AxisSelection sel;
        sel.layout = c.at("layout").get<std::string>();
        sel.at = io::parse_at(c.at("at").get<std::string>());
        sel.prefix_tokens = c.at("prefix").get<std::int64_t>();
        SCOPED_TRACE(ref_text + " layout=" + sel.layout + " at=" + c.at("at").get<std::string>() +
                     " prefix=" + std::to_string(sel.prefix_tokens));
        const io::TensorRef ref = io::parse_tensor_ref(fixture(ref_text));
        const auto file = io::open_tensor_file(ref.file);
        const io::SelectedMatrix m = io::load_selected(*file, ref.name, sel, "--q " + ref_text);
        const auto rows = c.at("rows").get<Eigen::Index>(), cols = c.at("cols").get<Eigen::Index>();
        ASSERT_EQ(m.values.rows(), rows);
        ASSERT_EQ(m.values.cols(), cols);
        const std::vector<double> expected = read_f8(c.at("expected").get<std::string>());
        for (Eigen::Index t = 0; t < rows; ++t)
            for (Eigen::Index f = 0; f < cols; ++f)
                ASSERT_EQ(m.values(t, f), expected[static_cast<std::size_t>(t * cols + f)]) << "token " << t << " feature " << f;
        std::map<char, std::int64_t> at_full;
        for (const auto& [k, v] : c.at("at_full").items())
            at_full[k[0]] = v.get<std::int64_t>();
        EXPECT_EQ(m.at, at_full);
        EXPECT_EQ(m.tokens_in_file, rows + sel.prefix_tokens);
        if (!sel.layout.empty()) {
            EXPECT_EQ(m.layout, sel.layout);
        }
        ++checked;
    }
    EXPECT_GE(checked, 100);
}

TEST(IoSelection, NonFiniteValuesAreReportedWithTokenFeatureAndSelection)
{
    const auto nan_file = io::open_tensor_file(fixture("sel/nan.npy"));   // [3, 7, 6], NaN at [2, 3, 5]
    io::AxisSelection sel;
    EXPECT_NO_THROW(io::load_selected(*nan_file, "", sel, "--q nan.npy"));   // head 0 is clean
    sel.at = {{'h', 2}};
    expect_throw_with<InputError>([&] { io::load_selected(*nan_file, "", sel, "--q nan.npy"); },
                                  {"--q nan.npy: non-finite value nan at token 3, feature 5 (selection h=2)"});
    sel.prefix_tokens = 2;   // tokens are counted in the file
    expect_throw_with<InputError>([&] { io::load_selected(*nan_file, "", sel, "--q nan.npy"); }, {"at token 3, feature 5"});
    sel.prefix_tokens = 4;
    EXPECT_NO_THROW(io::load_selected(*nan_file, "", sel, "--q nan.npy"));

    const auto inf_file = io::open_tensor_file(fixture("sel/inf.h5"));   // [2, 5, 4], -inf at [1, 4, 0]
    io::AxisSelection s2;
    s2.at = {{'h', 1}};
    expect_throw_with<InputError>([&] { io::load_selected(*inf_file, "acts/q", s2, "--k inf.h5:acts/q"); },
                                  {"--k inf.h5:acts/q: non-finite value -inf at token 4, feature 0 (selection h=1)"});
}

TEST(IoSelection, PrefixTokensAndEmptyTensors)
{
    const auto file = io::open_tensor_file(fixture("sel/hnd.npy"));   // [3, 7, 4]
    io::AxisSelection sel;
    sel.prefix_tokens = 6;
    EXPECT_EQ(io::load_selected(*file, "", sel, "--q").values.rows(), 1);
    sel.prefix_tokens = 7;
    expect_throw_with<InputError>([&] { io::load_selected(*file, "", sel, "--q hnd.npy"); },
                                  {"--q hnd.npy", "7 prefix tokens leave no token", "7 tokens"});
    sel.prefix_tokens = -1;
    EXPECT_THROW(io::load_selected(*file, "", sel, "--q"), std::invalid_argument);

    const auto empty = io::open_tensor_file(fixture("npy/empty_rows.npy"));   // [0, 5]
    expect_throw_with<InputError>([&] { io::load_selected(*empty, "", {}, "--q empty_rows.npy"); },
                                  {"--q empty_rows.npy", "0 tokens"});
    const auto h5 = io::open_tensor_file(fixture("h5/nested.h5"));
    io::AxisSelection dn;
    dn.layout = "dn";
    expect_throw_with<InputError>([&] { io::load_selected(*h5, "/empty", dn, "--q e.h5:/empty"); }, {"0 features"});
}

TEST(IoSelection, LoadSelectedPropagatesLookupErrors)
{
    const auto h5 = io::open_tensor_file(fixture("h5/nested.h5"));
    expect_throw_with<InputError>([&] { io::load_selected(*h5, "/nope", {}, "--q"); }, {"nested.h5", "no tensor '/nope'"});
    expect_throw_with<InputError>([&] { io::load_selected(*h5, "/text/names", {}, "--q"); }, {"string"});
}

}  // namespace

// The core names concepts, not the command line's flags (the desktop app shows these messages too; the CLI adds
// its flag where it parses one, e.g. "--at: ...").
TEST(Selection, MessagesNameConceptsNotFlags)
{
    const auto message = [](auto&& f) {
        try {
            f();
        } catch (const std::exception& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    io::TensorInfo t;
    t.name = "q";
    t.shape = {2, 3, 7, 4};
    io::AxisSelection bad_layout;
    bad_layout.layout = "hhnd";
    io::AxisSelection token_axis;
    token_axis.layout = "bhnd";
    token_axis.at = {{'n', 1}};
    io::AxisSelection out_of_range;
    out_of_range.layout = "bhnd";
    out_of_range.at = {{'h', 9}};
    for (const std::string& m : {message([] { io::parse_at("h=2,h=3"); }), message([] { io::parse_at("h"); }),
                                 message([&] { io::resolve_layout(t, bad_layout, "queries"); }),
                                 message([&] { io::resolve_layout(t, token_axis, "queries"); }),
                                 message([&] { io::resolve_layout(t, out_of_range, "queries"); })}) {
        EXPECT_NE(m, "(no error)");
        EXPECT_EQ(m.find("--"), std::string::npos) << m;
    }
}
