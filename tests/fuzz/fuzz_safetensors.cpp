#define FUZZ_EXT ".safetensors"
#include "fuzz_tensor_file.inc"
