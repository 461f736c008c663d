#pragma once
// A file's attributes as defaults (docs/cli.md "Axis selection"): the one rule by which the command line,
// batch jobs, sweeps and the desktop app turn what a file says about itself into options. Whatever the
// user chose explicitly wins; everything else may come from the file, and every front end reports what did.
//
// Attributes read (written by tools/python/attnscope_dump.py and `attnscope synth`), on the queries'
// dataset first, then on the file's root:
//   prefix_tokens  int          tokens to drop (CLS, registers)
//   causal         bool or int  causal masking
//   grid           2 or 3 ints  the token grid after the prefix tokens
//   block_grid     ints         MHLA blocks per grid axis (default: 4 where they divide the axis, else 2, else 1)
//   scale          number > 0   the softmax scale the model used (the PyTorch bridge records it per layer)
//   mixing         string       a mixing preset, or the learned mixing matrix: a dataset of the same file or
//                               FILE[:DATASET] relative to the file's folder, which it may not leave (refused)
//   gates          string       the gates of `gated` (docs/maths.md 1.8): a dataset of the same file or
//                               FILE[:DATASET] inside the file's folder, laid out like the queries without d
//   tokens         strings      the token strings, for display (else `text`: a string, one token per character)
//   image*         2-D numbers  the input image of a vision model (`image`, or a name starting with image_), for display
//   mask           string       the attention mask the model applied (docs/pytorch.md): "other" (neither causal nor
//                               padding) is not applied here, and apply_file_defaults() says so
//   key_padding_mask bool       the model was given a key padding mask; the bridge drops the padded tokens and
//   padded_tokens  int          records how many in padded_tokens. true without padded_tokens (older recordings
//                               that hold the padded tokens) is refused: the padded keys would count as real
// The grid (with its block grid) applies only when no block option was given and it holds exactly the
// selected tokens.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "attention/options.h"
#include "io/selection.h"

namespace attnscope::analysis {

using Index = Eigen::Index;

// An input image a file carries (row-major rows x cols), e.g. the digit of data/vit_digits.h5.
struct FileImage {
    std::string name;
    Index rows = 0, cols = 0;
    std::vector<double> values;
};

struct FileDefaults {
    std::optional<std::int64_t> prefix_tokens;
    std::optional<bool> causal;
    std::optional<double> scale;
    std::vector<Index> grid;
    std::vector<Index> block_grid;
    std::optional<std::string> mixing;      // as written in the file
    std::optional<std::string> gates;       // as written in the file
    std::vector<std::string> tokens;        // `tokens`, or the characters of `text`
    std::optional<FileImage> image;
    std::optional<std::string> mask;        // `mask` as written, e.g. "causal" or "other"
    std::optional<bool> key_padding_mask;   // `key_padding_mask` (true or 1: the model was given one)
    std::optional<std::int64_t> padded_tokens;   // `padded_tokens`: how many the recording dropped
    // The file whose folder a `mixing` or `gates` FILE[:DATASET] is relative to, and whose dataset a bare
    // DATASET names (io::TensorFile::attributes_file): the queries' file; for an array held in memory, the file
    // it was loaded from, or empty when there is none (then such an attribute is refused). Unset: the file of
    // the queries' reference.
    std::optional<std::string> attributes_file;
    // Attributes present with a value that cannot be used (a negative prefix_tokens, a grid of 4 sizes ...):
    // name -> why. Applying one is an error naming it (an explicit option instead avoids it).
    std::map<std::string, std::string> invalid;
};

// The attributes of the queries `q_ref` (FILE[:NAME]) names; reads headers only. Attributes of the wrong
// type or shape are ignored.
FileDefaults read_file_defaults(const io::TensorRef& q_ref);

// The same reading of one attribute object (e.g. a file's root attributes, for `attnscope info`).
FileDefaults file_defaults_from(const nlohmann::json& attributes);

// What the user set explicitly (a flag, a TOML key, an edit in the app): the file does not override it.
struct ExplicitChoices {
    bool prefix_tokens = false;
    bool causal = false;     // --causal or --no-causal
    bool scale = false;      // --scale
    bool blocks = false;     // any of --blocks, --chunk, --grid, --block-grid
    bool mixing = false;
    bool gates = false;      // --gates
    bool operator==(const ExplicitChoices&) const = default;
};

// Everything one analysis of one input is set up with.
struct AnalysisSetup {
    io::AxisSelection selection;
    attention::AttentionOptions options;
    ExplicitChoices given;
};

// The block grid the rule gives a token grid without a `block_grid` attribute: per axis 4 blocks where 4
// divides it, else 2, else 1.
std::vector<Index> default_block_grid(const std::vector<Index>& grid);

// Fills what `setup.given` leaves open from the `defaults` of the queries `q_ref` (whose header gives the
// selected token count when a grid is to be checked). A learned mixing matrix named by the file is loaded
// (InputError when it cannot be). An attribute that would apply but cannot be used (FileDefaults::invalid)
// is an InputError naming the attribute, its file and the option that overrides it. Returns what was taken
// from the file: the keys prefix_tokens, causal, grid, block_grid, mixing (the analyze JSON's
// input.defaults_from_file), and under "not_applied" a grid that does not hold the selected tokens and a
// mask the model applied that the analysis does not ("other"). A key padding mask whose padded tokens are
// still in the file (key_padding_mask true, no padded_tokens) is an InputError naming the attribute.
nlohmann::ordered_json apply_file_defaults(const FileDefaults& defaults, const io::TensorRef& q_ref, AnalysisSetup& setup);

// read_file_defaults() and apply_file_defaults() for the queries `q_ref`.
nlohmann::ordered_json resolve_file_defaults(const io::TensorRef& q_ref, AnalysisSetup& setup);

}  // namespace attnscope::analysis
