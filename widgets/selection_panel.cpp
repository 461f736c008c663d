// The selection panel: index axes, prefix tokens and token grid, and the guesses from the file; see selection_panel.h.
#include "selection_panel.h"

#include <QComboBox>
#include <QFormLayout>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>
#include <cmath>

#include "analysis/file_defaults.h"
#include "util/checked.h"

#include "widget_util.h"

namespace attnscope::widgets {

namespace {

QString defaultLayout(int rank)
{
    switch (rank) {
    case 2: return QStringLiteral("nd");
    case 3: return QStringLiteral("hnd");
    case 4: return QStringLiteral("bhnd");
    default: return {};
    }
}

QString axisName(QChar c)
{
    switch (c.toLatin1()) {
    case 'h': return QObject::tr("head");
    case 'b': return QObject::tr("batch");
    case 'l': return QObject::tr("layer");
    case 's': return QObject::tr("sample");
    case 't': return QObject::tr("time step");
    default: return QObject::tr("axis");
    }
}

}  // namespace

SelectionPanel::SelectionPanel(QWidget* parent) : QWidget(parent)
{
    auto* outer = new QVBoxLayout(this);
    auto* form = new QFormLayout;
    form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    form->setRowWrapPolicy(QFormLayout::WrapLongRows);   // fields under their labels in a narrow dock
    m_layout = new QLineEdit(this);
    m_layout->setToolTip(tr("One letter per axis of the queries' tensor: n tokens, d features, any other letter an "
                            "index axis (h head, b batch, l layer). Empty: default by rank (nd, hnd, bhnd). "
                            "Same as --layout."));
    m_layout->setMaxLength(8);
    form->addRow(tr("&Layout"), m_layout);
    outer->addLayout(form);

    m_axesBox = new QWidget(this);
    m_axesForm = new QFormLayout(m_axesBox);
    m_axesForm->setRowWrapPolicy(QFormLayout::WrapLongRows);
    m_axesForm->setContentsMargins(0, 0, 0, 0);
    m_layer = new QComboBox(this);
    m_layer->setToolTip(tr("The layer: per-layer datasets of this file (/layers/<i>/q, k, v). "
                           "Ctrl+PgDn / Ctrl+PgUp (or Alt+Down / Alt+Up) step it."));
    m_layerRow = new QWidget(this);
    auto* layerForm = new QFormLayout(m_layerRow);
    layerForm->setContentsMargins(0, 0, 0, 0);
    layerForm->addRow(tr("<b>layer</b>"), m_layer);
    m_layerRow->hide();
    outer->addWidget(m_layerRow);
    outer->addWidget(m_axesBox);
    connect(m_layer, &QComboBox::activated, this, [this](int index) { emit layerRequested(m_layer->itemData(index).toInt()); });

    auto* form2 = new QFormLayout;
    form2->setRowWrapPolicy(QFormLayout::WrapLongRows);
    m_prefix = spinBox(this, 0, 1 << 30, 0, tr("Tokens dropped from the front (CLS, registers). Same as --prefix-tokens."));
    form2->addRow(tr("&Prefix tokens"), m_prefix);
    auto* gridRow = new QHBoxLayout;
    m_grid = new QLineEdit(this);
    m_grid->setPlaceholderText(tr("none (1-D)"));
    m_grid->setToolTip(tr("Token grid H x W (or T x H x W) for grid views and MHLA grid blocks; empty for 1-D sequences"));
    auto* guess = new QPushButton(tr("Guess"), this);
    guess->setToolTip(tr("Guess grid and prefix tokens from the file's attributes or from N (s², s²+1)"));
    gridRow->addWidget(m_grid, 1);
    gridRow->addWidget(guess);
    form2->addRow(tr("Token grid"), gridRow);
    outer->addLayout(form2);

    m_info = new QLabel(this);
    m_info->setWordWrap(true);
    m_problem = problemLabel(this, QStringLiteral("#b00000"));
    outer->addWidget(m_info);
    outer->addWidget(m_problem);
    outer->addStretch(1);

    connect(m_layout, &QLineEdit::editingFinished, this, [this] {
        rebuildAxes();
        updateInfo();
        emit changed();
    });
    connect(m_prefix, &QSpinBox::valueChanged, this, [this] {
        if (m_restoring)
            return;
        updateInfo();
        emit changed();
    });
    connect(m_grid, &QLineEdit::editingFinished, this, [this] {
        m_gridGuessed = false;   // typed: the user's grid
        updateInfo();
        emit changed();
    });
    connect(guess, &QPushButton::clicked, this, [this] {
        guessGridAndPrefix();
        updateInfo();
        emit changed();
    });
    setTensor(std::nullopt);
}

void SelectionPanel::setTensor(const std::optional<TensorEntry>& queries)
{
    // Another shape, or another file: fresh guesses (nothing of the previous file's selection stays).
    const bool newShape = !queries || !m_tensor || queries->shape != m_shape || queries->file != m_tensor->file;
    const bool otherFile = !queries || !m_tensor || queries->file != m_tensor->file;
    if (otherFile && !m_restoring) {
        // Another file (or none): its indices start at 0 and no layout typed for the previous one stays
        // (the window restores a file's own selection when it comes back to it).
        m_at.clear();
        m_layout->clear();
        if (!queries) {
            m_grid->clear();
            m_prefix->setValue(0);
            m_origin.clear();
            m_gridGuessed = false;
        }
    }
    m_tensor = queries;
    m_shape = queries ? queries->shape : QVector<qint64>();
    m_layout->setPlaceholderText(queries ? tr("default: %1").arg(defaultLayout(int(m_shape.size())).isEmpty()
                                                                      ? tr("none for rank %1").arg(m_shape.size())
                                                                      : defaultLayout(int(m_shape.size())))
                                         : QString());
    if (newShape && !m_restoring) {
        // A layout typed for another rank would not fit: fall back to the default.
        if (!m_layout->text().isEmpty() && m_layout->text().size() != m_shape.size())
            m_layout->clear();
        guessGridAndPrefix();
    }
    rebuildAxes();
    updateInfo();
}

QString SelectionPanel::layout() const
{
    const QString typed = m_layout->text().trimmed();
    return typed.isEmpty() ? defaultLayout(int(m_shape.size())) : typed;
}

void SelectionPanel::rebuildAxes()
{
    for (auto* s : std::as_const(m_spins))
        s->disconnect(this);
    while (m_axesForm->rowCount() > 0)
        m_axesForm->removeRow(0);
    m_spins.clear();
    if (!m_tensor)
        return;
    const QString letters = layout();
    if (letters.size() != m_shape.size())
        return;
    for (int i = 0; i < letters.size(); ++i) {
        const QChar c = letters.at(i);
        if (c == QLatin1Char('n') || c == QLatin1Char('d'))
            continue;
        auto* spin = new QSpinBox(m_axesBox);
        spin->setRange(0, int(std::max<qint64>(0, m_shape[i] - 1)));
        spin->setValue(std::clamp(m_at.value(c, 0), 0, spin->maximum()));
        spin->setSuffix(tr("  of %1").arg(m_shape[i]));
        spin->setToolTip(tr("Index on axis %1 (%2), 0..%3. Same as --at %1=i.%4")
                             .arg(c)
                             .arg(axisName(c))
                             .arg(m_shape[i] - 1)
                             .arg(c == QLatin1Char('h') ? tr(" Step with PgUp/PgDn or Alt+Left/Right.") : QString()));
        spin->setKeyboardTracking(false);
        m_at[c] = spin->value();
        connect(spin, &QSpinBox::valueChanged, this, [this, c](int v) {
            m_at[c] = v;
            if (m_restoring)
                return;
            updateInfo();
            emit changed();
        });
        auto* label = new QLabel(QStringLiteral("<b>%1</b> %2").arg(c).arg(axisName(c)), m_axesBox);
        label->setBuddy(spin);
        m_axesForm->addRow(label, spin);
        m_spins.insert(c, spin);
    }
}

void SelectionPanel::guessGridAndPrefix()
{
    if (!m_tensor)
        return;
    const QString letters = layout();
    const qsizetype nAxis = letters.indexOf(QLatin1Char('n'));
    if (nAxis < 0 || nAxis >= m_shape.size())
        return;
    const qint64 n = m_shape[nAxis];
    // The file's attributes by the core's rule (docs/cli.md); without them, a guess from N for display.
    analysis::FileDefaults d;
    try {
        d = analysis::read_file_defaults(m_tensor->tensor());
    } catch (const std::exception&) {
        // An unreadable file reports its error when computed.
    }
    qint64 prefix = d.prefix_tokens.value_or(0);
    std::vector<qint64> grid(d.grid.begin(), d.grid.end());
    m_gridGuessed = false;
    QStringList fromFile;
    if (d.prefix_tokens && *d.prefix_tokens > 0)
        fromFile << tr("prefix tokens %1").arg(*d.prefix_tokens);
    if (!grid.empty())
        fromFile << tr("grid %1").arg(sizesText(d.grid));
    m_origin = fromFile.isEmpty() ? QString() : tr("From the file's attributes: %1.").arg(fromFile.join(QStringLiteral(", ")));
    if (!grid.empty()) {
        qint64 prod = 1;
        for (qint64 g : grid)
            prod *= g;
        if (!d.prefix_tokens && prod + 1 == n)
            prefix = 1;
    } else if (d.tokens.empty() && !d.causal.value_or(false)) {
        // No guess for text: a file with token strings, or a causal model, is a sequence, not an image.
        const qint64 s = qint64(std::llround(std::sqrt(double(n))));
        const qint64 s1 = qint64(std::llround(std::sqrt(double(n - 1))));
        if (s * s == n && s > 1)
            grid = {s, s};
        else if (s1 * s1 == n - 1 && s1 > 1 && !d.prefix_tokens) {
            grid = {s1, s1};
            prefix = 1;
        } else if (prefix > 0) {
            const qint64 s2 = qint64(std::llround(std::sqrt(double(n - prefix))));
            if (s2 * s2 == n - prefix && s2 > 1)
                grid = {s2, s2};
        }
        m_gridGuessed = !grid.empty();
        if (!grid.empty())
            m_origin += (m_origin.isEmpty() ? QString() : QStringLiteral(" ")) +
                        tr("Guessed from N = %1 (the file has no grid attribute; for display, MHLA keeps 1-D blocks): "
                           "%2grid %3x%4.")
                            .arg(n)
                            .arg(prefix > 0 && !d.prefix_tokens ? tr("prefix tokens %1, ").arg(prefix) : QString())
                            .arg(grid[0])
                            .arg(grid[1]);
    }
    QStringList parts;
    for (qint64 g : grid)
        parts << QString::number(g);
    const bool was = m_restoring;
    m_restoring = true;
    m_prefix->setValue(int(prefix));
    m_grid->setText(parts.join(QStringLiteral("x")));
    m_restoring = was;
}

io::AxisSelection SelectionPanel::selection() const
{
    io::AxisSelection sel;
    sel.layout = m_layout->text().trimmed().toStdString();
    for (auto it = m_spins.begin(); it != m_spins.end(); ++it)
        sel.at[char(it.key().toLatin1())] = it.value()->value();
    sel.prefix_tokens = m_prefix->value();
    return sel;
}

std::vector<Eigen::Index> SelectionPanel::tokenGrid() const
{
    return parseSizes(m_grid->text());
}

qint64 SelectionPanel::tokens() const
{
    if (!m_tensor)
        return -1;
    const QString letters = layout();
    const qsizetype nAxis = letters.indexOf(QLatin1Char('n'));
    if (letters.size() != m_shape.size() || nAxis < 0)
        return -1;
    return m_shape[nAxis] - m_prefix->value();
}

qint64 SelectionPanel::features() const
{
    if (!m_tensor)
        return -1;
    const QString letters = layout();
    const qsizetype dAxis = letters.indexOf(QLatin1Char('d'));
    return letters.size() == m_shape.size() && dAxis >= 0 ? m_shape[dAxis] : -1;
}

QString SelectionPanel::problem() const
{
    if (!m_tensor)
        return tr("Assign queries and keys in the data browser (right-click a tensor).");
    try {
        io::TensorInfo info;
        info.name = m_tensor->name.toStdString();
        for (qint64 s : m_shape)
            info.shape.push_back(s);
        io::resolve_layout(info, selection(), ("queries " + m_tensor->ref()).toStdString());
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
    const qint64 n = tokens();
    if (n < 1)
        return tr("Prefix tokens %1 leave no token (the queries have %2).").arg(m_prefix->value()).arg(n + m_prefix->value());
    if (!m_grid->text().trimmed().isEmpty()) {
        const auto grid = tokenGrid();
        if (grid.empty() || grid.size() > 3)
            return tr("Token grid '%1': give 2 or 3 sizes such as 16x16.").arg(m_grid->text());
        const auto prod = checked_product(grid);   // never wrapped: [2^62, 2^62] was "0 tokens"
        if (!prod)
            return tr("Token grid %1 holds more tokens than can be counted (its product overflows 64 bits); the selection "
                      "has N = %2.").arg(m_grid->text()).arg(n);
        if (*prod != n)
            return tr("Token grid %1 holds %2 tokens but the selection has N = %3 (after %4 prefix tokens).")
                .arg(m_grid->text())
                .arg(*prod)
                .arg(n)
                .arg(m_prefix->value());
    }
    return {};
}

QString SelectionPanel::summary() const
{
    QStringList parts;
    if (!m_layerRow->isHidden())
        parts << QStringLiteral("layer %1").arg(m_layer->currentData().toInt());
    for (auto it = m_spins.begin(); it != m_spins.end(); ++it) {
        QString p = QStringLiteral("%1=%2").arg(it.key()).arg(it.value()->value());
        if (it.key() == QLatin1Char('h') && m_kvHead >= 0 && m_kvHeads != m_heads)
            p += tr(" (kv %1)").arg(m_kvHead);
        parts << p;
    }
    return parts.join(QStringLiteral(", "));
}

void SelectionPanel::setLayers(const QList<int>& layers, int current)
{
    const QSignalBlocker block(m_layer);
    m_layer->clear();
    for (int l : layers)
        m_layer->addItem(tr("%1 of %2").arg(l).arg(layers.size()), l);
    m_layer->setCurrentIndex(std::max(0, int(layers.indexOf(current))));
    m_layerRow->setVisible(layers.size() >= 2);
}

int SelectionPanel::currentLayer() const
{
    return m_layer->count() > 0 ? m_layer->currentData().toInt() : -1;
}

bool SelectionPanel::stepLayer(int delta)
{
    if (m_spins.contains(QLatin1Char('l')))
        return step(QLatin1Char('l'), delta);
    if (m_layer->count() < 2)
        return false;
    const int i = std::clamp(m_layer->currentIndex() + delta, 0, m_layer->count() - 1);
    if (i == m_layer->currentIndex())
        return false;
    emit layerRequested(m_layer->itemData(i).toInt());
    return true;
}

void SelectionPanel::setHeadPairing(int kvHead, int kvHeads, int heads)
{
    m_kvHead = kvHead;
    m_kvHeads = kvHeads;
    m_heads = heads;
    if (QSpinBox* h = m_spins.value(QLatin1Char('h'))) {
        const qint64 count = h->maximum() + 1;
        h->setSuffix(kvHead >= 0 && kvHeads != heads ? tr("  of %1  (kv %2 of %3)").arg(count).arg(kvHead).arg(kvHeads)
                                                      : tr("  of %1").arg(count));
        h->setToolTip(h->toolTip().section(QStringLiteral(" Grouped-query"), 0, 0) +
                      (kvHead >= 0 && kvHeads != heads
                           ? tr(" Grouped-query attention: %1 query heads share %2 key/value heads; this head reads "
                                "key/value head %3 (docs/maths.md 1.7).")
                                 .arg(heads)
                                 .arg(kvHeads)
                                 .arg(kvHead)
                           : QString()));
    }
}

QChar SelectionPanel::stepAxis() const
{
    if (m_spins.contains(QLatin1Char('h')))
        return QLatin1Char('h');
    const QString letters = layout();
    for (QChar c : letters)
        if (m_spins.contains(c))
            return c;
    return QChar();
}

bool SelectionPanel::step(QChar axis, int delta)
{
    QSpinBox* spin = m_spins.value(axis);
    if (!spin)
        return false;
    const int before = spin->value();
    spin->setValue(std::clamp(before + delta, spin->minimum(), spin->maximum()));
    return spin->value() != before;
}

void SelectionPanel::setIndex(QChar axis, int value)
{
    if (QSpinBox* spin = m_spins.value(axis))
        spin->setValue(value);
    else
        m_at[axis] = value;
}

int SelectionPanel::index(QChar axis) const
{
    if (QSpinBox* spin = m_spins.value(axis))
        return spin->value();
    return m_at.value(axis, 0);
}

void SelectionPanel::updateInfo()
{
    const QString p = problem();
    m_problem->setText(p);
    m_problem->setVisible(!p.isEmpty() && m_tensor.has_value());
    if (!m_tensor) {
        m_info->setText(tr("No queries assigned yet."));
        return;
    }
    QStringList dims;
    for (qint64 s : m_shape)
        dims << QString::number(s);
    QString text = tr("Queries %1 [%2], layout %3").arg(m_tensor->name.isEmpty() ? tr("(array)") : m_tensor->name,
                                                     dims.join(QStringLiteral(", ")), layout());
    if (tokens() > 0)
        text += tr("; N = %1 tokens").arg(tokens());
    if (!m_origin.isEmpty())
        text += QStringLiteral("\n") + m_origin;
    m_info->setText(text);
}

QJsonObject SelectionPanel::saveState() const
{
    QJsonObject o;
    o[QStringLiteral("layout")] = m_layout->text().trimmed();
    QJsonObject at;
    for (auto it = m_spins.begin(); it != m_spins.end(); ++it)
        at[QString(it.key())] = it.value()->value();
    o[QStringLiteral("at")] = at;
    o[QStringLiteral("prefix_tokens")] = m_prefix->value();
    QJsonArray grid;
    for (auto g : tokenGrid())
        grid.append(qint64(g));
    o[QStringLiteral("token_grid")] = grid;
    return o;
}

void SelectionPanel::restoreState(const QJsonObject& state)
{
    m_restoring = true;
    m_gridGuessed = false;   // a session's grid is the one it was saved with
    m_layout->setText(state.value(QStringLiteral("layout")).toString());
    const QJsonObject at = state.value(QStringLiteral("at")).toObject();
    for (auto it = at.begin(); it != at.end(); ++it)
        if (!it.key().isEmpty())
            m_at[it.key().at(0)] = it->toInt();
    rebuildAxes();
    m_prefix->setValue(state.value(QStringLiteral("prefix_tokens")).toInt());
    QStringList parts;
    for (const auto& v : state.value(QStringLiteral("token_grid")).toArray())
        parts << QString::number(v.toInteger());
    m_grid->setText(parts.join(QStringLiteral("x")));
    m_restoring = false;
    updateInfo();
    emit changed();
}

}  // namespace attnscope::widgets
