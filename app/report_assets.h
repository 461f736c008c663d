#pragma once
// The files `attnscope report` writes beside index.html (app/report/, compiled in by app/report_assets.cpp).
#include <string_view>
#include <vector>

namespace attnscope::app {

struct ReportAsset {
    std::string_view path;   // relative to the report's folder
    std::string_view data;
};

const std::vector<ReportAsset>& report_assets();

// index.html with @TITLE@, @ABOUT@ and @FOOTER@ to fill in (HTML-escaped text).
std::string_view report_page_template();

}  // namespace attnscope::app
