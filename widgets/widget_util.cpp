// Small Qt helpers shared by the docks, dialogs and views; see widget_util.h.
#include "widget_util.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QRegularExpression>
#include <QSpinBox>
#include <QStringList>

namespace attnscope::widgets {

std::vector<Eigen::Index> parseSizes(const QString& text)
{
    static const QRegularExpression sep(QStringLiteral("[x×,\\s]+"));
    std::vector<Eigen::Index> out;
    for (const QString& part : text.split(sep, Qt::SkipEmptyParts)) {
        bool ok = false;
        const qint64 v = part.toLongLong(&ok);
        if (!ok || v < 1)
            return {};
        out.push_back(v);
    }
    return out;
}

QString sizesText(const std::vector<Eigen::Index>& sizes, const QString& separator)
{
    QStringList parts;
    for (auto x : sizes)
        parts << QString::number(qint64(x));
    return parts.join(separator);
}

QWidget* widgetRow(QWidget* parent, std::initializer_list<QWidget*> widgets)
{
    auto* w = new QWidget(parent);
    auto* l = new QHBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    for (QWidget* x : widgets)
        l->addWidget(x);
    return w;
}

QHBoxLayout* labelledRow(QWidget* parent, QWidget* first, std::initializer_list<std::pair<QString, QWidget*>> fields)
{
    auto* row = new QHBoxLayout;
    row->addWidget(first);
    for (const auto& [label, field] : fields) {
        row->addWidget(new QLabel(label, parent));
        row->addWidget(field);
    }
    return row;
}

void addFieldWithButton(QFormLayout* form, QWidget* parent, const QString& label, QWidget* field, QWidget* button)
{
    auto* row = new QHBoxLayout;
    row->addWidget(field, 1);
    row->addWidget(button);
    auto* buddy = new QLabel(label, parent);
    buddy->setBuddy(field);
    form->addRow(buddy, row);
}

QSpinBox* spinBox(QWidget* parent, int minimum, int maximum, int value, const QString& toolTip)
{
    auto* box = new QSpinBox(parent);
    box->setRange(minimum, maximum);
    box->setValue(value);
    box->setToolTip(toolTip);
    return box;
}

QDoubleSpinBox* doubleSpinBox(QWidget* parent, double minimum, double maximum, int decimals, double value, const QString& toolTip)
{
    auto* box = new QDoubleSpinBox(parent);
    // Decimals first: the range and the value are rounded to them.
    box->setDecimals(decimals);
    box->setRange(minimum, maximum);
    box->setValue(value);
    box->setToolTip(toolTip);
    return box;
}

QComboBox* comboBox(QWidget* parent, const QList<std::pair<QString, QVariant>>& items, const QString& toolTip)
{
    auto* box = new QComboBox(parent);
    for (const auto& [text, data] : items)
        box->addItem(text, data);
    box->setToolTip(toolTip);
    return box;
}

QLabel* problemLabel(QWidget* parent, const QString& color)
{
    auto* label = new QLabel(parent);
    label->setWordWrap(true);
    label->setStyleSheet(QStringLiteral("color: %1;").arg(color));
    label->hide();
    return label;
}

void restoreChecked(QCheckBox* box, const QJsonObject& state, const char* key)
{
    const QJsonValue v = state.value(QLatin1String(key));
    if (!v.isUndefined())
        box->setChecked(v.toBool());
}

void restoreText(QComboBox* box, const QJsonObject& state, const char* key)
{
    const QJsonValue v = state.value(QLatin1String(key));
    const int i = v.isString() ? box->findText(v.toString()) : -1;
    if (i >= 0)
        box->setCurrentIndex(i);
}

void restoreData(QComboBox* box, const QJsonObject& state, const char* key)
{
    const QJsonValue v = state.value(QLatin1String(key));
    const int i = v.isString() ? box->findData(v.toString()) : -1;
    if (i >= 0)
        box->setCurrentIndex(i);
}

QJsonObject SavedControls::save() const
{
    QJsonObject state;
    for (const Entry& e : m_entries) {
        const QString key = QLatin1String(e.key);
        if (e.check)
            state[key] = e.check->isChecked();
        else
            state[key] = e.byText ? e.combo->currentText() : e.combo->currentData().toString();
    }
    return state;
}

void SavedControls::restore(const QJsonObject& state) const
{
    for (const Entry& e : m_entries) {
        QWidget* control = e.check ? static_cast<QWidget*>(e.check) : e.combo;
        const QSignalBlocker blocker(control);
        if (e.check)
            restoreChecked(e.check, state, e.key);
        else if (e.byText)
            restoreText(e.combo, state, e.key);
        else
            restoreData(e.combo, state, e.key);
    }
}

}  // namespace attnscope::widgets
