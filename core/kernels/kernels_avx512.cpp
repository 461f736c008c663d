// The avx512 build of kernels_isa.inc (compiler flags: core/kernels/CMakeLists.txt).
#define ATTNSCOPE_ISA_NS avx512
#define ATTNSCOPE_ISA_EIGEN attnscope_eigen_avx512
#include "kernels/kernels_isa.inc"
