// core/kernels: which library runs each class of product (measured, cached, pinned), and SerialBlas.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <Eigen/Core>
#include <gtest/gtest.h>

#include "kernels/kernels.h"
#include "support/test_support.h"

extern "C" int openblas_get_num_threads(void);

using namespace attnscope;
using Eigen::MatrixXd;

namespace {

namespace fs = std::filesystem;

// ATTNSCOPE_CACHE_DIR pointed at a fresh folder for one test, restored afterwards.
class CacheDir {
public:
    CacheDir()
    {
        const char* old = std::getenv("ATTNSCOPE_CACHE_DIR");
        m_had = old != nullptr;
        if (m_had)
            m_old = old;
        m_dir = fs::temp_directory_path() / ("attnscope-gemm-" + std::to_string(::getpid()));
        fs::remove_all(m_dir);
        fs::create_directories(m_dir);
        ::setenv("ATTNSCOPE_CACHE_DIR", m_dir.c_str(), 1);
    }
    ~CacheDir()
    {
        if (m_had)
            ::setenv("ATTNSCOPE_CACHE_DIR", m_old.c_str(), 1);
        else
            ::unsetenv("ATTNSCOPE_CACHE_DIR");
        std::error_code ec;
        fs::remove_all(m_dir, ec);
    }
    fs::path file() const { return m_dir / "gemm-choice.txt"; }

private:
    fs::path m_dir;
    std::string m_old;
    bool m_had = false;
};

std::string slurp(const fs::path& p)
{
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GemmChoice, ClassesFollowTheShape)
{
    EXPECT_EQ(kernels::gemm_class(2048, 2048, 2048), kernels::gemm_general);
    EXPECT_EQ(kernels::gemm_class(2048, 2048, 32), kernels::gemm_rank_k);
    EXPECT_EQ(kernels::gemm_class(32, 2048, 2048), kernels::gemm_thin);
    EXPECT_EQ(kernels::gemm_class(2048, 64, 2048), kernels::gemm_thin);
}

TEST(GemmChoice, MeasuresOnceThenReadsTheCache)
{
    if (kernels::active_isa() == kernels::Isa::generic)
        GTEST_SKIP() << "the generic build always runs OpenBLAS";
    const CacheDir cache;
    const kernels::GemmChoice first = kernels::calibrate_gemm(true);
    EXPECT_EQ(first.source, "measured");
    for (int c = 0; c < 3; ++c) {   // both paths were timed, and the faster one chosen
        EXPECT_GT(first.seconds_own[c], 0.0);
        EXPECT_GT(first.seconds_openblas[c], 0.0);
        EXPECT_EQ(first.own[c], first.seconds_own[c] <= first.seconds_openblas[c]);
    }
    const std::string text = slurp(cache.file());
    EXPECT_NE(text.find(std::string("|") + std::string(kernels::to_string(kernels::active_isa())) + "|"), std::string::npos) << text;
    EXPECT_NE(text.find(kernels::openblas_core()), std::string::npos) << text;
    EXPECT_NE(text.find("threads=" + std::to_string(kernels::threads())), std::string::npos) << text;

    const kernels::GemmChoice again = kernels::calibrate_gemm(true);
    EXPECT_EQ(again.source, "cached");
    EXPECT_EQ(again.own, first.own);
}

TEST(GemmChoice, AGarbledCacheLineIsMeasuredAgainAndReplaced)
{
    if (kernels::active_isa() == kernels::Isa::generic)
        GTEST_SKIP() << "the generic build always runs OpenBLAS";
    const CacheDir cache;
    kernels::calibrate_gemm(true);
    std::string text = slurp(cache.file());
    const auto tab = text.find('\t');
    ASSERT_NE(tab, std::string::npos);
    text = text.substr(0, tab) + "\town fast maybe\nnot a line at all\n";
    std::ofstream(cache.file()) << text;
    const kernels::GemmChoice redone = kernels::calibrate_gemm(true);
    EXPECT_EQ(redone.source, "measured");
    EXPECT_EQ(kernels::calibrate_gemm(true).source, "cached");
}

TEST(GemmChoice, AnUnwritableCacheOnlyCostsAMeasurement)
{
    if (kernels::active_isa() == kernels::Isa::generic)
        GTEST_SKIP() << "the generic build always runs OpenBLAS";
    const char* old = std::getenv("ATTNSCOPE_CACHE_DIR");
    const std::string saved = old ? old : "";
    ::setenv("ATTNSCOPE_CACHE_DIR", "/proc/attnscope-no-such-dir", 1);
    EXPECT_EQ(kernels::calibrate_gemm(true).source, "measured");
    EXPECT_EQ(kernels::calibrate_gemm(true).source, "measured");
    if (old)
        ::setenv("ATTNSCOPE_CACHE_DIR", saved.c_str(), 1);
    else
        ::unsetenv("ATTNSCOPE_CACHE_DIR");
}

TEST(GemmChoice, PinnedPathsAgreeOnEveryClass)
{
    const kernels::GemmPath before = kernels::gemm_path();
    unsigned seed = 11;
    for (const auto& [m, n, k] : std::vector<std::tuple<int, int, int>>{{300, 280, 310}, {600, 520, 24}, {24, 700, 650}, {700, 24, 650}}) {
        const MatrixXd A = test::uniform_matrix(m, k, seed++), B = test::uniform_matrix(k, n, seed++);
        MatrixXd own(m, n), blas(m, n);
        kernels::gemm_on(kernels::GemmPath::own, 'N', 'N', m, n, k, 1.0, A.data(), m, B.data(), k, 0.0, own.data(), m);
        kernels::gemm_on(kernels::GemmPath::openblas, 'N', 'N', m, n, k, 1.0, A.data(), m, B.data(), k, 0.0, blas.data(), m);
        const MatrixXd want = A * B;
        EXPECT_LE((own - want).norm(), 1e-13 * want.norm()) << m << "x" << n << "x" << k;
        EXPECT_LE((blas - want).norm(), 1e-13 * want.norm()) << m << "x" << n << "x" << k;
    }
    kernels::set_gemm_path(kernels::GemmPath::openblas);
    const kernels::GemmChoice pinned = kernels::gemm_choice();
    EXPECT_EQ(pinned.own, (std::array<bool, 3>{false, false, false}));
    EXPECT_NE(pinned.source.find("openblas"), std::string::npos) << pinned.source;
    kernels::set_gemm_path(before);
}

TEST(MeasuredPath, TheFasterWholeOperationWinsAndIsRemembered)
{
    if (kernels::active_isa() == kernels::Isa::generic)
        GTEST_SKIP() << "the generic build always runs OpenBLAS";
    const CacheDir cache;
    int calls = 0;
    const auto blas_faster = [&](kernels::GemmPath p) {
        ++calls;
        return p == kernels::GemmPath::own ? 2e-3 : 1e-3;
    };
    EXPECT_EQ(kernels::measured_path("test-op-a", blas_faster), kernels::GemmPath::openblas);
    EXPECT_EQ(calls, 4);   // best of two on each path
    const auto own_faster = [&](kernels::GemmPath p) {
        ++calls;
        return p == kernels::GemmPath::own ? 1e-3 : 2e-3;
    };
    EXPECT_EQ(kernels::measured_path("test-op-a", own_faster), kernels::GemmPath::openblas);   // remembered
    EXPECT_EQ(calls, 4);
    EXPECT_EQ(kernels::measured_path("test-op-b", own_faster), kernels::GemmPath::own);
    EXPECT_NE(slurp(cache.file()).find("|test-op-b\town"), std::string::npos) << slurp(cache.file());
    EXPECT_EQ(kernels::measured_paths_made().at("test-op-a"), kernels::GemmPath::openblas);

    const kernels::GemmPath before = kernels::gemm_path();   // a pinned path decides without timing
    kernels::set_gemm_path(kernels::GemmPath::own);
    EXPECT_EQ(kernels::measured_path("test-op-c", blas_faster), kernels::GemmPath::own);
    kernels::set_gemm_path(before);
    EXPECT_EQ(calls, 8);
}

TEST(SerialBlas, OpenBlasRunsSeriallyWhileTheKernelsKeepTheirThreads)
{
    const int kernels_before = kernels::threads(), blas_before = openblas_get_num_threads();
    {
        const kernels::SerialBlas serial;
        EXPECT_EQ(openblas_get_num_threads(), 1);
        EXPECT_EQ(kernels::threads(), kernels_before);
        // A product on the OpenBLAS path inside still gets the kernels' threads, and is still right.
        const MatrixXd A = test::uniform_matrix(400, 300, 3), B = test::uniform_matrix(300, 350, 4);
        MatrixXd C(400, 350);
        kernels::gemm_on(kernels::GemmPath::openblas, 'N', 'N', 400, 350, 300, 1.0, A.data(), 400, B.data(), 300, 0.0,
                         C.data(), 400);
        EXPECT_LE((C - A * B).norm(), 1e-13 * (A * B).norm());
        EXPECT_EQ(openblas_get_num_threads(), 1);
    }
    EXPECT_EQ(openblas_get_num_threads(), blas_before);
    EXPECT_EQ(kernels::threads(), kernels_before);

    {   // overlapping guards (nested here; threads alike): the counts come back when the last one ends
        auto outer = std::make_unique<kernels::SerialBlas>();
        {
            const kernels::SerialBlas inner;
            EXPECT_EQ(openblas_get_num_threads(), 1);
        }
        EXPECT_EQ(openblas_get_num_threads(), 1);
        EXPECT_EQ(kernels::threads(), kernels_before);
        outer.reset();
    }
    EXPECT_EQ(openblas_get_num_threads(), blas_before);
    EXPECT_EQ(kernels::threads(), kernels_before);
}

}  // namespace
