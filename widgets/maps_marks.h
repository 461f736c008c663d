#pragma once
// What the attention maps draw besides their cells (private to widgets/): token strings made readable,
// axis ticks that name tokens, and MHLA's block boundaries drawn as lines or, where lines would cover the
// map, as ticks outside it. qcustomplot.h is included: only the maps' and query view's sources use this.
#include <QString>
#include <memory>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <qcustomplot.h>

namespace attnscope::analysis {
struct ExploreResult;
}

namespace attnscope::widgets {

// A token string for display: control characters escaped ("\n", "\t", "\r", "\x07"), spaces shown as
// "·", cut to `maxChars` characters with "…". An empty token shows as "∅".
QString displayToken(const std::string& token, int maxChars = 12);
// displayToken of every token of the result (empty when the file has none).
std::vector<QString> displayTokens(const analysis::ExploreResult& result, int maxChars = 12);

// Ticks of a token axis: at integer steps labelled "index token" (beside: y axes) or "index\ntoken" (below:
// x axes), or, once every token fits (setEvery), one tick per token labelled with the token alone. Without
// tokens, integer ticks labelled with the index.
class TokenTicker : public QCPAxisTicker {
public:
    TokenTicker(std::shared_ptr<const std::vector<QString>> tokens, bool below);
    void setEvery(bool every) { m_every = every; }
    bool every() const { return m_every; }
    bool hasTokens() const { return m_tokens && !m_tokens->empty(); }
    // Whether one label per token fits `pixelsPerToken` for the tokens of [first, last] in `font`.
    bool fits(const QFont& font, double pixelsPerToken, Eigen::Index first, Eigen::Index last) const;

protected:
    double getTickStep(const QCPRange& range) override;
    int getSubTickCount(double tickStep) override;
    QString getTickLabel(double tick, const QLocale& locale, QChar formatChar, int precision) override;

private:
    std::shared_ptr<const std::vector<QString>> m_tokens;
    bool m_below;
    bool m_every = false;
};

// MHLA's block boundaries over a map: `cuts` are the tokens k where a boundary falls before k (between
// k - 1 and k). Where consecutive visible boundaries are at least kLineGap pixels apart, lines across the
// map; closer, ticks above and right of it (at least 3 pixels apart, the others left out) so that the map
// stays visible. The axis rect keeps a margin for the ticks.
class BlockBoundaries : public QCPAbstractItem {
public:
    static constexpr double kLineGap = 6.0;
    BlockBoundaries(QCustomPlot* plot, QCPAxisRect* rect, std::vector<Eigen::Index> cuts);
    double selectTest(const QPointF& pos, bool onlySelectable, QVariant* details = nullptr) const override;
    // Lines when the visible boundaries are far enough apart at the rect's current size and range.
    bool drawsLines() const;
    // The boundaries drawn (after thinning), in pixels along x.
    std::vector<double> drawnPixels() const;

protected:
    void draw(QCPPainter* painter) override;
    QRect clipRect() const override;

private:
    std::vector<double> visiblePixels(const QCPAxis* axis) const;
    QCPAxisRect* m_rect;
    std::vector<Eigen::Index> m_cuts;
};

}  // namespace attnscope::widgets
