#pragma once
// TokenStrip: one query's attention over the tokens as shaded text, one block per mechanism (as BertViz's
// head view and CircuitsVis' coloured tokens show it): each key's token on a background as strong as its
// weight relative to the row's largest, the query outlined in red, the keys a causal query does not see
// in grey without shading. When the tokens need more than `maxLines` lines per mechanism, a window of them
// around the query is shown ("…" at a cut end). A layout element of the query view's QCustomPlot, so that
// it is exported with the plot. Private to widgets/.
#include <QColor>
#include <QString>
#include <vector>

#include <Eigen/Core>
#include <qcustomplot.h>

namespace attnscope::widgets {

class TokenStrip : public QCPLayoutElement {
public:
    struct Row {
        QString label;                // the mechanism
        QColor colour;                // its colour
        std::vector<double> weights;  // A[t, j] per key j (empty: the mechanism failed)
        std::vector<char> allowed;    // per key j: the query sees it (empty: every key)
        QString note;                 // shown instead of tokens when weights is empty
    };
    TokenStrip(QCustomPlot* plot, std::vector<QString> tokens, Eigen::Index query, std::vector<Row> rows, int maxLines = 4);

    // The tokens shown: [first(), end()) at the current width.
    Eigen::Index first() const { return m_first; }
    Eigen::Index end() const { return m_end; }
    // The shown tokens, concatenated.
    QString shownText() const;
    const std::vector<Row>& rows() const { return m_rows; }

    QSize minimumOuterSizeHint() const override;
    QSize maximumOuterSizeHint() const override;

protected:
    void draw(QCPPainter* painter) override;

private:
    struct Box {
        Eigen::Index token;
        QRectF rect;   // relative to the row's first line
    };
    QFont font() const { return scaledFont(m_font); }
    QFont labelFont() const { return scaledFont(m_labelFont); }
    QFont scaledFont(const QFont& f) const;
    int contentWidth() const;
    void chooseWindow(int width) const;
    std::vector<Box> flow(int width, int& lines) const;
    double tokenWidth(Eigen::Index t) const;
    int height(int width) const;
    void drawRow(QCPPainter* painter, const Row& row, const std::vector<Box>& boxes, const QPointF& origin) const;

    std::vector<QString> m_tokens;
    Eigen::Index m_query;
    std::vector<Row> m_rows;
    int m_maxLines;
    QFont m_font, m_labelFont;
    mutable Eigen::Index m_first = 0, m_end = 0;
    mutable int m_windowFor = -1;   // the width the window was chosen for
    mutable double m_scaleFor = 1;  // the font scale it was chosen at
};

}  // namespace attnscope::widgets
