// The files of `attnscope report`'s page (app/report/: the page's script, style and template, and the vendored
// Vega, Vega-Lite and vega-embed builds with their licences), compiled into the executable with the assembler's
// .incbin, so a report needs nothing installed beside the binary and works offline.
#include "report_assets.h"

#define ATTNSCOPE_ASSET(sym, file)                                                                                       \
    asm(".section .rodata\n.balign 16\n.global attnscope_asset_" #sym "\nattnscope_asset_" #sym ":\n.incbin \"" \
        ATTNSCOPE_REPORT_ASSET_DIR "/" file "\"\n.global attnscope_asset_" #sym "_end\nattnscope_asset_" #sym "_end:\n" \
        ".byte 0\n.previous\n");                                                                                          \
    extern "C" const char attnscope_asset_##sym[];                                                                      \
    extern "C" const char attnscope_asset_##sym##_end[];

ATTNSCOPE_ASSET(index_html, "index.html")
ATTNSCOPE_ASSET(report_js, "report.js")
ATTNSCOPE_ASSET(report_css, "report.css")
ATTNSCOPE_ASSET(vega, "vendor/vega.min.js")
ATTNSCOPE_ASSET(vega_lite, "vendor/vega-lite.min.js")
ATTNSCOPE_ASSET(vega_embed, "vendor/vega-embed.min.js")
ATTNSCOPE_ASSET(license_vega, "vendor/LICENSE.vega")
ATTNSCOPE_ASSET(license_vega_lite, "vendor/LICENSE.vega-lite")
ATTNSCOPE_ASSET(license_vega_embed, "vendor/LICENSE.vega-embed")
ATTNSCOPE_ASSET(vendor_readme, "vendor/README.md")

namespace attnscope::app {

namespace {
std::string_view view(const char* begin, const char* end) { return {begin, static_cast<std::size_t>(end - begin)}; }
}  // namespace

const std::vector<ReportAsset>& report_assets()
{
    static const std::vector<ReportAsset> assets = {
        {"report.js", view(attnscope_asset_report_js, attnscope_asset_report_js_end)},
        {"report.css", view(attnscope_asset_report_css, attnscope_asset_report_css_end)},
        {"vendor/vega.min.js", view(attnscope_asset_vega, attnscope_asset_vega_end)},
        {"vendor/vega-lite.min.js", view(attnscope_asset_vega_lite, attnscope_asset_vega_lite_end)},
        {"vendor/vega-embed.min.js", view(attnscope_asset_vega_embed, attnscope_asset_vega_embed_end)},
        {"vendor/LICENSE.vega", view(attnscope_asset_license_vega, attnscope_asset_license_vega_end)},
        {"vendor/LICENSE.vega-lite", view(attnscope_asset_license_vega_lite, attnscope_asset_license_vega_lite_end)},
        {"vendor/LICENSE.vega-embed", view(attnscope_asset_license_vega_embed, attnscope_asset_license_vega_embed_end)},
        {"vendor/README.md", view(attnscope_asset_vendor_readme, attnscope_asset_vendor_readme_end)},
    };
    return assets;
}

std::string_view report_page_template() { return view(attnscope_asset_index_html, attnscope_asset_index_html_end); }

}  // namespace attnscope::app
