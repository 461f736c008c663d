// The mechanisms to compute and the families' own options; see mechanism_choice.h.
#include "mechanism_choice.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QJsonArray>
#include <QLineEdit>
#include <QSignalBlocker>

#include "attention/mechanisms.h"
#include "widget_util.h"

namespace attnscope::widgets {

namespace {

QString text(std::string_view s) { return QString::fromUtf8(s.data(), qsizetype(s.size())); }

}  // namespace

MechanismChoice::MechanismChoice(QWidget* parent) : QWidget(parent)
{
    auto* form = new QFormLayout(this);
    form->setRowWrapPolicy(QFormLayout::WrapLongRows);
    form->setContentsMargins(0, 0, 0, 0);
    QList<QWidget*> boxes;
    for (const attention::MechanismInfo& info : attention::mechanism_table()) {
        auto* box = new QCheckBox(text(info.label), this);
        box->setChecked(info.default_set);
        box->setToolTip(tr("Compute %1: %2%3 (--mechanism %4)")
                            .arg(text(info.label), text(info.summary), info.causal_only ? tr("; causal only") : QString(),
                                 text(info.name)));
        connect(box, &QCheckBox::toggled, this, &MechanismChoice::changed);
        m_boxes.emplace_back(info.id, box);
        boxes << box;
    }
    auto* rows = new QWidget(this);
    auto* grid = new QGridLayout(rows);
    grid->setContentsMargins(0, 0, 0, 0);
    for (int i = 0; i < boxes.size(); ++i)
        grid->addWidget(boxes[i], i / 2, i % 2);   // two per row: the dock stays narrow
    form->addRow(rows);

    m_decayAuto = new QCheckBox(tr("per head"), this);
    m_decayAuto->setChecked(true);
    m_decayAuto->setToolTip(tr("RetNet's schedule: gamma = 1 \u2212 2^(\u22125 \u2212 h) for query head h; untick to type one (--decay)"));
    m_decay = doubleSpinBox(this, 1e-6, 1.0, 6, 0.96875, tr("decay: gamma in (0, 1], weight gamma^distance (--decay)"));
    m_decay->setSingleStep(0.01);
    form->addRow(tr("decay \u03b3"), widgetRow(this, {m_decayAuto, m_decay}));
    m_gates = new QLineEdit(this);
    m_gates->setPlaceholderText(tr("the file's gates attribute"));
    m_gates->setToolTip(tr("gated: the gates, one per token and head, FILE[:NAME] laid out like the queries without "
                           "their feature axis; empty: the queries' file's gates attribute (--gates)"));
    m_gatesLog = new QCheckBox(tr("ln g"), this);
    m_gatesLog->setToolTip(tr("The tensor holds ln g, as Mamba-2's dt \u00b7 A (--gates-log)"));
    form->addRow(tr("gated gates"), widgetRow(this, {m_gates, m_gatesLog}));
    connect(m_decayAuto, &QCheckBox::toggled, this, [this](bool on) {
        m_decay->setEnabled(!on);
        emit changed();
    });
    m_decay->setEnabled(false);
    connect(m_decay, &QDoubleSpinBox::valueChanged, this, &MechanismChoice::changed);
    connect(m_gates, &QLineEdit::editingFinished, this, &MechanismChoice::changed);
    connect(m_gatesLog, &QCheckBox::toggled, this, &MechanismChoice::changed);
}

std::vector<attention::Mechanism> MechanismChoice::mechanisms() const
{
    std::vector<attention::Mechanism> out;
    for (const auto& [m, box] : m_boxes)
        if (box->isChecked())
            out.push_back(m);
    return out;
}

bool MechanismChoice::isChecked(attention::Mechanism m) const
{
    for (const auto& [id, box] : m_boxes)
        if (id == m)
            return box->isChecked();
    return false;
}

void MechanismChoice::applyTo(attention::AttentionOptions& o, const std::string& fileGates) const
{
    if (!m_decayAuto->isChecked())
        o.decay.gamma = m_decay->value();
    const QString gates = m_gates->text().trimmed();
    o.gates.source = gates.isEmpty() ? fileGates : gates.toStdString();
    o.gates.log = m_gatesLog->isChecked();
}

QJsonObject MechanismChoice::saveState() const
{
    QJsonObject o;
    QJsonArray names;
    for (const attention::Mechanism m : mechanisms())
        names.append(text(attention::to_string(m)));
    o[QStringLiteral("mechanisms")] = names;
    o[QStringLiteral("decay")] = m_decayAuto->isChecked() ? QJsonValue() : QJsonValue(m_decay->value());
    o[QStringLiteral("gates")] = m_gates->text().trimmed();
    o[QStringLiteral("gates_log")] = m_gatesLog->isChecked();
    return o;
}

void MechanismChoice::restoreState(const QJsonObject& s)
{
    const QSignalBlocker block(this);
    const QJsonValue names = s.value(QStringLiteral("mechanisms"));
    for (const auto& [m, box] : m_boxes) {
        const QSignalBlocker b(box);
        box->setChecked(names.isArray() ? names.toArray().contains(text(attention::to_string(m)))
                                        : attention::mechanism_info(m).default_set);
    }
    const QJsonValue decay = s.value(QStringLiteral("decay"));
    m_decayAuto->setChecked(!decay.isDouble());
    if (decay.isDouble())
        m_decay->setValue(decay.toDouble());
    m_gates->setText(s.value(QStringLiteral("gates")).toString());
    m_gatesLog->setChecked(s.value(QStringLiteral("gates_log")).toBool());
}

}  // namespace attnscope::widgets
