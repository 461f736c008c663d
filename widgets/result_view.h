#pragma once
// Base of every result view of the desktop app (maps, query, spectrum, entropy, mixing, metrics).
//
// A view shows an analysis::ExploreResult computed by the core in the background; it never computes
// metrics itself. It can render itself for export at any size (publication style: axis titles, legend,
// colour-bar label), and save / restore its own view state (zoom, colour scale, ...) for sessions.
#include <QJsonObject>
#include <QSize>
#include <QString>
#include <QWidget>
#include <memory>

class QPainter;

namespace attnscope::analysis {
struct ExploreResult;
}

namespace attnscope::widgets {

class ResultView : public QWidget {
    Q_OBJECT
public:
    using QWidget::QWidget;

    // Stable id used in sessions and by `attnscope figure --view NAME`: "maps", "query", "spectrum",
    // "entropy", "mixing", "metrics".
    virtual QString viewName() const = 0;
    // Human title ("Attention maps", ...).
    virtual QString viewTitle() const = 0;

    // Shows `result` (null clears the view). Called on the GUI thread.
    virtual void setResult(std::shared_ptr<const analysis::ExploreResult> result) = 0;
    // The selected query token (-1: none). Views that can show it do.
    virtual void setQuery(int token) { Q_UNUSED(token); }

    // Draws the view onto `painter` at logical size `size` (fonts multiplied by font_scale) for export.
    virtual void renderTo(QPainter* painter, const QSize& size, double font_scale) = 0;
    // Preferred export size in logical pixels.
    virtual QSize preferredExportSize() const { return {1200, 800}; }

    virtual QJsonObject saveState() const { return {}; }
    virtual void restoreState(const QJsonObject& state) { Q_UNUSED(state); }

signals:
    void querySelected(int token);             // the user picked a query (click on a map row, ...)
    void statusMessage(const QString& text);   // hover read-outs and hints for the status bar
};

}  // namespace attnscope::widgets
