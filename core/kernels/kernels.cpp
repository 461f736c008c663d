#include "kernels/kernels.h"
#include "util/names.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "kernels/kernels_impl.h"

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int);
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
}

namespace attnscope::kernels {

namespace {

Isa cpu_isa()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma"))
        return Isa::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return Isa::avx2;
#endif
    return Isa::generic;
}

Isa clamp_to_cpu(Isa wanted)
{
    return static_cast<int>(wanted) <= static_cast<int>(cpu_isa()) ? wanted : cpu_isa();
}

// Unknown values are refused by check_environment() (gemm_choice.cpp) before any work; here they keep the CPU's.
Isa initial_isa()
{
    Isa isa = cpu_isa();
    if (const char* env = std::getenv("ATTNSCOPE_SIMD")) {
        const std::string v = env;
        if (v == "generic")
            isa = Isa::generic;
        else if (v == "avx2")
            isa = clamp_to_cpu(Isa::avx2);
        else if (v == "avx512")
            isa = clamp_to_cpu(Isa::avx512);
    }
    return isa;
}

std::atomic<Isa>& current()
{
    static std::atomic<Isa> isa{initial_isa()};
    return isa;
}

// 0 until set_threads: then OpenBLAS's count (--threads sets both).
std::atomic<int>& own_threads()
{
    static std::atomic<int> count{0};
    return count;
}

}  // namespace

int threads()
{
    const int own = own_threads().load(std::memory_order_relaxed);
    return own > 0 ? own : std::max(1, openblas_get_num_threads());
}

int usable_cores()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0)
        if (const int n = CPU_COUNT(&set); n > 0)
            return n;
    return std::max(1u, std::thread::hardware_concurrency());
}

void set_threads(int count)
{
    own_threads().store(std::max(1, count));
    openblas_set_num_threads(std::max(1, count));
}

RestoreThreads::RestoreThreads() : m_own(own_threads().load()), m_blas(std::max(1, openblas_get_num_threads())) {}

RestoreThreads::~RestoreThreads()
{
    openblas_set_num_threads(m_blas);
    own_threads().store(m_own);
}

namespace {

// Whether `bytes` more of address space can be mapped now (an mmap of that size, released at once).
bool address_space_for(std::size_t bytes)
{
    void* probe = ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (probe == MAP_FAILED)
        return false;
    ::munmap(probe, bytes);
    return true;
}

bool address_space_limited()
{
    struct rlimit limit {};
    return ::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
}

// Room for the warm-up's matrices and the new threads' stacks beside the buffers.
constexpr std::size_t kBlasMargin = std::size_t{64} << 20;

std::string mib(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string limit_text()
{
    struct rlimit limit {};
    ::getrlimit(RLIMIT_AS, &limit);
    return "ulimit -v: " + mib(static_cast<std::size_t>(limit.rlim_cur));
}

// The warm-up product's time limit: it takes about a millisecond; a loaded 2-core machine stays far inside.
constexpr int kBlasWarmUpLimitSeconds = 10;

// Ends the process with one error line (status 2) unless destroyed within kBlasWarmUpLimitSeconds. Its thread has
// a small stack (256 KiB), so it starts where OpenBLAS's 128 MiB buffer no longer fits; when even that fails there is
// no watchdog (the check before the product found room for a buffer and a margin, so this is not expected).
class BlasWatchdog {
public:
    explicit BlasWatchdog(std::string limit) : m_message("error: OpenBLAS found no room for its buffer of " + mib(kBlasBufferBytes) +
                                                         " under the address-space limit (" + std::move(limit) +
                                                         ") and would wait for it forever: raise the limit\n")
    {
        // A stack smaller than the static TLS of the loaded libraries is refused (EINVAL: 64 KiB was): the smallest
        // of these sizes that starts, else the default.
        for (const std::size_t kib : {256, 1024, 0}) {
            pthread_attr_t attr;
            if (::pthread_attr_init(&attr) != 0)
                return;
            if (kib == 0 || ::pthread_attr_setstacksize(&attr, kib << 10) == 0)
                m_started = ::pthread_create(&m_thread, &attr, &BlasWatchdog::watch, this) == 0;
            ::pthread_attr_destroy(&attr);
            if (m_started)
                return;
        }
    }
    ~BlasWatchdog()
    {
        if (!m_started)
            return;
        {
            const std::lock_guard lock(m_mutex);
            m_done = true;
        }
        m_cv.notify_one();
        ::pthread_join(m_thread, nullptr);
    }
    BlasWatchdog(const BlasWatchdog&) = delete;
    BlasWatchdog& operator=(const BlasWatchdog&) = delete;

private:
    static void* watch(void* self)
    {
        auto* dog = static_cast<BlasWatchdog*>(self);
        std::unique_lock lock(dog->m_mutex);
        if (!dog->m_cv.wait_for(lock, std::chrono::seconds(kBlasWarmUpLimitSeconds), [dog] { return dog->m_done; })) {
            std::fflush(nullptr);
            const ssize_t written = ::write(2, dog->m_message.data(), dog->m_message.size());
            (void)written;
            std::_Exit(2);
        }
        return nullptr;
    }
    std::string m_message;
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_done = false;
    bool m_started = false;
    pthread_t m_thread {};
};

}  // namespace

int reserve_blas_buffers(int wanted)
{
    const bool given = wanted > 0;   // --threads: set as given (else the count stays OpenBLAS's own)
    if (!given)
        wanted = threads();
    if (!address_space_limited()) {
        if (given)
            set_threads(wanted);
        return threads();
    }
    // Every OpenBLAS thread maps its buffer as it starts and the calling thread maps one at its first product.
    // The threads OpenBLAS started when it was loaded may not have theirs yet: one that found no room retries
    // until it does, and takes the first room that appears, possibly between this check and our own first
    // product, which would then wait forever (CI hung so at ulimit -v 400000 while this machine refused).
    // So room for all k buffers is asked for, as if none were mapped yet: more than needed when they are,
    // never less, and a buffer-hungry thread left spinning can only take room the analysis would have used
    // (an out-of-memory error, never a hang).
    int fit = 0;
    for (int k = wanted; k >= 1 && !fit; --k)
        if (address_space_for(static_cast<std::size_t>(k) * kBlasBufferBytes + kBlasMargin))
            fit = k;
    if (!fit)
        throw std::invalid_argument("the address-space limit (" + limit_text() + ") leaves no room for OpenBLAS's buffer of " +
                                    mib(kBlasBufferBytes) + " (it would wait for it forever): raise the limit");
    if (given || fit < wanted)
        set_threads(fit);
    // One product on every thread: OpenBLAS maps the calling thread's buffer now and keeps it for later products.
    // A thread OpenBLAS started at load that was still waiting for its buffer can take the room between the check
    // above and this product (CI: 1 start in ~10 hung at ulimit -v 400000, the worker's buffer mapped after the
    // check), and OpenBLAS would then wait for ours forever. No check can see such a thread, so a watchdog ends
    // the process with one error line when the product has not returned in kBlasWarmUpLimit (it takes ~1 ms).
    constexpr int n = 256;
    std::vector<double> a(static_cast<std::size_t>(n) * n, 1.0), c(static_cast<std::size_t>(n) * n, 0.0);
    const char no = 'N';
    const double one = 1.0, zero = 0.0;
    BlasWatchdog watchdog(limit_text());
    dgemm_(&no, &no, &n, &n, &n, &one, a.data(), &n, a.data(), &n, &zero, c.data(), &n);
    return fit;
}

bool blas_may_wait_at_exit()
{
    return address_space_limited() && !address_space_for(kBlasBufferBytes + kBlasMargin);
}

namespace {
// SerialBlas's shared state: the first one in saves both thread counts, the last one out restores them, so
// overlapping guards on several threads (a sweep beside the app's own computation) leave them as they were.
struct SerialState {
    std::mutex mutex;
    int depth = 0;
    int blas = 1, own = 0;
};
SerialState& serial_state()
{
    static SerialState state;
    return state;
}
}  // namespace

SerialBlas::SerialBlas()
{
    SerialState& st = serial_state();
    const std::lock_guard lock(st.mutex);
    if (st.depth++ > 0)
        return;
    st.blas = std::max(1, openblas_get_num_threads());
    st.own = own_threads().load();
    if (st.blas > 1) {
        own_threads().store(threads());   // our kernels keep their threads
        openblas_set_num_threads(1);
    }
}

SerialBlas::~SerialBlas()
{
    SerialState& st = serial_state();
    const std::lock_guard lock(st.mutex);
    if (--st.depth > 0 || st.blas <= 1)
        return;
    openblas_set_num_threads(st.blas);
    own_threads().store(st.own);
}

namespace {

// Runs f(t0, count) over row tiles of [0, n) on the --threads threads; the first non-zero status wins.
template <class F>
int parallel_tiles(Index n, Index tile, const F& f)
{
    std::atomic<Index> next{0};
    std::atomic<int> status{0};
    auto worker = [&] {
        for (;;) {
            const Index t0 = next.fetch_add(tile);
            if (t0 >= n || status.load() != 0)
                return;
            const int st = f(t0, std::min(tile, n - t0));
            if (st != 0) {
                int expected = 0;
                status.compare_exchange_strong(expected, st);
            }
        }
    };
    const int parts = static_cast<int>(std::min<Index>(threads(), (n + tile - 1) / tile));
    std::vector<std::thread> pool;
    for (int p = 1; p < parts; ++p)
        pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool)
        t.join();
    return status.load();
}

}  // namespace

namespace {
// The kernel built for the instruction set in use.
template <class F>
F for_isa(F avx512_kernel, F avx2_kernel, F generic_kernel)
{
    switch (active_isa()) {
    case Isa::avx512: return avx512_kernel;
    case Isa::avx2: return avx2_kernel;
    case Isa::generic: break;
    }
    return generic_kernel;
}
}  // namespace

std::string_view to_string(Isa isa)
{
    static constexpr NameTable<Isa, 3> names{{{Isa::generic, "generic"}, {Isa::avx2, "avx2"}, {Isa::avx512, "avx512"}}};
    return name_of(names, isa);
}

Isa active_isa() { return current().load(std::memory_order_relaxed); }

Isa set_isa(Isa isa)
{
    const Isa effective = clamp_to_cpu(isa);
    current().store(effective);
    return effective;
}

GemmClass gemm_class(Index m, Index n, Index k)
{
    constexpr Index thin = 128;
    if (std::min(m, n) <= thin)
        return gemm_thin;
    return k <= thin ? gemm_rank_k : gemm_general;
}

namespace {

void openblas_gemm(char ta, char tb, Index m, Index n, Index k, double alpha, const double* A, Index lda,
                   const double* B, Index ldb, double beta, double* C, Index ldc)
{
    constexpr Index int_max = 2147483647;
    if (m > int_max || n > int_max || k > int_max || lda > int_max || ldb > int_max || ldc > int_max)
        throw std::invalid_argument("gemm: dimensions exceed BLAS's int");
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(std::max<Index>(k, 0));
    const int la = static_cast<int>(std::max<Index>(lda, 1)), lb = static_cast<int>(std::max<Index>(ldb, 1)),
              lc = static_cast<int>(ldc);
    if (ki == 0) {   // C = beta C
        for (Index j = 0; j < n; ++j)
            for (Index i = 0; i < m; ++i)
                C[i + j * ldc] = beta == 0.0 ? 0.0 : beta * C[i + j * ldc];
        return;
    }
    const int blas = openblas_get_num_threads(), want = threads();   // inside SerialBlas: ours
    if (blas != want)
        openblas_set_num_threads(want);
    dgemm_(&ta, &tb, &mi, &ni, &ki, &alpha, A, &la, B, &lb, &beta, C, &lc);
    if (blas != want)
        openblas_set_num_threads(blas);
}

void own_gemm(Isa isa, char ta, char tb, Index m, Index n, Index k, double alpha, const double* A, Index lda,
              const double* B, Index ldb, double beta, double* C, Index ldc)
{
    auto kernel = isa == Isa::avx512 ? &avx512::gemm : &avx2::gemm;
    const bool bt = tb == 'T' || tb == 't';
    // C in slabs of a fixed number of columns, shared out to the threads: each slab's product (and so its
    // rounding, which depends on the blocking Eigen picks for its shape) is the same whatever --threads.
    constexpr Index slab = 256;
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (flops < 4e6 || (n <= slab && m <= 2 * slab)) {
        kernel(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (n <= slab) {   // a thin C (the two-stage SVD's C V, m x 32): slabs of rows instead
        const bool at = ta == 'T' || ta == 't';
        parallel_tiles(m, slab, [&](Index i0, Index h) {
            kernel(ta, tb, h, n, k, alpha, at ? A + i0 * lda : A + i0, lda, B, ldb, beta, C + i0, ldc);
            return 0;
        });
        return;
    }
    parallel_tiles(n, slab, [&](Index j0, Index w) {
        kernel(ta, tb, m, w, k, alpha, A, lda, bt ? B + j0 : B + j0 * ldb, ldb, beta, C + j0 * ldc, ldc);
        return 0;
    });
}

}  // namespace

void gemm_on(GemmPath path, char ta, char tb, Index m, Index n, Index k, double alpha, const double* A, Index lda,
             const double* B, Index ldb, double beta, double* C, Index ldc)
{
    if (m <= 0 || n <= 0)
        return;
    const Isa isa = active_isa();
    if (path == GemmPath::automatic) {
        // Small products: ours (no thread start-up, no calibration needed for a 4x4 block).
        const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
        path = flops < 4e6 ? GemmPath::own : (gemm_choice().own[gemm_class(m, n, k)] ? GemmPath::own : GemmPath::openblas);
    }
    if (isa == Isa::generic || k <= 0 || path == GemmPath::openblas)
        openblas_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        own_gemm(isa, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(char ta, char tb, Index m, Index n, Index k, double alpha, const double* A, Index lda, const double* B,
          Index ldb, double beta, double* C, Index ldc)
{
    gemm_on(gemm_path(), ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

int accumulate_entropy(const double* tile, Index rows, Index cols, Index ld, double* acc)
{
    return for_isa(&avx512::accumulate_entropy, &avx2::accumulate_entropy, &generic::accumulate_entropy)(tile, rows, cols, ld, acc);
}

void softmax_columns(double* tile, Index rows, Index cols, Index ld, double scale, const Index* allowed)
{
    for_isa(&avx512::softmax_columns, &avx2::softmax_columns, &generic::softmax_columns)(tile, rows, cols, ld, scale, allowed);
}

namespace {
constexpr Index k_entropy_tile = 128;   // queries per tile: a 512 x 128 score block (512 KiB)

// One value per query row of the softmax scores, tile by tile on the kernels' threads: `kernel` fills
// out[t0, t0 + count) (softmax_entropy, softmax_lse).
template <class Kernel>
int softmax_row_tiles(Kernel kernel, const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d,
                      double scale, bool causal, double* out)
{
    return parallel_tiles(n, k_entropy_tile, [&](Index t0, Index count) {
        return kernel(Q, ldq, K, ldk, n, d, scale, causal, t0, count, out + t0);
    });
}
}  // namespace

int softmax_row_entropies(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale,
                          bool causal, double* h)
{
    return softmax_row_tiles(for_isa(&avx512::softmax_entropy, &avx2::softmax_entropy, &generic::softmax_entropy), Q,
                             ldq, K, ldk, n, d, scale, causal, h);
}

int kernel_block_sums(const double* A, Index lda, const double* B, Index ldb, Index n, Index r, Index m,
                      const Index* offsets, bool causal, double* P, double* R, Index ldp)
{
    auto kernel = for_isa(&avx512::kernel_block_sums, &avx2::kernel_block_sums, &generic::kernel_block_sums);
    return parallel_tiles(n, k_entropy_tile, [&](Index u0, Index count) {
        return kernel(A, lda, B, ldb, r, m, offsets, u0, count, causal, P, R, ldp);
    });
}

namespace {
constexpr Index k_apply_tile = 128;   // output rows per task of softmax_apply
}  // namespace

int softmax_log_normalisers(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale,
                            bool causal, double* lse)
{
    return softmax_row_tiles(for_isa(&avx512::softmax_lse, &avx2::softmax_lse, &generic::softmax_lse), Q, ldq, K, ldk,
                             n, d, scale, causal, lse);
}

void softmax_apply(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale, bool causal,
                   const double* lse, bool transpose, const double* X, Index ldx, Index b, double* Y, Index ldy)
{
    if (n <= 0 || b <= 0)
        return;
    auto kernel = for_isa(&avx512::softmax_apply_rows, &avx2::softmax_apply_rows, &generic::softmax_apply_rows);
    parallel_tiles(n, k_apply_tile, [&](Index r0, Index count) {
        kernel(Q, ldq, K, ldk, n, d, scale, causal, lse, transpose, X, ldx, b, r0, count, Y, ldy);
        return 0;
    });
}

void softmax_gram(const double* Q, Index ldq, const double* K, Index ldk, Index n, Index d, double scale, bool causal,
                  const double* lse, const double* X, Index ldx, Index b, double* Y, Index ldy)
{
    if (n <= 0 || b <= 0)
        return;
    auto kernel = for_isa(&avx512::softmax_gram_rows, &avx2::softmax_gram_rows, &generic::softmax_gram_rows);
    const Index tiles = (n + k_apply_tile - 1) / k_apply_tile;
    const int parts = static_cast<int>(std::min<Index>(threads(), tiles));
    for (Index j = 0; j < b; ++j)
        std::fill(Y + j * ldy, Y + j * ldy + n, 0.0);
    // Part 0 sums straight into Y, the others into their own accumulators. Each part reuses one workspace:
    // the tile (n x 128, columns aligned) and its share of A X (128 x b).
    std::vector<std::vector<double>> acc(static_cast<std::size_t>(parts - 1));
    const auto work_size = static_cast<std::size_t>(8 + (n + 8) * k_apply_tile + k_apply_tile * b);
    std::vector<std::vector<double>> scratch(static_cast<std::size_t>(parts), std::vector<double>(work_size));
    auto work = [&](int p) {
        double* out = Y;
        Index ld = ldy;
        if (p > 0) {
            auto& a = acc[static_cast<std::size_t>(p - 1)];
            a.assign(static_cast<std::size_t>(n * b), 0.0);
            out = a.data();
            ld = n;
        }
        for (Index t = p; t < tiles; t += parts) {
            const Index r0 = t * k_apply_tile;
            kernel(Q, ldq, K, ldk, n, d, scale, causal, lse, X, ldx, b, r0, std::min(k_apply_tile, n - r0), out, ld,
                   scratch[static_cast<std::size_t>(p)].data());
        }
    };
    std::vector<std::thread> pool;
    for (int p = 1; p < parts; ++p)
        pool.emplace_back(work, p);
    work(0);
    for (std::thread& t : pool)
        t.join();
    for (const auto& a : acc)
        for (Index j = 0; j < b; ++j)
            for (Index i = 0; i < n; ++i)
                Y[i + j * ldy] += a[static_cast<std::size_t>(i + j * n)];
}

}  // namespace attnscope::kernels
