#include "metrics/topk.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <Spectra/SymEigsSolver.h>

#include "metrics/metrics.h"

namespace attnscope::metrics {

namespace {

// x -> A^T (A x): Spectra's matrix-operation concept (rows(), cols(), perform_op()).
class GramOp {
public:
    using Scalar = double;
    explicit GramOp(const attention::AttentionOperator& op) : m_op(op), m_out(op.rows(), 1) {}
    Eigen::Index rows() const { return m_op.rows(); }
    Eigen::Index cols() const { return m_op.cols(); }
    void perform_op(const double* x_in, double* y_out) const
    {
        const Eigen::Map<const Eigen::MatrixXd> x(x_in, m_op.rows(), 1);
        m_op.apply_gram(x, m_out);
        std::copy(m_out.data(), m_out.data() + m_out.size(), y_out);
        ++m_products;
    }
    Eigen::Index products() const { return m_products; }

private:
    const attention::AttentionOperator& m_op;
    mutable Eigen::MatrixXd m_out;
    mutable Eigen::Index m_products = 0;
};

}  // namespace

TopSingularValues top_singular_values(const attention::AttentionOperator& op, Eigen::Index k, double tol)
{
    if (k < 1)
        throw std::invalid_argument("top-k singular values: k must be at least 1 (got " + std::to_string(k) + ")");
    const Eigen::Index n = op.rows();
    TopSingularValues out;
    // Lanczos needs k < n and a subspace of a few k; small problems are cheaper densely.
    if (n <= 256 || k >= n - 1 || 2 * k + 1 > n) {
        std::vector<double> s = singular_values(op.dense());
        s.resize(static_cast<std::size_t>(std::min<Eigen::Index>(k, n)));
        out.values = std::move(s);
        return out;
    }
    GramOp gram(op);
    const Eigen::Index ncv = std::min<Eigen::Index>(n, std::max<Eigen::Index>(2 * k + 1, k + 20));
    Spectra::SymEigsSolver<GramOp> solver(gram, k, ncv);
    solver.init();
    solver.compute(Spectra::SortRule::LargestAlge, 1000, tol, Spectra::SortRule::LargestAlge);
    out.converged = solver.info() == Spectra::CompInfo::Successful;
    const Eigen::VectorXd lambda = solver.eigenvalues();
    for (Eigen::Index i = 0; i < lambda.size(); ++i)
        out.values.push_back(std::sqrt(std::max(lambda(i), 0.0)));
    std::sort(out.values.begin(), out.values.end(), std::greater<>());
    out.products = gram.products();
    return out;
}

}  // namespace attnscope::metrics
