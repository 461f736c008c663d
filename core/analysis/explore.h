#pragma once
// Everything the desktop app shows for one selection, computed in one background job:
// Q, K read from files -> the three attention matrices (kept, for the maps and query views) ->
// spectra, ranks and row entropies -> the MHLA block layout and mixing matrix with its spectrum.
// A mechanism whose options are impossible gets an error of its own; the others still compute.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "analysis/inputs.h"
#include "analysis/measure.h"
#include "analysis/job.h"
#include "attention/blocks.h"
#include "attention/mechanisms.h"
#include "attention/options.h"
#include "io/selection.h"

namespace attnscope::analysis {

struct ExploreRequest {
    TensorSource source;
    std::vector<attention::Mechanism> mechanisms = attention::default_mechanisms();
    attention::AttentionOptions options;
    std::optional<double> rank_rtol;
    std::optional<Eigen::Index> past_split;  // docs/maths.md 2.2's past block (default when causal: N/2)
    std::optional<Eigen::Index> past_splits; // the semiseparable profile's splits (MetricOptions::past_splits)
    std::uint64_t memory_limit = 0;          // 0: default_memory_limit()
    std::vector<Eigen::Index> token_grid;    // (H, W) or (T, H, W) for display when tokens lie on a grid; may be empty
};

// Reduced copies of an N x N matrix for drawing it zoomed out, and its range for the colour scale, so that
// the GUI never reads the whole matrix to repaint (512 MB at N = 8192). Level k holds, for each f x f block
// of entries (f = 4 * 2^k; blocks at the last row / column may be smaller), their maximum and their sum, as
// floats (display precision; the read-out uses the matrix itself).
struct MatrixPyramid {
    struct Level {
        Eigen::Index factor = 0;
        Eigen::MatrixXf max, sum;   // ceil(N / factor) square
    };
    std::vector<Level> levels;      // factors 4, 8, 16 ... down to a level at most 256 blocks wide
    double min = 0, max = 0;        // of all entries
    double min_positive = 0;        // smallest positive entry (+inf when there is none)
};

// The pyramid of A (square). `progress` (may be empty) receives the fraction done and may throw to stop.
MatrixPyramid make_pyramid(const Eigen::Ref<const Eigen::MatrixXd>& A, const std::function<void(double)>& progress = {});

struct MechanismOutcome {
    MechanismResult result;                             // mechanism, params, spectrum, entropy (rows included), warnings
    std::shared_ptr<const Eigen::MatrixXd> matrix;      // N by N; null when this mechanism failed
    std::shared_ptr<const MatrixPyramid> pyramid;       // reduced images of `matrix` when N > 1024, else null
    std::vector<Eigen::Index> allowed_keys;             // n_t
    std::string error;                                  // non-empty: this mechanism could not be computed
};

struct ExploreResult {
    nlohmann::ordered_json input;                       // as in the analyze JSON
    Eigen::Index n = 0, d = 0;
    std::vector<MechanismOutcome> outcomes;             // in request order
    std::optional<attention::BlockLayout> blocks;       // MHLA's blocks (when MHLA was requested and valid)
    Eigen::MatrixXd mixing;                             // M by M (empty without MHLA)
    std::vector<double> mixing_singular_values;
    Eigen::Index mixing_rank = 0;
    std::vector<Eigen::Index> token_grid;               // from the request (or the grid blocks); empty for 1-D data
    attention::TokenOrder token_order = attention::TokenOrder::raster;
    std::vector<std::string> tokens;                    // the analysed tokens' strings (the file's `tokens` or `text`); may be empty
    std::optional<FileImage> image;                     // the input image the file carries (vision models); may be absent
    double seconds = 0;

    // Grid coordinates of token t (raster or blocked order, as the blocks define it); empty for 1-D data.
    std::vector<Eigen::Index> grid_coords(Eigen::Index t) const;

    const MechanismOutcome* find(attention::Mechanism m) const;
    // The analyze JSON document of this result (same schema as `attnscope analyze --json`).
    nlohmann::ordered_json to_json(bool with_row_entropy) const;
};

// Peak bytes an explore of N tokens with `mechanisms` needs (kept matrices and pyramids plus one SVD).
std::uint64_t explore_memory_bytes(Eigen::Index n, std::size_t mechanisms);

// Runs the whole pipeline, reporting progress through ctx and stopping (JobCancelled) when cancelled.
// Throws InputError / std::invalid_argument for unreadable inputs or a selection that does not fit.
ExploreResult explore(const ExploreRequest& request, const JobContext& ctx);

// Values for drawing an N x N matrix region on a small canvas: the region [r0, r1) x [c0, c1) of A
// reduced to at most out_rows x out_cols cells by taking each cell's maximum (peaks stay visible) or
// mean. Row-major result, out_rows * out_cols values (fewer rows/cols when the region is smaller).
// With a pyramid of A, cells that span at least f x f entries are read from the level of block size f
// (the largest such): the region is then widened to whole blocks (by less than one cell) and each cell
// is the exact max / mean of the whole blocks it holds, so the cost follows the cells, not the region.
struct ReducedImage {
    Eigen::Index rows = 0, cols = 0;          // cells
    std::vector<double> values;               // row-major
    Eigen::Index r0 = 0, r1 = 0, c0 = 0, c1 = 0;   // the region of A the cells cover
    Eigen::Index factor = 1;                  // block size of the pyramid level read (1: the matrix)
};
enum class Reduce { max, mean };
ReducedImage reduce_region(const Eigen::Ref<const Eigen::MatrixXd>& A, Eigen::Index r0, Eigen::Index r1, Eigen::Index c0,
                           Eigen::Index c1, Eigen::Index out_rows, Eigen::Index out_cols, Reduce how,
                           const MatrixPyramid* pyramid = nullptr);

}  // namespace attnscope::analysis
