#include "analysis/file_defaults.h"

#include <cmath>

#include <algorithm>
#include <filesystem>

#include "analysis/inputs.h"
#include "attention/mixing.h"
#include "io/tensor_file.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/json_text.h"

namespace attnscope::analysis {

namespace fs = std::filesystem;

namespace {

std::optional<std::vector<Index>> positive_ints(const nlohmann::json& v)
{
    if (!v.is_array())
        return std::nullopt;
    std::vector<Index> out;
    for (const auto& x : v)
        if (x.is_number_integer() && x.get<long long>() > 0)
            out.push_back(x.get<Index>());
    if (out.size() != v.size())
        return std::nullopt;
    return out;
}

// One string per UTF-8 character (a malformed byte counts as one character).
std::vector<std::string> utf8_characters(const std::string& text)
{
    std::vector<std::string> out;
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
        len = std::min(len, text.size() - i);
        out.push_back(text.substr(i, len));
        i += len;
    }
    return out;
}

// A 2-D array of numbers (rows of equal length) as an image.
std::optional<FileImage> image_of(const std::string& name, const nlohmann::json& v)
{
    if (!v.is_array() || v.empty() || !v[0].is_array() || v[0].empty())
        return std::nullopt;
    FileImage img;
    img.name = name;
    img.rows = static_cast<Index>(v.size());
    img.cols = static_cast<Index>(v[0].size());
    for (const auto& row : v) {
        if (!row.is_array() || static_cast<Index>(row.size()) != img.cols)
            return std::nullopt;
        for (const auto& x : row) {
            if (!x.is_number())
                return std::nullopt;
            img.values.push_back(x.get<double>());
        }
    }
    return img;
}

// Fills what `d` lacks from one attribute object; values that cannot be used go to d.invalid.
void read_attributes(const nlohmann::json& attrs, FileDefaults& d)
{
    if (!attrs.is_object())
        return;
    auto seen = [&](const char* key) { return attrs.contains(key) && !d.invalid.count(key); };
    if (!d.prefix_tokens && seen("prefix_tokens")) {
        const auto& v = attrs["prefix_tokens"];
        if (v.is_number_integer() && v.get<std::int64_t>() >= 0)
            d.prefix_tokens = v.get<std::int64_t>();
        else
            d.invalid["prefix_tokens"] = "= " + json_text(v) + " is not a non-negative integer";
    }
    if (d.grid.empty() && seen("grid")) {
        if (auto g = positive_ints(attrs["grid"]); g && (g->size() == 2 || g->size() == 3) && !checked_product(*g))
            d.invalid["grid"] = "= " + json_text(attrs["grid"]) + " holds more tokens than 64 bits count (its product overflows)";
        else if (g && (g->size() == 2 || g->size() == 3))
            d.grid = std::move(*g);
        else
            d.invalid["grid"] = "= " + json_text(attrs["grid"]) + " is not 2 or 3 positive integers";
    }
    if (d.block_grid.empty() && seen("block_grid")) {
        if (auto g = positive_ints(attrs["block_grid"]); g && (g->size() == 2 || g->size() == 3))
            d.block_grid = std::move(*g);
        else
            d.invalid["block_grid"] = "= " + json_text(attrs["block_grid"]) + " is not 2 or 3 positive integers";
    }
    if (!d.scale && seen("scale")) {
        const auto& v = attrs["scale"];
        if (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0.0)
            d.scale = v.get<double>();
        else
            d.invalid["scale"] = "= " + json_text(v) + " is not a positive number";
    }
    if (!d.causal && seen("causal")) {
        const auto& c = attrs["causal"];
        if (c.is_boolean())
            d.causal = c.get<bool>();
        else if (c.is_number_integer() && (c.get<long long>() == 0 || c.get<long long>() == 1))
            d.causal = c.get<long long>() != 0;
        else
            d.invalid["causal"] = "= " + json_text(c) + " is not true or false";
    }
    if (!d.mixing && seen("mixing")) {
        if (attrs["mixing"].is_string() && !attrs["mixing"].get<std::string>().empty())
            d.mixing = attrs["mixing"].get<std::string>();
        else
            d.invalid["mixing"] = "= " + json_text(attrs["mixing"]) + " is not a preset name or a dataset";
    }
    if (!d.gates && seen("gates")) {
        if (attrs["gates"].is_string() && !attrs["gates"].get<std::string>().empty())
            d.gates = attrs["gates"].get<std::string>();
        else
            d.invalid["gates"] = "= " + json_text(attrs["gates"]) + " is not a dataset";
    }
    if (d.tokens.empty() && attrs.contains("tokens") && attrs["tokens"].is_array()) {
        std::vector<std::string> t;
        for (const auto& x : attrs["tokens"])
            if (x.is_string())
                t.push_back(x.get<std::string>());
        if (t.size() == attrs["tokens"].size())
            d.tokens = std::move(t);
    }
    if (!d.mask && attrs.contains("mask") && attrs["mask"].is_string())
        d.mask = attrs["mask"].get<std::string>();
    if (!d.key_padding_mask && attrs.contains("key_padding_mask")) {
        const auto& v = attrs["key_padding_mask"];
        if (v.is_boolean())
            d.key_padding_mask = v.get<bool>();
        else if (v.is_number_integer())
            d.key_padding_mask = v.get<long long>() != 0;
        else
            d.key_padding_mask = true;   // present but unreadable: assume the worst
    }
    if (!d.padded_tokens && attrs.contains("padded_tokens") && attrs["padded_tokens"].is_number_integer() &&
        attrs["padded_tokens"].get<long long>() >= 0)
        d.padded_tokens = attrs["padded_tokens"].get<std::int64_t>();
    if (d.tokens.empty() && attrs.contains("text") && attrs["text"].is_string())
        d.tokens = utf8_characters(attrs["text"].get<std::string>());
    if (!d.image)
        for (const auto& [key, value] : attrs.items())
            if ((key == "image" || key.rfind("image_", 0) == 0))
                if (auto img = image_of(key, value)) {
                    d.image = std::move(img);
                    break;
                }
}

// The grid's block grid: the file's (which must cut every axis into equal parts), else the default rule.
std::vector<Index> block_grid_for(const FileDefaults& d, const std::string& file)
{
    if (d.block_grid.empty())
        return default_block_grid(d.grid);
    bool fits = d.block_grid.size() == d.grid.size();
    for (std::size_t a = 0; fits && a < d.grid.size(); ++a)
        fits = d.grid[a] % d.block_grid[a] == 0;
    if (!fits)
        throw InputError(file + ": the file's attribute block_grid = " + json_text(nlohmann::json(d.block_grid)) +
                         " does not cut its grid " + json_text(nlohmann::json(d.grid)) +
                         " into equal parts; choose the MHLA blocks yourself (a grid of blocks) to override it");
    return d.block_grid;
}

// An attribute that would be applied but cannot be used: the error names it and the choice that overrides
// it, in words every front end shares ("the prefix tokens": --prefix-tokens, the Selection panel's field).
void refuse_invalid(const FileDefaults& d, const char* key, const std::string& file, const char* choice)
{
    if (const auto it = d.invalid.find(key); it != d.invalid.end())
        throw InputError(file + ": the file's attribute " + key + " " + it->second + "; choose " + choice +
                         " yourself to override it");
}

// A mixing attribute that is not a preset names a matrix, a gates attribute a tensor: FILE[:DATASET] relative
// to the queries' folder, else a dataset of the queries' own file. A data file is data (docs/security.md, "Data
// files"): the file it names must lie inside its folder once symlinks and `..` are resolved; an absolute path or
// one leading out is refused, and the option (a mixing matrix or gates chosen by the user) is how to read one from elsewhere.
// `q_file` names the queries in messages; `base` is the file the reference is relative to (FileDefaults::attributes_file).
io::TensorRef attribute_reference(const std::string& value, const std::string& q_file, const std::string& base_file,
                                const std::string& attribute, const std::string& what)
{
    if (base_file.empty())
        throw InputError(q_file + ": the attribute " + attribute + " = \"" + value + "\" names a " + what +
                         " in a file, but this tensor was not read from a file; choose the " + what + " yourself");
    const io::TensorRef ref = io::parse_tensor_ref(value);
    const fs::path base = fs::path(base_file).parent_path();
    if (ref.file.empty())
        return io::tensor_in(base_file, value);
    const fs::path named = fs::path(ref.file).is_absolute() ? fs::path(ref.file) : base / ref.file;
    std::error_code ec;
    if (!fs::exists(named, ec))
        return io::tensor_in(base_file, value);
    const fs::path folder = fs::weakly_canonical(fs::absolute(base.empty() ? fs::path(".") : base), ec);
    const fs::path real = fs::weakly_canonical(fs::absolute(named), ec);
    const fs::path rel = real.lexically_relative(folder);
    if (ec || rel.empty() || rel == "." || *rel.begin() == "..")
        throw InputError(q_file + ": the file's attribute " + attribute + " = \"" + value +
                         "\" names a file outside the file's folder; refused (choose the " + what + " yourself to read one from there)");
    return io::tensor_in(named.string(), ref.name);
}

}  // namespace

std::vector<Index> default_block_grid(const std::vector<Index>& grid)
{
    std::vector<Index> bg;
    for (const Index g : grid)
        bg.push_back(g % 4 == 0 ? 4 : g % 2 == 0 ? 2 : 1);
    return bg;
}

FileDefaults read_file_defaults(const io::TensorRef& ref)
{
    const auto file = io::open_tensor(ref);
    const io::TensorInfo& info = file->find(ref.name);
    FileDefaults d;
    read_attributes(info.attributes, d);
    read_attributes(file->file_attributes(), d);
    d.attributes_file = file->attributes_file();
    return d;
}

FileDefaults file_defaults_from(const nlohmann::json& attributes)
{
    FileDefaults d;
    read_attributes(attributes, d);
    return d;
}

nlohmann::ordered_json apply_file_defaults(const FileDefaults& d, const io::TensorRef& q_ref, AnalysisSetup& setup)
{
    nlohmann::ordered_json used = nlohmann::ordered_json::object();
    const std::string file = q_ref.file;
    // The padded keys of a key padding mask are not data: a recording that kept them, without the mask, cannot
    // be analysed as the model saw it (docs/pytorch.md 3.2 "Masks"), and no option could say which keys to drop.
    if (d.key_padding_mask.value_or(false) && !d.padded_tokens)
        throw InputError(file + ": the model was given a key padding mask (attribute key_padding_mask = true), but "
                         "the file holds every token with the padded ones, and not the mask: the padded keys would "
                         "count as real. Record it again with tools/python/attnscope_dump.py, which drops the "
                         "padded tokens (attribute padded_tokens), or delete the attribute if nothing was padded");
    if (!setup.given.prefix_tokens) {
        refuse_invalid(d, "prefix_tokens", file, "the prefix tokens");
        if (d.prefix_tokens && *d.prefix_tokens > 0) {
            setup.selection.prefix_tokens = *d.prefix_tokens;
            used["prefix_tokens"] = *d.prefix_tokens;
        }
    }
    if (!setup.given.causal) {
        refuse_invalid(d, "causal", file, "causal or not");
        if (d.causal && *d.causal) {
            setup.options.causal = true;
            used["causal"] = true;
        }
    }
    if (!setup.given.scale) {
        refuse_invalid(d, "scale", file, "the scale");
        // The bridge records every layer's scale; one equal to the default 1/sqrt(d) changes nothing and is
        // not reported (Gemma-like models with another scale are the reason for the attribute).
        if (d.scale) {
            const auto f = io::open_tensor(q_ref);
            const io::TensorInfo& info = f->find(q_ref.name);
            const std::string layout = io::resolve_layout(info, setup.selection, "--q " + q_ref.text);
            const double dflt = 1.0 / std::sqrt(static_cast<double>(info.shape[layout.find('d')]));
            if (std::abs(*d.scale - dflt) > 1e-6 * dflt) {
                setup.options.scale = *d.scale;
                used["scale"] = *d.scale;
            }
        }
    }
    if (!setup.given.blocks) {
        refuse_invalid(d, "grid", file, "the MHLA blocks");
        refuse_invalid(d, "block_grid", file, "the MHLA blocks");
    }
    if (!setup.given.blocks && !d.grid.empty()) {
        const Index cells = checked_product(d.grid).value_or(-1);   // checked when read: never -1 here
        const Index selected = selected_tokens(TensorSource{q_ref, q_ref, std::nullopt, setup.selection});
        if (selected == cells) {
            attention::BlockSpec& b = setup.options.blocks;
            b.kind = attention::BlockSpec::Kind::grid;
            b.grid = d.grid;
            b.block_grid = block_grid_for(d, file);
            used["grid"] = b.grid;
            used["block_grid"] = b.block_grid;
        } else {
            used["not_applied"]["grid"] = "the grid " + json_text(nlohmann::json(d.grid)) + " holds " + std::to_string(cells) +
                                          " tokens, the selection has " + std::to_string(selected);
        }
    }
    if (!setup.given.mixing) {
        refuse_invalid(d, "mixing", file, "the mixing");
        if (d.mixing) {
            attention::MixingSpec& m = setup.options.mixing;
            if (attention::is_mixing_preset(*d.mixing)) {
                m.preset = *d.mixing;
                m.matrix.reset();
            } else {
                load_mixing(m, attribute_reference(*d.mixing, file, d.attributes_file.value_or(file), "mixing", "mixing matrix"),
                            "the file's mixing attribute");
                // A learned M x M matrix fixes the block count: with no block option and no grid from the
                // file, 1-D blocks, M of them (docs/cli.md "Defaults from the file's attributes").
                const Index learned_m = m.matrix ? m.matrix->rows() : m.head_matrices.front().rows();
                if (!setup.given.blocks && setup.options.blocks.kind == attention::BlockSpec::Kind::count &&
                    setup.options.blocks.blocks == 0) {
                    setup.options.blocks.blocks = learned_m;
                    used["blocks"] = learned_m;
                }
            }
            used["mixing"] = *d.mixing;
        }
    }
    if (!setup.given.gates) {
        refuse_invalid(d, "gates", file, "--gates");
        if (d.gates) {
            const io::TensorRef gates = attribute_reference(*d.gates, file, d.attributes_file.value_or(file), "gates", "gates");
            setup.options.gates.source = gates.text;
            setup.options.gates.tensor = std::make_shared<const io::TensorRef>(gates);
            used["gates"] = *d.gates;
        }
    }
    // No option applies a mask that is neither causal nor padding (docs/pytorch.md 3.2 "Masks"): say so.
    if (d.mask == "other")
        used["not_applied"]["mask"] = "the model applied an attention mask that is neither causal nor padding "
                                      "(attribute mask = \"other\"); these matrices do not include it";
    return used;
}

nlohmann::ordered_json resolve_file_defaults(const io::TensorRef& q_ref, AnalysisSetup& setup)
{
    return apply_file_defaults(read_file_defaults(q_ref), q_ref, setup);
}

}  // namespace attnscope::analysis
