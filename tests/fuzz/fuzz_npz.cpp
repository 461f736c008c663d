#define FUZZ_EXT ".npz"
#include "fuzz_tensor_file.inc"
