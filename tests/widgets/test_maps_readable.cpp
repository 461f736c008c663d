// The attention maps made readable (docs/gui.md, "Views"): panels that fill the view with square cells at
// several view sizes, one panel enlarged by a double-click and back, the causal mask in its own colour
// (MHLA's by the block rule), each panel's colour range from its own entries (a percentile or the
// largest), block boundaries as lines or ticks and a toggle, token strings on the axes and in the hover
// read-out (data/char_lm_licenses.h5), and in the query view the token strip (the character LM) and the
// input image with the query's attention (data/vit_digits.h5).
#include <QApplication>
#include <QImage>
#include <QPainter>
#include <QJsonArray>
#include <QSignalSpy>
#include <QTest>
#include <QFontMetrics>
#include <algorithm>
#include <set>
#include <cmath>
#include <memory>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "analysis/explore.h"
#include "maps_marks.h"
#include "maps_panels.h"
#include "analysis/map_scale.h"
#include "token_strip.h"
#include "views.h"
#include "widget_test_support.h"

using namespace attnscope;
using attention::Mechanism;
using Eigen::Index;
using test::colourMaps;
using test::colourScales;
using test::plotOf;
using widgets::ResultView;

namespace {

using Result = test::ExploreResultPtr;

// Layer 1, head 0 of the character LM, causal as its attributes say; `blocks` MHLA blocks (0: default).
Result charLm(Index blocks = 0)
{
    const std::string path = test::dataPath("char_lm_licenses.h5");
    return test::exploreFile(path, [&](analysis::ExploreRequest& r) {
        r.source.q_ref = io::parse_tensor_ref(path + ":/layers/1/q");
        r.source.k_ref = io::parse_tensor_ref(path + ":/layers/1/k");
        r.source.selection.at['h'] = 0;
        r.options.causal = true;
        r.options.blocks.blocks = blocks;
    });
}

const Result& charLmDefault()
{
    static Result r = charLm();
    return r;
}

// The digit ViT's last layer, head 1, as its attributes say (CLS dropped, 8 x 8 grid, 4 x 4 blocks).
Result vitDigits()
{
    const std::string path = test::dataPath("vit_digits.h5");
    return test::exploreFile(path, [&](analysis::ExploreRequest& r) {
        r.source.q_ref = io::parse_tensor_ref(path + ":/layers/2/q");
        r.source.k_ref = io::parse_tensor_ref(path + ":/layers/2/k");
        r.source.selection.at['h'] = 1;
        r.source.selection.prefix_tokens = 1;
        r.options.blocks.kind = attention::BlockSpec::Kind::grid;
        r.options.blocks.grid = {8, 8};
        r.options.blocks.block_grid = {4, 4};
        r.token_grid = {8, 8};
    });
}

// Shows the maps view at `size` with `result` and waits for the images of the panels' on-screen size.
QCustomPlot* showMaps(ResultView* view, QSize size, const Result& result, const QJsonObject& state = {})
{
    QCustomPlot* plot = test::showOnScreen(view, size, [&] {
        view->setResult(result);
        if (!state.isEmpty())
            view->restoreState(state);
    });
    QTest::qWait(60);
    plot->replot();
    QTest::qWait(60);   // images for the panels' final size
    return plot;
}

// Every text element of the plot (titles, footnote), each on one line, joined by '|'.
QString allTexts(QCustomPlot* plot)
{
    QString out;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* t = qobject_cast<QCPTextElement*>(e))
            out += t->text().replace('\n', ' ') + "|";
    return out;
}

// Panels square, of one size, and together (with titles, axes and scales) at least 80% of the plot's
// height or width.
void expectFills(QCustomPlot* plot, int panels, const char* where)
{
    const auto rects = plot->axisRects();
    ASSERT_EQ(rects.size(), panels) << where;
    QRect box;
    for (QCPAxisRect* r : rects) {
        EXPECT_NEAR(r->width(), r->height(), 1) << where;   // N x N entries: square cells
        EXPECT_NEAR(r->width(), rects.front()->width(), 1) << where;
        box |= r->outerRect();
    }
    for (QCPColorScale* s : colourScales(plot))
        box |= s->outerRect();
    const double h = static_cast<double>(box.height()) / plot->height(), w = static_cast<double>(box.width()) / plot->width();
    EXPECT_TRUE(h >= 0.8 || w >= 0.8) << where << ": panels use " << h * 100 << "% of the height, " << w * 100 << "% of the width";
}

QPoint cellCentre(QCPAxisRect* rect, double t, double j)
{
    return {static_cast<int>(rect->axis(QCPAxis::atBottom)->coordToPixel(j)), static_cast<int>(rect->axis(QCPAxis::atLeft)->coordToPixel(t))};
}

bool near(const QColor& a, const QColor& b, int tol = 3)
{
    return std::abs(a.red() - b.red()) <= tol && std::abs(a.green() - b.green()) <= tol && std::abs(a.blue() - b.blue()) <= tol;
}

// The entries query t may see under the maths' rules (docs/maths.md 1.1, 1.3, 1.4), independent of the view.
bool allowedByMaths(const analysis::ExploreResult& r, Mechanism m, Index t, Index j)
{
    if (m != Mechanism::mhla || !r.blocks)
        return j <= t;
    const auto bt = r.blocks->block_of_token[static_cast<std::size_t>(t)], bj = r.blocks->block_of_token[static_cast<std::size_t>(j)];
    return bj < bt || (bj == bt && j <= t);
}

}  // namespace

TEST(MapsReadable, PanelsFillTheViewWithSquareCells)
{
    for (const QSize size : {QSize(1000, 800), QSize(760, 580), QSize(700, 1000), QSize(1500, 520), QSize(1200, 900)}) {
        SCOPED_TRACE(testing::Message() << size.width() << "x" << size.height());
        std::unique_ptr<ResultView> view(widgets::createMapsView());
        QCustomPlot* plot = showMaps(view.get(), size, charLmDefault());
        expectFills(plot, 3, "three panels");
        // The drawn image has at most one cell per pixel of a panel (no entry dropped when drawn).
        for (QCPColorMap* m : colourMaps(plot))
            EXPECT_LE(m->data()->keySize(), plot->axisRect(0)->width() + 1);
        view->restoreState(QJsonObject{{"difference", "softmax"}});
        plot->replot();
        expectFills(plot, 2, "difference panels");
        view->restoreState(QJsonObject{{"difference", "off"}, {"panels", "linear"}});
        plot->replot();
        expectFills(plot, 1, "one panel");
        QTest::qWait(60);
        EXPECT_LE(colourMaps(plot).at(0)->data()->keySize(), plot->axisRect(0)->width() + 1);
    }
}

TEST(MapsReadable, DoubleClickEnlargesOnePanelAndBack)
{
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {1000, 800}, charLmDefault());
    ASSERT_EQ(plot->axisRects().size(), 3);
    const int before = plot->axisRect(0)->width();
    QTest::mouseDClick(plot, Qt::LeftButton, Qt::NoModifier, cellCentre(plot->axisRect(2), 300, 100));
    plot->replot();
    ASSERT_EQ(plot->axisRects().size(), 1);
    EXPECT_EQ(view->saveState()["panels"].toString(), "MHLA");
    EXPECT_GT(plot->axisRect(0)->width(), 1.5 * before);
    expectFills(plot, 1, "enlarged");
    bool mhlaTitle = false;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* t = qobject_cast<QCPTextElement*>(e))
            mhlaTitle = mhlaTitle || t->text().startsWith("MHLA");
    EXPECT_TRUE(mhlaTitle);
    QTest::mouseDClick(plot, Qt::LeftButton, Qt::NoModifier, cellCentre(plot->axisRect(0), 300, 100));
    plot->replot();
    EXPECT_EQ(plot->axisRects().size(), 3);
    EXPECT_EQ(view->saveState()["panels"].toString(), "all");
}

// docs/maths.md 1.6: when the mixing matrix caps MHLA's rank whatever the data, the app says so in words: the MHLA
// panel's title and the warnings the Metrics view shows (and its CSV). data/gaussian.h5 (N = 256, d = 64) with
// 16 1-D blocks and `cos` mixing (rank 2): MHLA rank <= 128; with the default `exp` there is no cap to state.
TEST(MapsReadable, MixingRankCapIsSaidInWords)
{
    const auto explore = [](const char* mixing) {
        return test::exploreFile(test::dataPath("gaussian.h5"), [&](analysis::ExploreRequest& r) {
            r.options.blocks.blocks = 16;
            r.options.mixing.preset = mixing;
        });
    };
    const char* sentence = "the mixing matrix has rank 2: MHLA rank <= 128 whatever the data";
    for (const char* mixing : {"cos", ""}) {
        SCOPED_TRACE(mixing);
        const bool capped = std::string(mixing) == "cos";
        const Result res = explore(mixing);
        EXPECT_EQ(widgets::metricsCsv(*res).contains(sentence), capped);
        std::unique_ptr<ResultView> view(widgets::createMapsView());
        QCustomPlot* plot = showMaps(view.get(), {1400, 600}, res);
        const QString titles = allTexts(plot);
        EXPECT_EQ(titles.contains(QStringLiteral("rank \u2264 128 by its mixing")), capped) << titles.toStdString();
    }
}

// A title wider than its panel breaks into lines, each of which fits: also what follows the numbers ("= linear by
// construction" for MHLA with one block: it was cut off at the panel's edge, "...94 = linear by co").
TEST(MapsReadable, NarrowTitlesBreakIntoLinesThatFit)
{
    const Result res = test::exploreFile(test::dataPath("gaussian.h5"), [&](analysis::ExploreRequest& r) {
        r.options.blocks.blocks = 1;
    });
    ASSERT_TRUE(res);
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {640, 420}, res);
    int titles = 0;
    bool sentence = false;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true)) {
        auto* t = qobject_cast<QCPTextElement*>(e);
        if (!t || t->text().startsWith(QStringLiteral("Colours")))
            continue;
        ++titles;
        const QFontMetrics fm(t->font());
        for (const QString& line : t->text().split('\n'))
            EXPECT_LE(fm.horizontalAdvance(line), t->outerRect().width()) << line.toStdString() << " in " << t->text().toStdString();
        sentence = sentence || t->text().replace('\n', ' ').contains(QStringLiteral("= linear by construction"));
    }
    EXPECT_GE(titles, 3);
    EXPECT_TRUE(sentence) << allTexts(plot).toStdString();
}

// Causal data: the full rank is near N for every mechanism, so each title gives the past block's rank in its
// place ("past 16/256"), and the footnote says which block and the d it is measured against (issue 35: "linear
// rank 508/512" hid the collapse the Metrics view found). The trained character LM of data/trained_lm_mhla.h5
// (N = 512, d = 16): linear's past block has rank <= 16.
TEST(MapsReadable, CausalTitlesLeadWithThePastBlock)
{
    const std::string path = test::dataPath("trained_lm_mhla.h5");
    const Result res = test::exploreFile(path, [&](analysis::ExploreRequest& r) {
        r.source.q_ref = io::parse_tensor_ref(path + ":/layers/1/q");
        r.source.k_ref = io::parse_tensor_ref(path + ":/layers/1/k");
        r.source.selection.at['h'] = 0;
        r.options.causal = true;
    });
    ASSERT_TRUE(res);
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {1500, 900}, res);
    const QString titles = allTexts(plot);
    for (const auto& o : res->outcomes) {
        const auto& pb = o.result.past_block;
        ASSERT_TRUE(pb && pb->spectrum) << attention::to_string(o.result.mechanism);
        const QString past = QStringLiteral("past %1/256").arg(pb->spectrum->rank);
        EXPECT_TRUE(titles.contains(past)) << past.toStdString() << " in " << titles.toStdString();
        EXPECT_TRUE(titles.contains(QStringLiteral("Past: the rank of A[h:N, :h], h = 256; linear attention keeps it at most d = 16.")))
            << titles.toStdString();
        if (o.result.mechanism == attention::Mechanism::linear) {
            EXPECT_LE(pb->spectrum->rank, 16) << "linear attention's past block is bounded by d";
        }
    }
}

TEST(MapsReadable, CausalMaskHasItsOwnColour)
{
    const auto& r = *charLmDefault();
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {1000, 800}, charLmDefault());
    const QImage image = plot->grab().toImage();
    QCPAxisRect* softmax = plot->axisRect(0);
    const QCPColorScale* scale = colourMaps(plot).at(0)->colorScale();
    ASSERT_TRUE(scale);
    const QColor zero = QColor::fromRgba(scale->gradient().color(0.0, scale->dataRange(), false));
    ASSERT_FALSE(near(zero, widgets::maskColour(), 20)) << "the mask colour must differ from the colour of a zero weight";
    // Upper triangle: not allowed, drawn in the mask colour (the matrix holds 0 there).
    ASSERT_EQ((*r.outcomes[0].matrix)(50, 400), 0.0);
    EXPECT_TRUE(near(image.pixelColor(cellCentre(softmax, 50, 400)), widgets::maskColour())) << image.pixelColor(cellCentre(softmax, 50, 400)).name().toStdString();
    EXPECT_TRUE(std::isnan(colourMaps(plot).at(0)->data()->data(400, 50)));
    // Lower triangle: a colour of the map.
    EXPECT_FALSE(near(image.pixelColor(cellCentre(softmax, 400, 50)), widgets::maskColour()));
}

TEST(MapsReadable, MhlaCausalMaskFollowsTheBlockRule)
{
    // A grid in raster order: MHLA's causal rule lets a query see later tokens of earlier blocks.
    const Result res = test::exploreFile(test::dataPath("vit_local2d.h5"), [](analysis::ExploreRequest& r) {
        r.source.selection.at['h'] = 0;
        r.options.causal = true;
        r.options.blocks.kind = attention::BlockSpec::Kind::grid;
        r.options.blocks.grid = {16, 16};
        r.options.blocks.block_grid = {4, 4};
    });
    const auto* mhla = res->find(Mechanism::mhla);
    ASSERT_TRUE(mhla && mhla->matrix) << (mhla ? mhla->error : "no MHLA");
    const analysis::CausalMask mask = analysis::CausalMask::of(*res, *mhla);
    ASSERT_TRUE(mask.active());
    bool laterKeySeen = false;
    for (Index t = 0; t < res->n; ++t) {
        Index seen = 0;
        for (Index j = 0; j < res->n; ++j) {
            EXPECT_EQ(mask.allowed(t, j), allowedByMaths(*res, Mechanism::mhla, t, j)) << t << ", " << j;
            if (!mask.allowed(t, j)) {
                EXPECT_EQ((*mhla->matrix)(t, j), 0.0);
            }
            seen += mask.allowed(t, j);
            laterKeySeen = laterKeySeen || (j > t && mask.allowed(t, j));
        }
        EXPECT_EQ(seen, mhla->allowed_keys[static_cast<std::size_t>(t)]);
    }
    EXPECT_TRUE(laterKeySeen);
    EXPECT_FALSE(analysis::CausalMask::of(*res, *res->find(Mechanism::softmax)).allowed(5, 16));
}

TEST(MapsReadable, EachPanelHasItsOwnRange)
{
    const auto& r = *charLmDefault();
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {1000, 800}, charLmDefault());
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 3);
    ASSERT_EQ(colourScales(plot).size(), 3);
    // Default: 0 to the 99th percentile of the entries each causal query sees.
    std::vector<double> tops;
    for (int i = 0; i < 3; ++i) {
        const auto& o = r.outcomes[static_cast<std::size_t>(i)];
        std::vector<float> seen;
        for (Index t = 0; t < r.n; ++t)
            for (Index j = 0; j < r.n; ++j)
                if (allowedByMaths(r, o.result.mechanism, t, j))
                    seen.push_back(static_cast<float>((*o.matrix)(t, j)));
        const auto k = static_cast<std::size_t>(std::floor(0.99 * static_cast<double>(seen.size() - 1)));
        std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(k), seen.end());
        const QCPRange range = maps[i]->colorScale()->dataRange();
        EXPECT_EQ(range.lower, 0.0);
        EXPECT_FLOAT_EQ(static_cast<float>(range.upper), seen[k]) << attention::to_string(o.result.mechanism);
        EXPECT_LT(range.upper, o.matrix->maxCoeff());   // the first causal row (weight 1) is clipped
        tops.push_back(range.upper);
    }
    EXPECT_NE(tops[0], tops[1]);
    EXPECT_NE(tops[1], tops[2]);
    // Up to each panel's largest entry.
    view->restoreState(QJsonObject{{"clip", "largest entry"}});
    for (int i = 0; i < 3; ++i)
        EXPECT_DOUBLE_EQ(colourMaps(plot)[i]->colorScale()->dataRange().upper, r.outcomes[static_cast<std::size_t>(i)].matrix->maxCoeff());
    // Shared: one scale up to the largest of them.
    view->restoreState(QJsonObject{{"clip", "largest entry"}, {"scale", "shared"}});
    ASSERT_EQ(colourScales(plot).size(), 1);
    double largest = 0;
    for (const auto& o : r.outcomes)
        largest = std::max(largest, o.matrix->maxCoeff());
    EXPECT_DOUBLE_EQ(colourScales(plot)[0]->dataRange().upper, largest);
    // Differences share one symmetric range by default ("auto").
    view->restoreState(QJsonObject{{"difference", "softmax"}, {"scale", "auto"}});
    ASSERT_EQ(colourScales(plot).size(), 1);
    EXPECT_DOUBLE_EQ(colourScales(plot)[0]->dataRange().lower, -colourScales(plot)[0]->dataRange().upper);
}

// The matrices with one difference panel (MHLA − softmax): four square panels, the difference on its own
// symmetric scale (its 99th percentile of |MHLA − softmax| over the entries either mechanism allows),
// enlarged by a double-click and stored in the view state; the footnote broken to the plot's width.
TEST(MapsReadable, MatricesWithOneDifferencePanel)
{
    const auto& r = *charLmDefault();
    const QString name = QString::fromUtf8("MHLA \u2212 softmax");
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {760, 700}, charLmDefault(), QJsonObject{{"difference_panel", name}});
    expectFills(plot, 4, "matrices and a difference");
    ASSERT_EQ(colourScales(plot).size(), 4);   // "auto": each matrix its own range, the difference its own
    EXPECT_EQ(view->saveState()["difference_panel"].toString(), name);
    EXPECT_EQ(view->saveState()["difference"].toString(), "off");

    const auto* softmax = r.find(Mechanism::softmax);
    const auto* mhla = r.find(Mechanism::mhla);
    std::vector<double> diff;
    for (Index t = 0; t < r.n; ++t)
        for (Index j = 0; j < r.n; ++j)
            if (allowedByMaths(r, Mechanism::softmax, t, j) || allowedByMaths(r, Mechanism::mhla, t, j))
                diff.push_back(std::abs((*mhla->matrix)(t, j) - (*softmax->matrix)(t, j)));
    const auto k = static_cast<std::size_t>(std::floor(0.99 * static_cast<double>(diff.size() - 1)));
    std::nth_element(diff.begin(), diff.begin() + static_cast<std::ptrdiff_t>(k), diff.end());
    const QCPRange range = colourMaps(plot).at(3)->colorScale()->dataRange();
    EXPECT_NEAR(range.upper, diff[k], 1e-6 * diff[k]);
    EXPECT_DOUBLE_EQ(range.lower, -range.upper);
    EXPECT_GT(colourMaps(plot).at(0)->colorScale()->dataRange().lower, -1e-12);   // matrices from 0

    // The footnote fits the plot's width, in lines.
    auto footnoteOf = [plot] {
        QCPTextElement* footnote = nullptr;
        for (QCPLayoutElement* e : plot->plotLayout()->elements(false))
            if (auto* t = qobject_cast<QCPTextElement*>(e))
                footnote = t;
        return footnote;
    };
    QCPTextElement* footnote = footnoteOf();
    ASSERT_TRUE(footnote);
    const QStringList lines = footnote->text().split('\n');
    EXPECT_GE(lines.size(), 3);
    const QFontMetrics fm(footnote->font());
    for (const QString& line : lines)
        EXPECT_LE(fm.horizontalAdvance(line), plot->width()) << line.toStdString();

    // Shared: one scale for the matrices, the difference keeps its own.
    view->restoreState(QJsonObject{{"scale", "shared"}});
    plot->replot();
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 4);
    EXPECT_EQ(colourScales(plot).size(), 2);
    EXPECT_EQ(maps[0]->colorScale(), maps[1]->colorScale());
    EXPECT_EQ(maps[0]->colorScale(), maps[2]->colorScale());
    EXPECT_NE(maps[3]->colorScale(), maps[0]->colorScale());
    ASSERT_TRUE(footnoteOf());
    EXPECT_TRUE(footnoteOf()->text().startsWith("Colours: one range for the matrices")) << footnoteOf()->text().toStdString();
    for (const QSize size : {QSize(760, 700), QSize(1600, 480)}) {   // two by two, and four in a row
        view->resize(size);
        QTest::qWait(30);
        plot->replot();
        expectFills(plot, 4, "shared scale and a difference");
        ASSERT_EQ(colourScales(plot).size(), 2);
        if (size.width() > 1000) {
            for (QCPAxisRect* rect : plot->axisRects())
                EXPECT_EQ(rect->top(), plot->axisRect(0)->top()) << "four in a row";
        }
        for (QCPColorScale* s : colourScales(plot)) {   // every scale on screen beside the panels, none over one
            EXPECT_GT(s->outerRect().width(), 0);
            EXPECT_TRUE(plot->rect().adjusted(-2, -2, 2, 2).contains(s->outerRect())) << size.width() << ": " << s->outerRect().x() << "," << s->outerRect().y() << " " << s->outerRect().width() << "x" << s->outerRect().height() << " in " << plot->width() << "x" << plot->height();
            for (QCPAxisRect* rect : plot->axisRects())
                EXPECT_FALSE(s->outerRect().intersects(rect->rect()));
        }
    }
    view->resize(760, 700);
    QTest::qWait(30);

    // A double-click on the difference shows it alone.
    plot->replot();
    QTest::mouseDClick(plot, Qt::LeftButton, Qt::NoModifier, cellCentre(plot->axisRect(3), 300, 100));
    plot->replot();
    ASSERT_EQ(plot->axisRects().size(), 1);
    EXPECT_EQ(view->saveState()["panels"].toString(), name);
    expectFills(plot, 1, "the difference enlarged");
}

TEST(MapsReadable, BlockBoundariesThinToTicksAndToggle)
{
    const Result res = charLm(64);   // 8 tokens per block
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {1000, 800}, res);
    auto boundaries = [&] {
        std::vector<widgets::BlockBoundaries*> out;
        for (int i = 0; i < plot->itemCount(); ++i)
            if (auto* b = dynamic_cast<widgets::BlockBoundaries*>(plot->item(i)))
                out.push_back(b);
        return out;
    };
    ASSERT_EQ(boundaries().size(), 1u);
    EXPECT_FALSE(boundaries()[0]->drawsLines()) << "63 lines about 4 px apart would cover the map";
    const std::vector<double> ticks = boundaries()[0]->drawnPixels();
    ASSERT_GE(ticks.size(), 2u);
    for (std::size_t i = 1; i < ticks.size(); ++i)
        EXPECT_GE(ticks[i] - ticks[i - 1], 3.0);
    // Zoomed in to 100 tokens: lines again.
    view->restoreState(QJsonObject{{"x_range", QJsonArray{99.5, 199.5}}, {"y_range", QJsonArray{99.5, 199.5}}});
    plot->replot();
    EXPECT_TRUE(boundaries()[0]->drawsLines());
    // Off.
    view->restoreState(QJsonObject{{"block_boundaries", false}});
    EXPECT_TRUE(boundaries().empty());
    EXPECT_FALSE(view->saveState()["block_boundaries"].toBool());
}

TEST(MapsReadable, TokensOnAxesAndInTheReadOut)
{
    const auto& r = *charLmDefault();
    ASSERT_EQ(r.tokens.size(), static_cast<std::size_t>(r.n));
    std::unique_ptr<ResultView> view(widgets::createMapsView());
    QCustomPlot* plot = showMaps(view.get(), {1000, 800}, charLmDefault());
    // The key axis is labelled under the last panel of each column (the panels share it): the first labelled one.
    auto keyAxis = [plot] {
        for (QCPAxisRect* rect : plot->axisRects())
            if (rect->axis(QCPAxis::atBottom)->tickLabels())
                return rect->axis(QCPAxis::atBottom);
        return plot->axisRect(0)->axis(QCPAxis::atBottom);
    };
    QCPAxis* x = keyAxis();
    QCPAxis* y = plot->axisRect(0)->axis(QCPAxis::atLeft);
    // Zoomed out: thinned ticks labelled "index" and the token.
    ASSERT_FALSE(x->tickVector().isEmpty());
    for (int i = 0; i < x->tickVector().size(); ++i) {
        const auto t = static_cast<Index>(x->tickVector()[i]);
        if (t >= 0 && t < r.n) {
            EXPECT_EQ(x->tickVectorLabels()[i], QString::number(t) + "\n" + widgets::displayToken(r.tokens[static_cast<std::size_t>(t)]));
        }
    }
    // Zoomed in to 20 tokens: one tick per token, labelled with the token alone.
    view->restoreState(QJsonObject{{"x_range", QJsonArray{99.5, 119.5}}, {"y_range", QJsonArray{99.5, 119.5}}});
    plot->replot();
    x = keyAxis();   // restoring rebuilds the panels
    y = plot->axisRect(0)->axis(QCPAxis::atLeft);
    ASSERT_EQ(x->tickVector().size(), 20);
    for (int i = 0; i < x->tickVector().size(); ++i)
        EXPECT_EQ(x->tickVectorLabels()[i], widgets::displayToken(r.tokens[static_cast<std::size_t>(x->tickVector()[i])]));
    EXPECT_EQ(y->tickVector().size(), 20);
    // The read-out names both tokens.
    QSignalSpy status(view.get(), &ResultView::statusMessage);
    const QPoint at = cellCentre(plot->axisRect(1), 115, 110);
    QMouseEvent move(QEvent::MouseMove, QPointF(at), plot->mapToGlobal(QPointF(at)), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(plot, &move);
    ASSERT_GE(status.count(), 1);
    const QString text = status.last().at(0).toString();
    EXPECT_TRUE(text.contains("query t = 115 \u2018" + widgets::displayToken(r.tokens[115]) + "\u2019")) << text.toStdString();
    EXPECT_TRUE(text.contains("key j = 110 \u2018" + widgets::displayToken(r.tokens[110]) + "\u2019")) << text.toStdString();
}

TEST(MapsReadable, DisplayTokensEscapeControlCharacters)
{
    EXPECT_EQ(widgets::displayToken("\n"), "\\n");
    EXPECT_EQ(widgets::displayToken(" the"), QString::fromUtf8("\u00b7the"));
    EXPECT_EQ(widgets::displayToken("a\tb\x07"), "a\\tb\\x07");
    EXPECT_EQ(widgets::displayToken(""), QString::fromUtf8("\u2205"));
    EXPECT_EQ(widgets::displayToken("abcdefghijklmnop", 6), QString::fromUtf8("abcde\u2026"));
    EXPECT_EQ(widgets::displayToken("\xc3\xa9"), QString::fromUtf8("\u00e9"));
}

TEST(QueryReadable, TokenStripShowsTheQueryAttentionOverTokens)
{
    const auto& r = *charLmDefault();
    std::unique_ptr<ResultView> view(widgets::createQueryView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {1000, 800}, [&] {
        view->setResult(charLmDefault());
        view->setQuery(300);
    });
    widgets::TokenStrip* strip = nullptr;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* s = dynamic_cast<widgets::TokenStrip*>(e))
            strip = s;
    ASSERT_TRUE(strip);
    EXPECT_GT(strip->outerRect().height(), 100);
    EXPECT_GT(strip->outerRect().width(), 900);
    ASSERT_EQ(strip->rows().size(), 3u);
    EXPECT_LE(strip->first(), 300);
    EXPECT_GT(strip->end(), 300);
    EXPECT_GE(300 - strip->first(), 2 * (strip->end() - 301)) << "causal: mostly the keys before the query";
    QString before;
    for (Index j = 290; j <= 300; ++j)
        before += widgets::displayToken(r.tokens[static_cast<std::size_t>(j)], 16);
    EXPECT_TRUE(strip->shownText().contains(before)) << strip->shownText().toStdString();
    for (const auto& row : strip->rows()) {
        ASSERT_EQ(row.weights.size(), static_cast<std::size_t>(r.n));
        ASSERT_EQ(row.allowed.size(), static_cast<std::size_t>(r.n));
        EXPECT_TRUE(row.allowed[300]);
        EXPECT_FALSE(row.allowed[301]);
    }
    EXPECT_EQ(strip->rows()[0].weights[120], (*r.outcomes[0].matrix)(300, 120));
    // Exported with the plot: the strip's tokens are drawn.
    QImage image(1000, 800, QImage::Format_ARGB32_Premultiplied);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        view->renderTo(&painter, image.size(), 1.0);
    }
    double ink = 0;
    test::distinctColours(image.copy(0, 500, 1000, 300), &ink);
    EXPECT_GT(ink, 0.05);
}

TEST(QueryReadable, InputImageWithTheQueryAttention)
{
    const Result res = vitDigits();
    ASSERT_TRUE(res->image);
    const auto& img = *res->image;
    std::unique_ptr<ResultView> view(widgets::createQueryView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {1000, 800}, [&] {
        view->setResult(res);
        view->setQuery(27);
    });
    const auto maps = colourMaps(plot);
    ASSERT_EQ(maps.size(), 9);   // per mechanism: the grid map, the image, the attention over the image
    int images = 0, overlays = 0;
    for (QCPColorMap* m : maps) {
        if (m->data()->keySize() != img.cols || m->colorScale())
            continue;
        if (m->data()->cell(3, 2) == img.values[static_cast<std::size_t>(2 * img.cols + 3)])
            ++images;
        if (m->gradient().color(0.0, QCPRange(0, 1)) != m->gradient().color(1.0, QCPRange(0, 1)) && qAlpha(m->gradient().color(0.0, QCPRange(0, 1))) == 0)
            ++overlays;
    }
    EXPECT_EQ(images, 3);
    EXPECT_EQ(overlays, 3);
    // Square cells for the grid maps and the image.
    for (QCPAxisRect* r : plot->axisRects())
        EXPECT_NEAR(r->width(), r->height(), 2);
}

// The Query view in a small docked space: its rows per mechanism (the narrow arrangement) left the maps no height
// at 420 x 300 (each collapsed to a line); on screen a column per mechanism is used where it gives the larger maps,
// and a narrow, tall view keeps the rows.
TEST(QueryReadable, SmallViewKeepsItsPanelsVisible)
{
    const Result res = vitDigits();
    for (const QSize size : {QSize(420, 300), QSize(400, 280), QSize(500, 400)}) {
        SCOPED_TRACE(std::to_string(size.width()) + "x" + std::to_string(size.height()));
        std::unique_ptr<ResultView> view(widgets::createQueryView());
        QCustomPlot* plot = test::showOnScreen(view.get(), size, [&] { view->setResult(res); });
        plot->replot();
        const auto rects = plot->axisRects();
        ASSERT_EQ(rects.size(), 6);   // per mechanism: the grid map and the image
        for (QCPAxisRect* r : rects) {
            EXPECT_GE(std::min(r->width(), r->height()), 20) << r->width() << "x" << r->height();
            // Nearly square: the columns fit their margins once, which is a few pixels off at this size (38 x 34).
            EXPECT_NEAR(r->width(), r->height(), std::max(2.0, 0.2 * r->width()));
        }
    }
    std::unique_ptr<ResultView> view(widgets::createQueryView());
    QCustomPlot* plot = test::showOnScreen(view.get(), {400, 900}, [&] { view->setResult(res); });
    plot->replot();
    std::set<int> tops;
    for (QCPAxisRect* r : plot->axisRects()) {
        tops.insert(r->top() / 10);
        EXPECT_GE(r->width(), 80) << "rows in a tall view: maps a third of its width or more";
    }
    EXPECT_GE(tops.size(), 3u) << "a narrow, tall view keeps a row per mechanism";
    // A figure exported at a narrow and low size is laid out the same way (before: rows of collapsed maps).
    QImage image(420, 300, QImage::Format_ARGB32);
    image.fill(Qt::white);
    {
        QPainter painter(&image);
        view->renderTo(&painter, image.size(), 1.0);
    }
    for (QCPAxisRect* r : plot->axisRects())
        EXPECT_GE(std::min(r->width(), r->height()), 20) << "exported at 420 x 300: " << r->width() << "x" << r->height();
}
