#pragma once
// What `attnscope info` tells about a tensor file (docs/cli.md "info"): its `--json` document, and what the file
// carries for display. Shared by the command line (app/cmd_files.cpp) and the Python module (python/).
#include <string>

#include <nlohmann/json.hpp>

#include "io/tensor_file.h"

namespace attnscope::analysis {

// What a file carries for display (docs/pytorch.md 3.4): {"tokens": ..., "image": ...}, members absent when
// the file has none.
nlohmann::ordered_json display_inputs(const io::TensorFile& file);

// The `info --json` document of `file`, opened from `path`.
nlohmann::ordered_json info_json(const std::string& path, const io::TensorFile& file);

}  // namespace attnscope::analysis
