#pragma once
// Small Qt helpers shared by the docks, dialogs and views (private to widgets/): size lists as typed by
// the user ("16x16"), fields made in one call (spin boxes, combo boxes, a row of widgets, a problem
// label), and restoring a control from a view's saved state. QCustomPlot helpers are in plot_style.h.
#include <QJsonObject>
#include <QList>
#include <QString>
#include <QVariant>
#include <initializer_list>
#include <utility>
#include <vector>

#include <Eigen/Core>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QHBoxLayout;
class QLabel;
class QSpinBox;
class QWidget;

namespace attnscope::widgets {

// Sizes typed as "16x16", "16, 16", "4×4" or "2 8 8": positive integers; empty when any part is not one.
std::vector<Eigen::Index> parseSizes(const QString& text);
// The sizes joined by `separator` ("16x16"); parseSizes reads it back.
QString sizesText(const std::vector<Eigen::Index>& sizes, const QString& separator = QStringLiteral("x"));

// A widget holding `widgets` side by side without margins: several fields in one form row.
QWidget* widgetRow(QWidget* parent, std::initializer_list<QWidget*> widgets);
// A row layout of `first` and then each field after its label (the labels are made with `parent`).
QHBoxLayout* labelledRow(QWidget* parent, QWidget* first, std::initializer_list<std::pair<QString, QWidget*>> fields);
// Adds the row "LABEL  [field, stretched][button]" to `form`; the label's & shortcut focuses `field`.
void addFieldWithButton(QFormLayout* form, QWidget* parent, const QString& label, QWidget* field, QWidget* button);

QSpinBox* spinBox(QWidget* parent, int minimum, int maximum, int value, const QString& toolTip = QString());
QDoubleSpinBox* doubleSpinBox(QWidget* parent, double minimum, double maximum, int decimals, double value,
                              const QString& toolTip = QString());
// A combo box of (text, data) items.
QComboBox* comboBox(QWidget* parent, const QList<std::pair<QString, QVariant>>& items, const QString& toolTip = QString());
// A hidden, word-wrapped label in `color` that says what is wrong with the input.
QLabel* problemLabel(QWidget* parent, const QString& color);

// Saved state (sessions): each sets the control from state[key] when the key holds a value it knows,
// and leaves it alone otherwise. restoreText matches an item's text, restoreData its (string) data.
void restoreChecked(QCheckBox* box, const QJsonObject& state, const char* key);
void restoreText(QComboBox* box, const QJsonObject& state, const char* key);
void restoreData(QComboBox* box, const QJsonObject& state, const char* key);

// The controls a view keeps in its saved state, each under its key: a check box as a boolean, a combo
// box as its item's (string) data or its text. restore() sets them as above, their signals blocked.
class SavedControls {
public:
    void add(const char* key, QCheckBox* box) { m_entries.push_back({key, box, nullptr, false}); }
    void addByData(const char* key, QComboBox* box) { m_entries.push_back({key, nullptr, box, false}); }
    void addByText(const char* key, QComboBox* box) { m_entries.push_back({key, nullptr, box, true}); }
    bool empty() const { return m_entries.empty(); }
    QJsonObject save() const;
    void restore(const QJsonObject& state) const;

private:
    struct Entry {
        const char* key;
        QCheckBox* check;
        QComboBox* combo;
        bool byText;
    };
    std::vector<Entry> m_entries;
};

}  // namespace attnscope::widgets
