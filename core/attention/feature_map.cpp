#include "attention/feature_map.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "util/rng.h"

namespace attnscope::attention {

namespace {
// The MHLA authors' eps added to relu features (docs/maths.md 1.2).
constexpr double k_relu_eps = 1e-6;
}  // namespace

FeatureMap::FeatureMap(const FeatureMapOptions& options, Index d) : m_options(options), m_d(d)
{
    if (d < 1)
        throw std::invalid_argument("feature map: feature dimension d=" + std::to_string(d) + " must be >= 1");
    if (options.kind == FeatureMapKind::favor) {
        const Index m = options.favor_features;
        if (m < 1)
            throw std::invalid_argument("favor-features m=" + std::to_string(m) + " must be >= 1");
        // W(i, j), i < m, j < d, filled row by row with one normal draw per entry.
        m_w.resize(m, d);
        SplitMix64 rng(options.seed);
        for (Index i = 0; i < m; ++i)
            for (Index j = 0; j < d; ++j)
                m_w(i, j) = rng.normal();
    }
}

Index FeatureMap::dim() const { return m_options.kind == FeatureMapKind::favor ? m_options.favor_features : m_d; }

bool FeatureMap::non_negative() const { return m_options.kind != FeatureMapKind::identity; }

Eigen::MatrixXd FeatureMap::operator()(const Eigen::Ref<const Eigen::MatrixXd>& X) const
{
    if (X.cols() != m_d)
        throw std::invalid_argument("feature map: input has " + std::to_string(X.cols()) + " features, expected d=" +
                                    std::to_string(m_d));
    switch (m_options.kind) {
    case FeatureMapKind::relu:
        return (X.array().max(0.0) + k_relu_eps).matrix();
    case FeatureMapKind::elu1:
        // elu(x) + 1 = x + 1 for x > 0, exp(x) otherwise.
        return X.unaryExpr([](double x) { return x > 0.0 ? x + 1.0 : std::exp(x); });
    case FeatureMapKind::identity:
        return X;
    case FeatureMapKind::favor: {
        // x' = x d^(-1/4);  phi(x) = exp(W x' - |x'|^2 / 2) / sqrt(m)
        const double in_scale = std::pow(static_cast<double>(m_d), -0.25);
        const Eigen::MatrixXd Xs = in_scale * X;
        Eigen::MatrixXd proj(X.rows(), m_w.rows());
        proj.noalias() = Xs * m_w.transpose();
        const Eigen::VectorXd half_sq = 0.5 * Xs.rowwise().squaredNorm();
        proj.colwise() -= half_sq;
        const double out_scale = 1.0 / std::sqrt(static_cast<double>(m_w.rows()));
        return (proj.array().exp() * out_scale).matrix();
    }
    }
    throw std::logic_error("feature map: unhandled kind");
}

}  // namespace attnscope::attention
