// MixingView: MHLA's M x M mixing matrix Mc as a heatmap of square cells (query block i attends key block j)
// with a labelled colour bar, and its singular values and rank beside it (the bar chart takes the width the
// square matrix leaves).
#include <QHBoxLayout>
#include <QJsonObject>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <qcustomplot.h>

#include "analysis/explore.h"
#include "analysis/requests.h"
#include "attention/mixing.h"
#include "io/selection.h"
#include "plot_util.h"
#include "view_base.h"
#include "views.h"

namespace attnscope::widgets {

namespace {

// FILE[:DATASET] shortened to the file's name and the dataset, for a title.
QString elidedReference(const QString& ref)
{
    const std::optional<io::TensorRef> named = analysis::mixing_reference(ref.toStdString());
    if (!named)
        return ref;
    const io::TensorRef& r = *named;
    const QString file = QString::fromStdString(std::filesystem::path(r.file).filename().string());
    return r.name.empty() ? file : file + QLatin1Char(':') + QString::fromStdString(r.name);
}

}  // namespace
namespace {

using analysis::ExploreResult;
using Eigen::Index;

// The mechanism whose blocks are mixed by the matrix this view shows (MHLA: the first with mixing in the table).
attention::Mechanism mixingMechanism()
{
    for (const attention::MechanismInfo& info : attention::mechanism_table())
        if (info.has_mixing())
            return info.id;
    return attention::default_mechanisms().front();
}

class MixingView : public PlotView {
public:
    explicit MixingView(QWidget* parent) : PlotView(parent, QStringLiteral("mixing"), tr("Mixing matrix"), QSize(1000, 460))
    {
        toolRow()->addStretch(1);
        rebuild();
    }

    // A narrow printed figure stacks the spectrum under the matrix (adjustLayout): give it the height for that.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        return m_matrixRect ? narrowExportHeight(width, font_scale, fallback, 1.6) : fallback;
    }

protected:
    void adjustLayout(const QSize& size) override
    {
        if (!m_matrixRect)
            return;
        arrange(isNarrow(size.width(), fontScale()) && size.height() > size.width());
        fitSquareCells(m_plot, {{m_matrixRect, m_cells, m_cells}}, size, [this](const QSize& s) { layoutAt(s); });
    }

private:
    // The spectrum right of the matrix and its scale (row 0 titles, row 1 plots), or below them.
    void arrange(bool stacked)
    {
        if (stacked == m_stacked || !m_svRect || !m_svTitle)
            return;
        auto* layout = m_plot->plotLayout();
        placeSidePlot(layout, m_svTitle, m_svRect, m_matrixRect, 2, stacked, StackedMargins::left, m_group);
        layout->setRowStretchFactors(stacked ? QList<double>{0.01, 1.0, 0.01, 0.7} : QList<double>{0.01, 1.0});
        layout->setColumnStretchFactors(stacked ? QList<double>{1.0, 0.01} : QList<double>{1.0, 0.01, 1.0});
        m_stacked = stacked;
        layoutAt(m_plot->viewport().size());
    }

    void rebuild() override
    {
        m_matrixRect = nullptr;
        m_svRect = nullptr;
        m_svTitle = nullptr;
        m_stacked = false;
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see MHLA's mixing matrix."));
            return;
        }
        const auto* mhla = m_result->find(mixingMechanism());
        if (m_result->mixing.size() == 0) {
            QString why = tr("MHLA was not computed, so there is no mixing matrix.");
            if (mhla && !mhla->error.empty())
                why = tr("MHLA could not be computed:\n%1").arg(QString::fromStdString(mhla->error));
            showPlotMessage(m_plot, why);
            return;
        }
        clearPlot(m_plot);
        // A preset by name; a learned matrix by its file's name and dataset (and the head of a per-head file).
        QString source;
        if (mhla && mhla->result.params.contains("mixing") && mhla->result.params["mixing"].is_string()) {
            source = QString::fromStdString(mhla->result.params["mixing"].get<std::string>());
            if (!attention::is_mixing_preset(source.toStdString())) {
                source = tr("learned: %1").arg(elidedReference(source));
                if (mhla->result.params.contains("mixing_head"))
                    source += tr(", head %1").arg(mhla->result.params["mixing_head"].get<long long>());
            }
        }
        auto* layout = m_plot->plotLayout();
        auto* group = new QCPMarginGroup(m_plot);
        QString title = tr("Mixing matrix Mc") + (source.isEmpty() ? QString() : tr(" (%1)").arg(source)) +
                        tr(",  M = %1,  rank %2").arg(m_result->mixing.rows()).arg(m_result->mixing_rank);
        m_group = group;
        layout->addElement(0, 0, addTitle(m_plot, title, plotFont(kTitlePt, true)));
        addMatrix(layout, group);
        m_svTitle = addTitle(m_plot, tr("Singular values of Mc"), plotFont(kTitlePt, true));
        layout->addElement(0, 2, m_svTitle);
        addSingularValues(layout, group);
        layout->setRowStretchFactor(0, 0.01);
        layout->setColumnStretchFactor(0, 1.0);
        layout->setColumnStretchFactor(1, 0.01);
        layout->setColumnStretchFactor(2, 1.0);
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    // Mc as a heatmap (column 0) with its colour scale (column 1): diverging when it has negative weights.
    void addMatrix(QCPLayoutGrid* layout, QCPMarginGroup* group)
    {
        const Eigen::MatrixXd& Mc = m_result->mixing;
        const Index M = Mc.rows();
        auto* rect = addAxisRect(m_plot, layout, 1, 0);
        rect->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        m_matrixRect = rect;
        m_cells = static_cast<double>(M);
        setHeatmapAxes(rect, static_cast<double>(M), static_cast<double>(M), tr("key block j"), tr("query block i"));
        // QCPColorMap needs two cells per axis; for M = 1 the extra cells lie outside the axis range.
        const Index cells = std::max<Index>(M, 2);
        auto* map = addHeatmap(rect, static_cast<int>(cells), static_cast<int>(cells));
        for (Index i = 0; i < M; ++i)
            for (Index j = 0; j < M; ++j)
                map->data()->setCell(static_cast<int>(j), static_cast<int>(i), Mc(i, j));
        auto* scale = addColorScale(m_plot, tr("mixing weight Mc[i, j]"), 12, group);
        layout->addElement(1, 1, scale);
        const double lo = std::min(0.0, Mc.minCoeff()), hi = Mc.maxCoeff();
        const bool signedValues = lo < 0;
        scale->setGradient(colorGradient(signedValues ? ColorMap::diverging : ColorMap::viridis));
        const double m = std::max(std::abs(lo), std::abs(hi));
        scale->setDataRange(signedValues ? QCPRange(-m, m) : QCPRange(0, hi > 0 ? hi : 1));
        map->setColorScale(scale);
    }

    // The singular values of Mc as bars on a log axis (column 2), the numerical rank marked.
    void addSingularValues(QCPLayoutGrid* layout, QCPMarginGroup* group)
    {
        auto* sv = addAxisRect(m_plot, layout, 1, 2);
        sv->setMarginGroup(QCP::msTop | QCP::msBottom, group);
        m_svRect = sv;
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
        setLogScale(sy, 10, 0);
        setPowerLabels(sy);
        auto* bars = new QCPBars(sx, sy);
        bars->setWidth(0.7);
        bars->setPen(Qt::NoPen);
        bars->setBrush(mechanismColor(mixingMechanism()));
        bars->setBaseValue(smax > 0 ? std::max(smin / 10, smax * 1e-18) : 1e-18);
        bars->setData(xs, ys, true);
        sx->setRange(0.3, static_cast<double>(s.size()) + 0.7);
        if (smax > 0)
            sy->setRange(std::max(smin / 10, smax * 1e-18), smax * 3);
        const double rankX = static_cast<double>(m_result->mixing_rank) + 0.5;
        addVLine(m_plot, sv, rankX, QPen(QColor(60, 60, 60), 1.1, Qt::DashLine));
        auto* rankText = new QCPItemText(m_plot);
        rankText->setClipAxisRect(sv);
        rankText->position->setAxes(sx, sy);
        rankText->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        rankText->position->setAxisRect(sv);
        rankText->position->setCoords(rankX, 0.03);
        const bool nearEnd = static_cast<double>(m_result->mixing_rank) > 0.75 * static_cast<double>(s.size());
        rankText->setPositionAlignment((nearEnd ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignTop);
        rankText->setPadding(nearEnd ? QMargins(0, 0, 4, 0) : QMargins(4, 0, 0, 0));
        rankText->setText(tr("rank %1").arg(m_result->mixing_rank));
        rankText->setFont(plotFont(kTickPt));
    }

    QCPAxisRect* m_matrixRect = nullptr;   // the heatmap of Mc (null without one)
    QCPAxisRect* m_svRect = nullptr;       // Mc's singular values
    QCPTextElement* m_svTitle = nullptr;
    QCPMarginGroup* m_group = nullptr;
    bool m_stacked = false;                // the singular values below the matrix (a narrow, tall canvas)
    double m_cells = 1;                    // M
};

}  // namespace

ResultView* createMixingView(QWidget* parent) { return new MixingView(parent); }

}  // namespace attnscope::widgets
