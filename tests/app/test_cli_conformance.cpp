// `attnscope analyze` / `attnscope matrix` agree with the independent NumPy reference
// (tests/reference/attnref.py) on every mechanism option; the comparison itself lives in
// cli_conformance.py so that the known answers never come from our own code.
#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

namespace {

void conform(const std::string& group)
{
    attnscope::test::expect_script_passes("app/cli_conformance.py", "cli_conformance_" + group, {group});
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
