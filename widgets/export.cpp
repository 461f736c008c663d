// Figure export: PNG (raster at dpi / 96 scale), PDF (vector, page = logical size at 96 px/in) and SVG
// (vector, explicit font family), encoded in memory and written through QSaveFile (temporary file in the
// same folder, renamed on success) with one checked write.
#include "export.h"

#include <QBuffer>
#include <QDir>
#include <QFile>
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

#include "analysis/measure.h"
#include "util/error.h"
#include "util/output.h"
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

QString exportSizeProblem(const QString& format, int width, int height, double dpi, quint64 memoryLimit)
{
    auto millions = [](qint64 n) { return QString::number(double(n) / 1e6, 'f', 1); };
    auto side = [](qint64 area) { return qint64(std::floor(std::sqrt(double(area)))); };
    const qint64 budget = qint64(std::min<quint64>(memoryLimit, quint64(1) << 62));
    if (format == QLatin1String("png")) {
        if (!std::isfinite(dpi) || dpi <= 0)
            return QObject::tr("the dpi must be a positive number");
        const double scale = dpi / 96.0;
        const double w = std::round(std::max(width, 0) * scale), h = std::round(std::max(height, 0) * scale);
        const qint64 cap = std::min(kMaxRasterPixels, budget / kRasterBytesPerPixel);
        if (w * h <= double(cap))
            return {};
        const QString why = cap < kMaxRasterPixels
                                ? QObject::tr("need about %1 MiB, over the memory limit of %2 MiB")
                                      .arg(qint64(w * h * kRasterBytesPerPixel / 1048576.0))
                                      .arg(budget / 1048576)
                                : QObject::tr("are more than Qt draws into one image");
        return QObject::tr("%1 x %2 pixels (%3 x %4 at %5 dpi) %6; the largest PNG that works has %7 million pixels "
                           "(e.g. %8 x %8): lower the dpi or the size")
            .arg(qint64(w)).arg(qint64(h)).arg(width).arg(height).arg(dpi).arg(why).arg(millions(cap)).arg(side(cap));
    }
    const qint64 area = qint64(std::max(width, 0)) * std::max(height, 0);
    const qint64 cap = std::min(kMaxVectorArea, budget / kVectorBytesPerPixel);
    if (area <= cap)
        return {};
    const QString why = cap < kMaxVectorArea
                            ? QObject::tr("needs about %1 MiB to draw, over the memory limit of %2 MiB")
                                  .arg(area / 1048576 * kVectorBytesPerPixel)
                                  .arg(budget / 1048576)
                            : QObject::tr("is more than Qt draws on one %1 page").arg(format.toUpper());
    return QObject::tr("%1 x %2 logical pixels %3; the largest that works has %4 million logical pixels (e.g. %5 x %5, "
                       "or 20000 x %6)")
        .arg(width).arg(height).arg(why).arg(millions(cap)).arg(side(cap)).arg(cap / 20000);
}

bool paintVectorFigure(ResultView* view, QPaintDevice* device, const QSize& size, double font_scale)
{
    QCPPainter painter;
    if (!view || !painter.begin(device))
        return false;
    paintView(view, painter, size, font_scale, true);
    painter.end();
    return true;
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
    if (const QString p = exportSizeProblem(suffix, size.width(), size.height(), dpi, analysis::default_memory_limit()); !p.isEmpty())
        return QStringLiteral("cannot export %1: %2").arg(path, p);
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
        if (!paintVectorFigure(view, &writer, size, font_scale))
            return QStringLiteral("cannot write %1: PDF painter failed to start").arg(path);
    } else {
        QSvgGenerator generator;
        generator.setOutputDevice(&buffer);
        generator.setSize(size);
        generator.setViewBox(QRect(QPoint(0, 0), size));
        generator.setResolution(96);
        generator.setTitle(view->viewTitle());
        generator.setDescription(QStringLiteral("AttnScope figure: %1").arg(view->viewName()));
        if (!paintVectorFigure(view, &generator, size, font_scale))
            return QStringLiteral("cannot write %1: SVG painter failed to start").arg(path);
    }
    buffer.close();
    if (suffix == "svg") {
        // Every image of a figure is cells (a heatmap, an 8x8 digit): drawn with hard edges by the viewer, as
        // on screen, not blurred. Qt writes SVG 1.1's image-rendering="optimizeSpeed", which librsvg and
        // browsers may still smooth; CSS's pixelated (a style, which wins over the attribute) they honour.
        bytes.replace(QByteArrayLiteral("<image "), QByteArrayLiteral("<image style=\"image-rendering:pixelated\" "));
    }
    errno = 0;
    const bool written = file.write(bytes) == bytes.size() && file.flush();
    const int err = errno;
    if (!written || file.error() != QFileDevice::NoError)
        return QStringLiteral("cannot write %1: %2").arg(path, err ? qt_error_string(err) : file.errorString());
    if (!file.commit())
        return QStringLiteral("cannot write %1: %2").arg(path, file.errorString());
    return {};
}

QString exportViewTo(ResultView* view, const QString& path, const ExportOptions& options)
{
    try {
        OutputFile out(QFile::encodeName(path).toStdString(), SpecialFiles::refuse);
        out.write([&](const std::string& temp) {
            const QString err = exportView(view, QFile::decodeName(QByteArray::fromStdString(temp)), options);
            if (!err.isEmpty())
                throw InputError(err.toStdString());
        });
        out.commit();
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
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
        const QString msg = exportViewTo(v, QDir(folder).filePath(v->viewName() + '.' + fmt), options);
        if (!msg.isEmpty())
            errors << msg;
    }
    return errors;
}

}  // namespace attnscope::widgets
