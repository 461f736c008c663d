#pragma once
// Synthetic activations with real structure (`attnscope synth`).
//
//  gaussian  i.i.d. N(0,1) queries, keys and values: no structure, the null model.
//  lowrank   Q and K share an r-dimensional latent (r = max(2, d/8)) plus 5% noise: softmax attention
//            is dominated by a few directions, as in heads that track a handful of features.
//  local1d   sinusoidal positional features (transformer style, geometric frequencies) plus content
//            noise: q_t . k_j peaks at j = t and decays with |t - j|, so softmax attention concentrates
//            near the query position like a local / sliding-window head.
//  local2d   tokens on an H x W grid: 2-D sinusoidal positional features plus a smooth random spatial
//            field (low-frequency 2-D waves) shared by queries and keys, so softmax attention is local in
//            both grid directions and follows content, like a vision transformer's early layers.
//
// Every head draws its own random parameters; draws use util/rng.h so the data are reproducible from
// the seed. Values are returned row-major as [heads, N, d].
#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

namespace attnscope::analysis {

struct SynthOptions {
    Eigen::Index n = 0;
    Eigen::Index d = 0;
    Eigen::Index heads = 1;
    std::string kind = "gaussian";      // gaussian | lowrank | local1d | local2d
    std::vector<Eigen::Index> grid;     // H,W (local2d: default the square root of N)
    std::uint64_t seed = 0;
};

struct SynthData {
    std::vector<double> q, k, v;        // each heads * n * d values, row-major [h][t][f]
    nlohmann::json attributes;          // kind, seed, grid (if any), n, d, heads
};

// Throws std::invalid_argument for impossible options (naming them) and InputError when the data
// would exceed `max_bytes` (as float32 on disk, times three tensors).
SynthData synthesize(const SynthOptions& options, std::uint64_t max_bytes);
// The checks synthesize() makes before it allocates anything, throwing the same errors; returns the grid
// the data will have (local2d without a grid: the square root of N, twice; else the options' grid).
std::vector<Eigen::Index> check_synth_options(const SynthOptions& options, std::uint64_t max_bytes);

std::vector<std::string> synth_kinds();

// synthesize() written to an HDF5 file, atomically: datasets /q, /k, /v [heads, N, d] as float32
// (compressed) and the data's attributes on the root (docs/formats.md). Throws like synthesize() and
// InputError when the file cannot be written.
void write_synthetic_file(const std::string& path, const SynthOptions& options, std::uint64_t max_bytes);

}  // namespace attnscope::analysis
