#pragma once
// The mechanism panel: every option of docs/cli.md "Mechanism options" (softmax scale and
// causal; feature map with FAVOR+ features and seed; MHLA blocks by count, chunk or grid with block grid
// and token order; mixing preset with sigma / threshold or a mixing matrix from a file; normalisation).
// It only collects options: impossible combinations are explained inline (the core still decides and
// reports its own error per mechanism).
#include <QJsonObject>
#include <QStringList>
#include <QWidget>
#include <vector>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "analysis/file_defaults.h"
#include "attention/options.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QGroupBox;
class QPushButton;
class QFormLayout;

namespace attnscope::widgets {

class MechanismChoice;

class MechanismPanel : public QWidget {
    Q_OBJECT
public:
    explicit MechanismPanel(QWidget* parent = nullptr);

    // The options, without a mixing matrix from a file (see mixingFile(): the job loads it off the GUI thread).
    // When the grid fields are empty in grid mode, the selection's token grid is used.
    attention::AttentionOptions options() const;
    // The mechanisms ticked (the default set of the core's table unless the user or a session chose).
    std::vector<attention::Mechanism> mechanisms() const;
    // FILE[:DATASET] of the mixing matrix when "matrix from file" is chosen, else empty.
    QString mixingFile() const;
    // The options the user chose, as the core's rule names them: every option except those the file's attributes
    // set and the panel still holds as set (those may differ by layer: the Depth view takes each layer's own).
    analysis::ExplicitChoices explicitChoices() const;

    // A new queries' tensor: the options its file's attributes give through the core's rule
    // (analysis::resolve_file_defaults, docs/cli.md): causal, the block grid of a grid, the mixing. What
    // the file does not set goes back to its default, so nothing of the previous file stays; the block mode
    // is picked again by setContext(). Emits nothing (the window recomputes).
    void applyFileDefaults(const attention::AttentionOptions& resolved, const nlohmann::ordered_json& fromFile);
    // No file's defaults apply (a session's options, or no data).
    void forgetFileDefaults();
    // The program's defaults and no file's note (no data left: every file was closed). Emits nothing.
    void resetToDefaults();
    // What the selection provides: N tokens (after prefix tokens) and its token grid (may be empty). Until
    // the user picks a block mode, a grid gives MHLA grid blocks unless `gridBlocks` is false (a grid
    // guessed from N is for display only: the command line's 1-D blocks stay).
    void setContext(qint64 tokens, const std::vector<Eigen::Index>& tokenGrid, bool gridBlocks = true);
    // The queries' feature dimension d (-1: unknown): while the scale is automatic its field shows the
    // scale in use, 1/sqrt(d).
    void setFeatureDim(qint64 d);
    // Why some options cannot work together (shown inline); empty when all is well.
    QStringList problems() const;

    QJsonObject saveState() const;
    void restoreState(const QJsonObject& state);   // emits changed() once

signals:
    void changed();

private:
    QGroupBox* buildCommonBox();
    QGroupBox* buildFeatureMapBox();
    QGroupBox* buildMhlaBox();
    void addBlockRows(QGroupBox* box);
    void addMixingRows(QGroupBox* box);
    void connectFields();
    void updateEnabled();
    void updateProblems();
    void chooseMixingFile();
    void fillMixingDatasets();
    std::vector<Eigen::Index> effectiveGrid() const;
    void emitChanged();
    void updateFileNote();
    bool keptFromFile(const char* key, const attention::AttentionOptions& now) const;
    void restoreFields(const QJsonObject& state);   // restoreState without emitting

    qint64 m_tokens = -1;
    qint64 m_featureDim = -1;
    std::vector<Eigen::Index> m_selectionGrid;
    bool m_restoring = false;
    bool m_blockModeChosen = false;   // the user (or a session) chose the block mode
    std::vector<Eigen::Index> m_fileBlockGrid;   // the file's block_grid attribute (applyFileDefaults)
    nlohmann::ordered_json m_fromFile = nlohmann::ordered_json::object();   // what the file's attributes set
    attention::AttentionOptions m_fileOptions;   // the options they set it to
    QLabel* m_fileNote = nullptr;                // "From the file's attributes: causal, ..."
    QJsonObject m_defaults;                      // saveState() of the program's defaults (no block mode)

    MechanismChoice* m_choice = nullptr;   // which mechanisms, decay's gamma, gated's gates
    QCheckBox* m_scaleAuto = nullptr;
    QDoubleSpinBox* m_scale = nullptr;
    QCheckBox* m_causal = nullptr;
    QComboBox* m_featureMap = nullptr;
    QSpinBox* m_favorFeatures = nullptr;
    QSpinBox* m_seed = nullptr;
    QComboBox* m_blockMode = nullptr;
    QSpinBox* m_blocks = nullptr;
    QSpinBox* m_chunk = nullptr;
    QLineEdit* m_grid = nullptr;
    QLineEdit* m_blockGrid = nullptr;
    QComboBox* m_tokenOrder = nullptr;
    QComboBox* m_mixing = nullptr;
    QDoubleSpinBox* m_sigma = nullptr;
    QDoubleSpinBox* m_threshold = nullptr;
    QLineEdit* m_mixingPath = nullptr;
    QPushButton* m_mixingBrowse = nullptr;
    QComboBox* m_mixingDataset = nullptr;
    QComboBox* m_normalize = nullptr;
    QLabel* m_problems = nullptr;
    QWidget* m_fileRow = nullptr;               // the mixing file row (shown for "matrix from file")
    QFormLayout* m_mixingForm = nullptr;        // the MHLA box's form
};

}  // namespace attnscope::widgets
