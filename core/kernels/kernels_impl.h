#pragma once
// The per-instruction-set entry points behind kernels.h (internal to core/kernels). Plain declarations,
// no Eigen: this header is shared by builds with different compiler flags.
#include "kernels/kernels.h"

namespace attnscope::kernels {
#define ATTNSCOPE_KERNEL_DECLS                                                                                  \
    void gemm(char ta, char tb, Index m, Index n, Index k, double alpha, const double* A, Index lda,           \
              const double* B, Index ldb, double beta, double* C, Index ldc);                                  \
    int accumulate_entropy(const double* tile, Index rows, Index cols, Index ld, double* acc);                  \
    void softmax_columns(double* tile, Index rows, Index cols, Index ld, double scale, const Index* allowed);   \
    int softmax_entropy(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale, \
                        bool causal, Index t0, Index count, double* h);                                         \
    int kernel_block_sums(const double* A, Index lda, const double* B, Index ldb, Index r, Index m,                \
                          const Index* offsets, Index u0, Index count, bool causal, double* P, double* R, Index ldp); \
    int softmax_lse(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale,     \
                    bool causal, Index t0, Index count, double* lse);                                           \
    void softmax_apply_rows(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d,          \
                            double scale, bool causal, const double* lse, bool transpose, const double* X,     \
                            Index ldx, Index b, Index r0, Index count, double* Y, Index ldy);               \
    void softmax_gram_rows(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d,           \
                           double scale, bool causal, const double* lse, const double* X, Index ldx, Index b,  \
                           Index r0, Index count, double* Y, Index ldy, double* work);
namespace generic { ATTNSCOPE_KERNEL_DECLS }
namespace avx2 { ATTNSCOPE_KERNEL_DECLS }
namespace avx512 { ATTNSCOPE_KERNEL_DECLS }
#undef ATTNSCOPE_KERNEL_DECLS
}  // namespace attnscope::kernels
