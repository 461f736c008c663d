// `attnscope analyze` / `attnscope matrix` agree with the independent NumPy reference
// (tests/reference/attnref.py) on every mechanism option; the comparison itself lives in
// cli_conformance.py so that the known answers never come from our own code.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace {

void conform(const std::string& group)
{
    const std::string dir = attnscope::test::fresh_work_dir("cli_conformance_" + group);
    try {
        attnscope::test::run_python("app/cli_conformance.py", {ATTNSCOPE_BINARY, dir, group});
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
    }
}

}  // namespace

TEST(CliConformance, Softmax) { conform("softmax"); }
TEST(CliConformance, Linear) { conform("linear"); }
TEST(CliConformance, MhlaBlocks) { conform("mhla_blocks"); }
TEST(CliConformance, MhlaGrid) { conform("mhla_grid"); }
TEST(CliConformance, MhlaMixing) { conform("mhla_mixing"); }
TEST(CliConformance, MhlaCausal) { conform("mhla_causal"); }
TEST(CliConformance, MhlaNormalize) { conform("mhla_normalize"); }
TEST(CliConformance, Selection) { conform("selection"); }
TEST(CliConformance, MetricOptions) { conform("metrics"); }
