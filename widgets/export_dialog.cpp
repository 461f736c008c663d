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
#include <QSpinBox>
#include <QVBoxLayout>

#include "widget_util.h"

namespace attnscope::widgets {

ExportDialog::ExportDialog(const QString& viewName, const QSize& preferred, const QString& lastFolder, QWidget* parent)
    : QDialog(parent), m_viewName(viewName)
{
    setWindowTitle(tr("Export figure"));
    auto* form = new QFormLayout;
    m_current = new QRadioButton(tr("Current view (%1)").arg(viewName), this);
    m_all = new QRadioButton(tr("All views into a folder"), this);
    m_current->setChecked(true);
    auto* scope = new QVBoxLayout;
    scope->addWidget(m_current);
    scope->addWidget(m_all);
    form->addRow(tr("Export"), scope);

    m_format = comboBox(this,
                        {{tr("PNG (raster)"), QStringLiteral("png")},
                         {tr("PDF (vector, for papers)"), QStringLiteral("pdf")},
                         {tr("SVG (vector, editable)"), QStringLiteral("svg")}});
    form->addRow(tr("&Format"), m_format);

    m_width = spinBox(this, 100, 10000, preferred.width() > 0 ? preferred.width() : 1200);
    m_height = spinBox(this, 100, 10000, preferred.height() > 0 ? preferred.height() : 800);
    for (QSpinBox* s : {m_width, m_height})
        s->setSuffix(tr(" px"));
    auto* size = new QHBoxLayout;
    size->addWidget(m_width);
    size->addWidget(new QLabel(QStringLiteral("×"), this));
    size->addWidget(m_height);
    form->addRow(tr("&Size (logical)"), size);

    m_dpi = doubleSpinBox(this, 48, 1200, 0, 300, tr("PNG: pixels = size × DPI / 96. PDF/SVG: physical size at 96 logical px per inch."));
    form->addRow(tr("&DPI"), m_dpi);
    m_fontScale = doubleSpinBox(this, 0.25, 5, 2, 1.0);
    m_fontScale->setSingleStep(0.1);
    form->addRow(tr("Font &scale"), m_fontScale);
    m_pixels = new QLabel(this);
    m_pixels->setStyleSheet(QStringLiteral("color: palette(mid);"));
    form->addRow(QString(), m_pixels);

    m_target = new QLineEdit(this);
    auto* browse = new QPushButton(tr("Browse..."), this);
    auto* targetRow = new QHBoxLayout;
    targetRow->addWidget(m_target, 1);
    targetRow->addWidget(browse);
    form->addRow(tr("&Target"), targetRow);
    const QString folder = lastFolder.isEmpty() ? QDir::currentPath() : lastFolder;
    m_target->setText(QDir(folder).filePath(viewName + QStringLiteral(".png")));

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Export"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(browse, &QPushButton::clicked, this, &ExportDialog::browse);
    connect(m_format, &QComboBox::currentIndexChanged, this, [this] {
        updateTarget();
        updatePixels();
    });
    connect(m_all, &QRadioButton::toggled, this, &ExportDialog::updateTarget);
    connect(m_width, &QSpinBox::valueChanged, this, &ExportDialog::updatePixels);
    connect(m_height, &QSpinBox::valueChanged, this, &ExportDialog::updatePixels);
    connect(m_dpi, &QDoubleSpinBox::valueChanged, this, &ExportDialog::updatePixels);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(buttons);
    updatePixels();
}

void ExportDialog::updatePixels()
{
    const double f = m_dpi->value() / 96.0;
    if (format() == QLatin1String("png"))
        m_pixels->setText(tr("PNG of %1 × %2 pixels").arg(qRound(m_width->value() * f)).arg(qRound(m_height->value() * f)));
    else
        m_pixels->setText(tr("%1 × %2 mm").arg(m_width->value() / 96.0 * 25.4, 0, 'f', 0).arg(m_height->value() / 96.0 * 25.4, 0, 'f', 0));
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
bool ExportDialog::allViews() const { return m_all->isChecked(); }
QString ExportDialog::target() const { return m_target->text().trimmed(); }

}  // namespace attnscope::widgets
