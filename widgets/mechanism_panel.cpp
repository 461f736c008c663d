// The mechanism panel: its fields, the options they make, and the problems shown inline; see mechanism_panel.h.
#include "mechanism_panel.h"

#include <QCheckBox>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <cmath>

#include "analysis/file_defaults.h"
#include "attention/mixing.h"
#include "attention/mechanisms.h"
#include "attention/operator.h"
#include "io/tensor_file.h"
#include "mechanism_choice.h"
#include "widget_util.h"

namespace attnscope::widgets {

namespace {

// Long rows put the field under its label when the dock is narrow, so no field is cut off.
QFormLayout* wrappingForm(QWidget* parent)
{
    auto* form = new QFormLayout(parent);
    form->setRowWrapPolicy(QFormLayout::WrapLongRows);
    return form;
}

}  // namespace

MechanismPanel::MechanismPanel(QWidget* parent) : QWidget(parent)
{
    auto* outer = new QVBoxLayout(this);
    m_fileNote = new QLabel(this);
    m_fileNote->setWordWrap(true);
    m_fileNote->setTextFormat(Qt::RichText);
    m_fileNote->hide();
    outer->addWidget(m_fileNote);
    auto* which = new QGroupBox(tr("Mechanisms"), this);
    auto* whichLayout = new QVBoxLayout(which);
    m_choice = new MechanismChoice(which);
    whichLayout->addWidget(m_choice);
    outer->addWidget(which);
    outer->addWidget(buildCommonBox());
    outer->addWidget(buildFeatureMapBox());
    outer->addWidget(buildMhlaBox());
    for (QComboBox* c : findChildren<QComboBox*>()) {
        c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
        c->setMinimumContentsLength(8);
    }
    for (QAbstractSpinBox* b : findChildren<QAbstractSpinBox*>())
        b->setMinimumWidth(60);
    m_problems = new QLabel(this);
    m_problems->setWordWrap(true);
    m_problems->setTextFormat(Qt::RichText);
    outer->addWidget(m_problems);
    outer->addStretch(1);
    connectFields();
    updateEnabled();
    updateProblems();
    // The program's defaults, for a file that has none of its own (applyFileDefaults, resetToDefaults); the
    // block mode is left to setContext.
    m_defaults = saveState();
    m_defaults.remove(QStringLiteral("block_mode"));
}

// Common and softmax.
QGroupBox* MechanismPanel::buildCommonBox()
{
    auto* common = new QGroupBox(tr("All mechanisms"), this);
    auto* cf = wrappingForm(common);
    m_causal = new QCheckBox(tr("Causal (token t sees keys j <= t)"), common);
    m_causal->setToolTip(tr("Causal masking: query t attends to keys j <= t only (--causal)"));
    cf->addRow(m_causal);
    m_scaleAuto = new QCheckBox(tr("1/√d"), common);
    m_scaleAuto->setToolTip(tr("Softmax scale 1/√d of the data's feature dimension d; untick to type your own (--scale)"));
    m_scaleAuto->setChecked(true);
    m_scale = doubleSpinBox(common, -1e6, 1e6, 4, 0.125, tr("Softmax scale: S = scale · Q Kᵀ (--scale)"));
    m_scale->setSingleStep(0.01);
    cf->addRow(tr("Softmax scale"), widgetRow(common, {m_scaleAuto, m_scale}));
    return common;
}

QGroupBox* MechanismPanel::buildFeatureMapBox()
{
    QStringList users;   // the mechanisms that read a feature map (attention/mechanisms.h)
    for (const attention::MechanismInfo& info : attention::mechanism_table())
        if (info.takes(attention::opt_feature_map))
            users << QString::fromUtf8(info.label.data(), qsizetype(info.label.size()));
    auto* fm = new QGroupBox(tr("Feature map φ"), this);   // who reads it is in the tooltip: the dock stays narrow
    fm->setToolTip(tr("Read by %1").arg(users.join(QStringLiteral(", "))));
    auto* ff = wrappingForm(fm);
    m_featureMap = new QComboBox(fm);
    const std::pair<const char*, QString> maps[] = {{"relu", tr("max(x, 0) + 1e-6 (the MHLA authors' choice)")},
                                                    {"elu1", tr("elu(x) + 1")},
                                                    {"identity", tr("x (scores may be negative)")},
                                                    {"favor", tr("FAVOR+ positive random features (Performer)")}};
    for (const auto& [name, formula] : maps) {
        m_featureMap->addItem(QString::fromLatin1(name), QString::fromLatin1(name));
        m_featureMap->setItemData(m_featureMap->count() - 1, formula, Qt::ToolTipRole);
    }
    m_featureMap->setToolTip(tr("Feature map φ of the kernel mechanisms: %1 (--feature-map)").arg(users.join(QStringLiteral(", "))));
    ff->addRow(tr("φ"), m_featureMap);
    m_favorFeatures = spinBox(fm, 1, 1000000, 256, tr("Number m of FAVOR+ random features (--favor-features)"));
    m_seed = spinBox(fm, 0, 2147483647, 0, tr("Seed of the FAVOR+ random projection (--seed)"));
    ff->addRow(tr("Features m / seed"), widgetRow(fm, {m_favorFeatures, m_seed}));
    return fm;
}

QGroupBox* MechanismPanel::buildMhlaBox()
{
    auto* mh = new QGroupBox(tr("MHLA blocks and mixing"), this);
    m_mixingForm = wrappingForm(mh);
    addBlockRows(mh);
    addMixingRows(mh);
    m_normalize = comboBox(mh,
                           {{tr("row (rows sum to 1)"), QStringLiteral("row")},
                            {tr("none (raw kernel scores)"), QStringLiteral("none")},
                            {tr("official (authors' vision code)"), QStringLiteral("official")}},
                           tr("Normalisation of MHLA's rows (--normalize)"));
    m_mixingForm->addRow(tr("Normalise"), m_normalize);
    return mh;
}

// The block layout: a mode and the fields of each mode (updateEnabled shows those of the chosen one).
void MechanismPanel::addBlockRows(QGroupBox* mh)
{
    QFormLayout* mf = m_mixingForm;
    m_blockMode = comboBox(mh, {{tr("count M"), QStringLiteral("blocks")}, {tr("chunk C"), QStringLiteral("chunk")}, {tr("grid"), QStringLiteral("grid")}},
                           tr("How MHLA splits the tokens into blocks: a count, chunks of C tokens, or a grid of blocks "
                              "(--blocks, --chunk, --block-grid)"));
    mf->addRow(tr("Blocks"), m_blockMode);
    m_blocks = spinBox(mh, 0, 1 << 20, 0, tr("Number M of MHLA blocks, split in numpy.array_split order (--blocks)"));
    m_blocks->setSpecialValueText(tr("auto: min(16, N)"));
    mf->addRow(tr("M"), m_blocks);
    m_chunk = spinBox(mh, 1, 1 << 30, 64, tr("Tokens per MHLA block C (--chunk)"));
    mf->addRow(tr("C"), m_chunk);
    m_grid = new QLineEdit(mh);
    m_grid->setToolTip(tr("Token grid G1,G2[,G3] of MHLA's grid blocks; empty: the selection's token grid (--grid)"));
    m_blockGrid = new QLineEdit(QStringLiteral("4x4"), mh);
    m_blockGrid->setToolTip(tr("Blocks per grid axis B1,B2[,B3] (--block-grid)"));
    mf->addRow(tr("Token grid"), m_grid);
    mf->addRow(tr("Block grid"), m_blockGrid);
    m_tokenOrder = comboBox(mh, {{tr("raster"), QStringLiteral("raster")}, {tr("blocked (grouped by block)"), QStringLiteral("blocked")}},
                            tr("How tokens are ordered on the grid: raster, or grouped by block (--token-order)"));
    mf->addRow(tr("Token order"), m_tokenOrder);
}

// The mixing matrix: a preset with its parameters, or a matrix from a file (a dataset of it).
void MechanismPanel::addMixingRows(QGroupBox* mh)
{
    QFormLayout* mf = m_mixingForm;
    m_mixing = new QComboBox(mh);
    m_mixing->addItem(tr("default"), QString());
    for (const std::string_view p : attention::mixing_presets())
        m_mixing->addItem(QString::fromLatin1(p.data(), qsizetype(p.size())), QString::fromLatin1(p.data(), qsizetype(p.size())));
    m_mixing->addItem(tr("matrix from file..."), QStringLiteral("file"));
    m_mixing->setToolTip(tr("The M x M block mixing matrix of MHLA; default: %1 (--mixing)").arg(QString::fromStdString(attention::default_mixing_text())));
    mf->addRow(tr("Mixing"), m_mixing);
    m_sigma = doubleSpinBox(mh, 1e-6, 1e6, 3, 3.0, tr("Width σ of exp mixing (--mixing-sigma)"));
    m_threshold = doubleSpinBox(mh, 0, 1e6, 3, 1.5, tr("Distance threshold of local mixing (--mixing-threshold)"));
    mf->addRow(tr("σ / threshold"), widgetRow(mh, {m_sigma, m_threshold}));
    m_mixingPath = new QLineEdit(mh);
    m_mixingPath->setPlaceholderText(tr("file with an M x M matrix"));
    m_mixingPath->setToolTip(tr("File holding an M x M mixing matrix: .npy, .npz, .h5 or .safetensors (--mixing FILE)"));
    m_mixingBrowse = new QPushButton(tr("Browse..."), mh);
    m_mixingBrowse->setToolTip(tr("Choose the file of the mixing matrix (--mixing FILE)"));
    m_mixingDataset = new QComboBox(mh);
    m_mixingDataset->setToolTip(tr("Dataset or member of the file holding the matrix (--mixing FILE:DATASET)"));
    auto* fileBox = new QWidget(mh);
    auto* fl = new QVBoxLayout(fileBox);
    fl->setContentsMargins(0, 0, 0, 0);
    fl->addWidget(widgetRow(fileBox, {m_mixingPath, m_mixingBrowse}));
    fl->addWidget(m_mixingDataset);
    m_fileRow = fileBox;
    mf->addRow(tr("Mixing file"), fileBox);
}

void MechanismPanel::connectFields()
{
    auto changedSlot = [this] { emitChanged(); };
    connect(m_choice, &MechanismChoice::changed, this, changedSlot);
    for (QCheckBox* b : {m_causal, m_scaleAuto})
        connect(b, &QCheckBox::toggled, this, changedSlot);
    for (QDoubleSpinBox* b : {m_scale, m_sigma, m_threshold})
        connect(b, &QDoubleSpinBox::valueChanged, this, changedSlot);
    for (QSpinBox* b : {m_favorFeatures, m_seed, m_blocks, m_chunk})
        connect(b, &QSpinBox::valueChanged, this, changedSlot);
    for (QComboBox* c : {m_featureMap, m_tokenOrder, m_mixingDataset, m_normalize})
        connect(c, &QComboBox::currentIndexChanged, this, changedSlot);
    for (QLineEdit* e : {m_grid, m_blockGrid})
        connect(e, &QLineEdit::editingFinished, this, changedSlot);
    connect(m_blockMode, &QComboBox::currentIndexChanged, this, [this] {
        if (!m_restoring)
            m_blockModeChosen = true;
        emitChanged();
    });
    connect(m_mixing, &QComboBox::currentIndexChanged, this, [this] {
        if (m_mixing->currentData().toString() == QLatin1String("file") && m_mixingPath->text().isEmpty() && !m_restoring)
            chooseMixingFile();
        emitChanged();
    });
    connect(m_mixingPath, &QLineEdit::editingFinished, this, [this] {
        fillMixingDatasets();
        emitChanged();
    });
    connect(m_mixingBrowse, &QPushButton::clicked, this, &MechanismPanel::chooseMixingFile);
}

void MechanismPanel::emitChanged()
{
    if (m_restoring)
        return;
    updateEnabled();
    updateProblems();
    updateFileNote();
    emit changed();
}

void MechanismPanel::setFeatureDim(qint64 d)
{
    m_featureDim = d;
    updateEnabled();
}

void MechanismPanel::updateEnabled()
{
    m_scale->setEnabled(!m_scaleAuto->isChecked());
    if (m_scaleAuto->isChecked()) {
        // The scale the core uses without --scale: 1/sqrt(d) of the current data (docs/maths.md).
        const QSignalBlocker blocker(m_scale);
        if (m_featureDim > 0)
            m_scale->setValue(1.0 / std::sqrt(static_cast<double>(m_featureDim)));
        m_scale->setToolTip(m_featureDim > 0 ? tr("Softmax scale in use: 1/√d = 1/√%1 = %2 (--scale)")
                                                   .arg(m_featureDim)
                                                   .arg(1.0 / std::sqrt(static_cast<double>(m_featureDim)), 0, 'g', 6)
                                             : tr("Softmax scale in use: 1/√d of the data, once queries are assigned (--scale)"));
    } else {
        m_scale->setToolTip(tr("Softmax scale: S = scale · Q Kᵀ (--scale)"));
    }
    const bool favor = m_featureMap->currentData().toString() == QLatin1String("favor");
    m_favorFeatures->setEnabled(favor);
    m_seed->setEnabled(favor);
    const QString mode = m_blockMode->currentData().toString();
    // Only the fields of the chosen block mode are shown.
    m_mixingForm->setRowVisible(m_blocks, mode == QLatin1String("blocks"));
    m_mixingForm->setRowVisible(m_chunk, mode == QLatin1String("chunk"));
    m_mixingForm->setRowVisible(m_grid, mode == QLatin1String("grid"));
    m_mixingForm->setRowVisible(m_blockGrid, mode == QLatin1String("grid"));
    m_mixingForm->setRowVisible(m_tokenOrder, mode == QLatin1String("grid"));
    const QString mixing = m_mixing->currentData().toString();
    m_sigma->setEnabled(mixing == QLatin1String("exp"));
    m_threshold->setEnabled(mixing == QLatin1String("local"));
    m_mixingForm->setRowVisible(m_fileRow, mixing == QLatin1String("file"));
    m_grid->setPlaceholderText(m_selectionGrid.empty() ? tr("G1xG2 (none in the selection)") : tr("%1 from the selection").arg(sizesText(m_selectionGrid)));
}

void MechanismPanel::chooseMixingFile()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Mixing matrix"), QString(),
                                                      tr("Matrices (*.h5 *.hdf5 *.npy *.npz *.safetensors);;All files (*)"));
    if (path.isEmpty())
        return;
    m_mixingPath->setText(path);
    fillMixingDatasets();
    emitChanged();
}

void MechanismPanel::fillMixingDatasets()
{
    const bool was = m_restoring;
    m_restoring = true;
    const QString keep = m_mixingDataset->currentText();
    m_mixingDataset->clear();
    const QString path = m_mixingPath->text().trimmed();
    if (!path.isEmpty()) {
        try {
            const auto file = io::open_tensor_file(path.toStdString());
            // M x M matrices, and per-head stacks H x M x M (docs/maths.md 1.6).
            for (const auto& t : file->tensors())
                if ((t.shape.size() == 2 && t.shape[0] == t.shape[1]) ||
                    (t.shape.size() == 3 && t.shape[1] == t.shape[2]))
                    m_mixingDataset->addItem(QString::fromStdString(t.name));
        } catch (const std::exception&) {
            // The reason is shown by problems() / the core's error.
        }
    }
    const int i = m_mixingDataset->findText(keep);
    if (i >= 0)
        m_mixingDataset->setCurrentIndex(i);
    m_restoring = was;
}

QString MechanismPanel::mixingFile() const
{
    if (m_mixing->currentData().toString() != QLatin1String("file"))
        return {};
    const QString path = m_mixingPath->text().trimmed();
    if (path.isEmpty())
        return {};
    const QString ds = m_mixingDataset->currentText();
    return ds.isEmpty() ? path : path + QLatin1Char(':') + ds;
}

std::vector<Eigen::Index> MechanismPanel::effectiveGrid() const
{
    const QString typed = m_grid->text().trimmed();
    return typed.isEmpty() ? m_selectionGrid : parseSizes(typed);
}

attention::AttentionOptions MechanismPanel::options() const
{
    attention::AttentionOptions o;
    if (!m_scaleAuto->isChecked())
        o.scale = m_scale->value();
    o.causal = m_causal->isChecked();
    o.feature_map.kind = attention::parse_feature_map(m_featureMap->currentData().toString().toStdString());
    o.feature_map.favor_features = m_favorFeatures->value();
    o.feature_map.seed = std::uint64_t(m_seed->value());
    const QString mode = m_blockMode->currentData().toString();
    using Kind = attention::BlockSpec::Kind;
    if (mode == QLatin1String("chunk")) {
        o.blocks.kind = Kind::chunk;
        o.blocks.chunk = m_chunk->value();
    } else if (mode == QLatin1String("grid")) {
        o.blocks.kind = Kind::grid;
        o.blocks.grid = effectiveGrid();
        o.blocks.block_grid = parseSizes(m_blockGrid->text());
        o.blocks.order = attention::parse_token_order(m_tokenOrder->currentData().toString().toStdString());
    } else {
        o.blocks.kind = Kind::count;
        o.blocks.blocks = m_blocks->value();
    }
    const QString mixing = m_mixing->currentData().toString();
    o.mixing.preset = mixing == QLatin1String("file") ? mixingFile().toStdString() : mixing.toStdString();
    o.mixing.sigma = m_sigma->value();
    o.mixing.threshold = m_threshold->value();
    o.normalize = attention::parse_normalize(m_normalize->currentData().toString().toStdString());
    m_choice->applyTo(o, m_fileOptions.gates.source);
    return o;
}

std::vector<attention::Mechanism> MechanismPanel::mechanisms() const { return m_choice->mechanisms(); }

void MechanismPanel::applyFileDefaults(const attention::AttentionOptions& resolved, const nlohmann::ordered_json& fromFile)
{
    // Everything the file does not set starts from the program's defaults (feature map, normalisation,
    // mechanisms, gates ...): nothing of another file's options stays.
    restoreFields(m_defaults);
    m_fromFile = fromFile;
    m_fileOptions = resolved;
    m_restoring = true;
    m_causal->setChecked(resolved.causal);
    // A softmax scale the model used other than 1/sqrt(d) (the file's scale attribute, docs/cli.md).
    m_scaleAuto->setChecked(!fromFile.contains("scale"));
    if (fromFile.contains("scale") && resolved.scale)
        m_scale->setValue(*resolved.scale);
    m_blockModeChosen = false;   // setContext() picks the block mode for the new data
    m_fileBlockGrid = fromFile.contains("block_grid") ? resolved.blocks.block_grid : std::vector<Eigen::Index>{};
    m_mixingPath->clear();
    m_mixing->setCurrentIndex(0);   // default
    // A learned M x M mixing matrix gives the block count (the core's rule, docs/cli.md).
    m_blocks->setValue(fromFile.contains("blocks") ? static_cast<int>(resolved.blocks.blocks) : 0);
    if (fromFile.contains("mixing")) {
        if (resolved.mixing.matrix || !resolved.mixing.head_matrices.empty()) {
            // preset holds FILE:DATASET (the core resolved it against the data file's folder).
            const QString ref = QString::fromStdString(resolved.mixing.preset);
            const qsizetype colon = ref.lastIndexOf(QLatin1Char(':'));
            m_mixingPath->setText(colon > 0 ? ref.left(colon) : ref);
            fillMixingDatasets();
            m_mixingDataset->setCurrentIndex(std::max(0, m_mixingDataset->findText(colon > 0 ? ref.mid(colon + 1) : QString())));
            m_mixing->setCurrentIndex(m_mixing->findData(QStringLiteral("file")));
        } else {
            m_mixing->setCurrentIndex(std::max(0, m_mixing->findData(QString::fromStdString(resolved.mixing.preset))));
        }
    }
    m_restoring = false;
    updateEnabled();
    updateProblems();
    updateFileNote();
}

void MechanismPanel::forgetFileDefaults()
{
    m_fromFile = nlohmann::ordered_json::object();
    updateFileNote();
}

void MechanismPanel::resetToDefaults()
{
    restoreFields(m_defaults);
    m_fromFile = nlohmann::ordered_json::object();
    m_fileBlockGrid.clear();
    updateEnabled();
    updateProblems();
    updateFileNote();
}

// Whether the file's attributes set option `key` (causal, grid, blocks, scale, mixing) and the panel still holds
// what they set it to (`now`: the panel's options).
bool MechanismPanel::keptFromFile(const char* key, const attention::AttentionOptions& now) const
{
    if (!m_fromFile.contains(key))
        return false;
    const std::string k = key;
    if (k == "causal")
        return now.causal == m_fileOptions.causal;
    if (k == "grid")
        return now.blocks.kind == attention::BlockSpec::Kind::grid && now.blocks.block_grid == m_fileOptions.blocks.block_grid;
    if (k == "blocks")   // a learned M x M mixing matrix sets M
        return now.blocks.kind == attention::BlockSpec::Kind::count && now.blocks.blocks == m_fileOptions.blocks.blocks;
    if (k == "scale")
        return m_fileOptions.scale && now.scale == m_fileOptions.scale;
    if (k == "mixing")
        return now.mixing.preset == m_fileOptions.mixing.preset;
    return false;
}

analysis::ExplicitChoices MechanismPanel::explicitChoices() const
{
    const attention::AttentionOptions now = options();
    analysis::ExplicitChoices given;
    given.prefix_tokens = true;   // the Selection dock shows the prefix tokens in use
    given.causal = !keptFromFile("causal", now);
    given.scale = !keptFromFile("scale", now);
    given.blocks = !keptFromFile("grid", now) && !keptFromFile("blocks", now);
    given.mixing = !keptFromFile("mixing", now);
    given.gates = m_fileOptions.gates.source.empty() || now.gates.source != m_fileOptions.gates.source;   // the file's gates: per layer
    return given;
}

// Which options the file's attributes set, and which of them the user has overridden since.
void MechanismPanel::updateFileNote()
{
    QStringList parts;
    const attention::AttentionOptions now = options();
    auto item = [&](const char* key, const QString& what) {
        if (!m_fromFile.contains(key))
            return;
        parts << (keptFromFile(key, now) ? QStringLiteral("<b>%1</b>").arg(what.toHtmlEscaped())
                                         : tr("<s>%1</s> (overridden)").arg(what.toHtmlEscaped()));
    };
    item("causal", tr("causal"));
    if (m_fromFile.contains("grid"))
        item("grid", tr("grid blocks %1").arg(sizesText(m_fileOptions.blocks.block_grid)));
    item("blocks", tr("M = %1").arg(m_fileOptions.blocks.blocks));
    if (m_fileOptions.scale)
        item("scale", tr("softmax scale %1").arg(*m_fileOptions.scale));
    if (m_fromFile.contains("mixing"))
        item("mixing", tr("mixing %1").arg(QString::fromStdString(m_fromFile["mixing"].get<std::string>())));
    m_fileNote->setText(tr("From the file's attributes: %1").arg(parts.join(QStringLiteral(", "))));
    m_fileNote->setToolTip(tr("The data file says how to analyse it (docs/cli.md, \"Defaults from the file's attributes\"); "
                              "a change here overrides it for this file."));
    m_fileNote->setVisible(!parts.isEmpty());
}

void MechanismPanel::setContext(qint64 tokens, const std::vector<Eigen::Index>& tokenGrid, bool gridBlocks)
{
    m_tokens = tokens;
    m_selectionGrid = tokenGrid;
    // Grid data defaults to MHLA's grid blocks (up to 4 per axis, the paper's 4x4) until the user picks a mode.
    if (!m_blockModeChosen) {
        const bool was = m_restoring;
        m_restoring = true;
        const bool grid = gridBlocks && tokenGrid.size() >= 2 && tokenGrid.size() <= 3;
        m_blockMode->setCurrentIndex(m_blockMode->findData(grid ? QStringLiteral("grid") : QStringLiteral("blocks")));
        if (grid) {
            // The file's block grid when it fits this grid, else the core's rule (docs/cli.md).
            const bool fileFits = m_fileBlockGrid.size() == tokenGrid.size();
            m_blockGrid->setText(sizesText(fileFits ? m_fileBlockGrid : analysis::default_block_grid(tokenGrid)));
        }
        m_restoring = was;
    }
    updateEnabled();
    updateProblems();
    updateFileNote();
}

QStringList MechanismPanel::problems() const
{
    QStringList out;
    const bool causal = m_causal->isChecked();
    const QString mixing = m_mixing->currentData().toString();
    if (m_blockMode->currentData().toString() == QLatin1String("grid") && effectiveGrid().empty())
        out << tr("MHLA grid blocks need a token grid: set one in the Selection panel or type G1,G2 here.");
    else if (m_tokens > 0)
        // The core's own checks (the ones make_operator() makes), in its words, for every mechanism ticked.
        for (const attention::AttentionOptions o = options(); const attention::Mechanism m : mechanisms())
            if (const std::string p = attention::mechanism_problem(m, o, m_tokens); !p.empty())
                out << tr("%1: %2.").arg(QString::fromUtf8(attention::mechanism_info(m).label.data(),
                                                            qsizetype(attention::mechanism_info(m).label.size())),
                                         QString::fromStdString(p));
    if (mechanisms().empty())
        out << tr("Tick at least one mechanism to compute.");
    if (mixing == QLatin1String("file") && m_mixingPath->text().trimmed().isEmpty())
        out << tr("Mixing from a file: choose the file holding the M x M matrix.");
    if (mixing == QLatin1String("causal") && !causal)
        out << tr("Note: causal mixing is lower triangular; it is meant for causal attention.");
    if (m_featureMap->currentData().toString() == QLatin1String("identity"))
        out << tr("Note: identity features give negative scores for most data: entropy is then undefined.");
    return out;
}

void MechanismPanel::updateProblems()
{
    const QStringList p = problems();
    if (p.isEmpty()) {
        m_problems->clear();
        m_problems->hide();
        return;
    }
    QStringList html;
    for (const QString& s : p) {
        const bool note = s.startsWith(tr("Note:"));
        // U+2139 and U+26A0 (information, warning): both in DejaVu Sans, Debian's default font; U+24D8 was not (a box).
        html << QStringLiteral("<div style='color:%1'>%2 %3</div>")
                    .arg(note ? QStringLiteral("#806000") : QStringLiteral("#b00000"),
                         note ? QStringLiteral("\u2139") : QStringLiteral("\u26a0"), s.toHtmlEscaped());
    }
    m_problems->setText(html.join(QString()));
    m_problems->show();
}

QJsonObject MechanismPanel::saveState() const
{
    QJsonObject o;
    o[QStringLiteral("scale")] = m_scaleAuto->isChecked() ? QJsonValue() : QJsonValue(m_scale->value());
    o[QStringLiteral("causal")] = m_causal->isChecked();
    o[QStringLiteral("feature_map")] = m_featureMap->currentData().toString();
    o[QStringLiteral("favor_features")] = m_favorFeatures->value();
    o[QStringLiteral("seed")] = m_seed->value();
    o[QStringLiteral("block_mode")] = m_blockMode->currentData().toString();
    o[QStringLiteral("blocks")] = m_blocks->value();
    o[QStringLiteral("chunk")] = m_chunk->value();
    o[QStringLiteral("grid")] = m_grid->text().trimmed();
    o[QStringLiteral("block_grid")] = m_blockGrid->text().trimmed();
    o[QStringLiteral("token_order")] = m_tokenOrder->currentData().toString();
    o[QStringLiteral("mixing")] = m_mixing->currentData().toString();
    o[QStringLiteral("mixing_file")] = m_mixingPath->text().trimmed();
    o[QStringLiteral("mixing_dataset")] = m_mixingDataset->currentText();
    o[QStringLiteral("mixing_sigma")] = m_sigma->value();
    o[QStringLiteral("mixing_threshold")] = m_threshold->value();
    o[QStringLiteral("normalize")] = m_normalize->currentData().toString();
    const QJsonObject choice = m_choice->saveState();
    for (auto it = choice.begin(); it != choice.end(); ++it)
        o[it.key()] = it.value();
    return o;
}

void MechanismPanel::restoreState(const QJsonObject& s)
{
    restoreFields(s);
    emitChanged();
}

void MechanismPanel::restoreFields(const QJsonObject& s)
{
    m_restoring = true;
    const QJsonValue scale = s.value(QStringLiteral("scale"));
    m_scaleAuto->setChecked(!scale.isDouble());
    if (scale.isDouble())
        m_scale->setValue(scale.toDouble());
    m_causal->setChecked(s.value(QStringLiteral("causal")).toBool());
    restoreData(m_featureMap, s, "feature_map");
    m_favorFeatures->setValue(s.value(QStringLiteral("favor_features")).toInt(256));
    m_seed->setValue(s.value(QStringLiteral("seed")).toInt(0));
    restoreData(m_blockMode, s, "block_mode");
    m_blockModeChosen = s.contains(QStringLiteral("block_mode"));
    m_blocks->setValue(s.value(QStringLiteral("blocks")).toInt(0));
    m_chunk->setValue(s.value(QStringLiteral("chunk")).toInt(64));
    m_grid->setText(s.value(QStringLiteral("grid")).toString());
    m_blockGrid->setText(s.value(QStringLiteral("block_grid")).toString(QStringLiteral("4x4")));
    restoreData(m_tokenOrder, s, "token_order");
    m_mixingPath->setText(s.value(QStringLiteral("mixing_file")).toString());
    fillMixingDatasets();
    const int ds = m_mixingDataset->findText(s.value(QStringLiteral("mixing_dataset")).toString());
    if (ds >= 0)
        m_mixingDataset->setCurrentIndex(ds);
    const QJsonValue mixing = s.value(QStringLiteral("mixing"));
    m_mixing->setCurrentIndex(std::max(0, m_mixing->findData(mixing.toString())));
    m_sigma->setValue(s.value(QStringLiteral("mixing_sigma")).toDouble(3.0));
    m_threshold->setValue(s.value(QStringLiteral("mixing_threshold")).toDouble(1.5));
    restoreData(m_normalize, s, "normalize");
    m_choice->restoreState(s);
    m_restoring = false;
}

}  // namespace attnscope::widgets
