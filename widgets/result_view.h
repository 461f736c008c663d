#pragma once
// Base of every result view of the desktop app (maps, query, spectrum, entropy, mixing, metrics).
//
// A view shows an analysis::ExploreResult computed by the core in the background; it never computes
// metrics itself. It can render itself for export at any size (publication style: axis titles, legend,
// colour-bar label), and save / restore its own view state (zoom, colour scale, ...) for sessions.
//
// A view shows exactly the state its result was computed from, or says it does not: the window marks it
// (setNotice) "out of date" while the inputs have moved on (the picture greyed under the notice) and "not
// computed" when there is nothing to show for the current inputs (the view is then cleared).
#include <QJsonObject>
#include <QSize>
#include <QString>
#include <QWidget>
#include <memory>

class QLabel;
class QPainter;

namespace attnscope::analysis {
struct ExploreResult;
}

namespace attnscope::widgets {

class ResultView : public QWidget {
    Q_OBJECT
public:
    using QWidget::QWidget;

    // What the view shows, as far as the window knows: `current` (its result answers the current inputs),
    // `outOfDate` (an older result, greyed under `text`), `notComputed` (cleared, `text` says why).
    enum class Freshness { current, outOfDate, notComputed };
    void setNotice(Freshness freshness, const QString& text = {});
    Freshness freshness() const { return m_freshness; }
    QString noticeText() const;

    // Stable id used in sessions and by `attnscope figure --view NAME`: "maps", "query", "spectrum",
    // "entropy", "mixing", "metrics".
    virtual QString viewName() const = 0;
    // Human title ("Attention maps", ...): the tab's tool tip and the View menu's entry.
    virtual QString viewTitle() const = 0;
    // The tab's label: one short word ("Maps", "Spectrum", ...), so every tab reads whole at 1280 px.
    QString tabLabel() const
    {
        QString s = viewName();
        if (!s.isEmpty())
            s[0] = s[0].toUpper();
        return s;
    }

    // Shows `result` (null clears the view). Called on the GUI thread.
    virtual void setResult(std::shared_ptr<const analysis::ExploreResult> result) = 0;
    // The selected query token (-1: none). Views that can show it do.
    virtual void setQuery(int token) { Q_UNUSED(token); }

    // Draws the view onto `painter` at logical size `size` (fonts multiplied by font_scale) for export.
    virtual void renderTo(QPainter* painter, const QSize& size, double font_scale) = 0;
    // Preferred export size in logical pixels.
    virtual QSize preferredExportSize() const { return {1200, 800}; }
    // The height for a figure `width` logical pixels wide with fonts x font_scale whose height was left to the
    // view (a preset or printed width without a height): `fallback` (the preferred aspect) unless the view
    // needs another, as the attention maps do in a narrow column.
    virtual int exportHeightFor(int width, double font_scale, int fallback)
    {
        Q_UNUSED(width);
        Q_UNUSED(font_scale);
        return fallback;
    }

    virtual QJsonObject saveState() const { return {}; }
    virtual void restoreState(const QJsonObject& state) { Q_UNUSED(state); }

signals:
    void querySelected(int token);             // the user picked a query (click on a map row, ...)
    void statusMessage(const QString& text);   // hover read-outs and hints for the status bar

private:
    Freshness m_freshness = Freshness::current;
    QLabel* m_notice = nullptr;                // over the whole view while not current
};

}  // namespace attnscope::widgets
