#pragma once
// The words every front end shares: comma lists, sizes and indices, the choice of heads or layers ("all",
// a list, or the selection's own index) and mechanism lists. The command line, TOML jobs and the desktop
// app map their flags, keys and widgets onto these; messages name the option as the front end calls it
// (`what`: "--grid", "[attention] grid", "token grid"). The names of mechanisms, feature maps,
// normalisations and token orders live with their enums (attention/options.h), the mixing presets with
// the mixing matrices (attention/mixing.h), the synthetic kinds with synth (analysis/synth.h), the sweep
// metrics with the sweep (analysis/sweep.h).
#include <string>
#include <vector>

#include <Eigen/Core>

#include "attention/options.h"

namespace attnscope::analysis {

using Index = Eigen::Index;

// `text` cut at every `sep`, each piece kept as it is ("a;;b" -> "a", "", "b"; an empty text gives one
// empty piece).
std::vector<std::string> split_exact(const std::string& text, char sep);
// Splits at `sep`, dropping white space (an empty text gives one empty item).
std::vector<std::string> split_list(const std::string& text, char sep = ',');

// Positive integers, comma separated ("16,16"; with `x_too` also "16x16" and "16 x 16"). Throws
// std::invalid_argument naming `what`, the text and the bad item.
std::vector<Index> parse_sizes(const std::string& text, const std::string& what, bool x_too = false);
// Non-negative integers (head and layer indices), comma separated.
std::vector<Index> parse_indices(const std::string& text, const std::string& what);
// The text of sizes: "16,16" (or "16x16" with sep "x").
std::string sizes_text(const std::vector<Index>& sizes, const std::string& sep = ",");

// A comma list of mechanism names, each at most once (never empty).
std::vector<attention::Mechanism> parse_mechanisms(const std::string& text, const std::string& what = "--mechanism");

// Which indices of an index axis ('h' heads, 'l' layers) to visit.
struct AxisChoice {
    enum class Kind { selection, all, list };
    Kind kind = Kind::selection;   // selection: the selection's own index (--at, default 0)
    std::vector<Index> indices;    // Kind::list
    std::string what;              // the option or key it came from, for messages

    static AxisChoice all(std::string what);
    static AxisChoice list(std::vector<Index> indices, std::string what);
    // "all", a comma list of indices, or "" (the selection's index). Throws std::invalid_argument.
    static AxisChoice parse(const std::string& text, std::string what);
    bool operator==(const AxisChoice& o) const { return kind == o.kind && indices == o.indices; }
};

}  // namespace attnscope::analysis
