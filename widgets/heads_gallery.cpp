#include "heads_gallery.h"

#include <algorithm>
#include <cmath>

namespace attnscope::widgets {

Gallery arrangeGallery(const GalleryTexts& t, const QSize& size, bool grow, int onlyPerRow, double cell)
{
    const double fs = t.fontScale;
    const double width = size.width();
    Gallery best;
    Gallery fallback;   // the largest maps whatever the texts
    for (int perRow = t.shown; perRow >= 1; --perRow) {
        if (onlyPerRow > 0 && perRow != onlyPerRow)
            continue;
        const int blocks = (t.shown + perRow - 1) / perRow;
        Gallery g;
        g.perRow = perRow;
        g.cellFont = cell;
        const auto down = [&](bool split) {
            return t.fixedHeight + blocks * t.blockHeight + blocks * t.mechanisms * ((split ? 2 : 1) * t.numberLine + 2 * fs);
        };
        // The colour bars keep their labels when the maps are as tall as the labels are long.
        for (const bool labels : {true, false}) {
            const double across = t.rowLabelWidth + 12 * fs + t.scaleWidth + (labels ? t.scaleLabelLine : 0.0);
            const double sideW = (width - across) / perRow - 12;
            g.scaleLabels = labels;
            if (grow) {
                g.side = std::max(t.minSide, t.textWidth);
                if (sideW < g.side && perRow > 1)
                    break;
                if (labels && g.side < t.scaleLabelWidth)
                    continue;
                g.split = t.oneLineWidth > g.side;
                g.height = static_cast<int>(std::ceil(down(g.split) + blocks * t.mechanisms * g.side));
                return g;   // the most heads per row that keep maps of that side
            }
            // Numbers on one line where the side allows, else two.
            bool placed = false;
            for (const bool split : {false, true}) {
                const double side = std::min(sideW, (size.height() - down(split)) / (blocks * t.mechanisms));
                if (split && (fallback.perRow == 0 || side > fallback.side + 0.5)) {
                    fallback = g;
                    fallback.split = true;
                    fallback.side = side;
                    fallback.height = size.height();
                    fallback.scaleLabels = false;
                }
                if ((split ? t.textWidth : std::max(t.textWidth, t.oneLineWidth + 4)) > side && perRow > 1)
                    continue;
                if (labels && side < t.scaleLabelWidth)
                    break;
                placed = true;
                if (best.perRow == 0 || side > best.side + 0.5) {
                    best = g;
                    best.split = split;
                    best.side = side;
                    best.height = size.height();
                }
                break;
            }
            if (placed)
                break;
        }
    }
    if (best.perRow == 0)   // no arrangement keeps every text whole: the largest maps
        best = fallback;
    if (best.perRow == 0) {
        best.perRow = 1;
        best.split = true;
        best.cellFont = cell;
        best.scaleLabels = false;
    }
    return best;
}

}  // namespace attnscope::widgets
