// Token labels and block boundaries of the attention maps; see maps_marks.h.
#include "maps_marks.h"

#include <QFontMetricsF>
#include <algorithm>
#include <cmath>

#include "analysis/explore.h"

namespace attnscope::widgets {

using Eigen::Index;

QString displayToken(const std::string& token, int maxChars)
{
    if (token.empty())
        return QStringLiteral("\u2205");
    const QString s = QString::fromUtf8(token.data(), static_cast<qsizetype>(token.size()));
    QString out;
    for (const QChar c : s) {
        const char16_t u = c.unicode();
        if (u == '\n')
            out += QStringLiteral("\\n");
        else if (u == '\t')
            out += QStringLiteral("\\t");
        else if (u == '\r')
            out += QStringLiteral("\\r");
        else if (u == ' ')
            out += QChar(0x00B7);
        else if (u < 0x20 || u == 0x7f || (u >= 0x80 && u < 0xa0))
            out += QStringLiteral("\\x%1").arg(static_cast<int>(u), 2, 16, QLatin1Char('0'));
        else
            out += c;
    }
    if (maxChars > 1 && out.size() > maxChars)
        out = out.left(maxChars - 1) + QChar(0x2026);
    return out;
}

std::vector<QString> displayTokens(const analysis::ExploreResult& result, int maxChars)
{
    std::vector<QString> out;
    out.reserve(result.tokens.size());
    for (const std::string& t : result.tokens)
        out.push_back(displayToken(t, maxChars));
    return out;
}

TokenTicker::TokenTicker(std::shared_ptr<const std::vector<QString>> tokens, bool below)
    : m_tokens(std::move(tokens)), m_below(below)
{
    setTickCount(5);
}

bool TokenTicker::fits(const QFont& font, double pixelsPerToken, Index first, Index last) const
{
    if (!hasTokens())
        return false;
    const QFontMetricsF fm(font);
    if (!m_below)   // one line of text per token row
        return pixelsPerToken >= fm.height();
    const Index n = static_cast<Index>(m_tokens->size());
    first = std::max<Index>(first, 0);
    last = std::min<Index>(last, n - 1);
    double widest = 0;
    for (Index t = first; t <= last && pixelsPerToken > widest + 3; ++t)
        widest = std::max(widest, fm.horizontalAdvance((*m_tokens)[static_cast<std::size_t>(t)]));
    return pixelsPerToken >= widest + 3;
}

double TokenTicker::getTickStep(const QCPRange& range)
{
    if (m_every)
        return 1;
    const double s = QCPAxisTicker::getTickStep(range);   // integer steps: tokens are integers
    if (s < 1)
        return 1;
    return std::abs(s - 2.5) < 1e-9 ? 2.0 : std::round(s);
}

int TokenTicker::getSubTickCount(double tickStep) { return m_every ? 0 : QCPAxisTicker::getSubTickCount(tickStep); }

QString TokenTicker::getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision)
{
    const auto t = static_cast<Index>(std::llround(tick));
    if (!hasTokens() || t < 0 || t >= static_cast<Index>(m_tokens->size()))
        return QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision);
    const QString& token = (*m_tokens)[static_cast<std::size_t>(t)];
    if (m_every)
        return token;
    return QString::number(t) + (m_below ? QStringLiteral("\n") : QStringLiteral(" ")) + token;
}

BlockBoundaries::BlockBoundaries(QCustomPlot* plot, QCPAxisRect* rect, std::vector<Index> cuts)
    : QCPAbstractItem(plot), m_rect(rect), m_cuts(std::move(cuts))
{
    setClipToAxisRect(false);
    setSelectable(false);
    QMargins m = rect->minimumMargins();
    m.setTop(std::max(m.top(), 9));
    m.setRight(std::max(m.right(), 9));
    rect->setMinimumMargins(m);
}

double BlockBoundaries::selectTest(const QPointF& pos, bool onlySelectable, QVariant* details) const
{
    Q_UNUSED(pos);
    Q_UNUSED(onlySelectable);
    Q_UNUSED(details);
    return -1;
}

QRect BlockBoundaries::clipRect() const { return m_rect->outerRect(); }

// Pixel positions of the boundaries inside the axis' visible range, ascending.
std::vector<double> BlockBoundaries::visiblePixels(const QCPAxis* axis) const
{
    std::vector<double> px;
    const QCPRange range = axis->range();
    for (Index k : m_cuts) {
        const double c = static_cast<double>(k) - 0.5;
        if (range.contains(c))
            px.push_back(axis->coordToPixel(c));
    }
    std::sort(px.begin(), px.end());
    return px;
}

bool BlockBoundaries::drawsLines() const
{
    for (const QCPAxis* axis : {m_rect->axis(QCPAxis::atBottom), m_rect->axis(QCPAxis::atLeft)}) {
        const std::vector<double> px = visiblePixels(axis);
        for (std::size_t i = 1; i < px.size(); ++i)
            if (px[i] - px[i - 1] < kLineGap)
                return false;
    }
    return true;
}

namespace {

// Keeps positions at least `gap` pixels after the last one kept.
std::vector<double> thinned(const std::vector<double>& px, double gap)
{
    std::vector<double> out;
    for (double p : px)
        if (out.empty() || p - out.back() >= gap)
            out.push_back(p);
    return out;
}

}  // namespace

std::vector<double> BlockBoundaries::drawnPixels() const
{
    const std::vector<double> px = visiblePixels(m_rect->axis(QCPAxis::atBottom));
    return drawsLines() ? px : thinned(px, 3.0);
}

void BlockBoundaries::draw(QCPPainter* painter)
{
    const QRectF r = m_rect->rect();
    const std::vector<double> xs = visiblePixels(m_rect->axis(QCPAxis::atBottom));
    const std::vector<double> ys = visiblePixels(m_rect->axis(QCPAxis::atLeft));
    painter->setAntialiasing(false);
    if (drawsLines()) {
        painter->setPen(QPen(QColor(255, 255, 255, 170), 0));
        for (double x : xs)
            painter->drawLine(QPointF(x, r.top()), QPointF(x, r.bottom()));
        for (double y : ys)
            painter->drawLine(QPointF(r.left(), y), QPointF(r.right(), y));
        return;
    }
    painter->setPen(QPen(QColor(60, 60, 60), 0));
    for (double x : thinned(xs, 3.0))
        painter->drawLine(QPointF(x, r.top() - 2), QPointF(x, r.top() - 8));
    for (double y : thinned(ys, 3.0))
        painter->drawLine(QPointF(r.right() + 2, y), QPointF(r.right() + 8, y));
}

}  // namespace attnscope::widgets
