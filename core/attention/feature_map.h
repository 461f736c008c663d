#pragma once
// Feature maps phi of docs/maths.md 1.2, applied to each row (token) of Q and K.
#include <Eigen/Core>

#include "attention/options.h"

namespace attnscope::attention {

class FeatureMap {
public:
    // d: input feature dimension (the FAVOR+ projection W, m x d, is drawn here from the seed).
    FeatureMap(const FeatureMapOptions& options, Index d);

    // X  N by d, one token per row  ->  N by dim() features.
    Eigen::MatrixXd operator()(const Eigen::Ref<const Eigen::MatrixXd>& X) const;

    Index dim() const;                                   // d, or m for favor
    bool non_negative() const;                           // false only for identity
    const Eigen::MatrixXd& favor_projection() const { return m_w; }   // m by d (empty unless favor)

private:
    FeatureMapOptions m_options;
    Index m_d;
    Eigen::MatrixXd m_w;
};

}  // namespace attnscope::attention
