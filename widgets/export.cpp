// Figure export: PNG (raster at dpi / 96 scale), PDF (vector, page = logical size at 96 px/in) and SVG
// (vector, explicit font family), encoded in memory and written through QSaveFile (temporary file in the
// same folder, renamed on success) with one checked write.
#include "export.h"

#include <QBuffer>
#include <QDir>
#include <QFileInfo>
#include <QImage>
#include <QPageSize>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>
#include <QObject>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <qcustomplot.h>

#include "plot_style.h"
#include "result_view.h"

namespace attnscope::widgets {
namespace {

void paintView(ResultView* view, QCPPainter& painter, const QSize& size, double font_scale, bool vector)
{
    painter.setRenderHint(QPainter::Antialiasing, true);
    painter.setRenderHint(QPainter::TextAntialiasing, true);
    if (vector) {
        // Every image (heatmaps, the images of reduced maps) goes into a PDF Flate-compressed, never as a
        // JPEG, and unsmoothed: a cell edge stays a sharp step at any zoom.
        painter.setRenderHint(QPainter::LosslessImageRendering, true);
        painter.setRenderHint(QPainter::SmoothPixmapTransform, false);
        painter.setMode(QCPPainter::pmVectorized, true);
        painter.setMode(QCPPainter::pmNoCaching, true);
    }
    painter.fillRect(QRect(QPoint(0, 0), size), Qt::white);
    registerQcpPainter(&painter, true);
    view->renderTo(&painter, size, font_scale);
    registerQcpPainter(&painter, false);
}

constexpr double kLogicalPerInch = 96.0;

}  // namespace

const QList<ExportPreset>& exportPresets()
{
    // Journal columns: 3.5 in (88.9 mm) single, 7 in (177.8 mm) double, 8 pt ticks (most journals ask for
    // 6-8 pt at least); a slide: 10 in wide at 16:9 with 14 pt ticks, readable from the back of a room.
    static const QList<ExportPreset> presets = {
        {QStringLiteral("column"), QObject::tr("Single column (3.5 in, 8 pt)"), 88.9, 8.0, 0.0},
        {QStringLiteral("double"), QObject::tr("Double column (7 in, 8 pt)"), 177.8, 8.0, 0.0},
        {QStringLiteral("slide"), QObject::tr("Slide (10 in, 16:9, 14 pt)"), 254.0, 14.0, 9.0 / 16.0},
    };
    return presets;
}

const ExportPreset* findExportPreset(const QString& key)
{
    for (const ExportPreset& p : exportPresets())
        if (p.key == key)
            return &p;
    return nullptr;
}

ExportOptions printOptions(double widthMm, double heightMm, double fontPt, const QSize& preferred, double dpi)
{
    ExportOptions o;
    o.width = static_cast<int>(std::lround(widthMm / 25.4 * kLogicalPerInch));
    if (heightMm > 0) {
        o.height = static_cast<int>(std::lround(heightMm / 25.4 * kLogicalPerInch));
    } else {
        const double aspect = preferred.width() > 0 && preferred.height() > 0 ? double(preferred.height()) / preferred.width() : 0.6;
        o.height = static_cast<int>(std::lround(o.width * std::clamp(aspect, 0.35, 1.25)));
    }
    o.dpi = dpi;
    o.font_scale = fontPt / kTickPt;
    return o;
}

ExportOptions presetOptions(const ExportPreset& preset, const QSize& preferred, double dpi)
{
    return printOptions(preset.widthMm, preset.aspect > 0 ? preset.widthMm * preset.aspect : 0.0, preset.fontPt, preferred, dpi);
}

double tickPointSize(const ExportOptions& options)
{
    return kTickPt * (options.font_scale > 0 ? options.font_scale : 1.0);
}

QString exportView(ResultView* view, const QString& path, const ExportOptions& options)
{
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (!view)
        return QStringLiteral("cannot export %1: no view").arg(path);
    if (suffix != "png" && suffix != "pdf" && suffix != "svg")
        return QStringLiteral("cannot export %1: unknown format '%2' (use .png, .pdf or .svg)").arg(path, suffix);
    QSize size = view->preferredExportSize();
    if (options.width > 0)
        size.setWidth(options.width);
    if (options.height > 0)
        size.setHeight(options.height);
    if (size.width() < 16 || size.height() < 16 || size.width() > 20000 || size.height() > 20000)
        return QStringLiteral("cannot export %1: size %2x%3 out of range").arg(path).arg(size.width()).arg(size.height());
    const double dpi = options.dpi > 0 ? options.dpi : 96.0;
    const double font_scale = options.font_scale > 0 ? options.font_scale : 1.0;

    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly))
        return QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    // Encoded into memory first: QPdfWriter and QSvgGenerator ignore short writes, and QFile reports a
    // write cut short by a full disk as a short count without an error, so writing through them could
    // commit a truncated figure as a success.
    QByteArray bytes;
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);

    if (suffix == "png") {
        const double scale = dpi / 96.0;
        const QSize px(static_cast<int>(std::lround(size.width() * scale)), static_cast<int>(std::lround(size.height() * scale)));
        if (static_cast<qint64>(px.width()) * px.height() > 400LL * 1000 * 1000)
            return QStringLiteral("cannot export %1: %2x%3 pixels is too large (lower the dpi)").arg(path).arg(px.width()).arg(px.height());
        QImage image(px, QImage::Format_ARGB32_Premultiplied);
        if (image.isNull())
            return QStringLiteral("cannot export %1: out of memory for %2x%3 pixels").arg(path).arg(px.width()).arg(px.height());
        image.fill(Qt::white);
        {
            QCPPainter painter(&image);
            painter.scale(scale, scale);
            paintView(view, painter, size, font_scale, false);
        }
        image = image.convertToFormat(QImage::Format_RGB32);
        const int dpm = static_cast<int>(std::lround(dpi / 0.0254));
        image.setDotsPerMeterX(dpm);
        image.setDotsPerMeterY(dpm);
        if (!image.save(&buffer, "PNG"))
            return QStringLiteral("cannot write %1: PNG encoding failed").arg(path);
    } else if (suffix == "pdf") {
        QPdfWriter writer(&buffer);
        writer.setResolution(96);
        writer.setCreator(QStringLiteral("AttnScope"));
        writer.setTitle(view->viewTitle());
        writer.setPageSize(QPageSize(QSizeF(size.width() * 72.0 / 96.0, size.height() * 72.0 / 96.0), QPageSize::Point,
                                     QString(), QPageSize::ExactMatch));
        writer.setPageMargins(QMarginsF(0, 0, 0, 0));
        QCPPainter painter;
        if (!painter.begin(&writer))
            return QStringLiteral("cannot write %1: PDF painter failed to start").arg(path);
        paintView(view, painter, size, font_scale, true);
        painter.end();
    } else {
        QSvgGenerator generator;
        generator.setOutputDevice(&buffer);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setResolution(96);
        generator.setTitle(view->viewTitle());
        generator.setDescription(QStringLiteral("AttnScope figure: %1").arg(view->viewName()));
        QCPPainter painter;
        if (!painter.begin(&generator))
            return QStringLiteral("cannot write %1: SVG painter failed to start").arg(path);
        paintView(view, painter, size, font_scale, true);
        painter.end();
    }
    buffer.close();
    errno = 0;
    const bool written = file.write(bytes) == bytes.size() && file.flush();
    const int err = errno;
    if (!written || file.error() != QFileDevice::NoError)
        return QStringLiteral("cannot write %1: %2").arg(path, err ? qt_error_string(err) : file.errorString());
    if (!file.commit())
        return QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return {};
}

QStringList exportAllViews(const QList<ResultView*>& views, const QString& folder, const QString& format,
                           const ExportOptions& options)
{
    const QString fmt = format.toLower();
    if (fmt != "png" && fmt != "pdf" && fmt != "svg")
        return {QStringLiteral("cannot export into %1: unknown format '%2' (use png, pdf or svg)").arg(folder, format)};
    if (!QDir().mkpath(folder))
        return {QStringLiteral("cannot export into %1: cannot create the folder").arg(folder)};
    QStringList errors;
    for (ResultView* v : views) {
        if (!v)
            continue;
        const QString msg = exportView(v, QDir(folder).filePath(v->viewName() + '.' + fmt), options);
        if (!msg.isEmpty())
            errors << msg;
    }
    return errors;
}

}  // namespace attnscope::widgets
