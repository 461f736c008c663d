// Fuzzes the batch job parser: the input is written to a temp .toml and parsed (inputs it names need
// not exist: parse errors, not file errors, are the point).
#include <stdexcept>

#include "batch_job.h"
#include "fuzz_common.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    attnscope::fuzz::TempFile file(data, size, ".toml");
    try {
        (void)attnscope::app::parse_batch_job(file.path);
    } catch (const attnscope::InputError&) {
    } catch (const std::invalid_argument&) {
    }
    return 0;
}
