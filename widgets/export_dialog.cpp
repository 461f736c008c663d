// The figure export dialog; see export_dialog.h.
#include "export_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "widget_util.h"

namespace attnscope::widgets {

namespace {
const char* const kGroup = "export";
}  // namespace

QString defaultExportFolder(const QString& lastFolder, const QString& dataFile)
{
    QStringList candidates{lastFolder, QSettings().value(QString::fromLatin1(kGroup) + QStringLiteral("/folder")).toString()};
    if (!dataFile.isEmpty())
        candidates << QFileInfo(dataFile).absolutePath();
    for (const auto location : {QStandardPaths::PicturesLocation, QStandardPaths::DocumentsLocation, QStandardPaths::HomeLocation})
        candidates << QStandardPaths::writableLocation(location);
    for (const QString& c : candidates)
        if (!c.isEmpty() && QFileInfo(c).isDir())
            return QFileInfo(c).absoluteFilePath();
    return QDir::homePath();
}

ExportDialog::ExportDialog(const QString& viewName, const QSize& preferred, const QString& lastFolder, QWidget* parent)
    : QDialog(parent), m_viewName(viewName), m_preferred(preferred.isValid() && !preferred.isEmpty() ? preferred : QSize(1200, 800))
{
    setWindowTitle(tr("Export figure"));
    auto* form = new QFormLayout;
    m_current = new QRadioButton(tr("&Current view (%1)").arg(viewName), this);
    m_all = new QRadioButton(tr("&All views into a folder"), this);
    m_current->setChecked(true);
    auto* scope = new QVBoxLayout;
    scope->addWidget(m_current);
    scope->addWidget(m_all);
    form->addRow(tr("Export"), scope);

    m_format = comboBox(this,
                        {{tr("PNG (raster)"), QStringLiteral("png")},
                         {tr("PDF (vector, for papers)"), QStringLiteral("pdf")},
                         {tr("SVG (vector, editable)"), QStringLiteral("svg")}},
                        tr("File format; PDF and SVG keep text and lines as vectors and heatmaps as lossless images"));
    form->addRow(tr("&Format"), m_format);
    buildSizeRows(form);

    m_target = new QLineEdit(this);
    auto* browse = new QPushButton(tr("Browse..."), this);
    addFieldWithButton(form, this, tr("&Target"), m_target, browse);
    const QString folder = lastFolder.isEmpty() ? defaultExportFolder(QString(), QString()) : lastFolder;
    m_target->setText(QDir(folder).filePath(viewName + QStringLiteral(".png")));

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Export"));
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        saveChoices();
        accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(browse, &QPushButton::clicked, this, &ExportDialog::browse);
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] {
        updateTarget();
        updatePixels();
    });
    connect(m_all, &QRadioButton::toggled, this, &ExportDialog::updateTarget);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(buttons);
    restoreChoices();
    updatePreset();
    updateTarget();
}

// Preset, size in logical pixels, DPI, font scale and the line that says what they give.
void ExportDialog::buildSizeRows(QFormLayout* form)
{
    QList<std::pair<QString, QVariant>> presets = {{tr("Screen size (pixels below)"), QString()}};
    for (const ExportPreset& p : exportPresets())
        presets.push_back({p.label, p.key});
    m_preset = comboBox(this, presets,
                        tr("A printed width with its font size in points (the height follows the view), or the pixel size "
                           "below (--preset column, double or slide)"));
    form->addRow(tr("&Preset"), m_preset);

    m_width = spinBox(this, 16, 20000, m_preferred.width(), tr("Width in logical pixels, 96 per inch in PDF and SVG (--width)"));
    m_height = spinBox(this, 16, 20000, m_preferred.height(), tr("Height in logical pixels (--height)"));
    for (QSpinBox* s : {m_width, m_height})
        s->setSuffix(tr(" px"));
    auto* size = new QHBoxLayout;
    size->addWidget(m_width);
    size->addWidget(new QLabel(QStringLiteral("×"), this));
    size->addWidget(m_height);
    auto* sizeLabel = new QLabel(tr("&Size (logical)"), this);
    sizeLabel->setBuddy(m_width);
    form->addRow(sizeLabel, size);

    m_dpi = doubleSpinBox(this, 48, 1200, 0, 300, tr("PNG: pixels = size × DPI / 96. PDF/SVG: physical size at 96 logical px per inch (--dpi)"));
    form->addRow(tr("&DPI"), m_dpi);
    m_fontScale = doubleSpinBox(this, 0.25, 5, 2, 1.0, tr("Multiplies every font of the figure (--font-scale)"));
    m_fontScale->setSingleStep(0.1);
    form->addRow(tr("Font s&cale"), m_fontScale);
    m_pixels = new QLabel(this);
    m_pixels->setStyleSheet(QStringLiteral("color: palette(mid);"));
    form->addRow(QString(), m_pixels);

    connect(m_preset, &QComboBox::currentIndexChanged, this, &ExportDialog::updatePreset);
    connect(m_width, &QSpinBox::valueChanged, this, &ExportDialog::updatePixels);
    connect(m_height, &QSpinBox::valueChanged, this, &ExportDialog::updatePixels);
    connect(m_dpi, &QDoubleSpinBox::valueChanged, this, &ExportDialog::updatePixels);
    connect(m_fontScale, &QDoubleSpinBox::valueChanged, this, &ExportDialog::updatePixels);
}

void ExportDialog::restoreChoices()
{
    QSettings s;
    s.beginGroup(QString::fromLatin1(kGroup));
    if (s.value(QStringLiteral("all_views")).toBool())
        m_all->setChecked(true);
    if (const int i = m_format->findData(s.value(QStringLiteral("format")).toString()); i >= 0)
        m_format->setCurrentIndex(i);
    if (const int i = m_preset->findData(s.value(QStringLiteral("preset")).toString()); i >= 0)
        m_preset->setCurrentIndex(i);
    m_dpi->setValue(s.value(QStringLiteral("dpi"), m_dpi->value()).toDouble());
    m_fontScale->setValue(s.value(QStringLiteral("font_scale"), m_fontScale->value()).toDouble());
    // The pixel size belongs to the view (a maps figure is wider than a spectrum).
    const QSize size = s.value(QStringLiteral("size/") + m_viewName).toSize();
    if (size.isValid() && !size.isEmpty()) {
        m_width->setValue(size.width());
        m_height->setValue(size.height());
    }
}

void ExportDialog::saveChoices() const
{
    QSettings s;
    s.beginGroup(QString::fromLatin1(kGroup));
    s.setValue(QStringLiteral("all_views"), m_all->isChecked());
    s.setValue(QStringLiteral("format"), format());
    s.setValue(QStringLiteral("preset"), preset());
    s.setValue(QStringLiteral("dpi"), m_dpi->value());
    const QFileInfo target(this->target());
    s.setValue(QStringLiteral("folder"), m_all->isChecked() ? target.absoluteFilePath() : target.absolutePath());
    if (preset().isEmpty()) {
        s.setValue(QStringLiteral("font_scale"), m_fontScale->value());
        s.setValue(QStringLiteral("size/") + m_viewName, QSize(m_width->value(), m_height->value()));
    }
}

// A preset sets the size and the font scale (shown, not editable); the pixel size is the user's again when
// the preset is left.
void ExportDialog::setHeightFor(std::function<int(int, double, int)> heightFor)
{
    m_heightFor = std::move(heightFor);
    updatePreset();
}

void ExportDialog::updatePreset()
{
    const ExportPreset* p = findExportPreset(preset());
    for (QWidget* w : std::initializer_list<QWidget*>{m_width, m_height, m_fontScale})
        w->setEnabled(!p);
    if (p) {
        ExportOptions o = presetOptions(*p, m_preferred, m_dpi->value());
        if (m_heightFor && p->aspect <= 0)
            o.height = m_heightFor(o.width, o.font_scale, o.height);
        const QSignalBlocker b1(m_width), b2(m_height), b3(m_fontScale);
        m_width->setValue(o.width);
        m_height->setValue(o.height);
        m_fontScale->setValue(o.font_scale);
    }
    updatePixels();
}

void ExportDialog::updatePixels()
{
    const double f = m_dpi->value() / 96.0;
    const QString fonts = tr("tick labels %1 pt").arg(tickPointSize(options()), 0, 'g', 3);
    if (format() == QLatin1String("png"))
        m_pixels->setText(tr("PNG of %1 × %2 pixels, %3 at %4 DPI")
                              .arg(qRound(m_width->value() * f))
                              .arg(qRound(m_height->value() * f))
                              .arg(fonts)
                              .arg(m_dpi->value(), 0, 'f', 0));
    else
        m_pixels->setText(tr("%1 × %2 mm, %3")
                              .arg(m_width->value() / 96.0 * 25.4, 0, 'f', 1)
                              .arg(m_height->value() / 96.0 * 25.4, 0, 'f', 1)
                              .arg(fonts));
}

void ExportDialog::updateTarget()
{
    QFileInfo info(m_target->text());
    if (m_all->isChecked()) {
        if (!info.suffix().isEmpty())
            m_target->setText(info.absolutePath());
    } else {
        const QString dir = info.suffix().isEmpty() ? info.absoluteFilePath() : info.absolutePath();
        const QString base = info.suffix().isEmpty() ? m_viewName : info.completeBaseName();
        m_target->setText(QDir(dir).filePath(base + QLatin1Char('.') + format()));
    }
}

void ExportDialog::browse()
{
    if (m_all->isChecked()) {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Export all views into"), m_target->text());
        if (!dir.isEmpty())
            m_target->setText(dir);
        return;
    }
    const QString filter = format() == QLatin1String("png")   ? tr("PNG (*.png)")
                           : format() == QLatin1String("pdf") ? tr("PDF (*.pdf)")
                                                              : tr("SVG (*.svg)");
    const QString path = QFileDialog::getSaveFileName(this, tr("Export view"), m_target->text(), filter);
    if (!path.isEmpty()) {
        m_target->setText(path);
        updateTarget();
    }
}

ExportOptions ExportDialog::options() const
{
    return ExportOptions{.width = m_width->value(), .height = m_height->value(), .dpi = m_dpi->value(), .font_scale = m_fontScale->value()};
}

QString ExportDialog::format() const { return m_format->currentData().toString(); }
QString ExportDialog::preset() const { return m_preset->currentData().toString(); }
bool ExportDialog::allViews() const { return m_all->isChecked(); }
QString ExportDialog::target() const { return m_target->text().trimmed(); }

}  // namespace attnscope::widgets
