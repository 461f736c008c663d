#pragma once
// Subnormal numbers (0 < |x| < 2^-1022) read and written as zero for the life of a scope: the x86 MXCSR's
// flush-to-zero and denormals-are-zero bits, set on this thread and restored on leaving (exceptions too).
// Threads started inside the scope inherit them (Linux copies the FPU state at clone), so the GEMM tiles
// of kernels/ are covered; a pool started earlier (OpenBLAS's own) is not.
//
// Why: an orthogonal reduction of a (numerically) low-rank matrix fills the trailing matrix with values
// that shrink towards the subnormal range, where each multiply takes ~100 cycles in microcode. A constant
// 1024 x 1024 attention matrix (softmax of q = 0) took 5.9 s of CPU in dgbbrd's rotations and the stage-1
// products; flushed, 0.16 s. The flushed values are below 2^-1022 ~ 2.2e-308 absolute, far under every
// rank tolerance (eps * N * s_1), so no rank, effective rank or entropy changes (docs/maths.md 2).
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

namespace attnscope::util {

class FlushSubnormals {
public:
    FlushSubnormals()
    {
#if defined(__SSE2__)
        saved_ = _mm_getcsr();
        _mm_setcsr(saved_ | k_flush_to_zero | k_denormals_are_zero);
#endif
    }
    ~FlushSubnormals()
    {
#if defined(__SSE2__)
        _mm_setcsr(saved_);
#endif
    }
    FlushSubnormals(const FlushSubnormals&) = delete;
    FlushSubnormals& operator=(const FlushSubnormals&) = delete;

private:
#if defined(__SSE2__)
    static constexpr unsigned k_flush_to_zero = 0x8000u;       // MXCSR bit 15 (FTZ)
    static constexpr unsigned k_denormals_are_zero = 0x0040u;  // MXCSR bit 6 (DAZ)
    unsigned saved_ = 0;
#endif
};

}  // namespace attnscope::util
