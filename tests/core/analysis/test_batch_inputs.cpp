// expand_inputs: a glob that matches an entry stat() cannot follow (a symlink loop) skips it instead of
// letting std::filesystem_error escape (found by fuzz_toml_job with inputs = ["/*/*/*/*"]).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analysis/batch.h"
#include "support/test_support.h"
#include "util/error.h"

namespace fs = std::filesystem;

TEST(BatchInputs, SymlinkLoopIsSkippedNotThrown)
{
    const fs::path dir = attnscope::test::fresh_work_dir("batch_inputs_loop");
    std::ofstream(dir / "a.h5") << "x";
    fs::create_symlink("loop.h5", dir / "loop.h5");   // loop.h5 -> itself: stat fails with ELOOP
    const auto files = attnscope::analysis::expand_inputs({"*.h5"}, dir.string());
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(fs::path(files[0]).filename(), "a.h5");
    EXPECT_THROW(attnscope::analysis::expand_inputs({"loop.h5"}, dir.string()), attnscope::InputError);
}
