#include "main_window.h"

#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QStatusBar>
#include <QTreeWidget>
#include <QVBoxLayout>

namespace attnscope::widgets {

MainWindow::MainWindow(std::function<FileRow(const QString&)> open_file, QWidget* parent)
    : QMainWindow(parent), m_openFile(std::move(open_file))
{
    setWindowTitle(QStringLiteral("AttnScope"));
    auto* central = new QWidget(this);
    auto* layout = new QVBoxLayout(central);
    m_hint = new QLabel(tr("Open activation files (HDF5, .npy, .npz, .safetensors) with File > Open. "
                           "Headless analysis: attnscope analyze --help"),
                        central);
    m_hint->setWordWrap(true);
    m_tree = new QTreeWidget(central);
    m_tree->setColumnCount(3);
    m_tree->setHeaderLabels({tr("Name"), tr("Type"), tr("Shape")});
    m_tree->header()->setSectionResizeMode(0, QHeaderView::Stretch);
    layout->addWidget(m_hint);
    layout->addWidget(m_tree);
    setCentralWidget(central);

    auto* file_menu = menuBar()->addMenu(tr("&File"));
    file_menu->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::chooseFiles);
    file_menu->addSeparator();
    file_menu->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    resize(900, 600);
}

void MainWindow::chooseFiles()
{
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open activations"), QString(), tr("Activations (*.h5 *.hdf5 *.npy *.npz *.safetensors);;All files (*)"));
    openFiles(paths);
}

void MainWindow::openFiles(const QStringList& paths)
{
    for (const QString& path : paths) {
        const FileRow row = m_openFile(path);
        auto* item = new QTreeWidgetItem(m_tree, {path, row.format, QString()});
        if (!row.error.isEmpty()) {
            item->setText(2, row.error);
            item->setForeground(2, QBrush(Qt::red));
            statusBar()->showMessage(row.error, 10000);
            continue;
        }
        for (const TensorRow& t : row.tensors)
            new QTreeWidgetItem(item, {t.name, t.dtype, t.shape});
        item->setExpanded(true);
    }
}

}  // namespace attnscope::widgets
