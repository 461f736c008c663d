// MixingView: MHLA's M x M mixing matrix Mc as a heatmap (query block i attends key block j) with its
// singular values and rank beside it.
#include <QHBoxLayout>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "plot_style.h"
#include "views.h"

namespace attnscope::widgets {
namespace {

using analysis::ExploreResult;
using Eigen::Index;

class MixingView : public PlotView {
public:
    explicit MixingView(QWidget* parent) : PlotView(parent)
    {
        toolRow()->addStretch(1);
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("mixing"); }
    QString viewTitle() const override { return tr("Mixing matrix"); }
    QSize preferredExportSize() const override { return {1000, 460}; }

    void setResult(std::shared_ptr<const ExploreResult> result) override
    {
        m_result = std::move(result);
        rebuild();
    }

private:
    void rebuild()
    {
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see MHLA's mixing matrix."));
            return;
        }
        const auto* mhla = m_result->find(attention::Mechanism::mhla);
        if (m_result->mixing.size() == 0) {
            QString why = tr("MHLA was not computed, so there is no mixing matrix.");
            if (mhla && !mhla->error.empty())
                why = tr("MHLA could not be computed:\n%1").arg(QString::fromStdString(mhla->error));
            showPlotMessage(m_plot, why);
            return;
        }
        clearPlot(m_plot);
        const Eigen::MatrixXd& Mc = m_result->mixing;
        const Index M = Mc.rows();
        QString preset;
        if (mhla && mhla->result.params.contains("mixing") && mhla->result.params["mixing"].is_string())
            preset = QString::fromStdString(mhla->result.params["mixing"].get<std::string>());
        auto* layout = m_plot->plotLayout();
        auto* group = new QCPMarginGroup(m_plot);
        QString title = tr("Mixing matrix Mc") + (preset.isEmpty() ? QString() : tr(" (%1)").arg(preset)) +
                        tr(",  M = %1,  rank %2").arg(M).arg(m_result->mixing_rank);
        layout->addElement(0, 0, new QCPTextElement(m_plot, title, plotFont(kTitlePt, true)));

        auto* rect = new QCPAxisRect(m_plot, true);
        layout->addElement(1, 0, rect);
        styleAxisRect(rect);
        rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("key block j"));
        y->setLabel(tr("query block i"));
        x->grid()->setVisible(false);
        y->grid()->setVisible(false);
        y->setRangeReversed(true);
        x->setRange(-0.5, static_cast<double>(M) - 0.5);
        y->setRange(-0.5, static_cast<double>(M) - 0.5);
        setIntegerTicks(x);
        setIntegerTicks(y);
        auto* map = new QCPColorMap(x, y);
        map->setInterpolate(false);
        const Index cells = std::max<Index>(M, 2);
        map->data()->setSize(static_cast<int>(cells), static_cast<int>(cells));
        map->data()->setRange(QCPRange(0, static_cast<double>(cells) - 1), QCPRange(0, static_cast<double>(cells) - 1));
        for (Index i = 0; i < M; ++i)
            for (Index j = 0; j < M; ++j)
                map->data()->setCell(static_cast<int>(j), static_cast<int>(i), Mc(i, j));
        auto* scale = new QCPColorScale(m_plot);
        layout->addElement(1, 1, scale);
        scale->setBarWidth(12);
        scale->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        scale->axis()->setTickLabelFont(plotFont(kTickPt));
        scale->axis()->setLabelFont(plotFont(kLabelPt));
        scale->axis()->setLabel(tr("mixing weight Mc[i, j]"));
        const double lo = std::min(0.0, Mc.minCoeff()), hi = Mc.maxCoeff();
        const bool signedValues = lo < 0;
        scale->setGradient(colorGradient(signedValues ? ColorMap::diverging : ColorMap::viridis));
        const double m = std::max(std::abs(lo), std::abs(hi));
        scale->setDataRange(signedValues ? QCPRange(-m, m) : QCPRange(0, hi > 0 ? hi : 1));
        map->setColorScale(scale);

        // Singular values of Mc.
        layout->addElement(0, 2, new QCPTextElement(m_plot, tr("Singular values of Mc"), plotFont(kTitlePt, true)));
        auto* sv = new QCPAxisRect(m_plot, true);
        layout->addElement(1, 2, sv);
        styleAxisRect(sv);
        sv->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        auto* sx = sv->axis(QCPAxis::atBottom);
        auto* sy = sv->axis(QCPAxis::atLeft);
        sx->setLabel(tr("index i"));
        setIntegerTicks(sx);
        sy->setLabel(tr("singular value \u03c3_i"));
        const auto& s = m_result->mixing_singular_values;
        QVector<double> xs, ys;
        double smin = 1e300, smax = 0;
        for (std::size_t i = 0; i < s.size(); ++i) {
            if (s[i] <= 0)
                continue;
            xs << static_cast<double>(i + 1);
            ys << s[i];
            smin = std::min(smin, s[i]);
            smax = std::max(smax, s[i]);
        }
        sy->setScaleType(QCPAxis::stLogarithmic);
        auto logTicker = QSharedPointer<QCPAxisTickerLog>::create();
        logTicker->setSubTickCount(0);
        sy->setTicker(logTicker);
        sy->setNumberFormat("eb");
        sy->setNumberPrecision(0);
        auto* bars = new QCPBars(sx, sy);
        bars->setWidth(0.7);
        bars->setPen(Qt::NoPen);
        bars->setBrush(mechanismColor(attention::Mechanism::mhla));
        bars->setBaseValue(smax > 0 ? std::max(smin / 10, smax * 1e-18) : 1e-18);
        bars->setData(xs, ys, true);
        sx->setRange(0.3, static_cast<double>(s.size()) + 0.7);
        if (smax > 0)
            sy->setRange(std::max(smin / 10, smax * 1e-18), smax * 3);
        auto* rankLine = new QCPItemStraightLine(m_plot);
        rankLine->setClipAxisRect(sv);
        for (auto* p : {rankLine->point1, rankLine->point2})
            p->setAxes(sx, sy);
        rankLine->point1->setCoords(static_cast<double>(m_result->mixing_rank) + 0.5, 1);
        rankLine->point2->setCoords(static_cast<double>(m_result->mixing_rank) + 0.5, 2);
        rankLine->setPen(QPen(QColor(60, 60, 60), 1.1, Qt::DashLine));
        auto* rankText = new QCPItemText(m_plot);
        rankText->setClipAxisRect(sv);
        rankText->position->setAxes(sx, sy);
        rankText->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        rankText->position->setAxisRect(sv);
        rankText->position->setCoords(static_cast<double>(m_result->mixing_rank) + 0.5, 0.03);
        const bool nearEnd = static_cast<double>(m_result->mixing_rank) > 0.75 * static_cast<double>(s.size());
        rankText->setPositionAlignment((nearEnd ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignTop);
        rankText->setPadding(nearEnd ? QMargins(0, 0, 4, 0) : QMargins(4, 0, 0, 0));
        rankText->setText(tr("rank %1").arg(m_result->mixing_rank));
        rankText->setFont(plotFont(kTickPt));
        layout->setRowStretchFactor(0, 0.01);
        layout->setColumnStretchFactor(0, 1.0);
        layout->setColumnStretchFactor(1, 0.01);
        layout->setColumnStretchFactor(2, 1.0);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    std::shared_ptr<const ExploreResult> m_result;
};

}  // namespace

ResultView* createMixingView(QWidget* parent) { return new MixingView(parent); }

}  // namespace attnscope::widgets
