// A session's mechanism state from someone else (docs/security.md, "Sessions"): the families' fields are checked
// like the rest before anything acts on them (core/analysis/session_rules.h).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analysis/session_rules.h"
#include "util/error.h"

namespace {

using nlohmann::json;

std::string refusal(const json& mechanism)
{
    json s = {{"attnscope_session", 1}, {"mechanism", mechanism}};
    try {
        attnscope::analysis::check_session_document(s, 1 << 20);
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

TEST(SessionMechanisms, FamiliesFieldsAreChecked)
{
    EXPECT_EQ(refusal({{"mechanisms", {"softmax", "decay"}}, {"decay", nullptr}, {"gates", "acts.h5:/g"}, {"gates_log", true}}),
              "");
    EXPECT_EQ(refusal({{"decay", 0.5}}), "");
    EXPECT_NE(refusal({{"decay", 5}}).find("mechanism.decay"), std::string::npos);
    EXPECT_NE(refusal({{"decay", "x"}}).find("mechanism.decay"), std::string::npos);
    EXPECT_NE(refusal({{"gates", 3}}).find("mechanism.gates"), std::string::npos);
    EXPECT_NE(refusal({{"gates", std::string("a\0b", 3)}}).find("mechanism.gates"), std::string::npos);
    EXPECT_NE(refusal({{"gates_log", "yes"}}).find("mechanism.gates_log"), std::string::npos);
    EXPECT_NE(refusal({{"mechanisms", "decay"}}).find("mechanism.mechanisms"), std::string::npos);
    EXPECT_NE(refusal({{"mechanisms", {1, 2}}}).find("mechanism.mechanisms"), std::string::npos);
}

}  // namespace
