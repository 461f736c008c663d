// The analysis kernels, stage by stage: building each mechanism's N x N matrix, all singular values
// (LAPACK dgesdd against the two-stage reduction, per instruction set of core/kernels), dense row entropy,
// streamed row entropy per mechanism, and one matrix-free A^T A product. bench/compare_numpy.py runs the
// whole pipeline against NumPy.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include <lapacke.h>

#include "attention/operator.h"
#include "kernels/kernels.h"
#include "metrics/metrics.h"
#include "metrics/streaming.h"
#include "metrics/svd_two_stage.h"
#include "support/random_matrix.h"

namespace {

using namespace attnscope;

using test::splitmix_colwise;

// The mechanism on random queries and keys: n tokens, d = 64 (seeds 1 and 2); `options` default to 16 blocks.
std::unique_ptr<attention::AttentionOperator> random_operator(Eigen::Index n, attention::Mechanism mechanism,
                                                              const attention::AttentionOptions& options)
{
    const Eigen::MatrixXd q = splitmix_colwise(n, 64, 1), k = splitmix_colwise(n, 64, 2);
    return attention::make_operator(mechanism, q, k, options);
}

attention::AttentionOptions sixteen_blocks()
{
    attention::AttentionOptions options;
    options.blocks.blocks = 16;
    return options;
}

void build_matrix(benchmark::State& state, attention::Mechanism mechanism)
{
    const auto op = random_operator(state.range(0), mechanism, sixteen_blocks());
    for (auto _ : state) {
        Eigen::MatrixXd a = op->dense();
        benchmark::DoNotOptimize(a.data());
    }
}

void BM_softmax_matrix(benchmark::State& s) { build_matrix(s, attention::Mechanism::softmax); }
void BM_linear_matrix(benchmark::State& s) { build_matrix(s, attention::Mechanism::linear); }
void BM_mhla_matrix(benchmark::State& s) { build_matrix(s, attention::Mechanism::mhla); }

void BM_singular_values(benchmark::State& state)
{
    const auto n = state.range(0);
    const Eigen::MatrixXd a = splitmix_colwise(n, n, 3);
    for (auto _ : state) {
        Eigen::MatrixXd copy = a;
        auto s = metrics::singular_values(std::move(copy));
        benchmark::DoNotOptimize(s.data());
    }
}

// LAPACK's one-stage path (what NumPy's svd(compute_uv=False) calls) and the two-stage reduction on the
// kernels of each instruction set (0 generic/OpenBLAS, 1 AVX2, 2 AVX-512), on a softmax-like matrix.
void BM_dgesdd(benchmark::State& state)
{
    const auto n = state.range(0);
    const Eigen::MatrixXd a = splitmix_colwise(n, n, 3);
    std::vector<double> s(static_cast<std::size_t>(n));
    for (auto _ : state) {
        Eigen::MatrixXd copy = a;
        LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', static_cast<lapack_int>(n), static_cast<lapack_int>(n), copy.data(),
                       static_cast<lapack_int>(n), s.data(), nullptr, 1, nullptr, 1);
        benchmark::DoNotOptimize(s.data());
    }
}

void BM_two_stage(benchmark::State& state)
{
    const auto n = state.range(0);
    const auto isa = static_cast<kernels::Isa>(state.range(1));
    const kernels::Isa before = kernels::active_isa();
    if (kernels::set_isa(isa) != isa) {
        state.SkipWithError("instruction set not available");
        kernels::set_isa(before);
        return;
    }
    const Eigen::MatrixXd a = splitmix_colwise(n, n, 3);
    metrics::TwoStageStats total, one;
    for (auto _ : state) {
        auto s = metrics::singular_values_two_stage(Eigen::MatrixXd(a), metrics::two_stage_default_band, {}, &one);
        benchmark::DoNotOptimize(s.data());
        total.stage1_seconds += one.stage1_seconds;
        total.stage1_flops += one.stage1_flops;
        total.stage2_seconds += one.stage2_seconds;
        total.stage3_seconds += one.stage3_seconds;
    }
    {   // which library ran stage 1's products (measured once per machine, kernels::measured_path)
        std::string ops;
        for (const auto& [op, path] : kernels::measured_paths_made())
            ops += " " + op + ": " + (path == kernels::GemmPath::own ? "own" : "openblas");
        state.SetLabel(std::string(kernels::to_string(isa)) + " (OpenBLAS " + kernels::openblas_core() + ";" + ops + ")");
    }
    const auto runs = static_cast<double>(state.iterations());
    state.counters["stage1 GFLOP/s"] = total.stage1_flops / total.stage1_seconds * 1e-9;
    state.counters["stage1 s"] = total.stage1_seconds / runs;
    state.counters["stage2 s"] = total.stage2_seconds / runs;
    state.counters["stage3 s"] = total.stage3_seconds / runs;
    kernels::set_isa(before);
}

// One product per kernel (0 OpenBLAS, 1 own AVX2, 2 own AVX-512: pinned, not the measured choice) and shape: 0 square N x N x N (the machine's GEMM
// rate), 1 stage 1's left update (64 x N) = V^T C with V N x 64, 2 its rank-64 update C -= V W (N x N x 64).
// Reported as GFLOP/s, so docs/performance.md can set each stage against the GEMM rate.
void BM_gemm(benchmark::State& state)
{
    const auto n = state.range(0);
    const auto isa = static_cast<kernels::Isa>(state.range(1));
    const auto shape = state.range(2);
    const kernels::Isa before = kernels::active_isa();
    if (kernels::set_isa(isa) != isa) {
        state.SkipWithError("instruction set not available");
        kernels::set_isa(before);
        return;
    }
    constexpr Eigen::Index w = 64;
    const auto path = isa == kernels::Isa::generic ? kernels::GemmPath::openblas : kernels::GemmPath::own;
    static const char* shapes[] = {"square", "V^T C", "C - V W"};
    state.SetLabel((isa == kernels::Isa::generic ? "OpenBLAS " + kernels::openblas_core() : "own " + std::string(kernels::to_string(isa))) +
                   " " + shapes[shape]);
    const Eigen::MatrixXd a = splitmix_colwise(n, n, 3), v = splitmix_colwise(n, w, 4), x = splitmix_colwise(w, n, 5);
    Eigen::MatrixXd c = splitmix_colwise(n, n, 6), y(w, n);
    double flops = 0.0;
    for (auto _ : state) {
        if (shape == 0) {
            kernels::gemm_on(path, 'N', 'N', n, n, n, 1.0, a.data(), n, a.data(), n, 0.0, c.data(), n);
            flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
        } else if (shape == 1) {
            kernels::gemm_on(path, 'T', 'N', w, n, n, 1.0, v.data(), n, a.data(), n, 0.0, y.data(), w);
            flops = 2.0 * static_cast<double>(w) * static_cast<double>(n) * static_cast<double>(n);
        } else {
            kernels::gemm_on(path, 'N', 'N', n, n, w, -1.0, v.data(), n, x.data(), w, 1.0, c.data(), n);
            flops = 2.0 * static_cast<double>(w) * static_cast<double>(n) * static_cast<double>(n);
        }
        benchmark::DoNotOptimize(c.data());
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    kernels::set_isa(before);
}

void streamed_entropy(benchmark::State& state, attention::Mechanism mechanism)
{
    const auto n = state.range(0);
    const auto op = random_operator(n, mechanism, sixteen_blocks());
    for (auto _ : state) {
        auto e = metrics::streaming_row_entropy(*op);
        benchmark::DoNotOptimize(e.stats->mean);
    }
    state.counters["entries/s"] = benchmark::Counter(static_cast<double>(n) * static_cast<double>(n),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void BM_streamed_entropy_softmax(benchmark::State& s) { streamed_entropy(s, attention::Mechanism::softmax); }
void BM_streamed_entropy_linear(benchmark::State& s) { streamed_entropy(s, attention::Mechanism::linear); }
void BM_streamed_entropy_mhla(benchmark::State& s) { streamed_entropy(s, attention::Mechanism::mhla); }

void BM_softmax_gram_product(benchmark::State& state)
{
    const auto n = state.range(0);
    const auto op = random_operator(n, attention::Mechanism::softmax, {});
    const Eigen::MatrixXd x = splitmix_colwise(n, 1, 5);
    Eigen::MatrixXd y(n, 1);
    for (auto _ : state) {
        op->apply_gram(x, y);
        benchmark::DoNotOptimize(y.data());
    }
}

void BM_row_entropy(benchmark::State& state)
{
    const auto n = state.range(0);
    const Eigen::MatrixXd a = splitmix_colwise(n, n, 4).cwiseAbs();
    const std::vector<Eigen::Index> allowed(static_cast<std::size_t>(n), n);
    for (auto _ : state) {
        auto e = metrics::row_entropy(a, allowed);
        benchmark::DoNotOptimize(e.mean);
    }
}

}  // namespace

BENCHMARK(BM_softmax_matrix)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_linear_matrix)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_mhla_matrix)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_singular_values)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_dgesdd)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_two_stage)->ArgsProduct({{1024, 2048, 4096}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gemm)->ArgsProduct({{2048, 4096}, {0, 1, 2}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_streamed_entropy_softmax)->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_streamed_entropy_linear)->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_streamed_entropy_mhla)->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_softmax_gram_product)->Arg(4096)->Arg(8192)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_row_entropy)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
