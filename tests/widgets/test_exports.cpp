// Narrow and vector exports (docs/cli.md "figure", docs/gui.md "Export"): the entropy and query views at
// the single-column preset on the digit ViT (8 x 8 grid, an input image) and the character LM (a token
// strip) are laid out so that no two texts overlap, every text and image lies inside the page, the
// smallest text is at least 6.5 pt and the page is at least 2 in high; the slide preset's entropy legend
// keeps clear of the histogram's bars; the input image under the query's attention reaches PDF and SVG
// (pdfimages, a rendered page, the SVG's embedded PNGs); exported titles never say how to click; the
// default export folder is never the working directory.
//
// Text boxes come from a paint device that records what the view draws through the export's own vector
// path (widgets::paintVectorFigure): each text item's box (ascent + descent by its advance) in page
// coordinates, with its font size, and each image's rectangle.
#include <QBuffer>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImage>
#include <QJsonObject>
#include <QPaintDevice>
#include <QPaintEngine>
#include <QPainter>
#include <QProcess>
#include <QRegularExpression>
#include <QSettings>
#include <QStandardPaths>
#include <QSvgRenderer>
#include <QTextItem>
#include <QXmlStreamReader>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "export.h"
#include "analysis/heads.h"
#include "export_dialog.h"
#include "heads_view.h"
#include "support/attnscope_binary.h"
#include "support/test_support.h"
#include "views.h"
#include "widget_test_support.h"

using namespace attnscope;
using widgets::ResultView;

namespace {

struct DrawnText {
    QString text;
    QRectF box;       // page coordinates (logical pixels)
    double points;    // font size as printed
};

// A paint engine that draws nothing and remembers every text item and image with its transform.
class RecordingEngine : public QPaintEngine {
public:
    RecordingEngine() : QPaintEngine(QPaintEngine::AllFeatures) {}
    bool begin(QPaintDevice*) override { return true; }
    bool end() override { return true; }
    Type type() const override { return QPaintEngine::User; }
    void updateState(const QPaintEngineState& state) override
    {
        if (state.state() & QPaintEngine::DirtyTransform)
            m_transform = state.transform();
    }
    void drawPixmap(const QRectF& r, const QPixmap&, const QRectF&) override { images.push_back(m_transform.mapRect(r)); }
    void drawImage(const QRectF& r, const QImage&, const QRectF&, Qt::ImageConversionFlags) override
    {
        images.push_back(m_transform.mapRect(r));
    }
    void drawTextItem(const QPointF& p, const QTextItem& item) override
    {
        if (item.text().trimmed().isEmpty())
            return;
        const QFont f = item.font();
        const double pt = f.pointSizeF() > 0 ? f.pointSizeF() : f.pixelSize() * 72.0 / 96.0;
        // A transform that scales (none in these exports) scales the printed size too.
        const double scale = std::sqrt(std::abs(m_transform.determinant()));
        const QRectF box(p.x(), p.y() - item.ascent(), item.width(), item.ascent() + item.descent());
        texts.push_back({item.text(), m_transform.mapRect(box), pt * scale});
    }
    void drawPath(const QPainterPath&) override {}
    void drawPolygon(const QPointF*, int, PolygonDrawMode) override {}
    void drawLines(const QLineF*, int) override {}
    void drawRects(const QRectF*, int) override {}
    void drawEllipse(const QRectF&) override {}
    void drawPoints(const QPointF*, int) override {}

    std::vector<DrawnText> texts;
    std::vector<QRectF> images;

private:
    QTransform m_transform;
};

class RecordingDevice : public QPaintDevice {
public:
    explicit RecordingDevice(QSize size) : m_size(size) {}
    QPaintEngine* paintEngine() const override { return &m_engine; }
    RecordingEngine& engine() { return m_engine; }

protected:
    int metric(PaintDeviceMetric m) const override
    {
        switch (m) {
        case PdmWidth: return m_size.width();
        case PdmHeight: return m_size.height();
        case PdmWidthMM: return qRound(m_size.width() * 25.4 / 96);
        case PdmHeightMM: return qRound(m_size.height() * 25.4 / 96);
        case PdmDpiX: case PdmDpiY: case PdmPhysicalDpiX: case PdmPhysicalDpiY: return 96;
        case PdmDepth: return 32;
        case PdmNumColors: return INT_MAX;
        case PdmDevicePixelRatio: return 1;
        case PdmDevicePixelRatioScaled: return static_cast<int>(QPaintDevice::devicePixelRatioFScale());
        default: return 0;
        }
    }

private:
    QSize m_size;
    mutable RecordingEngine m_engine;
};

using Result = test::ExploreResultPtr;

// Layer 0 of the digit ViT as its attributes say (CLS dropped, 8 x 8 grid, 4 x 4 blocks, the input image).
Result vitDigits()
{
    static Result r = [] {
        const std::string path = test::dataPath("vit_digits.h5");
        return test::exploreFile(path, [&](analysis::ExploreRequest& q) {
            q.source.q_ref = io::parse_tensor_ref(path + ":/layers/0/q");
            q.source.k_ref = io::parse_tensor_ref(path + ":/layers/0/k");
            q.source.selection.prefix_tokens = 1;
            q.options.blocks.kind = attention::BlockSpec::Kind::grid;
            q.options.blocks.grid = {8, 8};
            q.options.blocks.block_grid = {4, 4};
            q.token_grid = {8, 8};
        });
    }();
    return r;
}

// Layer 0 of the character LM, causal as its attributes say (N = 512, the file's characters).
Result charLm()
{
    static Result r = [] {
        const std::string path = test::dataPath("char_lm_licenses.h5");
        return test::exploreFile(path, [&](analysis::ExploreRequest& q) {
            q.source.q_ref = io::parse_tensor_ref(path + ":/layers/0/q");
            q.source.k_ref = io::parse_tensor_ref(path + ":/layers/0/k");
            q.options.causal = true;
        });
    }();
    return r;
}

std::unique_ptr<ResultView> makeView(const std::string& name, const Result& result)
{
    std::unique_ptr<ResultView> view(name == "entropy" ? widgets::createEntropyView() : widgets::createQueryView());
    view->resize(900, 700);
    view->setResult(result);
    return view;
}

// The options `attnscope figure --preset KEY` gives the view (app/figure.cpp: the height left to the view).
widgets::ExportOptions presetFor(ResultView* view, const char* key)
{
    const widgets::ExportPreset* preset = widgets::findExportPreset(QString::fromLatin1(key));
    widgets::ExportOptions o = widgets::presetOptions(*preset, view->preferredExportSize());
    if (preset->aspect <= 0)
        o.height = view->exportHeightFor(o.width, o.font_scale, o.height);
    return o;
}

std::vector<DrawnText> recordTexts(ResultView* view, const widgets::ExportOptions& o, std::vector<QRectF>* images = nullptr)
{
    RecordingDevice device(QSize(o.width, o.height));
    EXPECT_TRUE(widgets::paintVectorFigure(view, &device, QSize(o.width, o.height), o.font_scale));
    if (images)
        *images = device.engine().images;
    return device.engine().texts;
}

// No two texts overlap (by more than a pixel each way), each lies inside the page, none is below 6.5 pt.
void expectReadable(const std::vector<DrawnText>& texts, const std::vector<QRectF>& images, QSize page, const std::string& where)
{
    ASSERT_GT(texts.size(), 10u) << where;
    const QRectF pageRect(QPointF(-1, -1), QSizeF(page.width() + 2, page.height() + 2));
    double smallest = 1e9;
    for (std::size_t i = 0; i < texts.size(); ++i) {
        const DrawnText& a = texts[i];
        smallest = std::min(smallest, a.points);
        EXPECT_TRUE(pageRect.contains(a.box)) << where << ": '" << a.text.toStdString() << "' at " << a.box.x() << "," << a.box.y()
                                              << " " << a.box.width() << "x" << a.box.height() << " outside the page";
        for (std::size_t j = i + 1; j < texts.size(); ++j) {
            const QRectF both = a.box.intersected(texts[j].box);
            EXPECT_FALSE(both.width() > 1 && both.height() > 1)
                << where << ": '" << a.text.toStdString() << "' overlaps '" << texts[j].text.toStdString() << "' at " << both.x() << ","
                << both.y();
        }
    }
    EXPECT_GE(smallest, 6.5) << where;
    for (const QRectF& r : images)
        EXPECT_TRUE(pageRect.contains(r)) << where << ": an image at " << r.x() << "," << r.y() << " outside the page";
}

bool anyText(const std::vector<DrawnText>& texts, const QString& needle)
{
    return std::any_of(texts.begin(), texts.end(), [&](const DrawnText& t) { return t.text.contains(needle); });
}

void checkColumn(const std::string& name, const Result& result, const std::string& file, const QJsonObject& state = {})
{
    const std::string where = name + " on " + file + " at --preset column" + (state.isEmpty() ? "" : " (view state)");
    auto view = makeView(name, result);
    if (!state.isEmpty())
        view->restoreState(state);
    const widgets::ExportOptions o = presetFor(view.get(), "column");
    EXPECT_EQ(o.width, 336) << where;
    EXPECT_GE(o.height, 2 * 96) << where << ": the page is " << o.height / 96.0 << " in high";
    std::vector<QRectF> images;
    const auto texts = recordTexts(view.get(), o, &images);
    expectReadable(texts, images, QSize(o.width, o.height), where);
    for (const DrawnText& t : texts) {
        EXPECT_FALSE(t.text.contains(QStringLiteral("click"), Qt::CaseInsensitive)) << where << ": '" << t.text.toStdString() << "'";
        EXPECT_FALSE(t.text.endsWith(QChar(0x2026)) && t.text.size() > 3 && !t.text.startsWith(QChar(0x2026)))
            << where << ": a title cut short: '" << t.text.toStdString() << "'";
    }
    if (std::getenv("EXPORTS_DEBUG")) {
        std::function<void(QCPLayoutElement*, int)> dump = [&](QCPLayoutElement* e, int depth) {
            const QRect r = e->outerRect();
            std::fprintf(stderr, "%*s%s %d,%d %dx%d min %dx%d max %dx%d margins %d %d %d %d\n", depth * 2, "", e->metaObject()->className(), r.x(), r.y(), r.width(), r.height(),
                         e->minimumOuterSizeHint().width(), e->minimumOuterSizeHint().height(), e->maximumSize().width(), e->maximumSize().height(),
                         e->margins().left(), e->margins().top(), e->margins().right(), e->margins().bottom());
            if (auto* l = qobject_cast<QCPLayout*>(e))
                for (int i = 0; i < l->elementCount(); ++i)
                    if (l->elementAt(i))
                        dump(l->elementAt(i), depth + 1);
        };
        std::fprintf(stderr, "page %dx%d\n", o.width, o.height);
        dump(test::plotOf(view.get())->plotLayout(), 0);
    }
    // Every plot keeps its room: the axis rects at least 0.6 in on each side.
    for (QCPAxisRect* r : test::plotOf(view.get())->axisRects())
        EXPECT_GE(std::min(r->width(), r->height()), 58) << where << ": a plot of " << r->width() << " x " << r->height();
}

}  // namespace

// Every head of the character LM's layer 0 (4 heads x 3 mechanisms) in a column: the heads wrap onto rows of
// two, so every small map keeps room and no title is cut or overlaps (a single row gave ~0.1 in maps).
TEST(Exports, HeadsColumnWrapsTheHeads)
{
    const std::string path = test::dataPath("char_lm_licenses.h5");
    analysis::HeadsRequest req;
    req.base.source.q_ref = io::parse_tensor_ref(path + ":/layers/0/q");
    req.base.source.k_ref = io::parse_tensor_ref(path + ":/layers/0/k");
    req.base.source.selection.at['h'] = 0;
    req.base.options.causal = true;
    req.cells = 64;
    auto page = std::make_shared<const analysis::HeadsResult>(analysis::explore_heads(req, analysis::JobContext{}));
    ASSERT_EQ(page->maps.size(), 4u);
    std::unique_ptr<widgets::HeadsView> view(widgets::createHeadsView());
    view->resize(1200, 800);
    view->setHeads(page);
    const widgets::ExportOptions o = presetFor(view.get(), "column");
    EXPECT_EQ(o.width, 336);
    EXPECT_GE(o.height, 4 * 96) << "the page is " << o.height / 96.0 << " in high";
    std::vector<QRectF> images;
    const auto texts = recordTexts(view.get(), o, &images);
    expectReadable(texts, images, QSize(o.width, o.height), "heads at --preset column");
    for (const DrawnText& t : texts)
        EXPECT_FALSE(t.text.endsWith(QChar(0x2026))) << "a title cut short: '" << t.text.toStdString() << "'";
    // The wrapped layout is the export's: the screen's page is one row again afterwards.
    test::plotOf(view.get())->replot(QCustomPlot::rpImmediateRefresh);
    const auto rects = test::plotOf(view.get())->axisRects();
    ASSERT_EQ(rects.size(), 12u);
    EXPECT_EQ(rects[0]->outerRect().top(), rects[3]->outerRect().top());
}

// Issue 35: the Heads page at every preset (a page of 8 of 12 heads x 3 mechanisms, and the causal LM's 4
// heads) is laid out for its page: the text rules (inside the page, no overlap, >= 6.5 pt), no name or
// number cut short, and maps that stay maps (square, at least 0.4 in on a side, a column's 24 maps in 9 in; the slide once drew 8 px
// dots and strips).
TEST(Exports, HeadsAtEveryPresetKeepTheTextRules)
{
    const std::string dir = test::fresh_work_dir("exports_heads_presets");
    const std::string twelve = dir + "/h12.h5";
    const auto made = test::run_attnscope("synth --n 256 --d 32 --heads 12 --kind local2d --grid 16,16 --out " + twelve);
    ASSERT_EQ(made.status, 0) << made.err;
    const std::string lm = test::dataPath("trained_lm_mhla.h5");
    struct Input {
        std::string file, q, k;
        bool causal;
    };
    for (const Input& in : {Input{twelve, ":/q", ":/k", false}, Input{lm, ":/layers/0/q", ":/layers/0/k", true}}) {
        analysis::HeadsRequest req;
        req.base.source.q_ref = io::parse_tensor_ref(in.file + in.q);
        req.base.source.k_ref = io::parse_tensor_ref(in.file + in.k);
        req.base.source.selection.at['h'] = 0;
        req.base.options.causal = in.causal;
        if (!in.causal) {
            req.base.options.blocks.kind = attention::BlockSpec::Kind::grid;
            req.base.options.blocks.grid = {16, 16};
            req.base.options.blocks.block_grid = {4, 4};
        }
        req.count = widgets::HeadsView::kPageSize;
        auto page = std::make_shared<const analysis::HeadsResult>(analysis::explore_heads(req, analysis::JobContext{}));
        ASSERT_GE(page->maps.size(), 4u);
        std::unique_ptr<widgets::HeadsView> view(widgets::createHeadsView());
        view->resize(1200, 800);
        view->setHeads(page);
        for (const char* preset : {"column", "double", "slide"}) {
            const std::string where = std::string("heads of ") + QFileInfo(QString::fromStdString(in.file)).fileName().toStdString() + " at --preset " + preset;
            const widgets::ExportOptions o = presetFor(view.get(), preset);
            std::vector<QRectF> images;
            const auto texts = recordTexts(view.get(), o, &images);
            expectReadable(texts, images, QSize(o.width, o.height), where);
            for (const DrawnText& t : texts)
                EXPECT_FALSE(t.text.contains(QChar(0x2026))) << where << ": cut short: '" << t.text.toStdString() << "'";
            // The maps are the square images (the colour bars are the tall thin ones): one per head and mechanism.
            std::size_t maps = 0;
            for (const QRectF& r : images) {
                if (r.width() < 0.7 * r.height())
                    continue;   // a colour bar
                ++maps;
                EXPECT_GE(std::min(r.width(), r.height()), 0.4 * 96) << where << ": a map of " << r.width() << " x " << r.height();
                EXPECT_NEAR(r.width() / r.height(), 1.0, 0.1) << where << ": a map of " << r.width() << " x " << r.height();
            }
            EXPECT_EQ(maps, page->maps.size() * page->mechanisms.size()) << where;
        }
    }
}

TEST(Exports, EntropyColumnOnTheGrid) { checkColumn("entropy", vitDigits(), "vit_digits.h5"); }
TEST(Exports, EntropyColumnPerPanelScales)
{
    checkColumn("entropy", vitDigits(), "vit_digits.h5", QJsonObject{{QStringLiteral("per_panel_scale"), true}});
}
TEST(Exports, QueryColumnSharedScale)
{
    checkColumn("query", vitDigits(), "vit_digits.h5", QJsonObject{{QStringLiteral("shared_scale"), true}});
}
TEST(Exports, EntropyColumnOnTheSequence) { checkColumn("entropy", charLm(), "char_lm_licenses.h5"); }
TEST(Exports, QueryColumnOnTheGrid) { checkColumn("query", vitDigits(), "vit_digits.h5"); }

namespace {

// The panels among the images drawn: the maps of an 8 x 8 grid and the 8 x 8 input image (the colour bars
// are the long thin ones, upright or across). Each has its cells' aspect within 3 % and is at least 0.6 in on
// a side; returns how many there are.
std::size_t expectSquarePanels(const std::vector<QRectF>& images, const std::string& where)
{
    std::size_t panels = 0;
    for (const QRectF& r : images) {
        if (std::min(r.width(), r.height()) < 0.3 * std::max(r.width(), r.height()))
            continue;   // a colour bar
        ++panels;
        EXPECT_NEAR(r.width() / r.height(), 1.0, 0.03) << where << ": a panel of " << r.width() << " x " << r.height();
        EXPECT_GE(std::min(r.width(), r.height()), 58) << where << ": a panel of " << r.width() << " x " << r.height();
    }
    return panels;
}

}  // namespace

// Issue 35, item 6: the query view's maps of the digit ViT's 8 x 8 grid and the 8 x 8 input image under
// them stay square at every preset (the column drew the maps 96 x 82, the digit stretched), with the text
// rules and no title cut, per-panel and shared colour scales alike; and on screen, wide and narrow.
TEST(Exports, QueryGridPanelsAreSquareAtEveryPreset)
{
    const Result result = vitDigits();
    ASSERT_TRUE(result->image);
    ASSERT_EQ(result->image->rows, result->image->cols);
    const std::size_t expected = 3 * result->outcomes.size();   // per mechanism: the map, the image, the attention over it
    for (const bool shared : {false, true})
        for (const char* preset : {"column", "double", "slide"}) {
            const std::string where = std::string("query at --preset ") + preset + (shared ? " (shared scale)" : "");
            auto view = makeView("query", result);
            view->restoreState(QJsonObject{{QStringLiteral("shared_scale"), shared}});
            const widgets::ExportOptions o = presetFor(view.get(), preset);
            std::vector<QRectF> images;
            const auto texts = recordTexts(view.get(), o, &images);
            expectReadable(texts, images, QSize(o.width, o.height), where);
            for (const DrawnText& t : texts)
                EXPECT_FALSE(t.text.contains(QChar(0x2026))) << where << ": cut short: '" << t.text.toStdString() << "'";
            EXPECT_EQ(expectSquarePanels(images, where), expected) << where;
        }
    // On screen, wide and narrow, also once a column export has rearranged the panels and given them back.
    for (const QSize screen : {QSize(1000, 800), QSize(420, 1000)}) {
        std::unique_ptr<ResultView> view(widgets::createQueryView());
        QCustomPlot* plot = test::showOnScreen(view.get(), screen, [&] { view->setResult(result); });
        for (const char* when : {"", " after a column export"}) {
            if (*when) {
                recordTexts(view.get(), presetFor(view.get(), "column"));
                plot->replot(QCustomPlot::rpImmediateRefresh);
            }
            for (QCPAxisRect* r : plot->axisRects()) {
                const std::string where = "on a screen of " + std::to_string(screen.width()) + " x " + std::to_string(screen.height()) + when;
                EXPECT_NEAR(r->width(), r->height(), 2) << where;
                EXPECT_GE(std::min(r->width(), r->height()), 58) << where;
            }
        }
    }
}

// The LM's query figure keeps its token strip: the characters around the query are drawn, in their font.
TEST(Exports, QueryColumnOnTheSequenceKeepsTheTokenStrip)
{
    checkColumn("query", charLm(), "char_lm_licenses.h5");
    auto view = makeView("query", charLm());
    const auto texts = recordTexts(view.get(), presetFor(view.get(), "column"));
    EXPECT_TRUE(anyText(texts, QStringLiteral("shade"))) << "no token strip caption";
    const std::string& q = charLm()->tokens[static_cast<std::size_t>(charLm()->n / 2)];
    EXPECT_TRUE(anyText(texts, QString::fromStdString(q).trimmed().isEmpty() ? QStringLiteral("\u00b7") : QString::fromStdString(q)));
}

// The slide preset (10 x 5.63 in, 14 pt): no bar of the histogram reaches into its legend, and no text
// overlaps another.
TEST(Exports, SlideEntropyLegendKeepsClearOfTheBars)
{
    for (const auto& [result, file] : {std::pair{vitDigits(), "vit_digits"}, std::pair{charLm(), "char_lm"}}) {
        auto view = makeView("entropy", result);
        const widgets::ExportOptions o = presetFor(view.get(), "slide");
        std::vector<QRectF> images;
        const auto texts = recordTexts(view.get(), o, &images);   // lays the plot out at the slide's size
        expectReadable(texts, images, QSize(o.width, o.height), std::string(file) + " at --preset slide");
        QCustomPlot* plot = test::plotOf(view.get());
        QCPLegend* legend = nullptr;
        QCPAxisRect* hist = nullptr;
        for (QCPAxisRect* r : plot->axisRects())
            for (QCPLayoutElement* e : r->insetLayout()->elements(false))
                if (auto* l = qobject_cast<QCPLegend*>(e)) {
                    // The causal entropy-per-query plot's own legend (ln(t+1), bottom right, under the curves
                    // that rise to the top): no point of its curves inside it.
                    if (r->axis(QCPAxis::atBottom)->label().startsWith(QStringLiteral("query"))) {
                        const QRect lbox = l->outerRect();
                        for (int i = 0; i < plot->graphCount(); ++i) {
                            if (plot->graph(i)->keyAxis()->axisRect() != r)
                                continue;
                            for (auto it = plot->graph(i)->data()->constBegin(); it != plot->graph(i)->data()->constEnd(); ++it) {
                                EXPECT_FALSE(lbox.contains(QPoint(static_cast<int>(plot->graph(i)->keyAxis()->coordToPixel(it->key)),
                                                                      static_cast<int>(plot->graph(i)->valueAxis()->coordToPixel(it->value)))))
                                        << file << ": " << plot->graph(i)->name().toStdString() << " at t = " << it->key
                                        << " is under the ln(t+1) legend";
                            }
                        }
                        continue;
                    }
                    legend = l, hist = r;
                }
        if (!legend)
            continue;   // the legend beside the plot: nothing to cover
        const QRect box = legend->outerRect();
        for (int i = 0; i < plot->graphCount(); ++i) {
            QCPGraph* g = plot->graph(i);
            if (g->keyAxis()->axisRect() != hist)
                continue;
            for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
                if (it->value <= 0)
                    continue;
                const double x = g->keyAxis()->coordToPixel(it->key), y = g->valueAxis()->coordToPixel(it->value);
                const double halfBin = std::abs(g->keyAxis()->coordToPixel(it->key + 0.5 * (g->data()->size() > 1 ? (g->data()->at(1)->key - g->data()->at(0)->key) : 1)) - x);
                if (x + halfBin < box.left() || x - halfBin > box.right())
                    continue;
                EXPECT_GT(y, box.bottom()) << file << ": a bar of " << g->name().toStdString() << " at " << it->key << " reaches the legend";
            }
        }
    }
}

namespace {

// The entropy view's histogram as laid out by the last export: the rect that clips its ln N label.
QRectF entropyHistogram(ResultView* view)
{
    for (QCPAxisRect* r : test::plotOf(view)->axisRects())
        if (r->axis(QCPAxis::atBottom)->label().startsWith(QStringLiteral("row entropy")))
            return QRectF(r->rect());
    return {};
}

}  // namespace

// Issue 35, item 6: the uniform level's label on the entropy histogram, "ln N = 4.16 (uniform)" or, where the
// plot is too low for that, the short "ln N", is drawn whole at every preset: one text saying ln N, inside the
// histogram that clips it (a double-column PDF once showed "16 (uniform)", its start cut under the axis) with
// room for a PDF's text, which runs up to 10 % longer than the screen's metrics say and, the label being
// anchored by its end near the top, reaches further down; and the text rules hold (inside the page, no overlap),
// with the grid's maps square beside or under the histogram (per-panel scales on the double column once
// stacked them as 208 x 6 px strips).
TEST(Exports, EntropyUniformLabelIsWholeAtEveryPreset)
{
    const QRegularExpression form(QStringLiteral("^ln N(?: = ([0-9.]+) \\(uniform\\))?$"));
    struct Case {
        Result result;
        const char* file;
        bool perPanel;
        std::size_t maps;   // grid data: one map per mechanism
    };
    const std::size_t mechanisms = vitDigits()->outcomes.size();
    for (const Case& c : {Case{vitDigits(), "vit_digits", false, mechanisms}, Case{vitDigits(), "vit_digits", true, mechanisms},
                          Case{charLm(), "char_lm", false, 0}})
        for (const char* preset : {"column", "double", "slide"}) {
            const std::string where = std::string("entropy of ") + c.file + " at --preset " + preset + (c.perPanel ? " (per-panel scales)" : "");
            auto view = makeView("entropy", c.result);
            view->restoreState(QJsonObject{{QStringLiteral("per_panel_scale"), c.perPanel}});
            const widgets::ExportOptions o = presetFor(view.get(), preset);
            std::vector<QRectF> images;
            const auto texts = recordTexts(view.get(), o, &images);
            expectReadable(texts, images, QSize(o.width, o.height), where);
            EXPECT_EQ(expectSquarePanels(images, where), c.maps) << where;
            std::vector<DrawnText> labels;
            std::copy_if(texts.begin(), texts.end(), std::back_inserter(labels), [](const DrawnText& t) { return t.text.contains(QStringLiteral("ln N")); });
            ASSERT_EQ(labels.size(), 1u) << where;
            const DrawnText& label = labels.front();
            const QRegularExpressionMatch m = form.match(label.text);
            EXPECT_TRUE(m.hasMatch()) << where << ": '" << label.text.toStdString() << "'";
            if (m.hasCaptured(1)) {
                EXPECT_NEAR(m.captured(1).toDouble(), std::log(static_cast<double>(c.result->n)), 0.006) << where;
            }
            ASSERT_GT(label.box.height(), label.box.width()) << where << ": the label runs up the plot";
            const QRectF hist = entropyHistogram(view.get()).adjusted(-1, -1, 1, 1);
            const QRectF asPdf = label.box.adjusted(0, 0, 0, 0.1 * label.box.height());
            EXPECT_TRUE(hist.contains(asPdf)) << where << ": '" << label.text.toStdString() << "' from y = " << label.box.top() << " to "
                                              << asPdf.bottom() << " as a PDF draws it, the histogram from " << hist.top() << " to " << hist.bottom();
        }
}

namespace {

// The query view of the digit ViT exported as `ext` at the column preset into the test folder.
QString exportQuery(const QString& ext, ResultView* view)
{
    const QString dir = QString::fromStdString(test::fresh_work_dir("exports_vector"));
    const QString path = dir + QStringLiteral("/query.") + ext;
    const QString err = widgets::exportView(view, path, presetFor(view, "column"));
    EXPECT_TRUE(err.isEmpty()) << err.toStdString();
    return path;
}

// The image panels ("... over image_8x8") of the view as laid out by the last export.
std::vector<QRect> imagePanels(ResultView* view)
{
    std::vector<QRect> panels;
    for (QCPAxisRect* r : test::plotOf(view)->axisRects())
        if (r->axis(QCPAxis::atBottom)->label().contains(QStringLiteral("image")))
            panels.push_back(r->rect());
    return panels;
}

// Inside each panel of `page` (rendered at 96 dpi): mostly light (the digit's paper), not black.
void expectPanelsShowTheImage(const QImage& page, const std::vector<QRect>& panels, const std::string& where)
{
    ASSERT_EQ(panels.size(), 3u) << where;
    for (const QRect& p : panels) {
        int light = 0, black = 0, n = 0;
        for (int y = p.top() + 2; y < p.bottom() - 1; ++y)
            for (int x = p.left() + 2; x < p.right() - 1; ++x) {
                const QColor c = page.pixelColor(x, y);
                ++n;
                light += c.lightness() > 200;
                black += c.lightness() < 40;
            }
        ASSERT_GT(n, 100) << where;
        EXPECT_GT(light, n / 4) << where << ": the image panel at " << p.x() << "," << p.y() << " is dark";
        EXPECT_LT(black, n / 10) << where << ": the image panel at " << p.x() << "," << p.y() << " is black";
    }
}

// The pixels of the digit: the input image's values, brightest (white) where the value is lowest.
bool showsTheDigit(const QImage& image, const analysis::FileImage& img)
{
    if (image.width() != img.cols || image.height() != img.rows)
        return false;
    const auto [lo, hi] = std::minmax_element(img.values.begin(), img.values.end());
    for (Eigen::Index r = 0; r < img.rows; ++r)
        for (Eigen::Index c = 0; c < img.cols; ++c) {
            const double v = img.values[static_cast<std::size_t>(r * img.cols + c)];
            const int light = QColor(image.pixel(static_cast<int>(c), static_cast<int>(r))).lightness();
            if ((v == *lo && light < 240) || (v == *hi && light > 150))
                return false;
        }
    return true;
}

}  // namespace

// The PDF holds the input image (pdfimages extracts it, pixel for pixel) and its rendered page shows it.
TEST(Exports, PdfShowsTheInputImage)
{
    auto view = makeView("query", vitDigits());
    const QString pdf = exportQuery(QStringLiteral("pdf"), view.get());
    const std::vector<QRect> panels = imagePanels(view.get());
    QProcess list;
    list.start(QStringLiteral("pdfimages"), {QStringLiteral("-list"), pdf});
    ASSERT_TRUE(list.waitForFinished(60000));
    const QString listing = QString::fromUtf8(list.readAllStandardOutput());
    EXPECT_TRUE(listing.contains(QStringLiteral("image       8     8"))) << listing.toStdString();
    const QString prefix = QFileInfo(pdf).absolutePath() + QStringLiteral("/img");
    ASSERT_EQ(QProcess::execute(QStringLiteral("pdfimages"), {QStringLiteral("-png"), pdf, prefix}), 0);
    int digits = 0;
    for (const QFileInfo& f : QDir(QFileInfo(pdf).absolutePath()).entryInfoList({QStringLiteral("img-*.png")}))
        digits += showsTheDigit(QImage(f.absoluteFilePath()).convertToFormat(QImage::Format_RGB32), *vitDigits()->image);
    EXPECT_EQ(digits, 3) << "the input image under each mechanism's attention";
    const QString png = QFileInfo(pdf).absolutePath() + QStringLiteral("/page");
    ASSERT_EQ(QProcess::execute(QStringLiteral("pdftoppm"), {QStringLiteral("-png"), QStringLiteral("-r"), QStringLiteral("96"),
                                                             QStringLiteral("-singlefile"), pdf, png}),
              0);
    expectPanelsShowTheImage(QImage(png + QStringLiteral(".png")).convertToFormat(QImage::Format_RGB32), panels, "pdf page");
}

// The SVG embeds the images as PNGs: none of them opaque black where the attention is nil (the overlay's
// transparent cells), one of them the digit; the rendered SVG shows the image.
TEST(Exports, SvgShowsTheInputImage)
{
    auto view = makeView("query", vitDigits());
    const QString svg = exportQuery(QStringLiteral("svg"), view.get());
    const std::vector<QRect> panels = imagePanels(view.get());
    QFile file(svg);
    ASSERT_TRUE(file.open(QIODevice::ReadOnly));
    QXmlStreamReader xml(&file);
    int images = 0, digits = 0;
    while (!xml.atEnd()) {
        if (xml.readNext() != QXmlStreamReader::StartElement || xml.name() != QLatin1String("image"))
            continue;
        QString href = xml.attributes().value(QStringLiteral("xlink:href")).toString();
        if (href.isEmpty())
            href = xml.attributes().value(QStringLiteral("href")).toString();
        const qsizetype comma = href.indexOf(QLatin1Char(','));
        ASSERT_GT(comma, 0) << "an <image> without embedded data";
        // Cells keep hard edges in every viewer (issue 35, item 6: librsvg blurred the 8x8 digit).
        EXPECT_EQ(xml.attributes().value(QStringLiteral("style")).toString(), QStringLiteral("image-rendering:pixelated"));
        QImage image;
        ASSERT_TRUE(image.loadFromData(QByteArray::fromBase64(href.mid(comma + 1).toLatin1())));
        image = image.convertToFormat(QImage::Format_ARGB32);
        int opaqueBlack = 0;
        for (int y = 0; y < image.height(); ++y)
            for (int x = 0; x < image.width(); ++x) {
                const QRgb p = image.pixel(x, y);
                opaqueBlack += qAlpha(p) == 255 && qRed(p) < 30 && qGreen(p) < 30 && qBlue(p) < 30;
            }
        EXPECT_LT(opaqueBlack, image.width() * image.height() / 4) << "image " << images << " is mostly black";
        digits += showsTheDigit(image.convertToFormat(QImage::Format_RGB32), *vitDigits()->image);
        ++images;
    }
    EXPECT_FALSE(xml.hasError()) << xml.errorString().toStdString();
    EXPECT_GE(images, 9);   // per mechanism: the map, the image, the attention over it
    EXPECT_EQ(digits, 3);
    QSvgRenderer renderer(svg);
    ASSERT_TRUE(renderer.isValid());
    QImage page(renderer.defaultSize(), QImage::Format_RGB32);
    page.fill(Qt::white);
    {
        QPainter painter(&page);
        renderer.render(&painter);
    }
    expectPanelsShowTheImage(page, panels, "svg page");
}

// The default query is named in the title by what it is, not by how to choose another.
TEST(Exports, TitlesSayWhatIsShown)
{
    for (const auto& [result, name] : {std::pair{vitDigits(), "grid"}, std::pair{charLm(), "sequence"}}) {
        auto view = makeView("query", result);
        widgets::ExportOptions o;
        o.width = 1000;
        o.height = 800;
        const auto texts = recordTexts(view.get(), o);
        EXPECT_TRUE(anyText(texts, QStringLiteral("default"))) << name;
        for (const DrawnText& t : texts)
            EXPECT_FALSE(t.text.contains(QStringLiteral("click"), Qt::CaseInsensitive)) << name << ": " << t.text.toStdString();
    }
}

// File > Export starts in the last export's folder, else the data file's, else Pictures, Documents or
// home: never the working directory.
TEST(Exports, DefaultFolderIsNotTheWorkingDirectory)
{
    test::useTestSettings();
    QSettings().remove(QStringLiteral("export/folder"));
    const QString data = QString::fromStdString(test::dataPath("vit_digits.h5"));
    const QString work = QString::fromStdString(test::fresh_work_dir("exports_folder"));
    EXPECT_EQ(widgets::defaultExportFolder(work, data), QFileInfo(work).absoluteFilePath());
    EXPECT_EQ(widgets::defaultExportFolder(QString(), data), QFileInfo(data).absolutePath());
    const QString fallback = widgets::defaultExportFolder(QString(), QString());
    EXPECT_NE(fallback, QDir::currentPath());
    EXPECT_TRUE(QFileInfo(fallback).isDir()) << fallback.toStdString();
    // The dialog remembers where it exported last.
    {
        widgets::ExportDialog dialog(QStringLiteral("query"), {1000, 800}, work);
        dialog.saveChoices();
    }
    EXPECT_EQ(widgets::defaultExportFolder(QString(), data), QFileInfo(work).absoluteFilePath());
    widgets::ExportDialog fresh(QStringLiteral("query"), {1000, 800}, QString());
    EXPECT_EQ(QFileInfo(fresh.target()).absolutePath(), QFileInfo(work).absoluteFilePath()) << fresh.target().toStdString();
    QSettings().remove(QStringLiteral("export/folder"));
}

// The window's exports (figures, CSV, matrices) start next to the data file it shows, before any export.
TEST(Exports, WindowExportsNextToItsDataFile)
{
    test::useTestSettings();
    QSettings().remove(QStringLiteral("export/folder"));
    const QString data = QString::fromStdString(test::dataPath("vit_digits.h5"));
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({data}));
    EXPECT_EQ(w.exportFolder(), QFileInfo(data).absolutePath());
    EXPECT_NE(w.exportFolder(), QDir::currentPath());
}

// "All views into a folder" exports only views that show the current inputs and names those it left out: the
// Heads and Depth views compute while their tabs are shown, so before that they are left out (they were, silently,
// under "Exported to"), and once shown they are exported too (issue 35, item 7).
TEST(Exports, AllViewsNamesTheViewsLeftOut)
{
    test::useTestSettings();
    const QString data = QString::fromStdString(test::dataPath("vit_digits.h5"));
    const QString dir = QString::fromStdString(test::fresh_work_dir("exports_all_views"));
    test::TestWindow w;
    ASSERT_TRUE(w.openAndWait({data}));
    int exported = 0;
    QStringList leftOut;
    EXPECT_TRUE(w.exportEveryView(dir + "/before", QStringLiteral("svg"), QString(), {}, &exported, &leftOut).isEmpty());
    EXPECT_EQ(leftOut, (QStringList{QStringLiteral("heads"), QStringLiteral("depth")}));
    EXPECT_FALSE(QFile::exists(dir + "/before/heads.svg"));
    EXPECT_FALSE(QFile::exists(dir + "/before/depth.svg"));
    EXPECT_TRUE(QFile::exists(dir + "/before/maps.svg"));
    EXPECT_EQ(QDir(dir + "/before").entryList(QDir::Files).size(), exported);

    for (const char* view : {"heads", "depth"}) {
        w.setCurrentView(QString::fromLatin1(view));
        ASSERT_TRUE(test::waitIdle(w)) << view;
    }
    EXPECT_TRUE(w.exportEveryView(dir + "/after", QStringLiteral("svg"), QString(), {}, &exported, &leftOut).isEmpty());
    EXPECT_TRUE(leftOut.isEmpty()) << leftOut.join(',').toStdString();
    EXPECT_TRUE(QFile::exists(dir + "/after/heads.svg"));
    EXPECT_TRUE(QFile::exists(dir + "/after/depth.svg"));
    EXPECT_EQ(QDir(dir + "/after").entryList(QDir::Files).size(), exported);
}
