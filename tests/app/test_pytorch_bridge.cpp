// The PyTorch bridge (tools/python/attnscope_dump.py): check_pytorch_bridge.py records small random
// models with Debian's python3-torch and compares `attnscope matrix` with PyTorch's own attention
// weights. Skipped (not failed) only when torch cannot be imported; tools/install-deps.sh installs it.
#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

TEST(PytorchBridge, SoftmaxFromDumpEqualsPytorchWeights)
{
    const auto probe = attnscope::test::run_command(std::string("'") + ATTNSCOPE_TEST_PYTHON + "' -c 'import torch'");
    if (probe.status != 0)
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << probe.err;
    attnscope::test::expect_script_passes("app/check_pytorch_bridge.py", "pytorch_bridge");
}
