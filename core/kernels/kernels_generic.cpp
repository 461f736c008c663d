// The generic build of kernels_isa.inc (compiler flags: core/kernels/CMakeLists.txt).
#define ATTNSCOPE_ISA_NS generic
#define ATTNSCOPE_ISA_EIGEN attnscope_eigen_generic
#include "kernels/kernels_isa.inc"
