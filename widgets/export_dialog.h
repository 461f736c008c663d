#pragma once
#include <functional>
// The figure export dialog: scope (the current view to one file, or every view into a folder), format
// (PNG, PDF, SVG), a size preset (the view's screen size in logical pixels, or a printed single column,
// double column or slide, export.h) with DPI and font scale, and the target. It remembers its choices
// (QSettings group "export": scope, format, preset, DPI, font scale, the pixel size per view and the folder) for the
// next export. The main window runs the export itself (exportView / exportAllViews, export.h).
#include <QDialog>
#include <QSize>
#include <QString>

#include "export.h"

class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLineEdit;
class QRadioButton;
class QSpinBox;
class QLabel;

namespace attnscope::widgets {

// Where an export goes when the user has not said: the first existing folder of `lastFolder` (this
// window's last export), the folder of the last export remembered in QSettings ("export/folder"), the
// folder of `dataFile` (the current queries' file), the user's Pictures, Documents or home folder; never
// the working directory, which for a build or a checkout is the source tree.
QString defaultExportFolder(const QString& lastFolder, const QString& dataFile);

class ExportDialog : public QDialog {
    Q_OBJECT
public:
    // `viewName` names the current view (used for the default file name); `preferred` its preferred size;
    // `lastFolder` the folder offered (empty: defaultExportFolder's choice without a data file).
    ExportDialog(const QString& viewName, const QSize& preferred, const QString& lastFolder, QWidget* parent = nullptr);

    // For a preset, the height the view asks for at the preset's width (ResultView::exportHeightFor); unset:
    // the preferred aspect.
    void setHeightFor(std::function<int(int width, double font_scale, int fallback)> heightFor);

    ExportOptions options() const;
    QString format() const;        // "png", "pdf" or "svg"
    QString preset() const;        // "" (pixels) or an ExportPreset key
    bool allViews() const;
    QString target() const;        // a file (current view) or a folder (all views)

    // Writes the choices to QSettings (called on accept; public for tests).
    void saveChoices() const;

private:
    void buildSizeRows(QFormLayout* form);
    void restoreChoices();
    void browse();
    void updateTarget();
    void updatePreset();
    void updatePixels();

    QString m_viewName;
    QSize m_preferred;
    std::function<int(int, double, int)> m_heightFor;
    QComboBox* m_preset = nullptr;
    QSpinBox* m_width = nullptr;
    QSpinBox* m_height = nullptr;
    QDoubleSpinBox* m_dpi = nullptr;
    QDoubleSpinBox* m_fontScale = nullptr;
    QComboBox* m_format = nullptr;
    QRadioButton* m_current = nullptr;
    QRadioButton* m_all = nullptr;
    QLineEdit* m_target = nullptr;
    QLabel* m_pixels = nullptr;
};

}  // namespace attnscope::widgets
