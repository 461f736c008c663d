// Renders the hand-drawn SVG icon to the PNG sizes of the hicolor theme: attnscope_render_icon SVG OUTDIR SIZE...
// writes OUTDIR/<SIZE>x<SIZE>/apps/attnscope.png. Qt's own SVG renderer does it, so the package build needs no
// other tool and the PNGs always match the SVG.
#include <QDir>
#include <QImage>
#include <QPainter>
#include <QSvgRenderer>

#include <cstdio>

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: attnscope_render_icon SVG OUTDIR SIZE...\n");
        return 2;
    }
    // No QGuiApplication: painting shapes into a QImage needs no platform plugin or display (the SVG has no text).
    QSvgRenderer svg(QString::fromLocal8Bit(argv[1]));
    if (!svg.isValid()) {
        std::fprintf(stderr, "error: %s is not a valid SVG\n", argv[1]);
        return 1;
    }
    for (int i = 3; i < argc; ++i) {
        const int size = QString::fromLatin1(argv[i]).toInt();
        if (size < 8 || size > 1024) {
            std::fprintf(stderr, "error: icon size %s outside 8..1024\n", argv[i]);
            return 2;
        }
        const QString dir = QStringLiteral("%1/%2x%2/apps").arg(QString::fromLocal8Bit(argv[2])).arg(size);
        QImage image(size, size, QImage::Format_ARGB32_Premultiplied);
        image.fill(Qt::transparent);
        QPainter painter(&image);
        painter.setRenderHint(QPainter::Antialiasing);
        svg.render(&painter);
        painter.end();
        if (!QDir().mkpath(dir) || !image.save(dir + QStringLiteral("/attnscope.png"))) {
            std::fprintf(stderr, "error: cannot write %s/attnscope.png\n", qPrintable(dir));
            return 1;
        }
    }
    return 0;
}
