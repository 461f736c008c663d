#pragma once
// Figure export of result views: PNG, PDF and SVG, chosen by the file's extension.
#include <QList>
#include <QSize>
#include <QtGlobal>
#include <QString>

class QPaintDevice;

namespace attnscope::widgets {

class ResultView;

struct ExportOptions {
    int width = 0;            // logical pixels; 0 = the view's preferredExportSize()
    int height = 0;
    double dpi = 300.0;       // PNG: pixels = logical size * dpi / 96; PDF/SVG: physical size at 96 logical px per inch
    double font_scale = 1.0;  // multiplies every font
};

// Figure sizes for print and slides. A preset fixes the printed width and the size in points of the
// smallest text, the tick labels (every other text keeps its proportion to them: labels x 9.5/8.5, titles
// x 10.5/8.5); the height follows the view's preferred aspect, kept between 0.35 and 1.25 of the width,
// unless the preset fixes it (slides: 16:9). PDF and SVG pages are exactly that size, so the points
// stay points when the figure is printed at 100 %.
struct ExportPreset {
    QString key;              // "column", "double", "slide" (attnscope figure --preset)
    QString label;            // for the export dialog
    double widthMm = 0;
    double fontPt = 8;        // tick labels at the printed size
    double aspect = 0;        // height / width; 0: the view's preferred aspect (clamped)
};
const QList<ExportPreset>& exportPresets();
const ExportPreset* findExportPreset(const QString& key);   // null for an unknown key
// The options for a printed width and height in millimetres (height 0: from `preferred`'s aspect, clamped as
// above) with tick labels of `fontPt` points: logical pixels = mm / 25.4 * 96, font_scale = fontPt / 8.5.
ExportOptions printOptions(double widthMm, double heightMm, double fontPt, const QSize& preferred, double dpi = 300.0);
ExportOptions presetOptions(const ExportPreset& preset, const QSize& preferred, double dpi = 300.0);
// The size in points of the tick labels of a figure exported with `options` (at 96 logical px per inch).
double tickPointSize(const ExportOptions& options);

// The largest figures Qt draws, measured (docs/security.md "Counts and sizes" > Figures):
// - PDF and SVG: QCustomPlot draws a colour map of a vector figure through a pixmap of its axis rect at 3x
//   the resolution (4 bytes a pixel), and Qt's PDF writer crashes (QPdfEnginePrivate::addImage) once that
//   pixmap passes 2 GiB: a page of at most kMaxVectorArea logical pixels keeps even a map filling the page
//   below it (one map at 7723 x 7723 drew in 6.1 GB; at 10000 x 10000 Qt crashed). Peak memory is about
//   kVectorBytesPerPixel bytes per logical pixel of the page.
// - PNG: at most kMaxRasterPixels pixels (size x dpi / 96 on each side; 20000 x 20000 at 96 dpi drew in
//   3.2 GB), about kRasterBytesPerPixel bytes each (the image, its RGB32 copy, the encoder).
inline constexpr qint64 kMaxVectorArea = (qint64(1) << 31) / (9 * 4);
inline constexpr qint64 kVectorBytesPerPixel = 108;
inline constexpr qint64 kMaxRasterPixels = 400LL * 1000 * 1000;
inline constexpr qint64 kRasterBytesPerPixel = 9;
// Why a figure of width x height logical pixels at `dpi` cannot be exported as `format` ("png", "pdf",
// "svg") within `memoryLimit` bytes: one sentence stating the largest that works ("" when it can).
// Overflow-safe for any int sizes and any dpi.
QString exportSizeProblem(const QString& format, int width, int height, double dpi, quint64 memoryLimit);

// Draws `view` at `size` logical pixels (fonts x font_scale) onto a vector device (PDF, SVG, or any other
// QPaintDevice of 96 logical pixels per inch) exactly as exportView does for PDF and SVG; false when no
// painter could start on it.
bool paintVectorFigure(ResultView* view, QPaintDevice* device, const QSize& size, double font_scale);

// Writes `view` to `path` (.png, .pdf or .svg). Written to a temporary file in the same folder and
// renamed, so a failure leaves nothing behind and never clobbers an existing file.
// Returns an empty string on success, else a one-line error message naming the path.
QString exportView(ResultView* view, const QString& path, const ExportOptions& options);
// exportView through the core's one writer (core/util/output.h): a temporary renamed into place; a device,
// FIFO or socket at `path` is refused, never replaced (docs/security.md, "Outputs").
QString exportViewTo(ResultView* view, const QString& path, const ExportOptions& options);

// Exports every view into `folder` as <viewName>.<format> (format: png, pdf or svg). Returns the
// messages of the failures (empty on success).
QStringList exportAllViews(const QList<ResultView*>& views, const QString& folder, const QString& format,
                           const ExportOptions& options);

}  // namespace attnscope::widgets
