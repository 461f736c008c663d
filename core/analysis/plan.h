#pragma once
// The one unit planner: inputs x layers x heads -> units of work, in a fixed order (inputs as given, then
// layers, then heads), for sweeps, batches, the command line and the desktop app. Only headers are read,
// so a plan is checked completely before any tensor data is.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "analysis/inputs.h"
#include "analysis/vocabulary.h"

namespace attnscope::analysis {

// At most this many units in one plan (docs/cli.md, "Counts and caps"): `all` the heads of a file whose
// header claims a billion of them, or a billion listed layers, are refused before anything is allocated.
constexpr std::uint64_t k_max_units = 1'000'000;

// One (input, layer, head): the selection it reads and the indices it stands for.
struct Unit {
    std::size_t index = 0;                   // in plan order
    std::size_t input = 0;                   // which of the inputs
    TensorSource source;                     // selection with this unit's 'l' and 'h' indices set
    std::optional<Eigen::Index> layer, head; // absent where the input has no such axis (a per-layer dataset
                                             // reports its own layer, see plan_units)
    std::map<char, Eigen::Index> at;         // the index of each other axis given as `all` (b=all: "b" -> 3)
};

// The units of `inputs` over the layers and heads chosen (an input without an 'l' / 'h' axis contributes
// one unit; choosing indices on an axis it lacks is an error), and over every index of each axis its
// selection gives as `all` (`--at b=all`; h=all and l=all are all the heads / layers, and may not be given
// with another choice of them), innermost in letter order. The units' selections hold no `all` any more. `input_layers[i]`, when set, is the layer
// input i holds (per-layer datasets such as /layers/3/q). Throws InputError / std::invalid_argument naming
// the input and the option (AxisChoice::what) at fault.
std::vector<Unit> plan_units(const std::vector<TensorSource>& inputs, const AxisChoice& layers, const AxisChoice& heads,
                             const std::vector<std::optional<Eigen::Index>>& input_layers = {});

// The index axes of `source`'s queries other than the layer and head ('l', 'h'), in layout order: the axes a
// selection may give as `all` so that every input a file holds is its own unit (`--at b=all`; the desktop
// app's sweep dialog, "every input"). Reads headers only; throws InputError like plan_units.
std::vector<char> input_axes(const TensorSource& source);

// One layer of per-layer datasets: names that differ from the given ones only in one numeric path
// component (/layers/3/q, /layers/3/k, /layers/3/v as tools/python/attnscope_dump.py writes them).
struct LayerTensors {
    Eigen::Index layer = 0;
    io::TensorRef q_ref, k_ref;
    std::optional<io::TensorRef> v_ref;    // when values were given and the layer has them
};
// Every layer of the file of `q_ref` that has queries and keys named like these (and values, when given),
// in layer order; empty when the names carry no layer number, the file has fewer than two such layers, or the
// tensors are arrays in memory.
// Reads headers only.
std::vector<LayerTensors> layer_tensors(const io::TensorRef& q_ref, const io::TensorRef& k_ref,
                                        const std::optional<io::TensorRef>& v_ref);
// `choice` (a sweep's `layers = all | LIST`) over inputs whose queries have no 'l' axis but per-layer datasets:
// each such source becomes one source per layer chosen, its layer in `input_layers` (as batch and the model
// overview take them; the sweep refused them with "layout hnd has no 'l' axis"). True when it expanded (the
// choice is then spent); false, changing nothing, when no source has such datasets or the choice is the
// selection's. A listed layer a file lacks, or sources of both kinds, throw std::invalid_argument. Reads headers.
bool expand_layer_datasets(std::vector<TensorSource>& sources, std::vector<std::optional<Eigen::Index>>& input_layers,
                           const AxisChoice& choice);

}  // namespace attnscope::analysis
