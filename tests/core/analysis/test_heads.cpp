// Grouped-query attention (docs/maths.md 1.7): query head h pairs with key/value head h // (H / Hk), the
// keys and values are read at that head, --kv-head overrides it, and head counts that do not divide are an
// error naming both.
#include <gtest/gtest.h>

#include "analysis/inputs.h"
#include "analysis/plan.h"
#include "io/writers.h"
#include "support/test_support.h"
#include "util/error.h"

using namespace attnscope;

namespace {

// [heads, 12 tokens, d] with every entry of head j equal to base + j + t / 100 (t the token).
io::DatasetOut heads_dataset(const std::string& name, std::int64_t heads, std::int64_t d, double base)
{
    io::DatasetOut ds{name, {heads, 12, d}, {}};
    for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t t = 0; t < 12; ++t)
            for (std::int64_t f = 0; f < d; ++f)
                ds.data.push_back(base + static_cast<double>(h) + static_cast<double>(t) / 100.0);
    return ds;
}

std::string write_gqa(const std::string& dir, std::int64_t kv_heads)
{
    const std::string path = dir + "/gqa" + std::to_string(kv_heads) + ".h5";
    io::write_hdf5(path, {heads_dataset("/q", 8, 4, 0.0), heads_dataset("/k", kv_heads, 4, 100.0),
                          heads_dataset("/v", kv_heads, 3, 200.0)});
    return path;
}

io::AxisSelection head(std::int64_t h)
{
    io::AxisSelection s;
    s.at['h'] = h;
    return s;
}

}  // namespace

TEST(Heads, GroupedQueryPairing)
{
    const std::string f = write_gqa(test::fresh_work_dir("heads_gqa"), 4);
    for (std::int64_t h = 0; h < 8; ++h) {
        const auto p = analysis::pair_heads(io::parse_tensor_ref(f + ":/q"), io::parse_tensor_ref(f + ":/k"), head(h));
        EXPECT_EQ(p.heads, 8);
        EXPECT_EQ(p.kv_heads, 4);
        EXPECT_TRUE(p.grouped());
        EXPECT_EQ(*p.kv_head, h / 2) << "query head " << h;
    }
    const analysis::LoadedInputs in = analysis::load_inputs(io::parse_tensor_ref(f + ":/q"), io::parse_tensor_ref(f + ":/k"), io::parse_tensor_ref(f + ":/v"), head(5));
    EXPECT_DOUBLE_EQ(in.q.values(0, 0), 5.0);
    EXPECT_DOUBLE_EQ(in.k.values(0, 0), 102.0);   // key head 5 // 2
    EXPECT_DOUBLE_EQ(in.v->values(3, 0), 202.03);  // values follow keys
    EXPECT_EQ(in.input_json["at"]["h"], 5);
    EXPECT_EQ(in.input_json["kv_head"], 2);
}

TEST(Heads, OverrideMultiQueryAndRefusal)
{
    const std::string dir = test::fresh_work_dir("heads_gqa_more");
    const std::string f = write_gqa(dir, 4);
    io::AxisSelection s = head(5);
    s.kv_head = 3;
    const analysis::LoadedInputs in = analysis::load_inputs(io::parse_tensor_ref(f + ":/q"), io::parse_tensor_ref(f + ":/k"), std::nullopt, s);
    EXPECT_DOUBLE_EQ(in.k.values(0, 0), 103.0);
    EXPECT_EQ(in.input_json["kv_head"], 3);
    s.kv_head = 4;
    EXPECT_THROW(analysis::pair_heads(io::parse_tensor_ref(f + ":/q"), io::parse_tensor_ref(f + ":/k"), s), std::invalid_argument);

    const std::string mq = write_gqa(dir, 1);   // multi-query: one key/value head
    EXPECT_EQ(*analysis::pair_heads(io::parse_tensor_ref(mq + ":/q"), io::parse_tensor_ref(mq + ":/k"), head(7)).kv_head, 0);

    const std::string odd = write_gqa(dir, 3);
    std::string msg;
    try {
        analysis::pair_heads(io::parse_tensor_ref(odd + ":/q"), io::parse_tensor_ref(odd + ":/k"), head(1));
    } catch (const InputError& e) {
        msg = e.what();
    }
    EXPECT_NE(msg.find("8 heads"), std::string::npos) << msg;
    EXPECT_NE(msg.find("has 3"), std::string::npos) << msg;
    EXPECT_THROW(analysis::load_inputs(io::parse_tensor_ref(odd + ":/q"), io::parse_tensor_ref(odd + ":/k"), std::nullopt, head(1)), InputError);

    // Equal head counts pair head h with head h, and the JSON stays as it was (no kv_head).
    const std::string same = write_gqa(dir, 8);
    const analysis::LoadedInputs eq = analysis::load_inputs(io::parse_tensor_ref(same + ":/q"), io::parse_tensor_ref(same + ":/k"), std::nullopt, head(6));
    EXPECT_DOUBLE_EQ(eq.k.values(0, 0), 106.0);
    EXPECT_FALSE(eq.input_json.contains("kv_head"));
}

TEST(Heads, EveryQueryHeadOfAPlanPairs)
{
    const std::string f = write_gqa(test::fresh_work_dir("heads_gqa_plan"), 2);
    const auto units = analysis::plan_units({{io::parse_tensor_ref(f + ":/q"), io::parse_tensor_ref(f + ":/k"), std::nullopt, {}}}, analysis::AxisChoice::parse("", "layers"),
                                            analysis::AxisChoice::all("heads"));
    ASSERT_EQ(units.size(), 8u);
    for (const auto& u : units) {
        const analysis::LoadedInputs in = analysis::load_inputs(u.source.q_ref, u.source.k_ref, std::nullopt, u.source.selection);
        EXPECT_DOUBLE_EQ(in.k.values(0, 0), 100.0 + static_cast<double>(*u.head / 4)) << "head " << *u.head;
    }
}
