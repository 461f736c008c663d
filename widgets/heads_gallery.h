#pragma once
// The Heads view's arrangement of a page of heads (widgets/heads_view.cpp): how many heads per row of maps, the
// side of a map and whether each cell's numbers take two lines, searched from the widths and heights of the
// page's texts measured at one font scale. Geometry only: the view measures its texts and builds the layout.
#include <QSize>

namespace attnscope::widgets {

// How the page's maps are arranged at one size: heads per row of maps (a page wraps onto blocks of rows,
// each block a row of maps per mechanism), whether each cell's numbers take two lines, the side of a map
// in pixels, and the height that arrangement needs (at most the height it was chosen for unless it scrolls).
struct Gallery {
    int perRow = 0;   // 0: not chosen yet (the whole page on one row)
    bool split = false;
    double side = 0;
    int height = 0;
    double cellFont = 1.0;      // the heads' names and numbers at this x kTickPt (a crowded figure: smaller, never below 6.6 pt printed)
    bool scaleLabels = true;    // each colour bar's label along it ("softmax weight"): only where the map is as tall
};

// The page's texts as the search needs them, in pixels at the font scale `fontScale`.
struct GalleryTexts {
    int shown = 0;               // heads on the page
    int mechanisms = 1;          // rows of maps per block
    double fontScale = 1.0;
    double textWidth = 0;        // the widest head name or number line when the numbers take two lines (+ margin)
    double oneLineWidth = 0;     // the widest cell's numbers on one line
    double rowLabelWidth = 0;    // the mechanisms' row labels
    double scaleLabelWidth = 0;  // the longest colour-bar label (drawn along the bar: needs a map that tall)
    double scaleLabelLine = 0;   // the width a colour-bar label takes across (its line height)
    double scaleWidth = 0;       // a colour scale without its label: bar, ticks, margins
    double fixedHeight = 0;      // title, details, foot and margins
    double blockHeight = 0;      // per block of rows: the head names
    double numberLine = 0;       // one line of a cell's numbers
    double minSide = 0;          // a grown arrangement's maps keep at least this side
};

// For each number of heads per row (only `onlyPerRow` when > 0), the side a map gets from the width and from the
// height after every text line (the names and numbers must fit that side whole); the largest side wins (more
// heads per row on a tie); when no arrangement keeps every text whole, the one with the largest maps. `grow`: the
// height is free: the most heads per row whose maps keep `minSide` (or the texts' width) across, and the height
// that estimate needs. `cell`: the cells' font factor, recorded in the result.
Gallery arrangeGallery(const GalleryTexts& t, const QSize& size, bool grow, int onlyPerRow, double cell);

}  // namespace attnscope::widgets
