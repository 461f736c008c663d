// The Curves view on a sweep over every input of a file (`--at b=all`, the sweep dialog's "every input"): by
// default it draws the core's 95% bootstrap interval of each point's mean as a band (the values of
// analysis::sweep_curves, not computed here) and names it in the subtitle; with one unit per point there is no
// band. The dialog's "every input" makes each index of the queries' other index axes a unit.
#include <QApplication>
#include <memory>
#include <qcustomplot.h>

#include <gtest/gtest.h>

#include "analysis/sweep.h"
#include "analysis/synth.h"
#include "curves.h"
#include "io/writers.h"
#include "support/test_support.h"
#include "sweep_dialog.h"
#include "widget_test_support.h"

using namespace attnscope;

namespace {

// Five inputs on a b axis (layout bnd), 32 tokens, d = 6.
std::string batchFile(const std::string& dir)
{
    analysis::SynthOptions so;
    so.n = 32;
    so.d = 6;
    so.heads = 5;
    so.kind = "local1d";
    const auto data = analysis::synthesize(so, 1ULL << 30);
    io::write_hdf5(dir + "/b.h5", {{"/q", {5, 32, 6}, data.q}, {"/k", {5, 32, 6}, data.k}});
    return dir + "/b.h5";
}

std::shared_ptr<const analysis::SweepResult> sweepOf(analysis::SweepSpec spec)
{
    auto r = std::make_shared<analysis::SweepResult>();
    r->records = analysis::run_sweep(analysis::plan_sweep(spec), analysis::JobContext{});
    r->spec = std::move(spec);
    return r;
}

QStringList texts(QCustomPlot* plot)
{
    QStringList out;
    for (QCPLayoutElement* e : plot->plotLayout()->elements(true))
        if (auto* t = qobject_cast<QCPTextElement*>(e))
            out << t->text();
    return out;
}

}  // namespace

TEST(CurvesBand, EveryInputGivesTheBootstrapBand)
{
    const std::string file = batchFile(test::fresh_work_dir("curves_band"));
    analysis::TensorSource src{io::parse_tensor_ref(file + ":/q"), io::parse_tensor_ref(file + ":/k"), std::nullopt, {}};
    src.selection.layout = "bnd";
    widgets::SweepParams p;
    p.vary = QLatin1Char('m');
    p.values = QStringLiteral("1,2,4");
    p.allInputs = true;
    const analysis::SweepSpec spec = widgets::sweepSpec(p, &src, attention::AttentionOptions{});
    ASSERT_EQ(spec.inputs.size(), 1u);
    EXPECT_EQ(spec.inputs[0].selection.all, std::set<char>{'b'});
    const auto sweep = sweepOf(spec);
    ASSERT_EQ(sweep->records.size(), 5u * 3u * 3u);

    std::unique_ptr<widgets::SweepView> view(widgets::createCurvesView());
    view->setSweep(sweep);
    view->setMetric(QStringLiteral("effective_rank"));
    EXPECT_EQ(view->saveState()["band"].toString(), "ci");   // the default
    QCustomPlot* plot = test::plotOf(view.get());
    const auto curves = analysis::sweep_curves(*sweep, analysis::sweep_summary(sweep->spec, sweep->records),
                                               "effective_rank", true);
    int bands = 0;
    for (int i = 0; i < plot->graphCount(); ++i) {
        QCPGraph* upper = plot->graph(i);
        QCPGraph* lower = upper->channelFillGraph();
        if (!lower)
            continue;
        ++bands;
        // The band's edges are some curve's interval, point by point.
        bool matched = false;
        for (const auto& c : curves) {
            bool all = upper->dataCount() == static_cast<int>(c.points.size());
            for (std::size_t k = 0; all && k < c.points.size(); ++k)
                all = upper->data()->at(static_cast<int>(k))->value == c.points[k].second.ci_high &&
                      lower->data()->at(static_cast<int>(k))->value == c.points[k].second.ci_low;
            matched = matched || all;
        }
        EXPECT_TRUE(matched) << "band " << bands;
    }
    EXPECT_EQ(bands, 3);   // one per mechanism
    EXPECT_TRUE(texts(plot).join('\n').contains(QStringLiteral("95% interval"))) << texts(plot).join(" | ").toStdString();

    // One input: one unit per point, no band.
    p.allInputs = false;
    view->setSweep(sweepOf(widgets::sweepSpec(p, &src, attention::AttentionOptions{})));
    view->setMetric(QStringLiteral("effective_rank"));
    for (int i = 0; i < plot->graphCount(); ++i)
        EXPECT_EQ(plot->graph(i)->channelFillGraph(), nullptr);
}

TEST(CurvesBand, EveryInputNeedsAnIndexAxis)
{
    const std::string dir = test::fresh_work_dir("curves_band_one");
    analysis::SynthOptions so;
    so.n = 16;
    so.d = 4;
    so.kind = "local1d";
    const auto data = analysis::synthesize(so, 1ULL << 30);
    io::write_hdf5(dir + "/one.h5", {{"/q", {16, 4}, data.q}, {"/k", {16, 4}, data.k}});
    const analysis::TensorSource src{io::parse_tensor_ref(dir + "/one.h5:/q"), io::parse_tensor_ref(dir + "/one.h5:/k"), std::nullopt, {}};
    widgets::SweepParams p;
    p.allInputs = true;
    EXPECT_NE(test::message_of([&] { widgets::sweepSpec(p, &src, attention::AttentionOptions{}); }).find("one input"),
              std::string::npos);
    const widgets::SweepParams back = widgets::SweepParams::fromJson(p.toJson());
    EXPECT_TRUE(back.allInputs);
}
