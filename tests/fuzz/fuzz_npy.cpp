#define FUZZ_EXT ".npy"
#include "fuzz_tensor_file.inc"
