// The views factory and the metrics CSV (the view classes live in one .cpp each).
#include "views.h"

#include <QStringList>
#include <cmath>

#include "analysis/explore.h"
#include "analysis/metric_table.h"
#include "depth_view.h"
#include "heads_view.h"
#include "plot_style.h"
#include "util/json_text.h"

namespace attnscope::widgets {

QList<ResultView*> createAllViews(QWidget* parent)
{
    return {createMapsView(parent),    createQueryView(parent),  createSpectrumView(parent),
            createEntropyView(parent), createMixingView(parent), createMetricsView(parent),
            createHeadsView(parent),   createDepthView(parent)};
}

namespace {

// RFC 4180 field: quoted when it holds a comma, quote or line break.
QString csvField(const QString& s)
{
    if (!s.contains(',') && !s.contains('"') && !s.contains('\n') && !s.contains('\r'))
        return s;
    QString q = s;
    q.replace('"', QStringLiteral("\"\""));
    return '"' + q + '"';
}

// Shortest text that reads back as the same double.
QString num(double v)
{
    if (!std::isfinite(v))
        return std::isnan(v) ? QStringLiteral("nan") : (v > 0 ? QStringLiteral("inf") : QStringLiteral("-inf"));
    return QString::number(v, 'g', QLocale::FloatingPointShortest);
}

}  // namespace

QString metricsCsv(const analysis::ExploreResult& result)
{
    const std::vector<const analysis::MetricEntry*> metrics = analysis::metrics_view_entries();
    QStringList header{"mechanism", "n"};
    for (const analysis::MetricEntry* e : metrics)
        header << QString::fromUtf8(e->metrics_csv_key().data(), static_cast<int>(e->metrics_csv_key().size()));
    header << "params" << "warnings" << "error";
    QString out = header.join(',') + '\n';
    for (const auto& o : result.outcomes) {
        const auto& r = o.result;
        QStringList row;
        row << QString::fromStdString(std::string(attention::to_string(r.mechanism))) << QString::number(result.n);
        for (const analysis::MetricEntry* e : metrics) {
            const std::optional<double> v = e->read(r);
            if (!v)
                row << QString();
            else
                row << (e->kind == analysis::MetricKind::count ? QString::number(static_cast<qlonglong>(*v)) : num(*v));
        }
        row << QString::fromStdString(json_text(r.params));
        QStringList warnings;
        for (const auto& w : r.warnings)
            warnings << QString::fromStdString(w);
        row << warnings.join("; ") << QString::fromStdString(o.error);
        for (QString& f : row)
            f = csvField(f);
        out += row.join(',') + '\n';
    }
    return out;
}

}  // namespace attnscope::widgets
