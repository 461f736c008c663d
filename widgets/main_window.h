#pragma once
// The desktop app's main window. For now: a browser of opened files and their tensors; the views of
// attention maps, spectra and entropy come with the desktop-app work (issue 3).
#include <QMainWindow>
#include <QString>
#include <QStringList>
#include <functional>
#include <vector>

class QTreeWidget;
class QLabel;

namespace attnscope::widgets {

struct TensorRow {
    QString name, dtype, shape;
};
struct FileRow {
    QString path, format, error;   // error non-empty when the file could not be opened
    std::vector<TensorRow> tensors;
};

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // `open_file` is supplied by the app (it calls the core readers); the window only shows rows.
    explicit MainWindow(std::function<FileRow(const QString&)> open_file, QWidget* parent = nullptr);
    void openFiles(const QStringList& paths);

private:
    void chooseFiles();
    std::function<FileRow(const QString&)> m_openFile;
    QTreeWidget* m_tree = nullptr;
    QLabel* m_hint = nullptr;
};

}  // namespace attnscope::widgets
