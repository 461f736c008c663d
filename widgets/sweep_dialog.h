#pragma once
// The sweep dialog (Analysis > Sweep...): what `attnscope sweep` asks, on the window's current
// queries, keys, selection and mechanism options or on synthetic data. It only collects parameters
// (SweepParams); sweepSpec() turns them into the core's SweepSpec and the main window runs it in the
// background (core JobRunner + run_sweep) and shows the result in the Curves tab.
#include <QDialog>
#include <QList>
#include <QJsonObject>
#include <QString>
#include <QStringList>

#include "analysis/sweep.h"

class QCheckBox;
class QComboBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QRadioButton;
class QSpinBox;

namespace attnscope::widgets {

// The dialog's parameters; also stored in sessions ("sweep"), so a reopened session recomputes the sweep.
struct SweepParams {
    bool synthetic = false;                    // synthetic data instead of the current Q/K
    QString synthKind = QStringLiteral("local1d");
    int d = 16;                                // synthetic features per head
    int seeds = 3;                             // synthetic draws (seeds 0..seeds-1 offset by `seed`)
    int n = 256;                               // synthetic tokens for vary m
    int blocks = 4;                            // synthetic data: MHLA block count M for vary n (the panel's
                                               // block layout describes the loaded data, not synthetic tokens)
    QChar vary = QLatin1Char('n');             // 'n' or 'm'
    QString values = QStringLiteral("64,128,256,512");   // comma list of N, or of M (block-grid sides for grid data)
    QString subsample = QStringLiteral("first");          // first | random | crop (vary n on loaded data)
    int draws = 1;                             // random subsets per N
    qint64 seed = 0;                           // subsample seed and synthetic seed offset
    bool allHeads = false;                     // every head of the 'h' axis instead of the current one
    QStringList mechanisms = {QStringLiteral("softmax"), QStringLiteral("linear"), QStringLiteral("mhla")};
    QString metric = QStringLiteral("rank");   // what the Curves tab shows first

    QJsonObject toJson() const;
    static SweepParams fromJson(const QJsonObject& o);   // missing keys keep their defaults
};

// The core spec: synthetic data, or `current` (the window's Q/K and selection; null when none is
// assigned), with the mechanism `options` (for synthetic data with 1-D blocks: params.blocks blocks).
// Throws std::invalid_argument naming the field at fault (an empty list, no inputs, ...).
analysis::SweepSpec sweepSpec(const SweepParams& params, const analysis::TensorSource* current,
                              const attention::AttentionOptions& options);

class SweepDialog : public QDialog {
    Q_OBJECT
public:
    // `haveData`: the window has queries and keys (else only synthetic data is offered).
    SweepDialog(const SweepParams& initial, bool haveData, QWidget* parent = nullptr);
    SweepParams params() const;

private:
    QGroupBox* buildDataBox(const SweepParams& initial);
    QGroupBox* buildSweepBox(const SweepParams& initial);
    void updateEnabled();
    void checkAndAccept();

    bool m_haveData = false;
    QRadioButton* m_current = nullptr;
    QRadioButton* m_synth = nullptr;
    QComboBox* m_kind = nullptr;
    QSpinBox* m_d = nullptr;
    QSpinBox* m_seeds = nullptr;
    QSpinBox* m_n = nullptr;
    QSpinBox* m_blocks = nullptr;
    QComboBox* m_vary = nullptr;
    QLineEdit* m_values = nullptr;
    QComboBox* m_subsample = nullptr;
    QSpinBox* m_draws = nullptr;
    QSpinBox* m_seed = nullptr;
    QComboBox* m_heads = nullptr;
    QList<QCheckBox*> m_mech;                  // one per mechanism, in attention::mechanism_names() order
    QComboBox* m_metric = nullptr;
    QLabel* m_problem = nullptr;
};

}  // namespace attnscope::widgets
