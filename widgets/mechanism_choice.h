#pragma once
// Which mechanisms the app computes (one check box per entry of the core's mechanism table, the default set
// ticked) and the options of the families without blocks (docs/maths.md 1.8): decay's gamma (RetNet's per-head
// default, or typed) and gated's gates (a tensor reference, or the file's `gates` attribute; as g or ln g).
// Private to widgets/: MechanismPanel holds one. It only collects choices; the core checks them.
#include <QJsonObject>
#include <QString>
#include <QWidget>
#include <vector>

#include "attention/options.h"

class QCheckBox;
class QDoubleSpinBox;
class QLineEdit;

namespace attnscope::widgets {

class MechanismChoice : public QWidget {
    Q_OBJECT
public:
    explicit MechanismChoice(QWidget* parent = nullptr);

    // The ticked mechanisms, in the table's order.
    std::vector<attention::Mechanism> mechanisms() const;
    // Sets decay's gamma and gated's gates in `o`; `fileGates`: the gates the file's attribute names (used
    // when the field is empty).
    void applyTo(attention::AttentionOptions& o, const std::string& fileGates) const;
    bool isChecked(attention::Mechanism m) const;

    QJsonObject saveState() const;
    void restoreState(const QJsonObject& state);   // keys absent: the defaults

signals:
    void changed();

private:
    std::vector<std::pair<attention::Mechanism, QCheckBox*>> m_boxes;
    QCheckBox* m_decayAuto = nullptr;
    QDoubleSpinBox* m_decay = nullptr;
    QLineEdit* m_gates = nullptr;
    QCheckBox* m_gatesLog = nullptr;
};

}  // namespace attnscope::widgets
