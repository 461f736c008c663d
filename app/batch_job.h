#pragma once
// The TOML job file of `attnscope batch` (schema in docs/batch.md), parsed into a core BatchPlan with
// the same validation as the command-line options. Unknown keys and wrong types are errors naming the
// file, line and key.
#include <string>

#include "analysis/batch.h"

namespace attnscope::app {

analysis::BatchPlan parse_batch_job(const std::string& path);

}  // namespace attnscope::app
