// The dense analysis path, stage by stage: building each mechanism's N x N matrix, all singular
// values (LAPACK dgesdd), row entropy. Compare with bench/numpy_dense.py on the same sizes.
#include <benchmark/benchmark.h>

#include <Eigen/Core>

#include "attention/operator.h"
#include "metrics/metrics.h"
#include "util/rng.h"

namespace {

using namespace attnscope;

Eigen::MatrixXd random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed)
{
    SplitMix64 rng(seed);
    Eigen::MatrixXd m(rows, cols);
    for (Eigen::Index j = 0; j < cols; ++j)
        for (Eigen::Index i = 0; i < rows; ++i)
            m(i, j) = rng.normal();
    return m;
}

void build_matrix(benchmark::State& state, attention::Mechanism mechanism)
{
    const auto n = state.range(0);
    const Eigen::MatrixXd q = random_matrix(n, 64, 1), k = random_matrix(n, 64, 2);
    attention::AttentionOptions options;
    options.blocks.blocks = 16;
    const auto op = attention::make_operator(mechanism, q, k, options);
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
    const Eigen::MatrixXd a = random_matrix(n, n, 3);
    for (auto _ : state) {
        Eigen::MatrixXd copy = a;
        auto s = metrics::singular_values(std::move(copy));
        benchmark::DoNotOptimize(s.data());
    }
}

void BM_row_entropy(benchmark::State& state)
{
    const auto n = state.range(0);
    const Eigen::MatrixXd a = random_matrix(n, n, 4).cwiseAbs();
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
BENCHMARK(BM_row_entropy)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
