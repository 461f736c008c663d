#pragma once
// A parameterised fixture for the tests that run once per instruction-set build of core/kernels:
// SetUp selects GetParam() (skipping the test when this CPU lacks it), TearDown restores the set that
// was active before. Instantiate with
//   INSTANTIATE_TEST_SUITE_P(Isa, Suite, test::every_isa(), test::isa_name);
// which names each instance after its instruction set (generic, avx2, avx512).
#include <string>

#include <gtest/gtest.h>

#include "kernels/kernels.h"

namespace attnscope::test {

class IsaTest : public ::testing::TestWithParam<kernels::Isa> {
protected:
    void SetUp() override
    {
        previous_ = kernels::active_isa();
        previous_path_ = kernels::gemm_path();
        kernels::set_gemm_path(kernels::GemmPath::own);   // this instruction set's own products, not OpenBLAS's
        if (kernels::set_isa(GetParam()) != GetParam())
            GTEST_SKIP() << "this CPU lacks " << kernels::to_string(GetParam());
    }
    void TearDown() override
    {
        kernels::set_isa(previous_);
        kernels::set_gemm_path(previous_path_);
    }
    kernels::Isa previous_ = kernels::Isa::generic;
    kernels::GemmPath previous_path_ = kernels::GemmPath::automatic;
};

inline auto every_isa() { return ::testing::Values(kernels::Isa::generic, kernels::Isa::avx2, kernels::Isa::avx512); }

inline std::string isa_name(const ::testing::TestParamInfo<kernels::Isa>& info)
{
    return std::string(kernels::to_string(info.param));
}

}  // namespace attnscope::test
