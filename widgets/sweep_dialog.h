#pragma once
// The sweep dialog (Analysis > Sweep...): what `attnscope sweep` asks, on the window's current
// queries, keys, selection and mechanism options or on synthetic data. It collects parameters
// (SweepParams) and checks them against the data while they are edited: sweepSpec() turns them into the
// core's SweepSpec and the core's plan_sweep (headers only) accepts it or says why not, in the app's words
// (sweepProblemText); Run is enabled only for a sweep that can run. It proposes values that fit the data
// (the core's sweep_value_choice). The main window runs the sweep in the background (core JobRunner +
// run_sweep) and shows the result in the Curves tab.
#include <QDialog>
#include <QList>
#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <optional>

#include "analysis/sweep.h"

class QCheckBox;
class QComboBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QRadioButton;
class QSpinBox;

namespace attnscope::widgets {

// The default mechanisms' names (attention/mechanisms.h): the sweep dialog's initial choice.
QStringList defaultMechanismNames();

// The dialog's parameters; sessions store the last ones ("sweep_dialog") so that the dialog opens with them
// again (they never start a sweep by themselves).
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
    bool allInputs = false;                    // every index of the queries' other index axes (b ...) as its
                                               // own unit (`--at b=all`) instead of the selection's
    QStringList mechanisms = defaultMechanismNames();
    QString metric = QStringLiteral("rank");   // what the Curves tab shows first

    QJsonObject toJson() const;
    static SweepParams fromJson(const QJsonObject& o);   // missing keys keep their defaults
};

// The core spec: synthetic data, or `current` (the window's Q/K and selection; null when none is
// assigned), with the mechanism `options` (for synthetic data with 1-D blocks: params.blocks blocks).
// Throws std::invalid_argument naming the field at fault (an empty list, no inputs, ...).
analysis::SweepSpec sweepSpec(const SweepParams& params, const analysis::TensorSource* current,
                              const attention::AttentionOptions& options);

// The core's refusal of a sweep (plan_sweep, make_blocks, the readers) in the app's words: what the
// command line calls "--vary n=64" or "--subsample crop" is "N = 64" and "centred crops" here.
QString sweepProblemText(const QString& coreMessage);

// What the dialog checks its values against: the window's data and options as a sweep would run on them.
struct SweepDataContext {
    bool haveData = false;                          // queries and keys are assigned
    std::optional<analysis::TensorSource> source;   // those and the selection; absent when there are none or
                                                    // the selection is wrong (then `problem` says why)
    QString problem;
    attention::AttentionOptions options;            // the mechanism panel's options
};

class SweepDialog : public QDialog {
    Q_OBJECT
public:
    // Checks every change against `data` (a short moment after it, and before Run closes the dialog);
    // parameters that do not fit the data are replaced by values that do when the dialog opens.
    SweepDialog(const SweepParams& initial, SweepDataContext data, QWidget* parent = nullptr);
    // Without the data to check against: `haveData` says whether the current queries and keys may be chosen;
    // their sweeps are checked only for what needs no data.
    SweepDialog(const SweepParams& initial, bool haveData, QWidget* parent = nullptr);
    SweepParams params() const;

    // Checks the parameters now; returns the problem shown ("" when the sweep can run).
    QString validate();
    QString problem() const { return m_problemText; }
    bool canRun() const;        // Run is enabled
    QString hint() const;       // what fits the data, as shown under the values

private:
    void build(const SweepParams& initial);
    QGroupBox* buildDataBox(const SweepParams& initial);
    QGroupBox* buildSweepBox(const SweepParams& initial);
    void updateEnabled();
    void kindChanged();
    void fitToData(bool preferCrop);
    void useProposal();
    void checkAndAccept();
    // The parameters as they would run (draws 1 unless random subsets).
    SweepParams effectiveParams() const;
    // The spec of `p` on the dialog's data; throws std::invalid_argument when there are none to sweep.
    analysis::SweepSpec specOf(const SweepParams& p, bool* checkable) const;

    SweepDataContext m_data;
    QRadioButton* m_current = nullptr;
    QRadioButton* m_synth = nullptr;
    QComboBox* m_kind = nullptr;
    QSpinBox* m_d = nullptr;
    QSpinBox* m_seeds = nullptr;
    QSpinBox* m_n = nullptr;
    QSpinBox* m_blocks = nullptr;
    QComboBox* m_vary = nullptr;
    QLineEdit* m_values = nullptr;
    QPushButton* m_propose = nullptr;
    QLabel* m_hint = nullptr;
    QComboBox* m_subsample = nullptr;
    QSpinBox* m_draws = nullptr;
    QSpinBox* m_seed = nullptr;
    QComboBox* m_inputs = nullptr;
    QComboBox* m_heads = nullptr;
    QList<QCheckBox*> m_mech;                  // one per mechanism, in attention::mechanism_names() order
    QComboBox* m_metric = nullptr;
    QLabel* m_problem = nullptr;
    QPushButton* m_run = nullptr;
    QTimer m_check;                            // validates a moment after the last change
    QString m_problemText;
    std::vector<Eigen::Index> m_proposed;      // values that fit the data (sweep_value_choice)
};

}  // namespace attnscope::widgets
