#include "support/test_support.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <limits>
#include <random>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <lapacke.h>

#include "io/writers.h"

namespace attnscope::test {

namespace fs = std::filesystem;

std::string tests_path(const std::string& relative) { return std::string(ATTNSCOPE_TESTS_DIR) + "/" + relative; }

std::string fresh_work_dir(const std::string& name)
{
    // CTest runs every test in its own process, two or more at a time: one folder per process, so
    // parallel tests never wipe each other's files.
    const fs::path dir = fs::path(ATTNSCOPE_TEST_WORK_DIR) / (name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir.string();
}

std::string shell_quote(const std::string& s)
{
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

CommandResult run_command(const std::string& command)
{
    static int counter = 0;
    const fs::path tmp = fs::path(ATTNSCOPE_TEST_WORK_DIR) / "cmd";
    fs::create_directories(tmp);
    const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
    const std::string out_path = (tmp / ("out_" + tag)).string();
    const std::string err_path = (tmp / ("err_" + tag)).string();
    const std::string full = "( " + command + " ) >" + shell_quote(out_path) + " 2>" + shell_quote(err_path) + " </dev/null";
    const int rc = std::system(full.c_str());
    CommandResult r;
    r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + (WIFSIGNALED(rc) ? WTERMSIG(rc) : 0);
    r.out = read_text(out_path);
    r.err = read_text(err_path);
    fs::remove(out_path);
    fs::remove(err_path);
    return r;
}

void run_python(const std::string& script, const std::vector<std::string>& args)
{
    std::string cmd = shell_quote(ATTNSCOPE_TEST_PYTHON) + " " + shell_quote(tests_path(script));
    for (const auto& a : args) {
        cmd += ' ';   // (appending " " + quoted trips GCC 12's -Wrestrict false positive)
        cmd += shell_quote(a);
    }
    const CommandResult r = run_command(cmd);
    if (r.status != 0)
        throw std::runtime_error("python fixture script failed: " + cmd + "\n" + r.out + r.err);
}

std::string read_text(const std::string& path)
{
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Eigen::MatrixXd read_npy_simple(const std::string& path)
{
    const std::string bytes = read_text(path);
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
        throw std::runtime_error("not a .npy file: " + path);
    const int major = static_cast<unsigned char>(bytes[6]);
    std::size_t header_len = 0, offset = 0;
    if (major == 1) {
        header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
        offset = 10;
    } else {
        header_len = 0;
        for (int i = 0; i < 4; ++i)
            header_len |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
        offset = 12;
    }
    const std::string header = bytes.substr(offset, header_len);
    const bool f8 = header.find("'<f8'") != std::string::npos;
    const bool f4 = header.find("'<f4'") != std::string::npos;
    if (!f8 && !f4)
        throw std::runtime_error("read_npy_simple: only <f8/<f4: " + header);
    if (header.find("'fortran_order': False") == std::string::npos)
        throw std::runtime_error("read_npy_simple: only C order: " + header);
    const auto lp = header.find("'shape': (");
    const auto rp = header.find(')', lp);
    std::string dims = header.substr(lp + 10, rp - lp - 10);
    std::vector<long> shape;
    std::stringstream ds(dims);
    std::string item;
    while (std::getline(ds, item, ','))
        if (item.find_first_not_of(' ') != std::string::npos)
            shape.push_back(std::stol(item));
    const long rows = shape.empty() ? 1 : shape[0];
    const long cols = shape.size() >= 2 ? shape[1] : 1;
    Eigen::MatrixXd m(rows, cols);
    const char* data = bytes.data() + offset + header_len;
    for (long i = 0; i < rows; ++i)
        for (long j = 0; j < cols; ++j) {
            const long k = i * cols + j;
            if (f8) {
                double v;
                std::memcpy(&v, data + 8 * k, 8);
                m(i, j) = v;
            } else {
                float v;
                std::memcpy(&v, data + 4 * k, 4);
                m(i, j) = v;
            }
        }
    return m;
}

Eigen::MatrixXd gaussian_matrix(Eigen::Index rows, Eigen::Index cols, unsigned seed)
{
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> g;
    Eigen::MatrixXd A(rows, cols);
    for (Eigen::Index i = 0; i < A.size(); ++i)
        A.data()[i] = g(rng);
    return A;
}

Eigen::MatrixXd uniform_matrix(Eigen::Index rows, Eigen::Index cols, unsigned seed, double lo, double hi)
{
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    Eigen::MatrixXd A(rows, cols);
    for (Eigen::Index i = 0; i < A.size(); ++i)
        A.data()[i] = u(rng);
    return A;
}

std::vector<double> dgesdd_values(const Eigen::MatrixXd& A)
{
    Eigen::MatrixXd B = A;
    std::vector<double> s(static_cast<std::size_t>(std::min(A.rows(), A.cols())));
    if (s.empty())
        return s;
    const lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'N', static_cast<lapack_int>(B.rows()),
                                           static_cast<lapack_int>(B.cols()), B.data(), static_cast<lapack_int>(B.rows()),
                                           s.data(), nullptr, 1, nullptr, 1);
    EXPECT_EQ(info, 0);
    return s;
}

std::string message_of(const std::function<void()>& f)
{
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(no std::invalid_argument)";
}

std::vector<OperatorCase> operator_cases(const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                         const Eigen::Ref<const Eigen::MatrixXd>& K, Eigen::Index blocks)
{
    using attention::Mechanism;
    std::vector<OperatorCase> cases;
    for (bool causal : {false, true})
        for (Mechanism m : {Mechanism::softmax, Mechanism::linear, Mechanism::mhla, Mechanism::decay, Mechanism::gated,
                            Mechanism::cosformer}) {
            if (m == Mechanism::gated && !causal)
                continue;   // causal only
            attention::AttentionOptions o;
            o.causal = causal;
            o.blocks.blocks = blocks;
            o.decay.gamma = 0.9;
            o.gates.values = Eigen::VectorXd::LinSpaced(Q.rows(), 0.8, 1.0);
            cases.push_back({m, causal, attention::make_operator(m, Q, K, o)});
        }
    return cases;
}

void write_synthetic_h5(const std::string& path, const analysis::SynthOptions& o, std::uint64_t max_bytes)
{
    const auto data = analysis::synthesize(o, max_bytes);
    const std::vector<std::int64_t> shape{o.heads, o.n, o.d};
    io::write_hdf5(path, {io::DatasetOut{"/q", shape, data.q}, io::DatasetOut{"/k", shape, data.k}});
}

double max_rel_diff(const Eigen::Ref<const Eigen::MatrixXd>& a, const Eigen::Ref<const Eigen::MatrixXd>& b)
{
    if (a.rows() != b.rows() || a.cols() != b.cols())
        return std::numeric_limits<double>::infinity();
    const double scale = std::max(b.cwiseAbs().maxCoeff(), 1e-300);
    return (a - b).cwiseAbs().maxCoeff() / scale;
}

}  // namespace attnscope::test
