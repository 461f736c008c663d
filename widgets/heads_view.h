#pragma once
// HeadsView: every head of the current layer at a glance (viewName() "heads"). One row of small attention
// maps per mechanism computed (the Mechanisms dock's ticked ones, named left of the row), one column per head
// of the page (named above it; grouped-query attention: "q head 5 (kv 2)"), each map under its numerical
// rank (causal: the past block's) and its normalised entropy read from the head's result through the metric
// table (the Metrics view's numbers for that head). The maps of a row share one colour scale, beside the row;
// keys a causal query may not see are grey. A failed mechanism keeps its row of grey maps saying "failed"
// and its message under the grid. A title line and a details line say what was computed (file, layer, N,
// options) and which page is shown ("heads 0–7 of 12"), with Prev / Next in the tool row. On screen no map
// is under 96 px and no text is cut: the page wraps onto more rows of heads and scrolls down when the view
// is too low; a figure takes the arrangement with the largest maps that keeps every text whole.
//
// The view computes nothing: the window runs analysis::explore_heads for the page (in the background, with
// its own cancel) and hands the result over with setHeads(). The view asks for another page with
// pageRequested(first), and a click on a small map asks to open that head in the Maps view with
// headActivated(head).
#include <memory>

#include "result_view.h"

namespace attnscope::analysis {
struct HeadsResult;
}

namespace attnscope::widgets {

class HeadsView : public ResultView {
    Q_OBJECT
public:
    using ResultView::ResultView;
    static constexpr int kPageSize = 8;   // heads per page

    // The page to show (null: none); the page shown becomes its first head.
    virtual void setHeads(std::shared_ptr<const analysis::HeadsResult> heads) = 0;
    virtual std::shared_ptr<const analysis::HeadsResult> heads() const = 0;
    // The first head of the page the view wants (the one shown, or the one asked for since).
    virtual int pageFirst() const = 0;
    // The window's progress for the page being computed (fraction < 0: none runs).
    virtual void setProgress(double fraction, const QString& stage) = 0;

signals:
    void pageRequested(int first);   // Prev / Next: the page that starts at head `first`
    void headActivated(int head);    // a click on a small map: show this head in the Maps view (-1: no head axis)
};

HeadsView* createHeadsView(QWidget* parent = nullptr);

}  // namespace attnscope::widgets
