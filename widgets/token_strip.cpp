// One query's attention over the tokens as shaded text; see token_strip.h.
#include "token_strip.h"

#include <QFontMetricsF>
#include <algorithm>
#include <cmath>

#include "plot_style.h"

namespace attnscope::widgets {

using Eigen::Index;

namespace {

constexpr double kPad = 3, kGap = 2, kLineSpacing = 3, kRowSpacing = 8;
constexpr Index kEllipsisBefore = -1, kEllipsisAfter = -2;

QString ellipsis() { return QString(QChar(0x2026)); }

}  // namespace

TokenStrip::TokenStrip(QCustomPlot* plot, std::vector<QString> tokens, Index query, std::vector<Row> rows, int maxLines)
    : QCPLayoutElement(plot), m_tokens(std::move(tokens)), m_query(query), m_rows(std::move(rows)), m_maxLines(std::max(1, maxLines)),
      m_font(plotFont(kLabelPt)), m_labelFont(plotFont(kTickPt, true))
{
    setMargins(QMargins(12, 6, 12, 6));
    m_end = static_cast<Index>(m_tokens.size());
}

// The fonts at the scale of the export in progress (plot_font.h, kFontScaleProperty); a new scale is a new
// width per token, so the window is chosen again.
QFont TokenStrip::scaledFont(const QFont& f) const
{
    const double s = property(kFontScaleProperty).isValid() ? property(kFontScaleProperty).toDouble() : 1.0;
    if (s != m_scaleFor) {
        m_scaleFor = s;
        m_windowFor = -1;
    }
    QFont out = f;
    out.setPointSizeF(f.pointSizeF() * s);
    return out;
}

QString TokenStrip::shownText() const
{
    QString out;
    for (Index t = m_first; t < m_end; ++t)
        out += m_tokens[static_cast<std::size_t>(t)];
    return out;
}

double TokenStrip::tokenWidth(Index t) const
{
    const QFontMetricsF fm(font());
    const QString& s = t >= 0 ? m_tokens[static_cast<std::size_t>(t)] : ellipsis();
    return std::max(8.0, fm.horizontalAdvance(s) + 2 * kPad);
}

// The width the tokens flow in: the element's, or before the first layout the plot's.
int TokenStrip::contentWidth() const
{
    const int w = rect().width() > 0 ? rect().width() : mParentPlot->viewport().width() - margins().left() - margins().right();
    return std::max(w, 60);
}

// All tokens when they fit in maxLines lines, else a window around the query: mostly before it when a
// row is causal (its later keys are not seen), centred otherwise.
void TokenStrip::chooseWindow(int width) const
{
    if (width == m_windowFor)
        return;
    m_windowFor = width;
    const Index n = static_cast<Index>(m_tokens.size());
    const double budget = m_maxLines * width * 0.9 - 2 * tokenWidth(kEllipsisBefore);
    double total = 0;
    for (Index t = 0; t < n; ++t)
        total += tokenWidth(t) + kGap;
    if (total <= budget || m_query < 0 || m_query >= n) {
        m_first = 0, m_end = n;
        return;
    }
    bool causal = false;
    for (const Row& r : m_rows)
        causal = causal || !r.allowed.empty();
    m_first = m_query, m_end = m_query + 1;
    double used = tokenWidth(m_query) + kGap;
    for (int step = 0;; ++step) {
        const bool left = causal ? step % 4 != 3 : step % 2 == 0;
        const Index next = left ? m_first - 1 : m_end;
        if (next < 0 || next >= n || used + tokenWidth(next) + kGap > budget) {
            const Index other = left ? m_end : m_first - 1;   // the other side may still have room
            if (other < 0 || other >= n || used + tokenWidth(other) + kGap > budget)
                break;
            (left ? m_end : m_first) += left ? 1 : -1;
            used += tokenWidth(other) + kGap;
            continue;
        }
        (left ? m_first : m_end) += left ? -1 : 1;
        used += tokenWidth(next) + kGap;
    }
}

// Boxes of the shown tokens (and the ellipses of cut ends) flowed into lines of `width`.
std::vector<TokenStrip::Box> TokenStrip::flow(int width, int& lines) const
{
    const double lineH = QFontMetricsF(font()).height() + 4;
    std::vector<Box> boxes;
    double x = 0;
    int line = 0;
    auto place = [&](Index token) {
        const double w = tokenWidth(token);
        if (x > 0 && x + w > width) {
            x = 0;
            ++line;
        }
        boxes.push_back({token, QRectF(x, line * (lineH + kLineSpacing), w, lineH)});
        x += w + kGap;
    };
    if (m_first > 0)
        place(kEllipsisBefore);
    for (Index t = m_first; t < m_end; ++t)
        place(t);
    if (m_end < static_cast<Index>(m_tokens.size()))
        place(kEllipsisAfter);
    lines = line + 1;
    return boxes;
}

int TokenStrip::height(int width) const
{
    chooseWindow(width);
    int lines = 0;
    flow(width, lines);
    const double lineH = QFontMetricsF(font()).height() + 4;
    const double label = QFontMetricsF(labelFont()).height() + 2;
    const double row = label + lines * (lineH + kLineSpacing);
    return static_cast<int>(std::ceil(static_cast<double>(m_rows.size()) * (row + kRowSpacing)));
}

QSize TokenStrip::minimumOuterSizeHint() const
{
    return {0, height(contentWidth()) + margins().top() + margins().bottom()};
}

QSize TokenStrip::maximumOuterSizeHint() const
{
    return {QWIDGETSIZE_MAX, minimumOuterSizeHint().height()};
}

void TokenStrip::draw(QCPPainter* painter)
{
    const int width = contentWidth();
    chooseWindow(width);
    int lines = 0;
    const std::vector<Box> boxes = flow(width, lines);
    const double lineH = QFontMetricsF(font()).height() + 4;
    const double label = QFontMetricsF(labelFont()).height() + 2;
    QPointF origin = rect().topLeft();
    painter->setAntialiasing(true);
    for (const Row& row : m_rows) {
        drawRow(painter, row, boxes, origin);
        origin.ry() += label + lines * (lineH + kLineSpacing) + kRowSpacing;
    }
}

void TokenStrip::drawRow(QCPPainter* painter, const Row& row, const std::vector<Box>& boxes, const QPointF& origin) const
{
    const double label = QFontMetricsF(labelFont()).height() + 2;
    double top = 0;
    for (std::size_t j = 0; j < row.weights.size(); ++j)
        if (row.allowed.empty() || row.allowed[j])
            top = std::max(top, row.weights[j]);
    QString caption = row.label;
    if (row.weights.empty())
        caption += QStringLiteral(": ") + row.note;
    else
        caption += QStringLiteral(": shade \u221d A[t, j], darkest = ") + fmtNum(top);
    painter->setFont(labelFont());
    painter->setPen(row.colour.darker(130));
    painter->drawText(QRectF(origin, QSizeF(rect().width(), label)), Qt::AlignLeft | Qt::AlignVCenter, caption);
    if (row.weights.empty())
        return;
    painter->setFont(font());
    for (const Box& b : boxes) {
        const QRectF r = b.rect.translated(origin + QPointF(0, label));
        if (b.token < 0) {
            painter->setPen(QColor(120, 120, 120));
            painter->drawText(r, Qt::AlignCenter, ellipsis());
            continue;
        }
        const auto j = static_cast<std::size_t>(b.token);
        const bool seen = row.allowed.empty() || row.allowed[j];
        const double a = seen && top > 0 ? std::clamp(row.weights[j] / top, 0.0, 1.0) : 0.0;
        const QColor bg(static_cast<int>(std::lround(255 + (row.colour.red() - 255) * a)),
                        static_cast<int>(std::lround(255 + (row.colour.green() - 255) * a)),
                        static_cast<int>(std::lround(255 + (row.colour.blue() - 255) * a)));
        painter->setPen(Qt::NoPen);
        painter->setBrush(seen ? bg : QColor(238, 238, 238));
        painter->drawRect(r);
        const double lum = 0.299 * bg.red() + 0.587 * bg.green() + 0.114 * bg.blue();
        painter->setPen(!seen ? QColor(165, 165, 165) : lum < 140 ? Qt::white : Qt::black);
        painter->drawText(r, Qt::AlignCenter, m_tokens[j]);
        if (b.token == m_query) {
            painter->setPen(QPen(QColor(230, 30, 30), 1.6));
            painter->setBrush(Qt::NoBrush);
            painter->drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5));
        }
    }
}

}  // namespace attnscope::widgets
