#pragma once
// The files of `attnscope report`'s page (docs/cli.md, report): DIR/index.html, DIR/data.js, the vendored scripts
// and, for a large model, one page per input layer with its data (--pages). app/cmd_report.cpp gathers the data.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace attnscope::app {

// How the heads are laid out (--pages): all on index.html, on one page per input layer, or by the size rule.
enum class ReportPages { single, layer, automatic };

// --pages auto's rule: the report's inputs are paged by layer when they hold more than kPagedAboveHeads heads, or
// more than kPagedAboveBytes of per-head data (the units as data.js would hold them), in all. Measured with
// bench/report_scale.py (docs/performance.md): one page takes about 0.45 s + 0.17 s per MiB of data.js to its
// overviews in headless Chromium (384 heads at N = 256, 5.8 MiB: 1.4 s; 768 heads, 11.5 MiB: 2.4 s), so 8 MiB
// keeps it under 2 s; and past about 200 heads one page is a long scroll (each head's section is about 650 px
// high) that loads every head's maps (0.1 MiB each), though it still opens quickly.
constexpr std::size_t kPagedAboveHeads = 192;
constexpr std::size_t kPagedAboveBytes = std::size_t{8} << 20;

// One page of one input layer's heads: DIR/<html> loads data.js (the overview's data: the input's facts, the
// layers' pages for the links) and DIR/<script>, which sets window.ATTNSCOPE_LAYER = {input, layer, units}, the
// units exactly as a single page would hold them.
struct LayerPage {
    std::string html, script;
    std::string heading;
    nlohmann::ordered_json data;
};

// Pages the inputs (the page's "inputs" array) by layer when `mode` says so: each unit keeps its numbers and names
// its page, the curves move to the returned layer pages (to be written by write_pages).
std::vector<LayerPage> paged(nlohmann::ordered_json& inputs, ReportPages mode, const std::filesystem::path& out);

// Writes the page's files into `out` (the scripts, data.js, the layer pages, index.html last) and removes the layer
// pages of an earlier report there that this one does not write. `command` and `stamp` say what made it.
void write_pages(const std::filesystem::path& out, const nlohmann::ordered_json& data,
                 const std::vector<LayerPage>& layer_pages, const std::string& title, const std::string& command,
                 const std::string& stamp);

}  // namespace attnscope::app
