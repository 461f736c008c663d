// The `info --json` document (docs/cli.md): shared by `attnscope info` (app/) and `attnscope.info` (python/).
#include "analysis/info_document.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "io/tensor_file.h"

namespace attnscope::analysis {

using ojson = nlohmann::ordered_json;

namespace {

// The shape of a nested JSON array (an attribute's value): [] for a scalar.
std::vector<std::int64_t> json_shape(const nlohmann::json& v)
{
    std::vector<std::int64_t> shape;
    for (const nlohmann::json* p = &v; p->is_array(); p = &(*p)[0]) {
        shape.push_back(static_cast<std::int64_t>(p->size()));
        if (p->empty())
            break;
    }
    return shape;
}

}  // namespace

// What a file carries for display (docs/pytorch.md 3.4 "Tokens and images"): the token strings (the `tokens`
// attribute, else `text` one token per character; the core's rule) and the input image (an `image` or
// `image_*` attribute of any shape, else a dataset /image). Null members when absent.
ojson display_inputs(const io::TensorFile& file)
{
    constexpr std::size_t kShownTokens = 16;
    const nlohmann::json& attrs = file.file_attributes();
    const FileDefaults d = file_defaults_from(attrs);
    ojson out;
    if (!d.tokens.empty()) {
        ojson first = ojson::array();
        for (std::size_t i = 0; i < std::min(d.tokens.size(), kShownTokens); ++i)
            first.push_back(d.tokens[i]);
        const bool listed = attrs.contains("tokens") && attrs["tokens"].is_array();
        out["tokens"] = ojson{{"count", d.tokens.size()}, {"attribute", listed ? "tokens" : "text"}, {"first", first}};
    }
    for (const auto& [key, value] : attrs.items())
        if ((key == "image" || key.rfind("image_", 0) == 0) && value.is_array()) {
            out["image"] = ojson{{"attribute", key}, {"shape", json_shape(value)}};
            break;
        }
    if (!out.contains("image"))
        for (const auto& t : file.tensors())
            if (t.name == "/image")
                out["image"] = ojson{{"dataset", t.name}, {"shape", t.shape}};
    return out;
}

ojson info_json(const std::string& path, const io::TensorFile& file)
{
    ojson j;
    j["file"] = path;
    j["format"] = std::string(file.format());
    j["attributes"] = file.file_attributes();
    ojson tensors = ojson::array();
    for (const auto& t : file.tensors()) {
        ojson e;
        e["name"] = t.name;
        e["shape"] = t.shape;
        e["dtype"] = std::string(io::dtype_name(t.dtype));
        e["attributes"] = t.attributes;
        tensors.push_back(std::move(e));
    }
    j["tensors"] = std::move(tensors);
    ojson skipped = ojson::array();
    for (const auto& s : file.skipped())
        skipped.push_back(ojson{{"name", s.name}, {"reason", s.reason}});
    j["skipped"] = std::move(skipped);
    const ojson shown = display_inputs(file);
    j["tokens"] = shown.contains("tokens") ? shown["tokens"] : ojson(nullptr);
    j["image"] = shown.contains("image") ? shown["image"] : ojson(nullptr);
    return j;
}

}  // namespace attnscope::analysis
