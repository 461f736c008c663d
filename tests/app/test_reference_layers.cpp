// The reference linear-attention and MHLA layers (tools/python/attnscope_layers.py): check_reference_layers.py
// records them (queries, keys, learned Mc) and compares `attnscope matrix` with each layer's own attention
// matrix. Skipped (not failed) only when torch cannot be imported; tools/install-deps.sh installs it.
#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

TEST(ReferenceLayers, AttnscopeMatrixEqualsTheLayersOwnAttention)
{
    const auto probe = attnscope::test::run_command(std::string("'") + ATTNSCOPE_TEST_PYTHON + "' -c 'import torch'");
    if (probe.status != 0)
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << probe.err;
    attnscope::test::expect_script_passes("app/check_reference_layers.py", "reference_layers");
}

// Issue 32: the MQAR study's dumps (tools/study/mqar.py) open in analyze with no option, their retrieval targets
// point at the answering value tokens, and retrieval_mass equals NumPy's on `attnscope matrix` (check_mqar_dump.py).
TEST(ReferenceLayers, MqarDumpsCarryTheirRetrievalTargets)
{
    const auto probe = attnscope::test::run_command(std::string("'") + ATTNSCOPE_TEST_PYTHON + "' -c 'import torch'");
    if (probe.status != 0)
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << probe.err;
    attnscope::test::expect_script_passes("app/check_mqar_dump.py", "mqar_dump");
}
