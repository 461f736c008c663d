// MetricsView: every metric per mechanism in a table (metrics down, mechanisms across), Copy as CSV
// (metricsCsv: one row per mechanism), and a vector rendering of the table for export.
#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonObject>
#include <QLabel>
#include <QPainter>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "analysis/explore.h"
#include "analysis/metric_table.h"
#include "plot_style.h"
#include "view_base.h"
#include "views.h"
#include "util/json_text.h"

namespace attnscope::widgets {
namespace {

QString paramsText(const nlohmann::ordered_json& params)
{
    QStringList parts;
    if (params.is_object())
        for (auto it = params.begin(); it != params.end(); ++it)
            parts << QString::fromStdString(it.key()) + '=' +
                         QString::fromStdString(it.value().is_string() ? it.value().get<std::string>() : json_text(it.value()));
    return parts.join(", ");
}

// What a count is out of in its cell ("r / N"): N, except for the past block's counts, whose block
// A[h:N, :h] has min(N - h, h) singular values (a past-block rank of 16 reads "16 / 256", not "/ 512").
long long countOutOf(const analysis::MetricEntry& e, const analysis::MechanismResult& r, long long n)
{
    if (e.group != analysis::MetricGroup::past_block)
        return n;
    const analysis::MetricEntry* rows = analysis::find_metric("past_block_rows");
    const analysis::MetricEntry* cols = analysis::find_metric("past_block_cols");
    const std::optional<double> a = rows ? rows->read(r) : std::nullopt;
    const std::optional<double> b = cols ? cols->read(r) : std::nullopt;
    return a && b ? static_cast<long long>(std::min(*a, *b)) : n;
}

class MetricsView : public ExploreView {
public:
    explicit MetricsView(QWidget* parent) : ExploreView(parent, QStringLiteral("metrics"), tr("Metrics"), {1000, 600})
    {
        auto* v = new QVBoxLayout(this);
        v->setContentsMargins(4, 4, 4, 4);
        auto* row = new QHBoxLayout;
        m_summary = new QLabel(this);
        m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
        row->addWidget(m_summary, 1);
        m_copy = new QPushButton(tr("Copy as CSV"), this);
        m_copy->setToolTip(tr("Copy every metric, one row per mechanism, as CSV (Ctrl+Shift+C)"));
        row->addWidget(m_copy);
        v->addLayout(row);
        m_table = new QTableWidget(this);
        m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
        m_table->setWordWrap(true);
        m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
        // Rows of one value each are of one height (a row sized to its contents is a line taller wherever a
        // label or value wraps, which reads as a gap in the table); params, warnings and error take their lines.
        m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
        m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
        v->addWidget(m_table, 1);
        auto* action = new QAction(tr("Copy as CSV"), this);
        action->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
        action->setShortcutContext(Qt::WidgetWithChildrenShortcut);
        addAction(action);
        connect(action, &QAction::triggered, this, [this] { copyCsv(); });
        connect(m_copy, &QPushButton::clicked, this, [this] { copyCsv(); });
        rebuild();
    }

    // The selected cell, by metric and mechanism (the table has no other state; column widths follow the view).
    QJsonObject saveState() const override
    {
        const int r = m_table->currentRow(), c = m_table->currentColumn();
        if (r < 0 || c < 0 || r >= m_rows.size() || c >= m_cols.size() || !m_table->currentItem() || !m_table->currentItem()->isSelected())
            return {};
        return QJsonObject{{"metric", m_rows[r]}, {"mechanism", m_cols[c]}};
    }
    void restoreState(const QJsonObject& s) override
    {
        const int r = m_rows.indexOf(s["metric"].toString()), c = m_cols.indexOf(s["mechanism"].toString());
        if (r >= 0 && c >= 0)
            m_table->setCurrentCell(r, c);
    }

    void renderTo(QPainter* painter, const QSize& size, double font_scale) override
    {
        painter->save();
        painter->fillRect(QRect(QPoint(0, 0), size), Qt::white);
        paintTable(painter, size, font_scale);
        painter->restore();
    }

    // Every row of the table, whatever the width: the height it takes when the view's aspect gives less.
    int exportHeightFor(int width, double font_scale, int fallback) override
    {
        const double needed = paintTable(nullptr, QSize(width, 1 << 20), font_scale);
        return std::max(fallback, static_cast<int>(std::ceil(needed)));
    }

private:
    // Lays out (and with a painter, draws) the heading and the table at `size`; returns the height it took.
    // Names, headers and cells wrap at word boundaries; a narrow figure gets narrower margins and a name
    // column of at most a third of the width. Rows that do not fit the height are not dropped in silence:
    // a last line says how many are left out (the export height, exportHeightFor, makes room for all).
    double paintTable(QPainter* painter, const QSize& size, double font_scale)
    {
        const QFont body = plotFont(kLabelPt * font_scale), bold = plotFont(kLabelPt * font_scale, true),
                    title = plotFont(kTitlePt * 1.1 * font_scale, true);
        const double margin = std::min(24 * font_scale, std::max(4.0, size.width() * 0.03));
        const double textW = std::max(10.0, size.width() - 2 * margin);
        double y = margin;
        const QString heading = m_result ? tr("Metrics per mechanism (N = %1, d = %2)").arg(m_result->n).arg(m_result->d)
                                         : tr("Metrics");
        const QRectF headingBox = QFontMetricsF(title).boundingRect(QRectF(0, 0, textW, 1e6), Qt::TextWordWrap, heading);
        if (painter) {
            painter->setPen(Qt::black);
            painter->setFont(title);
            painter->drawText(QRectF(margin, y, textW, headingBox.height()), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, heading);
        }
        y += headingBox.height() + QFontMetricsF(title).height() * 0.6;
        if (!m_result || m_cols.isEmpty()) {
            const QString text = tr("No result yet. Open activation files and assign Q and K.");
            if (painter) {
                painter->setFont(body);
                painter->drawText(QRectF(margin, y, textW, size.height() - y), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, text);
            }
            return y + QFontMetricsF(body).height() * 2 + margin;
        }
        const QFontMetricsF fm(body), fmb(bold);
        const double pad = 5 * font_scale;
        double nameW = 0;
        for (const QString& r : m_rows)
            nameW = std::max(nameW, fmb.horizontalAdvance(r));
        nameW = std::min(nameW + 16 * font_scale, textW / 3);
        const double tableW = textW;
        const double colW = (tableW - nameW) / m_cols.size();
        // Names break between words only; values (parameter lists) anywhere, since a long one may have none.
        const int nameFlags = Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap;
        const int flags = nameFlags | Qt::TextWrapAnywhere;
        auto wrapped = [](const QFontMetricsF& f, double w, const QString& text, int how) {
            return f.boundingRect(QRectF(0, 0, std::max(1.0, w), 1e6), how, text).height();
        };
        auto rowHeight = [&](const QString& name, const QStringList& cells, const QFontMetricsF& f) {
            double h = std::max(f.height(), name.isEmpty() ? 0.0 : wrapped(fmb, nameW - pad, name, nameFlags));
            for (const QString& c : cells)
                h = std::max(h, wrapped(f, colW - 2 * pad, c, flags));
            return h + 2 * pad;
        };
        // Header.
        const double hh = rowHeight(QString(), m_cols, fmb);
        if (painter) {
            painter->fillRect(QRectF(margin, y, tableW, hh), QColor(235, 238, 243));
            painter->setFont(bold);
            for (int c = 0; c < m_cols.size(); ++c) {
                painter->setPen(m_colColors[c].darker(120));
                painter->drawText(QRectF(margin + nameW + c * colW + pad, y + pad, colW - 2 * pad, hh - 2 * pad), flags, m_cols[c]);
            }
        }
        y += hh;
        if (painter) {
            painter->setPen(QPen(QColor(60, 60, 60), 1));
            painter->drawLine(QPointF(margin, y), QPointF(margin + tableW, y));
        }
        const double noteH = fm.height() * 1.5;
        for (int r = 0; r < m_rows.size(); ++r) {
            QStringList cells;
            for (int c = 0; c < m_cols.size(); ++c)
                cells << m_cells[r][c];
            const double h = rowHeight(m_rows[r], cells, fm);
            const bool last = r + 1 == m_rows.size();
            if (y + h + (last ? 0 : noteH) > size.height() - margin / 2) {
                if (painter) {
                    painter->setPen(QColor(160, 20, 20));
                    painter->setFont(body);
                    painter->drawText(QRectF(margin, y + pad, tableW, noteH), Qt::AlignLeft | Qt::AlignTop,
                                      tr("%n more row(s) left out: a taller figure shows them (Copy as CSV has all)", nullptr,
                                         static_cast<int>(m_rows.size() - r)));
                }
                return y + noteH + margin / 2;
            }
            if (painter) {
                if (r % 2 == 1)
                    painter->fillRect(QRectF(margin, y, tableW, h), QColor(248, 248, 248));
                painter->setPen(Qt::black);
                painter->setFont(bold);
                painter->drawText(QRectF(margin + pad, y + pad, nameW - pad, h - 2 * pad), nameFlags, m_rows[r]);
                painter->setFont(body);
                for (int c = 0; c < m_cols.size(); ++c) {
                    const bool alarm = (m_rows[r] == tr("error") || m_rows[r] == tr("warnings")) && cells[c] != QStringLiteral("\u2014");
                    painter->setPen(alarm ? QColor(160, 20, 20) : Qt::black);
                    painter->drawText(QRectF(margin + nameW + c * colW + pad, y + pad, colW - 2 * pad, h - 2 * pad), flags, cells[c]);
                }
            }
            y += h;
        }
        if (painter) {
            painter->setPen(QPen(QColor(60, 60, 60), 1));
            painter->drawLine(QPointF(margin, y), QPointF(margin + tableW, y));
        }
        return y + margin / 2;
    }

    void copyCsv()
    {
        if (!m_result)
            return;
        QApplication::clipboard()->setText(metricsCsv(*m_result));
        emit statusMessage(tr("Metrics copied as CSV (%1 mechanisms)").arg(m_result->outcomes.size()));
    }

    void rebuild() override
    {
        m_rows.clear();
        m_cols.clear();
        m_colColors.clear();
        m_cells.clear();
        m_table->clear();
        m_copy->setEnabled(bool(m_result));
        if (!m_result) {
            m_summary->setText(tr("No result yet. Open activation files and assign Q and K to see the metrics."));
            m_table->setRowCount(0);
            m_table->setColumnCount(0);
            return;
        }
        m_summary->setText(tr("N = %1 tokens, d = %2 features, computed in %3 s")
                               .arg(m_result->n)
                               .arg(m_result->d)
                               .arg(fmtNum(m_result->seconds)));
        // One row per metric of the table's Metrics view (analysis/metric_table.h), then what shaped the result.
        const std::vector<const analysis::MetricEntry*> metrics = analysis::metrics_view_entries();
        for (const analysis::MetricEntry* e : metrics)
            m_rows << QString::fromUtf8(e->label.data(), static_cast<int>(e->label.size()));
        m_rows << tr("params") << tr("warnings") << tr("error");
        for (const auto& o : m_result->outcomes) {
            m_cols << mechanismLabel(o.result.mechanism);
            m_colColors << mechanismColor(o.result.mechanism);
        }
        m_cells.assign(m_rows.size(), QStringList());
        const QString na = QStringLiteral("\u2014");
        for (const auto& o : m_result->outcomes) {
            const auto& r = o.result;
            QStringList v;
            for (const analysis::MetricEntry* e : metrics) {
                const std::optional<double> x = e->read(r);
                if (x && e->kind == analysis::MetricKind::count)
                    v << tr("%1 / %2").arg(static_cast<qlonglong>(*x)).arg(countOutOf(*e, r, static_cast<long long>(m_result->n)));
                else if (x)
                    v << fmtNum(*x, e->view_digits);
                else   // no entropy without an error: it is undefined (an entry < 0, docs/maths.md section 2)
                    v << (e->group == analysis::MetricGroup::entropy && o.error.empty() ? tr("undefined") : na);
            }
            v << paramsText(r.params);
            QStringList w;
            for (const auto& s : r.warnings)
                w << QString::fromStdString(s);
            v << (w.isEmpty() ? na : w.join("\n")) << (o.error.empty() ? na : QString::fromStdString(o.error));
            for (int i = 0; i < m_rows.size(); ++i)
                m_cells[i] << v[i];
        }
        m_table->setRowCount(m_rows.size());
        m_table->setColumnCount(m_cols.size());
        m_table->setHorizontalHeaderLabels(m_cols);
        m_table->setVerticalHeaderLabels(m_rows);
        for (int r = 0; r < m_rows.size(); ++r)
            for (int c = 0; c < m_cols.size(); ++c) {
                auto* item = new QTableWidgetItem(m_cells[r][c]);
                item->setToolTip(m_cells[r][c]);
                if (m_rows[r] == tr("error") && m_cells[r][c] != na)
                    item->setForeground(QColor(160, 20, 20));
                m_table->setItem(r, c, item);
            }
        for (int r = static_cast<int>(metrics.size()); r < m_rows.size(); ++r)
            m_table->verticalHeader()->setSectionResizeMode(r, QHeaderView::ResizeToContents);
    }

    QLabel* m_summary;
    QPushButton* m_copy;
    QTableWidget* m_table;
    QStringList m_rows, m_cols;
    QList<QColor> m_colColors;
    std::vector<QStringList> m_cells;
};

}  // namespace

ResultView* createMetricsView(QWidget* parent) { return new MetricsView(parent); }

}  // namespace attnscope::widgets
