// SpectrumView: normalised singular values s_i / s_1 (log y) per mechanism with the rank tolerance
// tol / s_1 and the ranks in the legend; optionally the cumulative energy sum_{i<=k} s_i^2 / sum s^2.
#include <QCheckBox>
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

class SpectrumView : public PlotView {
public:
    explicit SpectrumView(QWidget* parent) : PlotView(parent)
    {
        auto* tools = toolRow();
        m_cumBox = new QCheckBox(tr("Cumulative energy"), this);
        m_cumBox->setToolTip(tr("Show sum_{i<=k} s_i^2 / sum_i s_i^2 on a linear axis"));
        tools->addWidget(m_cumBox);
        m_logxBox = new QCheckBox(tr("Log index axis"), this);
        tools->addWidget(m_logxBox);
        tools->addStretch(1);
        connect(m_cumBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        connect(m_logxBox, &QCheckBox::toggled, this, [this](bool) { rebuild(); });
        rebuild();
    }

    QString viewName() const override { return QStringLiteral("spectrum"); }
    QString viewTitle() const override { return tr("Singular value spectrum"); }
    QSize preferredExportSize() const override { return {900, 600}; }

    void setResult(std::shared_ptr<const ExploreResult> result) override
    {
        m_result = std::move(result);
        rebuild();
    }

    QJsonObject saveState() const override
    {
        return QJsonObject{{"cumulative", m_cumBox->isChecked()}, {"log_x", m_logxBox->isChecked()}};
    }
    void restoreState(const QJsonObject& s) override
    {
        const QSignalBlocker b1(m_cumBox), b2(m_logxBox);
        if (s.contains("cumulative"))
            m_cumBox->setChecked(s["cumulative"].toBool());
        if (s.contains("log_x"))
            m_logxBox->setChecked(s["log_x"].toBool());
        rebuild();
    }

private:
    void rebuild()
    {
        if (!m_result) {
            showPlotMessage(m_plot, tr("No result yet.\nOpen activation files and assign Q and K to see the singular value spectra."));
            return;
        }
        clearPlot(m_plot);
        const bool cumulative = m_cumBox->isChecked();
        const bool logx = m_logxBox->isChecked();
        auto* title = new QCPTextElement(
            m_plot,
            cumulative ? tr("Cumulative spectral energy (N = %1)").arg(m_result->n)
                       : tr("Normalised singular values (N = %1)").arg(m_result->n),
            plotFont(kTitlePt, true));
        m_plot->plotLayout()->addElement(0, 0, title);
        auto* rect = new QCPAxisRect(m_plot, true);
        m_plot->plotLayout()->addElement(1, 0, rect);
        m_plot->plotLayout()->setRowStretchFactor(0, 0.01);
        styleAxisRect(rect);
        auto* x = rect->axis(QCPAxis::atBottom);
        auto* y = rect->axis(QCPAxis::atLeft);
        x->setLabel(tr("index i"));
        setIntegerTicks(x);
        y->setLabel(cumulative ? tr("cumulative energy  \u03a3\u1D62\u2264\u2096 s\u1D62\u00b2 / \u03a3 s\u1D62\u00b2") : tr("s\u1D62 / s\u2081"));
        if (cumulative)
            x->setLabel(tr("number of singular values k"));
        auto* legend = addLegend(rect, cumulative ? (Qt::AlignBottom | Qt::AlignRight) : (Qt::AlignBottom | Qt::AlignLeft));

        double ymin = 1.0;
        std::size_t count = 1;
        std::vector<std::pair<QColor, double>> tols;
        QStringList notes;
        for (const auto& o : m_result->outcomes) {
            const auto mech = o.result.mechanism;
            if (!o.matrix && !o.error.empty()) {
                notes << tr("%1: failed (%2)").arg(mechanismLabel(mech), QString::fromStdString(o.error));
                continue;
            }
            if (!o.result.spectrum || o.result.spectrum->singular_values.empty() || o.result.spectrum->singular_values.front() <= 0) {
                notes << tr("%1: no spectrum").arg(mechanismLabel(mech));
                continue;
            }
            const auto& sp = *o.result.spectrum;
            const auto& s = sp.singular_values;
            const double s1 = s.front();
            QVector<double> xs, ys;
            xs.reserve(static_cast<int>(s.size()));
            ys.reserve(static_cast<int>(s.size()));
            QString name = tr("%1: rank %2 / %3").arg(mechanismLabel(mech)).arg(sp.rank).arg(m_result->n);
            if (cumulative) {
                double total = 0;
                for (double v : s)
                    total += v * v;
                double acc = 0;
                std::size_t k99 = 0;
                for (std::size_t i = 0; i < s.size(); ++i) {
                    acc += s[i] * s[i];
                    xs << static_cast<double>(i + 1);
                    ys << acc / total;
                    if (k99 == 0 && acc / total >= 0.99)
                        k99 = i + 1;
                }
                name += tr(", 99% energy at k = %1").arg(k99);
            } else {
                std::size_t dropped = 0;
                for (std::size_t i = 0; i < s.size(); ++i) {
                    if (s[i] <= 0) {
                        ++dropped;
                        continue;
                    }
                    xs << static_cast<double>(i + 1);
                    ys << s[i] / s1;
                    ymin = std::min(ymin, s[i] / s1);
                }
                if (dropped)
                    name += tr(" (%1 zero values not drawn)").arg(dropped);
                tols.emplace_back(mechanismColor(mech), sp.tol / s1);
                ymin = std::min(ymin, sp.tol / s1);
            }
            count = std::max(count, s.size());
            auto* g = m_plot->addGraph(x, y);
            g->setData(xs, ys, true);
            g->setPen(mechanismPen(mech, 1.1));
            g->setName(name);
            g->addToLegend(legend);
        }
        if (m_plot->graphCount() == 0) {
            showPlotMessage(m_plot, tr("No spectrum to show.\n") + notes.join('\n'));
            return;
        }
        const double xmax = static_cast<double>(count);
        if (logx) {
            x->setScaleType(QCPAxis::stLogarithmic);
            x->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
            x->setRange(0.8, xmax * 1.25);
        } else {
            x->setRange(0, xmax * 1.02 + 1);
        }
        if (cumulative) {
            y->setRange(0, 1.04);
            auto* line = new QCPItemStraightLine(m_plot);
            line->setClipAxisRect(rect);
            for (auto* p : {line->point1, line->point2})
                p->setAxes(x, y);
            line->point1->setCoords(1, 0.99);
            line->point2->setCoords(2, 0.99);
            line->setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
        } else {
            y->setScaleType(QCPAxis::stLogarithmic);
            auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
            ticker->setLogBase(10);
            ticker->setSubTickCount(0);
            y->setTicker(ticker);
            y->setNumberFormat("eb");
            y->setNumberPrecision(0);
            y->setRange(std::max(ymin / 5, 1e-300), 3);
            // Tolerance lines: one grey line when they agree within a factor 1.5, else one per mechanism.
            double lo = 1e300, hi = 0;
            for (const auto& t : tols)
                lo = std::min(lo, t.second), hi = std::max(hi, t.second);
            const bool one = !tols.empty() && hi <= lo * 1.5;
            std::vector<std::pair<QColor, double>> lines = one ? std::vector<std::pair<QColor, double>>{{QColor(90, 90, 90), hi}} : tols;
            for (const auto& [color, v] : lines) {
                if (!(v > 0))
                    continue;
                auto* line = new QCPItemStraightLine(m_plot);
                line->setClipAxisRect(rect);
                for (auto* p : {line->point1, line->point2})
                    p->setAxes(x, y);
                line->point1->setCoords(1, v);
                line->point2->setCoords(2, v);
                line->setPen(QPen(color, 1.2, Qt::DashLine));
            }
            if (!tols.empty()) {
                auto* legendLine = m_plot->addGraph(x, y);   // legend entry only
                legendLine->setPen(QPen(one ? QColor(90, 90, 90) : QColor(40, 40, 40), 1.2, Qt::DashLine));
                legendLine->setName(one ? tr("rank tolerance tol / s\u2081 = %1").arg(fmtNum(hi, 2))
                                        : tr("rank tolerance tol / s\u2081 (dashed, mechanism colour)"));
                legendLine->addToLegend(legend);
            }
        }
        if (!notes.isEmpty()) {
            auto* note = new QCPItemText(m_plot);
            note->setClipAxisRect(rect);
            note->position->setType(QCPItemPosition::ptAxisRectRatio);
            note->position->setAxisRect(rect);
            note->position->setCoords(0.02, cumulative ? 0.02 : 0.98);
            note->setPositionAlignment(Qt::AlignLeft | (cumulative ? Qt::AlignTop : Qt::AlignBottom));
            note->setTextAlignment(Qt::AlignLeft);
            note->setText(notes.join('\n'));
            note->setFont(plotFont(kTickPt));
            note->setColor(QColor(170, 20, 20));
        }
        m_plot->replot(QCustomPlot::rpQueuedReplot);
    }

    std::shared_ptr<const ExploreResult> m_result;
    QCheckBox *m_cumBox, *m_logxBox;
};

}  // namespace

ResultView* createSpectrumView(QWidget* parent) { return new SpectrumView(parent); }

}  // namespace attnscope::widgets
