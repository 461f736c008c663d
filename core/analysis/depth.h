#pragma once
// Collapse with depth (docs/maths.md 2.2; Dong, Cordonnier & Loukas 2021; attention rollout, Abnar & Zuidema
// 2020): over the layers 1..L of one file, per mechanism,
//   P_L = (alpha A_L + (1 - alpha) I) ... (alpha A_1 + (1 - alpha) I),
// A_l the layer's attention matrix (the mean over its heads, or one head), and per depth L the metrics of
// section 2 of P_L (measure() on the formed product: spectrum, ranks, entropy, locality, the past block when
// causal) and residual_to_uniform = ||P_L - 1 pi^T||_F / ||P_L||_F, pi the column means of P_L.
// Layers come from per-layer datasets (/layers/<i>/q) or an `l` axis, planned as a batch plans them
// (analysis/batch.h: the file's attributes, prefix tokens, grouped-query heads).
#include <cstdint>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/batch.h"
#include "analysis/job.h"

namespace attnscope::analysis {

struct DepthRequest {
    BatchPlan plan;           // one file; its layers and heads (AxisChoice), mechanisms, options, metrics, memory
    bool head_mean = true;    // A_l = the mean over the planned heads; false: exactly one head is planned
    double alpha = 0.5;       // in [0, 1]; 1 = the pure attention path
};

// ||P - 1 pi^T||_F / ||P||_F with pi the column means of P (0 for P = 0).
double residual_to_uniform(const Eigen::Ref<const Eigen::MatrixXd>& P);

// {attnscope_version, input: {file, layers, heads, alpha, n}, depth: [{depth, layer, results: [analyze result +
// residual_to_uniform]}], kernels}. Throws InputError when the file holds fewer than one layer, layers of
// different N, or the products do not fit the memory limit; std::invalid_argument for impossible options. With
// `ctx`: progress per layer's head read and per depth's products measured, cancellation between them.
nlohmann::ordered_json depth_document(const DepthRequest& request, const JobContext* ctx = nullptr);

}  // namespace attnscope::analysis
