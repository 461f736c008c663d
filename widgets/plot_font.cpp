// The font of the plots; see plot_font.h.
#include "plot_font.h"

#include <QString>

namespace attnscope::widgets {

QFont plotFont(double point_size, bool bold)
{
    QFont f(QStringLiteral("DejaVu Sans"));
    f.setPointSizeF(point_size);
    f.setBold(bold);
    f.setStyleStrategy(QFont::PreferAntialias);
    return f;
}

}  // namespace attnscope::widgets
