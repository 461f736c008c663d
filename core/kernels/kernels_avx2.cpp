// The avx2 build of kernels_isa.inc (compiler flags: core/kernels/CMakeLists.txt).
#define ATTNSCOPE_ISA_NS avx2
#define ATTNSCOPE_ISA_EIGEN attnscope_eigen_avx2
#include "kernels/kernels_isa.inc"
