#pragma once
// Helpers shared by the tests: run a Python fixture script (Debian's python3 with numpy/h5py) into a
// fresh folder, read NumPy arrays written by it, compare matrices, make random inputs, operators and
// synthetic HDF5 files, take LAPACK's singular values as the reference.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "analysis/synth.h"
#include "attention/operator.h"
#include "support/random_matrix.h"

namespace attnscope::test {

// Path of a file under tests/ (source tree), e.g. tests_path("reference/attnref.py").
std::string tests_path(const std::string& relative);

// A fresh, empty folder under the build tree's tests/work/<name>_<pid> (removed first if it exists):
// private to this test process.
std::string fresh_work_dir(const std::string& name);

// Runs `python3 tests/<script> <args...>`; throws std::runtime_error with the output when it fails.
void run_python(const std::string& script, const std::vector<std::string>& args);

// `s` in single quotes for the shell.
std::string shell_quote(const std::string& s);

// Runs a shell command, returns its exit status and captures stdout / stderr.
struct CommandResult {
    int status = -1;
    std::string out;
    std::string err;
};
CommandResult run_command(const std::string& command);

// Reads a float64 / float32 little-endian C-order .npy of rank 1 or 2 written by NumPy (test-side only;
// the product's readers are tested against it, not with it).
Eigen::MatrixXd read_npy_simple(const std::string& path);

// Largest |a - b| relative to max(|b|max, tiny).
double max_rel_diff(const Eigen::Ref<const Eigen::MatrixXd>& a, const Eigen::Ref<const Eigen::MatrixXd>& b);

std::string read_text(const std::string& path);

// rows x cols of independent standard normal entries (std::mt19937_64 seeded with `seed`, column by column).
Eigen::MatrixXd gaussian_matrix(Eigen::Index rows, Eigen::Index cols, unsigned seed);

// rows x cols of independent entries uniform in [lo, hi) (std::mt19937_64 seeded with `seed`, column by column).
Eigen::MatrixXd uniform_matrix(Eigen::Index rows, Eigen::Index cols, unsigned seed, double lo = -1.0, double hi = 1.0);

// All singular values of A, descending, from LAPACK's dgesdd called directly (values only); expects
// dgesdd to succeed. Empty for an empty A.
std::vector<double> dgesdd_values(const Eigen::MatrixXd& A);

// What the std::invalid_argument thrown by f says, or "(no std::invalid_argument)" when f returns.
std::string message_of(const std::function<void()>& f);

// Softmax, linear and MHLA (`blocks` blocks, the other options default) on Q and K, first non-causal,
// then causal: six operators, each with what it was made from.
struct OperatorCase {
    attention::Mechanism mechanism;
    bool causal = false;
    std::unique_ptr<attention::AttentionOperator> op;
};
std::vector<OperatorCase> operator_cases(const Eigen::Ref<const Eigen::MatrixXd>& Q,
                                         const Eigen::Ref<const Eigen::MatrixXd>& K, Eigen::Index blocks);

// Synthetic activations (analysis::synthesize(o, max_bytes)) written with core's HDF5 writer to `path`:
// /q and /k, each heads x n x d.
void write_synthetic_h5(const std::string& path, const analysis::SynthOptions& o, std::uint64_t max_bytes);

}  // namespace attnscope::test
