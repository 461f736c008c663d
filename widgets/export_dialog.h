#pragma once
// The figure export dialog: size in logical pixels, DPI, font scale, format (PNG, PDF, SVG) and scope
// (the current view to one file, or every view into a folder). The main window runs the export itself
// (exportView / exportAllViews, export.h).
#include <QDialog>
#include <QString>

#include "export.h"

class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QRadioButton;
class QSpinBox;
class QLabel;

namespace attnscope::widgets {

class ExportDialog : public QDialog {
    Q_OBJECT
public:
    // `viewName` names the current view (used for the default file name); `preferred` its preferred size.
    ExportDialog(const QString& viewName, const QSize& preferred, const QString& lastFolder, QWidget* parent = nullptr);

    ExportOptions options() const;
    QString format() const;        // "png", "pdf" or "svg"
    bool allViews() const;
    QString target() const;        // a file (current view) or a folder (all views)

private:
    void browse();
    void updateTarget();
    void updatePixels();

    QString m_viewName;
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
