#pragma once
// The data browser dock: every opened activation file as a tree (HDF5 groups from dataset paths,
// npz members, safetensors tensors) with shape, element type and attributes. Only headers are read
// (io::open_tensor_file lists tensors without reading data). Objects the readers skip are shown
// greyed with their reason; a file that fails to open shows its error in place of its tensors.
//
// Queries, keys and values are assigned by context menu or automatically from common names
// (q/k/v, query/key/value, *_q, q_proj ...; per file and per group) and shown bold with a Q/K/V badge.
#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>
#include <optional>

#include "io/selection.h"

class QTreeWidget;
class QTreeWidgetItem;

namespace attnscope::widgets {

enum class TensorRole { queries = 0, keys = 1, values = 2 };

struct TensorEntry {
    QString file;                 // path as opened
    QString name;                 // tensor name inside the file ("" for a .npy)
    QVector<qint64> shape;
    QString dtype;
    QJsonObject attributes;       // the tensor's own attributes
    QJsonObject fileAttributes;   // the file's root attributes

    // The core's tensor reference FILE[:NAME], as text (shown, saved in sessions) and as the core reads it.
    QString ref() const { return name.isEmpty() ? file : file + QLatin1Char(':') + name; }
    io::TensorRef tensor() const { return io::tensor_in(file.toStdString(), name.toStdString()); }
};

// The role a tensor name suggests (its last path component: "q", "query", "layer0_k", "v_proj" ...),
// and the name with the role word replaced by '*' (tensors sharing it belong together). Case-insensitive.
std::optional<TensorRole> roleFromName(const QString& name, QString* stem = nullptr);

class DataBrowser : public QWidget {
    Q_OBJECT
public:
    explicit DataBrowser(QWidget* parent = nullptr);

    // Opens (headers only) and lists the file; a file already open is listed once. Returns false and
    // sets *error when the file cannot be opened (the error is shown in the tree as well).
    bool openFile(const QString& path, QString* error = nullptr);
    void closeAll();
    // Closes one file; its tensors lose their roles. False when it is not open. Emits assignmentChanged only
    // when one of its tensors had a role (the data shown changes), else filesChanged.
    bool closeFile(const QString& path);
    QStringList files() const;                 // successfully opened files, in opening order
    int tensorCount(const QString& file) const;   // numeric tensors listed for an open file (0: not open)
    QString currentFile() const;               // the file of the item selected in the tree ("" when none)

    // Assigns Q, K and V from the first group of `file` whose names suggest them (Q and K at least).
    bool autoAssign(const QString& file);
    bool setAssignment(TensorRole role, const QString& file, const QString& name);   // false: no such tensor
    // Queries, keys and (when `v` is not empty) values of one file at once: one assignmentChanged.
    bool assignTensors(const QString& file, const QString& q, const QString& k, const QString& v = {});
    void clearAssignment(TensorRole role);
    std::optional<TensorEntry> assigned(TensorRole role) const;
    // The tensor `name` of the open file `file` (headers only), or nothing.
    std::optional<TensorEntry> tensor(const QString& file, const QString& name) const;

    QTreeWidget* tree() const { return m_tree; }

signals:
    void assignmentChanged();
    // The list of open files changed but no assignment did (a file that was not shown was closed).
    void filesChanged();
    // The user asked to see `file` (double-click on it, or its menu's "Show this file"): the window shows it
    // as it was left (its layer, tensors and options), else with Q/K/V from its names (MainWindow::showFile).
    void showFileRequested(const QString& file);

private:
    class GroupTree;
    void showOpenError(QTreeWidgetItem* fileItem, const QString& path, const QString& message);
    void addTensorItem(GroupTree& groups, const TensorEntry& tensor);
    void addSkippedItem(GroupTree& groups, const QString& name, const QString& reason);
    void showContextMenu(const QPoint& pos);
    void refreshBadges();
    bool assignGroup(const QString& file, const QString& stemPrefix);
    QTreeWidgetItem* findTensorItem(const QString& file, const QString& name) const;

    struct OpenFile {
        QString path;
        QVector<TensorEntry> tensors;
    };
    QVector<OpenFile> m_files;
    std::optional<TensorEntry> m_assigned[3];
    QTreeWidget* m_tree = nullptr;
};

}  // namespace attnscope::widgets
