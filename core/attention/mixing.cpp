#include "attention/mixing.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "util/names.h"

namespace attnscope::attention {

namespace {

// Euclidean distances between block centres (rows of C).
Eigen::MatrixXd distances(const Eigen::MatrixXd& C)
{
    const Index m = C.rows();
    Eigen::MatrixXd D(m, m);
    for (Index j = 0; j < m; ++j)
        for (Index i = 0; i < m; ++i)
            D(i, j) = std::sqrt((C.row(i) - C.row(j)).squaredNorm());
    return D;
}

// Each column divided by its sum (as the authors' 1x1-convolution weights).
// `label` names the preset in errors (a column summing to 0 cannot be normalised).
Eigen::MatrixXd column_normalised(Eigen::MatrixXd W, const std::string& label)
{
    for (Index j = 0; j < W.cols(); ++j) {
        const double s = W.col(j).sum();
        if (!(s > 0.0) || !std::isfinite(s))
            throw std::invalid_argument("mixing " + label + ": column " + std::to_string(j) + " sums to " +
                                        std::to_string(s) + ", cannot column-normalise");
        W.col(j) /= s;
    }
    return W;
}

std::string fmt_double(double x)
{
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

}  // namespace

const std::vector<std::string_view>& mixing_presets()
{
    static const std::vector<std::string_view> presets = {"cos",     "linear",   "exp",          "gaussian", "local",
                                                          "uniform", "identity", "causal-local", "causal"};
    return presets;
}

bool is_mixing_preset(std::string_view text)
{
    for (const std::string_view p : mixing_presets())
        if (text == p)
            return true;
    return false;
}

std::string_view default_mixing_name(bool causal, bool grid)
{
    if (causal)
        return "causal-local";
    return grid ? "cos" : "exp";
}

bool signed_mixing(const Eigen::MatrixXd& mixing) { return (mixing.array() < 0.0).any(); }

std::string default_mixing_text()
{
    std::string s(default_mixing_name(false, false));
    s.append(" on 1-D blocks, ").append(default_mixing_name(false, true)).append(" on a block grid, ");
    return s.append(default_mixing_name(true, false)).append(" when causal");
}

std::string resolved_mixing_name(const MixingSpec& spec, bool causal, bool grid)
{
    if (spec.matrix)
        return "file";
    if (spec.preset.empty())
        return std::string(default_mixing_name(causal, grid));
    return spec.preset;
}

Eigen::MatrixXd make_mixing(const MixingSpec& spec, const BlockLayout& layout, bool causal)
{
    const Index m = layout.num_blocks;
    if (spec.matrix) {
        const Eigen::MatrixXd& W = *spec.matrix;
        const std::string source = spec.preset.empty() ? std::string("mixing matrix") : "mixing matrix " + spec.preset;
        if (W.rows() != m || W.cols() != m)
            throw std::invalid_argument(source + " is " + std::to_string(W.rows()) + "x" + std::to_string(W.cols()) +
                                        " but there are M=" + std::to_string(m) + " blocks (expected " +
                                        std::to_string(m) + "x" + std::to_string(m) + ")");
        for (Index j = 0; j < m; ++j)
            for (Index i = 0; i < m; ++i) {
                if (!std::isfinite(W(i, j)))
                    throw std::invalid_argument(source + " has a non-finite entry at (" + std::to_string(i) + ", " +
                                                std::to_string(j) + ")");
            }
        return W;
    }

    const std::string name = resolved_mixing_name(spec, causal, layout.centres.cols() > 1);
    if (!is_mixing_preset(name))
        throw std::invalid_argument("unknown mixing preset '" + name + "' (valid: " + joined(mixing_presets()) +
                                    ", or FILE[:DATASET])");
    if ((name == "exp" || name == "causal-local") && !(spec.sigma > 0.0 && std::isfinite(spec.sigma)))
        throw std::invalid_argument("mixing-sigma " + fmt_double(spec.sigma) + " must be finite and > 0");
    if (name == "local" && std::isnan(spec.threshold))
        throw std::invalid_argument("mixing-threshold must be a number");
    if (m < 1)
        throw std::invalid_argument("mixing: no blocks (M=0)");
    if (layout.centres.rows() != m)
        throw std::invalid_argument("mixing: layout has " + std::to_string(layout.centres.rows()) +
                                    " block centres for M=" + std::to_string(m) + " blocks");
    if (m == 1)
        return Eigen::MatrixXd::Ones(1, 1);

    if (name == "uniform")
        return Eigen::MatrixXd::Ones(m, m);
    if (name == "identity")
        return Eigen::MatrixXd::Identity(m, m);
    if (name == "causal-local") {
        // Lower triangular, exp(-(i - j) / sigma) for j <= i, each row divided by its sum: recent blocks
        // weigh more, so row i is not constant over the blocks a query sees (docs/maths.md 1.6).
        Eigen::MatrixXd W = Eigen::MatrixXd::Zero(m, m);
        for (Index i = 0; i < m; ++i) {
            for (Index j = 0; j <= i; ++j)
                W(i, j) = std::exp(-static_cast<double>(i - j) / spec.sigma);
            W.row(i) /= W.row(i).sum();
        }
        return W;
    }
    if (name == "causal") {
        // Lower triangular, row i holds 1/(i+1) for j <= i (a running mean over earlier blocks).
        Eigen::MatrixXd W = Eigen::MatrixXd::Zero(m, m);
        for (Index i = 0; i < m; ++i)
            W.row(i).head(i + 1).setConstant(1.0 / static_cast<double>(i + 1));
        return W;
    }

    const Eigen::MatrixXd D = distances(layout.centres);
    const double dmax = D.maxCoeff();
    if (!(dmax > 0.0))
        throw std::invalid_argument("mixing '" + name + "': block centres coincide (Dmax=0)");
    const double pi = 3.14159265358979323846;
    if (name == "cos")
        return column_normalised((D.array() / dmax * (pi / 4.0)).cos().matrix(), "'cos'");
    if (name == "linear")
        return column_normalised((1.0 - D.array() / dmax).matrix(), "'linear'");
    if (name == "exp")
        return column_normalised((-D.array() / spec.sigma).exp().matrix(), "'exp' (sigma " + fmt_double(spec.sigma) + ")");
    if (name == "gaussian") {
        const double s = dmax / 3.0;
        return (-D.array().square() / (2.0 * s * s)).exp().matrix();
    }
    // local: 1[D <= tau]
    const Eigen::MatrixXd W = (D.array() <= spec.threshold).cast<double>().matrix();
    return column_normalised(W, "'local' (threshold " + fmt_double(spec.threshold) + ")");
}

}  // namespace attnscope::attention
