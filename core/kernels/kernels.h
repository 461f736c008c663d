#pragma once
// Hot loops compiled for the CPU at hand: the matrix products of the dense SVD's first stage and of the
// streamed attention tiles, and the entropy reductions. Each kernel is built three times (kernels_isa.inc:
// baseline x86-64, AVX2 + FMA, AVX-512) and picked once at run time from what the CPU supports, so one
// binary runs anywhere and uses the vector units it finds. The baseline is OpenBLAS (cblas_dgemm) and
// plain loops.
//
// Why not just OpenBLAS: the Debian OpenBLAS build this project uses (0.3.21) does not recognise some
// current CPUs and falls back to older kernels (SSE3 "Prescott" on some Xeons, where Eigen's AVX-512
// products are 2-4x faster per core; AVX2 "Haswell" when the environment forces it), and forcing a newer
// core type is known to give wrong results with older builds on some processors (docs/performance.md).
// Where OpenBLAS does run its tuned kernels it can be the faster one, so which library runs a product is
// measured on each machine (gemm_choice, measured_path below), not assumed.
//
// Products run on threads() threads (the --threads setting), split by columns (or rows) of C.
// Override the choice with ATTNSCOPE_SIMD=generic|avx2|avx512 (tests compare the paths).
#include <array>
#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace attnscope::kernels {

using Index = std::ptrdiff_t;

// Threads of the kernels below: set_threads (the --threads option) sets them and OpenBLAS's; until then
// OpenBLAS's count.
int threads();
void set_threads(int count);
// The cores this process may run on (sched_getaffinity: a container's or taskset's share), else
// std::thread::hardware_concurrency(); at least 1. --threads is capped at it.
int usable_cores();

// OpenBLAS maps one buffer (kBlasBufferBytes in Debian's build, 0.3.21) for every thread it starts, as it
// starts it, and for a calling thread at its first product; when that mmap fails it tries again forever
// (memory.c, blas_memory_alloc): under an address-space limit (ulimit -v, RLIMIT_AS), `--threads 32` hung.
// reserve_blas_buffers(wanted) sets the thread count (ours and OpenBLAS's; 0: keep it) to `wanted`, or to
// fewer when the buffers of all its threads do not fit (an mmap of their size, released at once; asked
// for as if none were mapped yet, since a thread started at load may still be waiting for its own),
// and has OpenBLAS map the calling thread's buffer now with one small product, while the space is there. A thread
// started at load can still take that room after the check: a product not done in 10 s then ends the process
// with one error line (status 2) from a watchdog thread, never a hang.
// Returns the count in effect. Throws std::invalid_argument naming the limit when not even one buffer fits:
// an error line, never a hang. Products never depend on the thread count, so no number changes.
inline constexpr std::size_t kBlasBufferBytes = (std::size_t{128} << 20) + (std::size_t{64} << 10);
int reserve_blas_buffers(int wanted = 0);
// True under an address-space limit that leaves no room for one more OpenBLAS buffer: a thread OpenBLAS started
// when the library was loaded may then be waiting for its buffer forever, and OpenBLAS's exit handler joins it.
// main() then ends the process with _Exit after flushing its output.
bool blas_may_wait_at_exit();

// For one run's --threads in a process that outlives the run (the Python module's threads=, docs/python.md
// "No state between calls"): when it ends, both counts are put back as they were when it was made (before
// any set_threads: OpenBLAS's own count, which the kernels then follow), whatever set_threads did meanwhile.
// The counts belong to the process, so the caller makes sure nothing else computes while one lives.
class RestoreThreads {
public:
    RestoreThreads();
    ~RestoreThreads();
    RestoreThreads(const RestoreThreads&) = delete;
    RestoreThreads& operator=(const RestoreThreads&) = delete;

private:
    int m_own, m_blas;
};

// While one lives, OpenBLAS runs on one thread and the kernels keep theirs. For stretches where our kernels
// do the parallel work between small LAPACK calls (a QR panel, a bulge chase): OpenBLAS's idle workers spin
// on sched_yield for ~0.1 s after each threaded call, taking a core from the kernels' threads (a quarter of
// the two-stage SVD's CPU time at N = 2048 went there). Guards may overlap, on one thread or several: the
// counts come back when the last one ends.
class SerialBlas {
public:
    SerialBlas();
    ~SerialBlas();
    SerialBlas(const SerialBlas&) = delete;
    SerialBlas& operator=(const SerialBlas&) = delete;
};

enum class Isa { generic, avx2, avx512 };
std::string_view to_string(Isa isa);
// The instruction set in use (detected once; ATTNSCOPE_SIMD can lower it, never raise it past the CPU).
Isa active_isa();
// For tests: run with `isa` from now on (clamped to what the CPU supports); returns the one in effect.
Isa set_isa(Isa isa);

// C = alpha * op(A) * op(B) + beta * C, column-major, op(X) = X or X^T as trans_a / trans_b are 'N' / 'T'
// (dgemm's contract; C is m x n, the inner dimension k). beta = 0 ignores C's old contents.
void gemm(char trans_a, char trans_b, Index m, Index n, Index k, double alpha, const double* A, Index lda,
          const double* B, Index ldb, double beta, double* C, Index ldc);

// Products come in three classes: rank-k updates (inner dimension k <= 128, C larger), thin outputs
// (C with at most 128 rows or columns: the panels of the two-stage SVD, V^T C and C V) and the rest. For
// each class either OpenBLAS's dgemm or the instruction set's own kernel runs, whichever was faster when
// measured on this machine (~0.4 s, once: the result is cached per CPU model, instruction set, OpenBLAS core
// and thread count in $ATTNSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/attnscope, else ~/.cache/attnscope, file
// gemm-choice.txt). ATTNSCOPE_GEMM=own|openblas pins one path for every class (tests comparing the
// instruction sets pin `own`). The generic build always uses OpenBLAS.
enum class GemmPath { automatic, own, openblas };
enum GemmClass { gemm_general = 0, gemm_rank_k = 1, gemm_thin = 2 };
struct GemmChoice {
    std::array<bool, 3> own{false, false, false};   // per GemmClass: the own kernel (else OpenBLAS)
    std::array<double, 3> seconds_own{0, 0, 0}, seconds_openblas{0, 0, 0};   // when measured now
    std::string source;   // "measured", "cached", or what fixed it
};
GemmClass gemm_class(Index m, Index n, Index k);
void set_gemm_path(GemmPath path);
GemmPath gemm_path();
// The choice in effect for the active instruction set and thread count (measured or read on first use).
GemmChoice gemm_choice();
// The choice if one was needed in this process (a product large enough ran), else nothing: reports only.
std::optional<GemmChoice> gemm_choice_made();
// Measures now (use_cache: read a cached answer first and store a new one).
GemmChoice calibrate_gemm(bool use_cache);
// Operations that run many products in a row (stage 1 of the two-stage SVD) choose their library as a
// whole, by timing a representative run on each path: single products measured apart miss how the two
// libraries interfere (OpenBLAS's idle workers spin for ~0.1 s after each threaded call and take a core from
// our threads), so a per-class mix measured slower than either library alone. `time_it(path)` returns the
// seconds of one representative run; the faster path (best of two, ours first) is cached like the classes,
// under `operation`. Pinned paths (ATTNSCOPE_GEMM, set_gemm_path) and the generic build decide without timing.
GemmPath measured_path(const std::string& operation, const std::function<double(GemmPath)>& time_it);
// The operations measured (or read from the cache) in this process, for reports.
std::map<std::string, GemmPath> measured_paths_made();
// gemm() on the given path (automatic: as gemm()).
void gemm_on(GemmPath path, char trans_a, char trans_b, Index m, Index n, Index k, double alpha, const double* A,
             Index lda, const double* B, Index ldb, double beta, double* C, Index ldc);
// The kernel-choice cache's text as key -> value: lines "key<TAB>value"; a line without a tab, longer than 1 KiB,
// or with an empty key or value or a control character is ignored (the cache is read only when it is a regular
// file of at most 64 KiB, never through a symlink, and rewritten atomically). For the fuzzer as well.
std::map<std::string, std::string> parse_gemm_cache(std::string_view text);

// Refuses values of the ATTNSCOPE_* variables read here that are not ones they take (std::invalid_argument:
// "ATTNSCOPE_GEMM=opnblas is not one of own, openblas"); unset or empty is fine. Front ends call it first,
// so that a misspelt override is an error rather than silently ignored.
void check_environment();

// The kernel OpenBLAS runs on this CPU (openblas_get_corename: "Haswell", "SkylakeX", "Prescott", ...).
std::string openblas_core();

// Row entropy of a column-major tile (rows x cols, leading dimension ld) of non-negative entries:
// acc[i] -= sum_j a_ij ln a_ij (0 ln 0 = 0). Returns 0, or 1 when an entry is negative, 2 when one is
// NaN or infinite (acc is then unspecified).
int accumulate_entropy(const double* tile, Index rows, Index cols, Index ld, double* acc);

// Softmax columns in place: for each column c of the (rows x cols, ld) tile, with `allowed[c]` leading
// entries in play (the rest set to 0): x <- exp(scale * x - max), then divided by its sum.
void softmax_columns(double* tile, Index rows, Index cols, Index ld, double scale, const Index* allowed);

// Streamed row entropies, O((N + tile) d) memory, on the --threads threads. Each returns 0, or 1 when an
// entry is negative (entropy undefined), 2 when one is not finite or a row sums to zero.
//
// Softmax rows H_t of softmax(scale * Q K^T) (causal: keys j <= t), every t in [0, n): Q and K column-major
// n x d. A running log-sum-exp: H_t = ln s_t - (1/s_t) sum_j e_tj (x_tj - m_t), e = exp(x - m), so no log
// per entry.
int softmax_row_entropies(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale,
                          bool causal, double* h);
// Kernel attention in sorted coordinates (blocks contiguous: block b holds positions offsets[b] ..
// offsets[b+1]-1), raw scores g_uv = a_u . b_v (causal: v <= u), A and B column-major n x r: per row u and
// key block b, P(u, b) = sum_v g_uv and R(u, b) = sum_v g_uv ln g_uv over the block's allowed keys (P, R
// column-major n x m, leading dimension ldp). Every mixing and normalisation of linear and MHLA attention
// follows from these (AttentionOperator::row_entropies), so one pass serves both mechanisms. Returns 1
// when a score is negative.
int kernel_block_sums(const double* A, Index lda, const double* B, Index ldb, Index n, Index r, Index m,
                      const Index* offsets, bool causal, double* P, double* R, Index ldp);

// Softmax's log normalisers lse[t] = ln sum_j exp(scale q_t . k_j) over the keys allowed to query t (all,
// or j <= t when causal), t in [0, n), Q and K column-major n x d. With them any tile of the attention
// matrix stands on its own, A[t,j] = exp(scale q_t . k_j - lse[t]), which is what lets softmax_apply share
// out output rows instead of accumulating partial sums. Returns 0, or 2 when a score or a normaliser is not
// finite (lse is then unspecified).
int softmax_log_normalisers(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale,
                            bool causal, double* lse);

// Y = A X (transpose false) or Y = A^T X (true) for the softmax matrix A of Q, K with log normalisers `lse`
// (softmax_log_normalisers), X and Y column-major n x b (leading dimensions ldx, ldy). One pass over the
// N x N scores whatever b: tiles of 128 output rows go to the --threads threads, and each sums over the other
// side in a fixed order, so Y is the same for any number of threads. Causal tiles skip the masked half.
void softmax_apply(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale, bool causal,
                   const double* lse, bool transpose, const double* X, Index ldx, Index b, double* Y, Index ldy);

// Y = A^T (A X) in one pass: each tile of query rows of A is formed once (all the keys it sees), gives its
// rows of A X, and adds its share of A^T (A X) at once. Tiles are dealt out round-robin to the --threads
// threads, each summing into its own n x b accumulator, added in thread order: Y is the same for the same
// number of threads. Memory: threads * (n * b + n * 128) doubles.
void softmax_gram(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale, bool causal,
                  const double* lse, const double* X, Index ldx, Index b, double* Y, Index ldy);

}  // namespace attnscope::kernels
