#pragma once
// The bases of the result views (private to widgets/). ExploreView: a view of one ExploreResult with its
// name, title and export size; PlotView: the same with a QCustomPlot (plot_style.h's PlotViewOf).
// SweepPlotView: a QCustomPlot view of one sweep, with the metric box that starts its tool row.
// Each keeps what it shows and calls the derived view's rebuild() when that changes, and saves and
// restores the controls a view registers in m_saved (restoring redraws).
#include <QSize>
#include <QString>
#include <memory>

#include "curves.h"
#include "plot_style.h"
#include "result_view.h"
#include "widget_util.h"

class QComboBox;

namespace attnscope::analysis {
struct ExploreResult;
struct SweepResult;
}

namespace attnscope::widgets {

class ExploreView : public ResultView {
public:
    ExploreView(QWidget* parent, QString name, QString title, QSize exportSize = {1200, 800});
    QString viewName() const override { return m_name; }
    QString viewTitle() const override { return m_title; }
    QSize preferredExportSize() const override { return m_exportSize; }
    void setResult(std::shared_ptr<const analysis::ExploreResult> result) override;
    QJsonObject saveState() const override { return m_saved.save(); }
    void restoreState(const QJsonObject& state) override;

protected:
    // A new result (or none) is in m_result; the default redraws.
    virtual void resultChanged() { rebuild(); }
    virtual void rebuild() = 0;

    std::shared_ptr<const analysis::ExploreResult> m_result;
    SavedControls m_saved;

private:
    QString m_name, m_title;
    QSize m_exportSize;
};

using PlotView = PlotViewOf<ExploreView>;

class SweepPlotView : public PlotViewOf<SweepView> {
public:
    SweepPlotView(QWidget* parent, QString name, QString title, QSize exportSize = {1200, 800});
    QString viewName() const override { return m_name; }
    QString viewTitle() const override { return m_title; }
    QSize preferredExportSize() const override { return m_exportSize; }
    // Sweep views show sweeps only.
    void setResult(std::shared_ptr<const analysis::ExploreResult> result) override { Q_UNUSED(result); }
    void setSweep(std::shared_ptr<const analysis::SweepResult> sweep) override;
    void setMetric(const QString& metric) override;
    QJsonObject saveState() const override { return m_saved.save(); }
    void restoreState(const QJsonObject& state) override;

protected:
    // A new sweep (or none) is in m_sweep; the default redraws.
    virtual void sweepChanged() { rebuild(); }
    virtual void rebuild() = 0;
    QString metric() const;   // the metric key shown ("rank", ...)

    std::shared_ptr<const analysis::SweepResult> m_sweep;
    QComboBox* m_metricBox = nullptr;
    SavedControls m_saved;   // "metric" and the derived view's controls

private:
    QString m_name, m_title;
    QSize m_exportSize;
};

}  // namespace attnscope::widgets
