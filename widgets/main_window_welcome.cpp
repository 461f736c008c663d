// MainWindow's start page (before any file is open): what to do first, and a button per bundled sample.
#include "main_window.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHash>
#include <QLabel>
#include <QPushButton>
#include <QSizePolicy>
#include <QVBoxLayout>

namespace attnscope::widgets {

namespace {

// The bundled samples (data/*.h5) near the executable or the working folder, for the welcome page.
QString sampleFolder()
{
    const QString app = QCoreApplication::applicationDirPath();
    const QStringList candidates = {qEnvironmentVariable("ATTNSCOPE_DATA"), app + QStringLiteral("/../data"),
                                    app + QStringLiteral("/../../data"), app + QStringLiteral("/../share/attnscope/data"),
                                    QDir::currentPath() + QStringLiteral("/data")};
    for (const QString& c : candidates)
        if (!c.isEmpty() && QFileInfo::exists(c + QStringLiteral("/vit_local2d.h5")))
            return QDir::cleanPath(c);
    return {};
}

// A sample's button text: its file name in words, abbreviations as they are written ("trained_vit_mhla.h5"
// reads "Trained ViT MHLA", "char_lm_licenses.h5" "Char LM licenses").
QString sampleName(const QString& file)
{
    static const QHash<QString, QString> kWritten = {{"vit", "ViT"},   {"lm", "LM"},           {"mhla", "MHLA"},
                                                    {"gqa", "GQA"},   {"llama", "LLaMA"},     {"local1d", "local 1-D"},
                                                    {"local2d", "local 2-D"}, {"lowrank", "low-rank"}, {"mqar", "MQAR"},
                                                    {"blocks16", "M = 16"}};
    QStringList words = QFileInfo(file).completeBaseName().split(QLatin1Char('_'), Qt::SkipEmptyParts);
    for (QString& w : words)
        w = kWritten.value(w.toLower(), w);
    if (!words.isEmpty() && words.front().at(0).isLower())
        words.front()[0] = words.front().at(0).toUpper();
    return words.join(QLatin1Char(' '));
}

}  // namespace

QWidget* MainWindow::buildWelcome()
{
    auto* page = new QWidget;
    auto* outer = new QVBoxLayout(page);
    outer->addStretch(1);
    auto* title = new QLabel(tr("<h2>AttnScope</h2><p>How expressive are softmax, linear and MHLA attention on your "
                                "activations?</p>"),
                             page);
    title->setAlignment(Qt::AlignCenter);
    outer->addWidget(title);
    auto* steps = new QLabel(
        tr("<ol>"
           "<li><b>Open</b> activation files: File &gt; Open (Ctrl+O) or drop them here "
           "(HDF5, .npy, .npz, .safetensors).</li>"
           "<li>Queries and keys are <b>assigned</b> from their names (q, k, query, key, *_q, q_proj ...); "
           "else right-click a tensor in the Data dock.</li>"
           "<li><b>Step through heads</b> with PgUp / PgDn (or Alt+Left / Alt+Right).</li>"
           "<li><b>Click a query</b> in the maps; compare the mechanisms in the tabs.</li>"
           "<li><b>Export</b> a figure with Ctrl+E; save the whole state as a session with Ctrl+S.</li>"
           "</ol>"),
        page);
    steps->setAlignment(Qt::AlignCenter);
    // Wrapped to the page: a narrow central area (1280 x 720 with both docks) cut the second step mid-word.
    steps->setWordWrap(true);
    steps->setMaximumWidth(760);
    steps->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Minimum);
    auto* stepsRow = new QHBoxLayout;   // centred, as wide as the page allows up to 760 px (height for that width)
    stepsRow->addStretch(1);
    stepsRow->addWidget(steps, 100);
    stepsRow->addStretch(1);
    outer->addLayout(stepsRow);
    const QString samples = sampleFolder();
    if (!samples.isEmpty()) {
        // Rows of a few buttons each, so that every name is whole in a narrow window.
        auto* label = new QLabel(tr("Open a sample:"), page);
        label->setAlignment(Qt::AlignCenter);
        outer->addWidget(label);
        auto* grid = new QGridLayout;
        const QStringList files = QDir(samples).entryList({QStringLiteral("*.h5")}, QDir::Files, QDir::Name);
        constexpr int kColumns = 4;
        for (int i = 0; i < files.size(); ++i) {
            auto* b = new QPushButton(sampleName(files[i]), page);
            b->setObjectName(QStringLiteral("sample"));
            const QString path = QDir(samples).filePath(files[i]);
            b->setToolTip(QDir::toNativeSeparators(path));
            connect(b, &QPushButton::clicked, this, [this, path] { openFiles({path}); });
            grid->addWidget(b, i / kColumns, i % kColumns);
        }
        auto* row = new QHBoxLayout;
        row->addStretch(1);
        row->addLayout(grid);
        row->addStretch(1);
        outer->addLayout(row);
    }
    outer->addStretch(2);
    return page;
}

}  // namespace attnscope::widgets
