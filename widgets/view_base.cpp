// The bases of the result views; see view_base.h.
#include "view_base.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <utility>

namespace attnscope::widgets {

ExploreView::ExploreView(QWidget* parent, QString name, QString title, QSize exportSize)
    : ResultView(parent), m_name(std::move(name)), m_title(std::move(title)), m_exportSize(exportSize)
{
}

void ExploreView::setResult(std::shared_ptr<const analysis::ExploreResult> result)
{
    m_result = std::move(result);
    resultChanged();
}

// A view without saved controls has no state: nothing to restore, nothing to redraw.
void ExploreView::restoreState(const QJsonObject& state)
{
    if (m_saved.empty())
        return;
    m_saved.restore(state);
    rebuild();
}

SweepPlotView::SweepPlotView(QWidget* parent, QString name, QString title, QSize exportSize)
    : PlotViewOf<SweepView>(parent), m_name(std::move(name)), m_title(std::move(title)), m_exportSize(exportSize)
{
    auto* tools = toolRow();
    tools->addWidget(new QLabel(tr("Metric"), this));
    m_metricBox = new QComboBox(this);
    for (const QString& k : sweepMetricKeys())
        m_metricBox->addItem(sweepMetricLabel(k), k);
    tools->addWidget(m_metricBox);
    tools->addSpacing(12);
    connect(m_metricBox, &QComboBox::currentIndexChanged, this, [this](int) { rebuild(); });
    m_saved.addByData("metric", m_metricBox);
}

void SweepPlotView::restoreState(const QJsonObject& state)
{
    m_saved.restore(state);
    rebuild();
}

void SweepPlotView::setSweep(std::shared_ptr<const analysis::SweepResult> sweep)
{
    m_sweep = std::move(sweep);
    sweepChanged();
}

void SweepPlotView::setMetric(const QString& metric)
{
    const int i = m_metricBox->findData(metric);
    if (i >= 0)
        m_metricBox->setCurrentIndex(i);   // rebuilds when it changes
}

QString SweepPlotView::metric() const { return m_metricBox->currentData().toString(); }

}  // namespace attnscope::widgets
