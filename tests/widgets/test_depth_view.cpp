// The Depth view in the window (docs/gui.md "Depth"): its curves are the numbers `attnscope depth --json` gives
// for the same file, alpha and heads (the command line plans them on its own: default dataset names, the file's
// attributes); alpha and "Mean over heads" recompute it and are kept in sessions; another layer shown gives the
// same depth (nothing recomputed); a file without layers says so instead of a plot; `attnscope figure --view
// depth` draws it.
#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QImage>
#include <QTemporaryDir>
#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "analysis/depth_curves.h"
#include "depth_view.h"
#include "plot_style.h"
#include "plot_util.h"
#include "selection_panel.h"
#include "support/attnscope_binary.h"
#include "widget_test_support.h"

using namespace attnscope;
using namespace attnscope::widgets;
using test::TestWindow;

namespace {

class DepthViewTest : public test::MainWindowTest {};

DepthView* depthView(const MainWindow& w)
{
    for (ResultView* v : w.views())
        if (auto* d = qobject_cast<DepthView*>(v))
            return d;
    return nullptr;
}

bool showDepth(TestWindow& w)
{
    w.setCurrentView(QStringLiteral("depth"));
    return test::waitIdle(w);
}

// The curves the view draws: per panel (0: residual to uniform, 1: effective rank) and mechanism label, the
// (depth, value) points.
using Points = std::vector<std::pair<double, double>>;
std::map<int, std::map<QString, Points>> drawnCurves(QCustomPlot* plot)
{
    std::map<int, std::map<QString, Points>> out;
    const QList<QCPAxisRect*> rects = plot->axisRects();
    for (int g = 0; g < plot->graphCount(); ++g) {
        QCPGraph* graph = plot->graph(g);
        const int panel = static_cast<int>(rects.indexOf(graph->keyAxis()->axisRect()));
        Points& pts = out[panel][graph->name()];
        for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
            pts.emplace_back(it->key, it->value);
    }
    return out;
}

// `attnscope depth FILE ARGS --json -`.
nlohmann::json cliDepth(const std::string& file, const std::string& args)
{
    const auto r = test::run_attnscope("depth " + file + " " + args + " --json -");
    EXPECT_EQ(r.status, 0) << r.err;
    return nlohmann::json::parse(r.out);
}

// Every mechanism of the command line's document drawn at each depth with its residual and effective rank.
void expectCurvesEqual(QCustomPlot* plot, const nlohmann::json& doc, const std::string& what)
{
    const auto curves = drawnCurves(plot);
    ASSERT_EQ(curves.size(), 2u) << what;
    const auto& steps = doc["depth"];
    ASSERT_GE(steps.size(), 2u) << what;
    const std::size_t mechanisms = steps[0]["results"].size();
    ASSERT_EQ(curves.at(0).size(), mechanisms) << what;
    for (std::size_t m = 0; m < mechanisms; ++m) {
        attention::Mechanism mech{};
        ASSERT_TRUE(mechanismFromName(steps[0]["results"][m]["mechanism"].get<std::string>(), mech));
        const QString label = mechanismLabel(mech);
        ASSERT_TRUE(curves.at(0).count(label) && curves.at(1).count(label)) << what << ": " << label.toStdString();
        const Points& residual = curves.at(0).at(label);
        const Points& effective = curves.at(1).at(label);
        ASSERT_EQ(residual.size(), steps.size()) << what << " " << label.toStdString();
        ASSERT_EQ(effective.size(), steps.size()) << what << " " << label.toStdString();
        for (std::size_t d = 0; d < steps.size(); ++d) {
            const auto& r = steps[d]["results"][m];
            EXPECT_EQ(residual[d].first, steps[d]["depth"].get<double>());
            const double want = r["residual_to_uniform"].get<double>(), wantEff = r["effective_rank"].get<double>();
            EXPECT_NEAR(residual[d].second, want, 1e-9 * std::max(1.0, want)) << what << " " << label.toStdString() << " depth " << d + 1;
            EXPECT_NEAR(effective[d].second, wantEff, 1e-9 * std::max(1.0, wantEff)) << what << " " << label.toStdString() << " depth " << d + 1;
        }
    }
}

QStringList plotTexts(QCustomPlot* plot)
{
    QStringList out;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* t = qobject_cast<QCPTextElement*>(e)) {
            const QString whole = elidedTitleText(t);
            out << (whole.isEmpty() ? t->text() : whole);
        }
    return out;
}

}  // namespace

TEST_F(DepthViewTest, VitDigitsCurvesAreTheCommandLinesDepthAndFollowAlphaAndHead)
{
    TestWindow w;
    const std::string file = test::dataPath("vit_digits.h5");
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(file)}));
    DepthView* view = depthView(w);
    ASSERT_NE(view, nullptr);
    // Not on its tab: nothing is computed, and the view says when it will be.
    EXPECT_FALSE(view->depth());
    EXPECT_EQ(view->freshness(), ResultView::Freshness::notComputed);
    ASSERT_TRUE(showDepth(w));
    ASSERT_TRUE(view->depth());
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    EXPECT_EQ(view->depth()->layers, (std::vector<Eigen::Index>{0, 1, 2}));
    EXPECT_FALSE(view->depth()->head);
    EXPECT_EQ(view->depth()->heads_averaged, 4);
    QCustomPlot* plot = test::plotOf(view);
    expectCurvesEqual(plot, cliDepth(file, ""), "vit_digits alpha 0.5, mean");
    const QString title = plotTexts(plot).join('|');
    EXPECT_TRUE(title.contains(QStringLiteral("vit_digits.h5")) && title.contains(QStringLiteral("N = 64")) &&
                title.contains(QStringLiteral("\u03b1 = 0.5")) && title.contains(QStringLiteral("mean over 4 heads")))
        << title.toStdString();

    // Another layer shown: the same depth, nothing recomputed.
    const auto before = view->depth();
    ASSERT_TRUE(w.stepLayer(+1));
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(view->depth(), before);
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);

    // Alpha: out of date at once, then the command line's --alpha numbers.
    auto* alpha = view->findChild<QDoubleSpinBox*>();
    ASSERT_NE(alpha, nullptr);
    alpha->setValue(1.0);
    EXPECT_NE(view->freshness(), ResultView::Freshness::current);
    ASSERT_TRUE(test::waitIdle(w));
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    ASSERT_EQ(view->depth()->request.alpha, 1.0);
    expectCurvesEqual(plot, cliDepth(file, "--alpha 1"), "vit_digits alpha 1");

    // One head: the head the Selection dock names.
    w.selectionPanel()->setIndex(QLatin1Char('h'), 2);
    ASSERT_TRUE(test::waitIdle(w));
    auto* mean = view->findChild<QCheckBox*>();
    ASSERT_NE(mean, nullptr);
    mean->setChecked(false);
    ASSERT_TRUE(test::waitIdle(w));
    ASSERT_TRUE(view->depth()->head);
    EXPECT_EQ(*view->depth()->head, 2);
    expectCurvesEqual(plot, cliDepth(file, "--alpha 1 --head 2"), "vit_digits alpha 1, head 2");
    EXPECT_TRUE(plotTexts(plot).join('|').contains(QStringLiteral("head 2")));

    // The view's state: alpha and the heads, in a session and back.
    const QJsonObject state = w.sessionState(QString())[QStringLiteral("views")].toObject()[QStringLiteral("depth")].toObject();
    EXPECT_EQ(state[QStringLiteral("alpha")].toDouble(), 1.0);
    EXPECT_EQ(state[QStringLiteral("head_mean")].toBool(true), false);
    QTemporaryDir dir;
    const QString session = dir.filePath(QStringLiteral("depth.attnscope"));
    ASSERT_TRUE(w.saveSession(session));
    TestWindow again;
    ASSERT_TRUE(again.loadSession(session));
    ASSERT_TRUE(test::waitIdle(again));
    DepthView* restored = depthView(again);
    EXPECT_EQ(restored->alpha(), 1.0);
    EXPECT_FALSE(restored->headMean());
    ASSERT_TRUE(showDepth(again));
    ASSERT_TRUE(restored->depth());
    EXPECT_EQ(*restored->depth()->head, 2);
    expectCurvesEqual(test::plotOf(restored), cliDepth(file, "--alpha 1 --head 2"), "vit_digits from the session");
}

TEST_F(DepthViewTest, TrainedMhlaLanguageModelWithItsPerLayerMixing)
{
    TestWindow w;
    const std::string file = test::dataPath("trained_lm_mhla.h5");
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(file)}));
    ASSERT_TRUE(showDepth(w));
    DepthView* view = depthView(w);
    ASSERT_TRUE(view->depth());
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    EXPECT_EQ(view->depth()->n, 512);
    EXPECT_EQ(view->depth()->layers, (std::vector<Eigen::Index>{0, 1}));
    // MHLA is among the mechanisms: its layers' own learned mixing matrices (the file's attributes) apply.
    bool mhla = false;
    for (const auto& c : view->depth()->curves)
        mhla = mhla || c.mechanism == attention::Mechanism::mhla;
    EXPECT_TRUE(mhla);
    expectCurvesEqual(test::plotOf(view), cliDepth(file, ""), "trained_lm_mhla");
}

TEST_F(DepthViewTest, FileWithoutLayersSaysSoInsteadOfAPlot)
{
    TestWindow w;
    ASSERT_TRUE(w.openAndWait({QString::fromStdString(test::dataPath("gaussian.h5"))}));
    ASSERT_TRUE(showDepth(w));
    DepthView* view = depthView(w);
    ASSERT_TRUE(view->depth());
    EXPECT_EQ(view->freshness(), ResultView::Freshness::current);
    QCustomPlot* plot = test::plotOf(view);
    EXPECT_EQ(plot->graphCount(), 0);
    EXPECT_EQ(plot->axisRectCount(), 0);
    const QString text = plotTexts(plot).join('|');
    EXPECT_TRUE(text.contains(QStringLiteral("depth needs the layers of one model")) && text.contains(QStringLiteral("gaussian.h5")))
        << text.toStdString();
}

TEST_F(DepthViewTest, FigureDrawsTheDepth)
{
    const std::string dir = test::fresh_work_dir("depth_view_figure");
    const std::string vit = test::dataPath("vit_digits.h5");
    const std::string layer0 = " --q " + vit + ":/layers/0/q --k " + vit + ":/layers/0/k";
    for (const char* ext : {"png", "svg"}) {
        const std::string out = dir + "/depth." + ext;
        const auto r = test::run_attnscope("figure --view depth" + layer0 + " --width 1000 --height 600 --dpi 96 --out " + out);
        ASSERT_EQ(r.status, 0) << ext << ": " << r.err;
        EXPECT_GT(test::read_text(out).size(), 2000u) << ext;
    }
    QImage png(QString::fromStdString(dir + "/depth.png"));
    EXPECT_EQ(png.width(), 1000);
    EXPECT_EQ(png.height(), 600);
    double ink = 0;
    EXPECT_GT(test::distinctColours(png, &ink), 8);
    EXPECT_GT(ink, 0.01);
    const std::string svg = test::read_text(dir + "/depth.svg");
    EXPECT_NE(svg.find("Collapse with depth"), std::string::npos);
    EXPECT_NE(svg.find("mean over 4 heads"), std::string::npos);
    // The view's state: alpha and one head (the selection's, --head).
    const auto one = test::run_attnscope("figure --view depth" + layer0 + " --head 1 --view-state '{\"alpha\": 1, \"head_mean\": false}' --out " +
                                         dir + "/one.svg");
    ASSERT_EQ(one.status, 0) << one.err;
    const std::string oneSvg = test::read_text(dir + "/one.svg");
    EXPECT_NE(oneSvg.find("head 1"), std::string::npos);
    EXPECT_EQ(oneSvg.find("mean over"), std::string::npos);
    // Refused, one error line each: alpha outside [0, 1], a file without layers, a batch figure of depth.
    const auto bad = test::run_attnscope("figure --view depth" + layer0 + " --view-state '{\"alpha\": 2}' --out " + dir + "/bad.png");
    test::expect_one_error(bad, {"alpha", "[0, 1]"}, "figure depth alpha 2");
    const std::string gauss = test::dataPath("gaussian.h5");
    const auto none = test::run_attnscope("figure --view depth --q " + gauss + ":/q --k " + gauss + ":/k --out " + dir + "/none.png");
    test::expect_one_error(none, {"depth needs the layers of one model"}, "figure depth gaussian");
    {
        std::ofstream job(dir + "/job.toml");
        job << "inputs = [\"" << vit << "\"]\nq = \"/layers/0/q\"\nk = \"/layers/0/k\"\n[[figure]]\nview = \"depth\"\n";
    }
    const auto batch = test::run_attnscope("batch " + dir + "/job.toml --out " + dir + "/batch_out");
    test::expect_one_error(batch, {"view = \"depth\"", "[depth]"}, "batch figure depth");
}
