// The PyTorch bridge (tools/python/attnscope_dump.py): check_pytorch_bridge.py records small random
// models with Debian's python3-torch and compares `attnscope matrix` with PyTorch's own attention
// weights; check_sdpa_models.py does the same for models in the LLaMA, GPT-2, ViT and BERT styles that
// call scaled_dot_product_attention. Skipped (not failed) only when torch cannot be imported;
// tools/install-deps.sh installs it.
#include <gtest/gtest.h>

#include "support/attnscope_binary.h"

namespace {

bool torch_missing(std::string& why)
{
    const auto probe = attnscope::test::run_command(std::string("'") + ATTNSCOPE_TEST_PYTHON + "' -c 'import torch'");
    why = probe.err;
    return probe.status != 0;
}

}  // namespace

TEST(PytorchBridge, SoftmaxFromDumpEqualsPytorchWeights)
{
    std::string why;
    if (torch_missing(why))
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << why;
    attnscope::test::expect_script_passes("app/check_pytorch_bridge.py", "pytorch_bridge");
}

TEST(PytorchBridge, ScaledDotProductAttentionModelsMatchTheirOwnProbabilities)
{
    std::string why;
    if (torch_missing(why))
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << why;
    attnscope::test::expect_script_passes("app/check_sdpa_models.py", "pytorch_sdpa");
}

// save(gates=...): a gated model's scalar gates recorded beside q and k are analysed as `gated` from the file alone
// (tests/app/check_bridge_gates.py).
TEST(PytorchBridge, GatesSavedWithTheRecordingAreAnalysedAsGated)
{
    std::string why;
    if (torch_missing(why))
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << why;
    attnscope::test::expect_script_passes("app/check_bridge_gates.py", "bridge_gates");
}

// save(batch="all"): B inputs in one file ([B, H, N, d], layout bhnd); `--at b=I` reads each back as PyTorch computed
// it (tests/app/check_bridge_batch.py).
TEST(PytorchBridge, BatchDumpReadsBackEachInputByIndex)
{
    std::string why;
    if (torch_missing(why))
        GTEST_SKIP() << "python3 cannot import torch (apt-get install python3-torch): " << why;
    attnscope::test::expect_script_passes("app/check_bridge_batch.py", "bridge_batch");
}
