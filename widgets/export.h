#pragma once
// Figure export of result views: PNG, PDF and SVG, chosen by the file's extension.
#include <QList>
#include <QString>

namespace attnscope::widgets {

class ResultView;

struct ExportOptions {
    int width = 0;            // logical pixels; 0 = the view's preferredExportSize()
    int height = 0;
    double dpi = 300.0;       // PNG: pixels = logical size * dpi / 96; PDF/SVG: physical size at 96 logical px per inch
    double font_scale = 1.0;  // multiplies every font
};

// Writes `view` to `path` (.png, .pdf or .svg). Written to a temporary file in the same folder and
// renamed, so a failure leaves nothing behind and never clobbers an existing file.
// Returns an empty string on success, else a one-line error message naming the path.
QString exportView(ResultView* view, const QString& path, const ExportOptions& options);

// Exports every view into `folder` as <viewName>.<format> (format: png, pdf or svg). Returns the
// messages of the failures (empty on success).
QStringList exportAllViews(const QList<ResultView*>& views, const QString& folder, const QString& format,
                           const ExportOptions& options);

}  // namespace attnscope::widgets
