// The views factory and the metrics CSV (the view classes live in one .cpp each).
#include "views.h"

#include <QStringList>
#include <cmath>

#include "analysis/explore.h"
#include "plot_style.h"
#include "util/json_text.h"

namespace attnscope::widgets {

QList<ResultView*> createAllViews(QWidget* parent)
{
    return {createMapsView(parent),    createQueryView(parent),  createSpectrumView(parent),
            createEntropyView(parent), createMixingView(parent), createMetricsView(parent)};
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
    const QStringList header{"mechanism",    "n",           "rank",           "relative_rank",  "tol",
                             "s1",           "effective_rank", "stable_rank", "entropy_mean",   "entropy_std",
                             "entropy_min",  "entropy_max", "entropy_normalized_mean", "params", "warnings", "error"};
    QString out = header.join(',') + '\n';
    for (const auto& o : result.outcomes) {
        const auto& r = o.result;
        QStringList row;
        row << QString::fromStdString(std::string(attention::to_string(r.mechanism))) << QString::number(result.n);
        if (r.spectrum) {
            const auto& s = *r.spectrum;
            row << QString::number(s.rank) << num(s.relative_rank) << num(s.tol)
                << (s.singular_values.empty() ? QString() : num(s.singular_values.front())) << num(s.effective_rank)
                << num(s.stable_rank);
        } else {
            row << "" << "" << "" << "" << "" << "";
        }
        if (r.entropy) {
            const auto& e = *r.entropy;
            row << num(e.mean) << num(e.std) << num(e.min) << num(e.max) << num(e.normalized_mean);
        } else {
            row << "" << "" << "" << "" << "";
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
