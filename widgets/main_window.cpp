#include "main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDir>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFrame>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QSaveFile>
#include <QScrollArea>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <optional>

#include "analysis/explore.h"
#include "analysis/inputs.h"
#include "analysis/job.h"
#include "analysis/sweep.h"
#include "curves.h"
#include "data_browser.h"
#include "export.h"
#include "export_dialog.h"
#include "io/writers.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"
#include "session.h"
#include "sweep_dialog.h"
#include "util/atomic_file.h"
#include "views.h"

namespace attnscope::widgets {

namespace {

constexpr int kMaxRecent = 10;
constexpr int kDebounceMs = 150;
const char* kRecentKey = "recentFiles";

using ResultPtr = std::shared_ptr<const analysis::ExploreResult>;

QString mib(std::uint64_t bytes)
{
    if (bytes >= (std::uint64_t(1) << 30))
        return QObject::tr("%1 GiB").arg(double(bytes) / double(1ULL << 30), 0, 'f', 1);
    return QObject::tr("%1 MiB").arg(bytes >> 20);
}

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

QWidget* scrolled(QWidget* inner)
{
    auto* area = new QScrollArea;
    area->setWidget(inner);
    area->setWidgetResizable(true);
    area->setFrameShape(QFrame::NoFrame);
    area->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    return area;
}

}  // namespace

// One kind of sweep ("curves" or "overview"): its own worker (queue depth one), its last result and
// the tab that shows it (created when the first result arrives).
struct MainWindow::SweepSlot {
    QString name;
    std::unique_ptr<analysis::JobRunner> runner = std::make_unique<analysis::JobRunner>();
    std::uint64_t job = 0;
    bool running = false;
    double fraction = 0;
    QString stage;
    std::shared_ptr<const analysis::SweepResult> result;
    SweepView* view = nullptr;
    std::optional<QJsonObject> pendingState;   // a session's view state, applied with the first result
    bool requested = false;                    // run since the last reset (recorded in sessions)
    bool activate = true;                      // show the tab when done (not for a session's reruns)
};

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_runner(std::make_unique<analysis::JobRunner>()), m_curvesSlot(std::make_unique<SweepSlot>()),
      m_overviewSlot(std::make_unique<SweepSlot>()), m_sweepParams(std::make_unique<SweepParams>())
{
    m_curvesSlot->name = QStringLiteral("curves");
    m_overviewSlot->name = QStringLiteral("overview");
    setWindowTitle(QStringLiteral("AttnScope"));
    setAcceptDrops(true);
    setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);

    // Centre: message bar above a stack of (welcome page | view tabs).
    auto* central = new QWidget(this);
    auto* cl = new QVBoxLayout(central);
    cl->setContentsMargins(4, 4, 4, 0);
    cl->setSpacing(4);
    m_messageBar = new QFrame(central);
    m_messageBar->setFrameShape(QFrame::StyledPanel);
    auto* ml = new QHBoxLayout(m_messageBar);
    ml->setContentsMargins(8, 4, 4, 4);
    m_message = new QLabel(m_messageBar);
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* close = new QToolButton(m_messageBar);
    close->setText(QStringLiteral("✕"));
    close->setAutoRaise(true);
    close->setToolTip(tr("Hide this message"));
    connect(close, &QToolButton::clicked, this, &MainWindow::hideMessage);
    ml->addWidget(m_message, 1);
    ml->addWidget(close, 0, Qt::AlignTop);
    m_messageBar->hide();
    cl->addWidget(m_messageBar);

    m_stack = new QStackedWidget(central);
    m_stack->addWidget(buildWelcome());
    m_tabs = new QTabWidget(m_stack);
    m_tabs->setDocumentMode(true);
    m_views = createAllViews(m_tabs);
    for (ResultView* v : m_views) {
        m_tabs->addTab(v, v->viewTitle());
        connect(v, &ResultView::querySelected, this, &MainWindow::setQuery);
        connect(v, &ResultView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 6000); });
    }
    m_stack->addWidget(m_tabs);
    // An explicit minimum keeps a view's long unwrapped label from squeezing the docks off screen.
    m_stack->setMinimumSize(420, 300);
    cl->addWidget(m_stack, 1);
    setCentralWidget(central);

    // Docks.
    m_browser = new DataBrowser(this);
    auto* dataDock = new QDockWidget(tr("Data"), this);
    dataDock->setObjectName(QStringLiteral("dataDock"));
    dataDock->setWidget(m_browser);
    addDockWidget(Qt::LeftDockWidgetArea, dataDock);

    m_selection = new SelectionPanel(this);
    auto* selDock = new QDockWidget(tr("Selection"), this);
    selDock->setObjectName(QStringLiteral("selectionDock"));
    selDock->setWidget(scrolled(m_selection));
    addDockWidget(Qt::LeftDockWidgetArea, selDock);

    m_mechanism = new MechanismPanel(this);
    auto* mechDock = new QDockWidget(tr("Mechanisms"), this);
    mechDock->setObjectName(QStringLiteral("mechanismDock"));
    mechDock->setWidget(scrolled(m_mechanism));
    addDockWidget(Qt::RightDockWidgetArea, mechDock);
    resizeDocks({dataDock, mechDock}, {270, 285}, Qt::Horizontal);
    resizeDocks({dataDock, selDock}, {520, 330}, Qt::Vertical);

    connect(m_browser, &DataBrowser::assignmentChanged, this, &MainWindow::onAssignmentChanged);
    connect(m_selection, &SelectionPanel::changed, this, &MainWindow::onSelectionChanged);
    connect(m_mechanism, &MechanismPanel::changed, this, &MainWindow::scheduleCompute);
    m_debounce.setSingleShot(true);
    m_debounce.setInterval(kDebounceMs);
    connect(&m_debounce, &QTimer::timeout, this, &MainWindow::startComputation);

    buildMenus();
    buildStatusBar();
    updateCentral();
    resize(1500, 950);
}

MainWindow::~MainWindow()
{
    // Join the workers first: their `done` posts to this object, which must outlive them.
    m_curvesSlot->runner.reset();
    m_overviewSlot->runner.reset();
    m_runner.reset();
}

// ---------------------------------------------------------------------------------------------- setup

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
    outer->addWidget(steps, 0, Qt::AlignHCenter);
    const QString samples = sampleFolder();
    if (!samples.isEmpty()) {
        auto* row = new QHBoxLayout;
        row->addStretch(1);
        row->addWidget(new QLabel(tr("Open a sample:"), page));
        const QStringList files = QDir(samples).entryList({QStringLiteral("*.h5")}, QDir::Files, QDir::Name);
        for (const QString& f : files) {
            auto* b = new QPushButton(f, page);
            const QString path = QDir(samples).filePath(f);
            connect(b, &QPushButton::clicked, this, [this, path] { openFiles({path}); });
            row->addWidget(b);
        }
        row->addStretch(1);
        outer->addLayout(row);
    }
    outer->addStretch(2);
    return page;
}

void MainWindow::buildMenus()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::chooseFiles);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    connect(m_recentMenu, &QMenu::aboutToShow, this, &MainWindow::fillRecentMenu);
    file->addAction(tr("&Close All Files"), this, [this] {
        m_browser->closeAll();
        m_sessionPath.clear();
        updateTitle();
    });
    file->addSeparator();
    file->addAction(tr("Open &Session..."), QKeySequence(tr("Ctrl+Shift+O")), this, &MainWindow::chooseSessionToOpen);
    file->addAction(tr("&Save Session"), QKeySequence::Save, this, [this] { chooseSessionToSave(false); });
    file->addAction(tr("Save Session &As..."), QKeySequence::SaveAs, this, [this] { chooseSessionToSave(true); });
    file->addSeparator();
    file->addAction(tr("&Export Figure..."), QKeySequence(tr("Ctrl+E")), this, &MainWindow::showExportDialog);
    file->addAction(tr("Export &Metrics CSV..."), this, &MainWindow::chooseMetricsCsv);
    file->addAction(tr("Export Matrices (.&npy)..."), this, &MainWindow::chooseMatricesFolder);
    file->addAction(tr("Export S&weep CSV..."), this, &MainWindow::chooseSweepCsv);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    auto* view = menuBar()->addMenu(tr("&View"));
    for (int i = 0; i < m_views.size(); ++i) {
        ResultView* v = m_views[i];
        QAction* a = view->addAction(v->viewTitle(), this, [this, i] {
            m_tabs->setCurrentIndex(i);
            updateCentral();
        });
        a->setShortcut(QKeySequence(QStringLiteral("Ctrl+%1").arg(i + 1)));
    }
    view->addSeparator();
    for (QDockWidget* d : findChildren<QDockWidget*>())
        view->addAction(d->toggleViewAction());

    auto* sel = menuBar()->addMenu(tr("&Selection"));
    QAction* next = sel->addAction(tr("&Next Head"), this, [this] { stepIndex(+1); });
    next->setShortcuts({QKeySequence(Qt::Key_PageDown), QKeySequence(Qt::ALT | Qt::Key_Right)});
    QAction* prev = sel->addAction(tr("&Previous Head"), this, [this] { stepIndex(-1); });
    prev->setShortcuts({QKeySequence(Qt::Key_PageUp), QKeySequence(Qt::ALT | Qt::Key_Left)});
    sel->addAction(tr("Clear &Query"), QKeySequence(tr("Ctrl+Shift+Q")), this, [this] { setQuery(-1); });
    sel->addSeparator();
    sel->addAction(tr("&Recompute"), QKeySequence(Qt::Key_F5), this, &MainWindow::computeNow);
    sel->addAction(tr("&Cancel Computation"), QKeySequence(Qt::Key_Escape), this, &MainWindow::cancelComputation);

    auto* analysisMenu = menuBar()->addMenu(tr("&Analysis"));
    analysisMenu->addAction(tr("&Sweep..."), QKeySequence(tr("Ctrl+Shift+W")), this, &MainWindow::showSweepDialog);
    analysisMenu->addAction(tr("Model &Overview"), this, &MainWindow::runOverview);
    analysisMenu->addSeparator();
    analysisMenu->addAction(tr("&Cancel Sweeps"), this, &MainWindow::cancelSweeps);

    auto* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Quick Start"), this, [this] {
        QMessageBox::information(
            this, tr("Quick start"),
            tr("1. File > Open (Ctrl+O) or drop activation files on the window.\n"
               "2. Q/K/V are assigned from names; right-click a tensor to change them.\n"
               "3. Step heads with PgUp/PgDn; every view updates.\n"
               "4. Click a row of a map to select a query.\n"
               "5. Ctrl+E exports a figure; Ctrl+S saves a session.\n\n"
               "Headless: attnscope analyze --help"));
    });
    help->addAction(tr("&About AttnScope"), this, [this] {
        QMessageBox::about(this, tr("About AttnScope"),
                           tr("<b>AttnScope %1</b><p>Softmax, linear and MHLA (multi-head linear attention, "
                              "arXiv 2601.07832) attention on your activations: maps, rank, singular spectra, "
                              "entropy.</p>")
                               .arg(QCoreApplication::applicationVersion()));
    });
}

void MainWindow::buildStatusBar()
{
    m_stage = new QLabel(this);
    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setFixedWidth(160);
    m_progress->setTextVisible(false);
    m_cancel = new QToolButton(this);
    m_cancel->setText(tr("Cancel"));
    m_cancel->setToolTip(tr("Cancel the running computation (Esc)"));
    connect(m_cancel, &QToolButton::clicked, this, &MainWindow::cancelComputation);
    m_info = new QLabel(this);
    statusBar()->addPermanentWidget(m_stage);
    statusBar()->addPermanentWidget(m_progress);
    statusBar()->addPermanentWidget(m_cancel);
    statusBar()->addPermanentWidget(m_info);
    m_stage->hide();
    m_progress->hide();
    m_cancel->hide();

    m_sweepStage = new QLabel(this);
    m_sweepProgress = new QProgressBar(this);
    m_sweepProgress->setRange(0, 1000);
    m_sweepProgress->setFixedWidth(120);
    m_sweepProgress->setTextVisible(false);
    m_sweepCancel = new QToolButton(this);
    m_sweepCancel->setText(tr("Cancel sweep"));
    m_sweepCancel->setToolTip(tr("Cancel the running sweeps (Analysis > Cancel Sweeps)"));
    connect(m_sweepCancel, &QToolButton::clicked, this, &MainWindow::cancelSweeps);
    statusBar()->addPermanentWidget(m_sweepStage);
    statusBar()->addPermanentWidget(m_sweepProgress);
    statusBar()->addPermanentWidget(m_sweepCancel);
    m_sweepStage->hide();
    m_sweepProgress->hide();
    m_sweepCancel->hide();
}

// ------------------------------------------------------------------------------------------- opening

void MainWindow::chooseFiles()
{
    const QStringList paths = QFileDialog::getOpenFileNames(
        this, tr("Open activations"), QString(),
        tr("Activations and sessions (*.h5 *.hdf5 *.npy *.npz *.safetensors *.attnscope);;All files (*)"));
    openFiles(paths);
}

bool MainWindow::openOne(const QString& path, QString* error)
{
    if (path.endsWith(QLatin1String(".attnscope"), Qt::CaseInsensitive))
        return loadSession(path, error);
    const bool ok = m_browser->openFile(path, error);
    addRecentFile(path);
    return ok;
}

void MainWindow::openFiles(const QStringList& paths)
{
    QStringList errors;
    QStringList opened;
    for (const QString& path : paths) {
        QString error;
        if (openOne(path, &error)) {
            if (!path.endsWith(QLatin1String(".attnscope"), Qt::CaseInsensitive))
                opened << path;
        } else {
            errors << QStringLiteral("%1: %2").arg(QFileInfo(path).fileName(), error);
        }
    }
    // Assign Q/K/V from names when nothing (or nothing open any more) is assigned.
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    if (!q || !k) {
        for (const QString& path : opened)
            if (m_browser->autoAssign(path) && m_browser->assigned(TensorRole::queries) &&
                m_browser->assigned(TensorRole::keys))
                break;
        if (!opened.isEmpty() && (!m_browser->assigned(TensorRole::queries) || !m_browser->assigned(TensorRole::keys)))
            showMessage(tr("No queries and keys recognised from the tensor names: right-click a tensor in the Data dock "
                           "and choose \"Use as queries\" / \"Use as keys\"."),
                        false);
    }
    if (!errors.isEmpty()) {
        showMessage(errors.join(QLatin1Char('\n')), true);
        statusBar()->showMessage(errors.first(), 10000);
    } else if (!opened.isEmpty()) {
        statusBar()->showMessage(tr("Opened %1").arg(opened.join(QStringLiteral(", "))), 5000);
    }
    updateCentral();
    updateTitle();
}

void MainWindow::addRecentFile(const QString& path)
{
    QSettings settings;
    QStringList recent = settings.value(QString::fromLatin1(kRecentKey)).toStringList();
    const QString abs = QFileInfo(path).absoluteFilePath();
    recent.removeAll(abs);
    recent.prepend(abs);
    while (recent.size() > kMaxRecent)
        recent.removeLast();
    settings.setValue(QString::fromLatin1(kRecentKey), recent);
}

void MainWindow::fillRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = QSettings().value(QString::fromLatin1(kRecentKey)).toStringList();
    for (const QString& path : recent) {
        QAction* a = m_recentMenu->addAction(QFileInfo(path).fileName(), this, [this, path] { openFiles({path}); });
        a->setToolTip(path);
        a->setStatusTip(path);
        a->setEnabled(QFileInfo::exists(path));
    }
    if (recent.isEmpty())
        m_recentMenu->addAction(tr("(none)"))->setEnabled(false);
    else {
        m_recentMenu->addSeparator();
        m_recentMenu->addAction(tr("Clear List"), this, [] { QSettings().remove(QString::fromLatin1(kRecentKey)); });
    }
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event)
{
    if (event->mimeData()->hasUrls())
        for (const QUrl& url : event->mimeData()->urls())
            if (url.isLocalFile()) {
                event->acceptProposedAction();
                return;
            }
}

void MainWindow::dropEvent(QDropEvent* event)
{
    QStringList paths;
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile())
            paths << url.toLocalFile();
    event->acceptProposedAction();
    openFiles(paths);
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    m_runner->cancel();
    cancelSweeps();
    QMainWindow::closeEvent(event);
}

// ------------------------------------------------------------------------------------ state changes

void MainWindow::onAssignmentChanged()
{
    m_selection->setTensor(m_browser->assigned(TensorRole::queries));
    onSelectionChanged();
    updateCentral();
}

void MainWindow::onSelectionChanged()
{
    m_mechanism->setContext(m_selection->tokens(), m_selection->tokenGrid());
    updateTitle();
    scheduleCompute();
}

void MainWindow::scheduleCompute()
{
    if (m_applyingSession)
        return;
    m_debounce.start();
}

bool MainWindow::isComputing() const
{
    return m_debounce.isActive() || m_jobRunning;
}

void MainWindow::computeNow()
{
    m_debounce.stop();
    startComputation();
}

void MainWindow::cancelComputation()
{
    m_debounce.stop();
    if (m_jobRunning)
        m_runner->cancel();
}

void MainWindow::finishWithError(const QString& error)
{
    m_lastError = error;
    showMessage(error, true);
    statusBar()->showMessage(error, 10000);
    emit computationFinished(false, error);
}

void MainWindow::startComputation()
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    const auto v = m_browser->assigned(TensorRole::values);
    if (!q || !k) {
        if (m_jobRunning)
            m_runner->cancel();
        emit computationFinished(false, tr("queries and keys are not assigned"));
        return;
    }
    const QString problem = m_selection->problem();
    if (!problem.isEmpty()) {
        if (m_jobRunning)
            m_runner->cancel();
        finishWithError(tr("Selection: %1").arg(problem));
        return;
    }

    analysis::ExploreRequest request;
    request.source.q_ref = q->ref().toStdString();
    request.source.k_ref = k->ref().toStdString();
    if (v)
        request.source.v_ref = v->ref().toStdString();
    request.source.selection = m_selection->selection();
    request.token_grid = m_selection->tokenGrid();
    try {
        request.options = m_mechanism->options();
    } catch (const std::exception& e) {
        finishWithError(tr("Mechanism options: %1").arg(QString::fromStdString(e.what())));
        return;
    }

    Eigen::Index n = 0;
    try {
        n = analysis::selected_tokens(request.source);
    } catch (const std::exception& e) {
        finishWithError(QString::fromStdString(e.what()));
        return;
    }
    // Ask before a computation over the memory limit; refuse one over physical memory.
    const std::uint64_t need = analysis::explore_memory_bytes(n, 3);
    const std::uint64_t limit = analysis::default_memory_limit();
    const std::uint64_t physical = limit * 2;
    if (need > physical) {
        finishWithError(tr("N = %1 tokens need about %2 for three dense %1 x %1 matrices, more than this machine's %3 "
                           "of memory. Select fewer tokens (prefix tokens, another tensor) or use attnscope analyze "
                           "with one mechanism.")
                            .arg(n)
                            .arg(mib(need), mib(physical)));
        return;
    }
    if (need > limit) {
        if (m_approvedTokens != n && m_interactive) {
            const auto answer = QMessageBox::question(
                this, tr("Large computation"),
                tr("N = %1 tokens need about %2 of memory (the limit is half the machine's memory, %3). Proceed?")
                    .arg(n)
                    .arg(mib(need), mib(limit)),
                QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
            if (answer != QMessageBox::Yes) {
                finishWithError(tr("Computation of N = %1 tokens not started (needs %2).").arg(n).arg(mib(need)));
                return;
            }
        }
        m_approvedTokens = n;
        request.memory_limit = physical;
    }

    const std::string mixingRef = m_mechanism->mixingFile().toStdString();
    auto work = [request, mixingRef](const analysis::JobContext& ctx) mutable -> ResultPtr {
        if (!mixingRef.empty()) {
            ctx.progress(0.0, "reading the mixing matrix");
            request.options.mixing.matrix = analysis::load_matrix(mixingRef);
        }
        return std::make_shared<const analysis::ExploreResult>(analysis::explore(request, ctx));
    };
    auto done = [this](analysis::JobOutcome<ResultPtr> outcome) {
        auto shared = std::make_shared<analysis::JobOutcome<ResultPtr>>(std::move(outcome));
        QMetaObject::invokeMethod(
            this,
            [this, shared] {
                if (shared->id != m_currentJob)
                    return;   // a newer request replaced this one
                m_jobRunning = false;
                m_stage->hide();
                m_progress->hide();
                m_cancel->hide();
                if (shared->cancelled) {
                    statusBar()->showMessage(tr("Computation cancelled"), 5000);
                    emit computationFinished(false, tr("cancelled"));
                    return;
                }
                if (!shared->error.empty()) {
                    finishWithError(QString::fromStdString(shared->error));
                    return;
                }
                m_result = *shared->result;
                m_lastError.clear();
                if (m_query >= m_result->n)
                    m_query = -1;
                for (ResultView* v : m_views) {
                    v->setResult(m_result);
                    v->setQuery(m_query);
                }
                QStringList problems;
                for (const auto& o : m_result->outcomes)
                    if (!o.error.empty())
                        problems << QStringLiteral("%1: %2").arg(QString::fromLatin1(attention::to_string(o.result.mechanism)),
                                                                 QString::fromStdString(o.error));
                if (problems.isEmpty())
                    hideMessage();
                else
                    showMessage(problems.join(QLatin1Char('\n')), true);
                m_info->setText(tr("N = %1, d = %2 · %3 s").arg(m_result->n).arg(m_result->d).arg(m_result->seconds, 0, 'f', 2));
                statusBar()->showMessage(tr("Computed in %1 s").arg(m_result->seconds, 0, 'f', 2), 4000);
                updateCentral();
                updateTitle();
                emit computationFinished(true, QString());
            },
            Qt::QueuedConnection);
    };
    auto progress = [this](double fraction, const std::string& stage) {
        const QString text = QString::fromStdString(stage);
        QMetaObject::invokeMethod(
            this,
            [this, fraction, text] {
                if (!m_jobRunning)
                    return;
                m_stage->setText(text);
                m_progress->setValue(int(fraction * 1000));
            },
            Qt::QueuedConnection);
    };
    m_jobRunning = true;
    m_stage->setText(tr("starting"));
    m_progress->setValue(0);
    m_stage->show();
    m_progress->show();
    m_cancel->show();
    m_currentJob = m_runner->submit<ResultPtr>(work, done, progress);
    emit computationStarted();
}

// ------------------------------------------------------------------------------------ query and views

void MainWindow::setQuery(int token)
{
    if (m_result && token >= m_result->n)
        token = -1;
    m_query = token;
    for (ResultView* v : m_views)
        v->setQuery(token);
    if (token >= 0) {
        QString where;
        if (m_result) {
            const auto c = m_result->grid_coords(token);
            QStringList parts;
            for (auto x : c)
                parts << QString::number(qint64(x));
            if (!parts.isEmpty())
                where = tr(" at grid (%1)").arg(parts.join(QStringLiteral(", ")));
        }
        statusBar()->showMessage(tr("Query %1%2").arg(token).arg(where), 5000);
    }
    updateTitle();
}

ResultView* MainWindow::currentView() const
{
    return qobject_cast<ResultView*>(m_tabs->currentWidget());
}

void MainWindow::setCurrentView(const QString& name)
{
    for (int i = 0; i < m_tabs->count(); ++i)
        if (auto* v = qobject_cast<ResultView*>(m_tabs->widget(i)); v && v->viewName() == name)
            m_tabs->setCurrentIndex(i);
}

bool MainWindow::stepIndex(int delta)
{
    const QChar axis = m_selection->stepAxis();
    if (axis.isNull()) {
        statusBar()->showMessage(tr("The selection has no index axis to step (layout %1)").arg(m_selection->layout()), 4000);
        return false;
    }
    const bool moved = m_selection->step(axis, delta);
    if (!moved)
        statusBar()->showMessage(delta > 0 ? tr("Last %1 index").arg(axis) : tr("First %1 index").arg(axis), 2000);
    return moved;
}

void MainWindow::updateCentral()
{
    const bool haveData = !m_browser->files().isEmpty() || m_result;
    m_stack->setCurrentIndex(haveData ? 1 : 0);
}

void MainWindow::updateTitle()
{
    QString title = QStringLiteral("AttnScope");
    const auto q = m_browser->assigned(TensorRole::queries);
    if (q) {
        QString what = QFileInfo(q->file).fileName();
        if (!q->name.isEmpty())
            what += QLatin1Char(':') + q->name;
        const QString sel = m_selection->summary();
        if (!sel.isEmpty())
            what += QStringLiteral("  [%1]").arg(sel);
        if (m_selection->tokens() > 0)
            what += QStringLiteral("  N=%1").arg(m_selection->tokens());
        if (m_query >= 0)
            what += tr("  query %1").arg(m_query);
        title = what + QStringLiteral(" — AttnScope");
    }
    if (!m_sessionPath.isEmpty())
        title += QStringLiteral(" (%1)").arg(QFileInfo(m_sessionPath).fileName());
    setWindowTitle(title);
}

void MainWindow::showMessage(const QString& text, bool error)
{
    m_message->setText(text);
    m_messageBar->setStyleSheet(error ? QStringLiteral("QFrame { background: #fde8e8; color: #7a0000; border: 1px solid #e0a0a0; }")
                                      : QStringLiteral("QFrame { background: #e8f0fd; color: #1a3a6a; border: 1px solid #a0b8e0; }"));
    m_message->setStyleSheet(QStringLiteral("border: none;"));
    m_messageBar->show();
}

void MainWindow::hideMessage()
{
    m_message->clear();
    m_messageBar->hide();
}

QString MainWindow::messageText() const
{
    return m_messageBar->isVisible() || !m_messageBar->isHidden() ? m_message->text() : QString();
}

// --------------------------------------------------------------------------------------------- exports

void MainWindow::showExportDialog()
{
    ResultView* view = currentView();
    const bool sweepView = view && (view == curvesView() || view == overviewView());
    if (!view || (sweepView ? !hasSweepResult(view->viewName()) : !m_result)) {
        showMessage(tr("Nothing to export yet: open data and wait for the computation."), false);
        return;
    }
    ExportDialog dialog(view->viewName(), view->preferredExportSize(), m_lastExportFolder, this);
    if (dialog.exec() != QDialog::Accepted)
        return;
    const QString target = dialog.target();
    QApplication::setOverrideCursor(Qt::WaitCursor);
    QStringList errors;
    if (dialog.allViews()) {
        QDir().mkpath(target);
        QList<ResultView*> views = exportableViews();
        if (!m_result)   // only the sweep views have something to show
            views.erase(std::remove_if(views.begin(), views.end(), [this](ResultView* v) { return m_views.contains(v); }), views.end());
        errors = exportAllViews(views, target, dialog.format(), dialog.options());
        m_lastExportFolder = target;
    } else {
        const QString err = exportView(view, target, dialog.options());
        if (!err.isEmpty())
            errors << err;
        m_lastExportFolder = QFileInfo(target).absolutePath();
    }
    QApplication::restoreOverrideCursor();
    if (errors.isEmpty())
        statusBar()->showMessage(tr("Exported to %1").arg(target), 8000);
    else
        showMessage(errors.join(QLatin1Char('\n')), true);
}

bool MainWindow::exportMetricsCsv(const QString& path, QString* error)
{
    if (!m_result) {
        if (error)
            *error = tr("no result to export yet");
        return false;
    }
    QSaveFile out(path);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate) || out.write(metricsCsv(*m_result).toUtf8()) < 0 ||
        !out.commit()) {
        if (error)
            *error = tr("%1: cannot write (%2)").arg(path, out.errorString());
        return false;
    }
    return true;
}

bool MainWindow::exportMatrices(const QString& folder, QString* error)
{
    if (!m_result) {
        if (error)
            *error = tr("no result to export yet");
        return false;
    }
    try {
        for (const auto& o : m_result->outcomes) {
            if (!o.matrix)
                continue;
            const std::string path =
                QDir(folder).filePath(QStringLiteral("%1.npy").arg(QString::fromLatin1(attention::to_string(o.result.mechanism)))).toStdString();
            AtomicOutput out(path);
            io::write_npy(out.temp_path(), *o.matrix);
            out.commit();
        }
        if (m_result->mixing.size() > 0) {
            AtomicOutput out(QDir(folder).filePath(QStringLiteral("mixing.npy")).toStdString());
            io::write_npy(out.temp_path(), m_result->mixing);
            out.commit();
        }
    } catch (const std::exception& e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return false;
    }
    return true;
}

void MainWindow::chooseMetricsCsv()
{
    if (!m_result) {
        showMessage(tr("Nothing to export yet: open data and wait for the computation."), false);
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export metrics"),
                                                      QDir(m_lastExportFolder).filePath(QStringLiteral("metrics.csv")),
                                                      tr("CSV (*.csv)"));
    if (path.isEmpty())
        return;
    QString error;
    if (exportMetricsCsv(path, &error))
        statusBar()->showMessage(tr("Metrics written to %1").arg(path), 8000);
    else
        showMessage(error, true);
}

void MainWindow::chooseMatricesFolder()
{
    if (!m_result) {
        showMessage(tr("Nothing to export yet: open data and wait for the computation."), false);
        return;
    }
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Export matrices (softmax.npy, linear.npy, mhla.npy, mixing.npy) into"),
                                                             m_lastExportFolder);
    if (folder.isEmpty())
        return;
    QApplication::setOverrideCursor(Qt::WaitCursor);
    QString error;
    const bool ok = exportMatrices(folder, &error);
    QApplication::restoreOverrideCursor();
    if (ok)
        statusBar()->showMessage(tr("Matrices written to %1").arg(folder), 8000);
    else
        showMessage(error, true);
}

// -------------------------------------------------------------------------------------------- sessions

void MainWindow::chooseSessionToOpen()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open session"), QString(), tr("AttnScope sessions (*.attnscope)"));
    if (path.isEmpty())
        return;
    QString error;
    if (!loadSession(path, &error))
        showMessage(error, true);
}

void MainWindow::chooseSessionToSave(bool saveAs)
{
    QString path = m_sessionPath;
    if (saveAs || path.isEmpty()) {
        path = QFileDialog::getSaveFileName(this, tr("Save session"), path.isEmpty() ? QStringLiteral("session.attnscope") : path,
                                            tr("AttnScope sessions (*.attnscope)"));
        if (path.isEmpty())
            return;
        if (!path.endsWith(QLatin1String(".attnscope")))
            path += QStringLiteral(".attnscope");
    }
    QString error;
    if (saveSession(path, &error))
        statusBar()->showMessage(tr("Session saved to %1").arg(path), 6000);
    else
        showMessage(error, true);
}

QJsonObject MainWindow::sessionState(const QString& sessionFile) const
{
    QJsonObject s;
    s[QStringLiteral("attnscope_session")] = kSessionVersion;
    QJsonArray files;
    for (const QString& f : m_browser->files())
        files.append(sessionStoredPath(sessionFile, f));
    s[QStringLiteral("files")] = files;
    QJsonObject tensors;
    const char* keys[3] = {"q", "k", "v"};
    for (int r = 0; r < 3; ++r) {
        const auto t = m_browser->assigned(TensorRole(r));
        if (!t)
            continue;
        QJsonObject ref;
        ref[QStringLiteral("file")] = sessionStoredPath(sessionFile, t->file);
        ref[QStringLiteral("name")] = t->name;
        tensors[QString::fromLatin1(keys[r])] = ref;
    }
    s[QStringLiteral("tensors")] = tensors;
    s[QStringLiteral("selection")] = m_selection->saveState();
    s[QStringLiteral("mechanism")] = m_mechanism->saveState();
    if (ResultView* v = currentView())
        s[QStringLiteral("view")] = v->viewName();
    s[QStringLiteral("query")] = m_query;
    QJsonObject views;
    for (ResultView* v : m_views)
        views[v->viewName()] = v->saveState();
    for (SweepSlot* slot : {m_curvesSlot.get(), m_overviewSlot.get()}) {
        if (slot->view)
            views[slot->name] = slot->view->saveState();
        else if (slot->pendingState)
            views[slot->name] = *slot->pendingState;
    }
    s[QStringLiteral("views")] = views;
    // Sweeps are stored as their parameters (the results are recomputed when the session is opened).
    if (m_curvesSlot->requested)
        s[QStringLiteral("sweep")] = m_sweepParams->toJson();
    if (m_overviewSlot->requested)
        s[QStringLiteral("overview")] = true;
    return s;
}

bool MainWindow::saveSession(const QString& path, QString* error)
{
    if (!writeSessionFile(path, sessionState(path), error))
        return false;
    m_sessionPath = path;
    addRecentFile(path);
    updateTitle();
    return true;
}

bool MainWindow::loadSession(const QString& path, QString* error)
{
    const auto doc = readSessionFile(path, error);
    if (!doc)
        return false;
    if (!applySession(*doc, path, error))
        return false;
    m_sessionPath = path;
    addRecentFile(path);
    updateTitle();
    return true;
}

bool MainWindow::applySession(const QJsonObject& s, const QString& sessionFile, QString* error)
{
    auto fail = [&](const QString& why) {
        m_applyingSession = false;
        const QString text = tr("session %1: %2").arg(sessionFile, why);
        if (error)
            *error = text;
        showMessage(text, true);
        updateCentral();
        return false;
    };
    m_debounce.stop();
    m_applyingSession = true;
    resetSweeps();
    m_browser->closeAll();
    m_result.reset();
    for (ResultView* v : m_views)
        v->setResult(nullptr);
    for (const auto& f : s.value(QStringLiteral("files")).toArray()) {
        const QString path = sessionResolvedPath(sessionFile, f.toString());
        QString why;
        if (!m_browser->openFile(path, &why))
            return fail(tr("cannot open %1: %2").arg(path, why));
    }
    const QJsonObject tensors = s.value(QStringLiteral("tensors")).toObject();
    const char* keys[3] = {"q", "k", "v"};
    for (int r = 0; r < 3; ++r) {
        const QJsonObject ref = tensors.value(QString::fromLatin1(keys[r])).toObject();
        if (ref.isEmpty())
            continue;
        const QString file = sessionResolvedPath(sessionFile, ref.value(QStringLiteral("file")).toString());
        if (!m_browser->files().contains(file)) {
            QString why;
            if (!m_browser->openFile(file, &why))
                return fail(tr("cannot open %1: %2").arg(file, why));
        }
        const QString name = ref.value(QStringLiteral("name")).toString();
        if (!m_browser->setAssignment(TensorRole(r), file, name))
            return fail(tr("no tensor '%1' in %2").arg(name, file));
    }
    m_selection->setTensor(m_browser->assigned(TensorRole::queries));
    m_selection->restoreState(s.value(QStringLiteral("selection")).toObject());
    m_mechanism->setContext(m_selection->tokens(), m_selection->tokenGrid());
    m_mechanism->restoreState(s.value(QStringLiteral("mechanism")).toObject());
    const QJsonObject views = s.value(QStringLiteral("views")).toObject();
    for (ResultView* v : m_views)
        if (views.contains(v->viewName()))
            v->restoreState(views.value(v->viewName()).toObject());
    for (SweepSlot* slot : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (views.contains(slot->name))
            slot->pendingState = views.value(slot->name).toObject();
    const QString active = s.value(QStringLiteral("view")).toString(QStringLiteral("maps"));
    setCurrentView(active);
    m_pendingView = (active == m_curvesSlot->name || active == m_overviewSlot->name) ? active : QString();
    m_query = s.value(QStringLiteral("query")).toInt(-1);
    m_applyingSession = false;
    hideMessage();
    updateCentral();
    updateTitle();
    computeNow();
    // A session's sweeps rerun in the background; only the session's active view is brought forward.
    if (s.contains(QStringLiteral("sweep"))) {
        runSweep(SweepParams::fromJson(s.value(QStringLiteral("sweep")).toObject()));
        m_curvesSlot->activate = false;
    }
    if (s.value(QStringLiteral("overview")).toBool()) {
        runOverview();
        m_overviewSlot->activate = false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------- sweeps

MainWindow::SweepSlot& MainWindow::slot(const QString& view) const
{
    return view == m_overviewSlot->name ? *m_overviewSlot : *m_curvesSlot;
}

SweepView* MainWindow::curvesView() const { return m_curvesSlot->view; }
SweepView* MainWindow::overviewView() const { return m_overviewSlot->view; }

bool MainWindow::hasSweepResult(const QString& view) const
{
    return (view == m_curvesSlot->name || view == m_overviewSlot->name) && slot(view).result != nullptr;
}

std::shared_ptr<const analysis::SweepResult> MainWindow::sweepResult(const QString& view) const
{
    return hasSweepResult(view) ? slot(view).result : nullptr;
}

bool MainWindow::isSweeping() const
{
    return m_curvesSlot->running || m_overviewSlot->running;
}

void MainWindow::cancelSweeps()
{
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (s->running && s->runner)
            s->runner->cancel();
}

QList<ResultView*> MainWindow::exportableViews() const
{
    QList<ResultView*> views = m_views;
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (s->view && s->result)
            views << s->view;
    return views;
}

void MainWindow::resetSweeps()
{
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()}) {
        if (s->running)
            s->runner->cancel();
        s->running = false;
        s->job = 0;   // a late outcome of the cancelled job is dropped
        s->result.reset();
        s->pendingState.reset();
        s->requested = false;
        if (s->view) {
            m_tabs->removeTab(m_tabs->indexOf(s->view));
            s->view->deleteLater();
            s->view = nullptr;
        }
    }
    m_lastSweepError.clear();
    m_pendingView.clear();
    updateSweepStatus();
}

bool MainWindow::currentSource(analysis::TensorSource& source, QString* error) const
{
    const auto q = m_browser->assigned(TensorRole::queries);
    const auto k = m_browser->assigned(TensorRole::keys);
    if (!q || !k) {
        *error = tr("queries and keys are not assigned");
        return false;
    }
    const QString problem = m_selection->problem();
    if (!problem.isEmpty()) {
        *error = tr("Selection: %1").arg(problem);
        return false;
    }
    source.q_ref = q->ref().toStdString();
    source.k_ref = k->ref().toStdString();
    source.selection = m_selection->selection();
    return true;
}

void MainWindow::showSweepDialog()
{
    const bool haveData = m_browser->assigned(TensorRole::queries) && m_browser->assigned(TensorRole::keys);
    SweepDialog dialog(*m_sweepParams, haveData, this);
    if (dialog.exec() == QDialog::Accepted)
        runSweep(dialog.params());
}

void MainWindow::runSweep(const SweepParams& params)
{
    *m_sweepParams = params;
    m_curvesSlot->requested = true;
    analysis::SweepSpec spec;
    try {
        analysis::TensorSource source;
        QString why;
        const bool have = !params.synthetic && currentSource(source, &why);
        if (!params.synthetic && !have)
            throw std::invalid_argument(why.toStdString());
        spec = sweepSpec(params, have ? &source : nullptr, m_mechanism->options());
    } catch (const std::exception& e) {
        m_lastSweepError = tr("Sweep: %1").arg(QString::fromStdString(e.what()));
        showMessage(m_lastSweepError, true);
        emit sweepFinished(m_curvesSlot->name, false, m_lastSweepError);
        return;
    }
    const std::string mixingRef = m_mechanism->mixingFile().toStdString();
    startSweep(m_curvesSlot->name, [spec, mixingRef](const analysis::JobContext& ctx) mutable {
        if (!mixingRef.empty()) {
            ctx.progress(0.0, "reading the mixing matrix");
            spec.options.mixing.matrix = analysis::load_matrix(mixingRef);
        }
        auto records = analysis::run_sweep(analysis::plan_sweep(spec), ctx);
        return std::make_shared<const analysis::SweepResult>(analysis::SweepResult{std::move(spec), std::move(records)});
    });
}

void MainWindow::runOverview()
{
    m_overviewSlot->requested = true;
    analysis::TensorSource source;
    attention::AttentionOptions options;
    QString why;
    try {
        if (!currentSource(source, &why))
            throw std::invalid_argument(why.toStdString());
        options = m_mechanism->options();
    } catch (const std::exception& e) {
        m_lastSweepError = tr("Model overview: %1").arg(QString::fromStdString(e.what()));
        showMessage(m_lastSweepError, true);
        emit sweepFinished(m_overviewSlot->name, false, m_lastSweepError);
        return;
    }
    const std::string mixingRef = m_mechanism->mixingFile().toStdString();
    startSweep(m_overviewSlot->name, [source, options, mixingRef](const analysis::JobContext& ctx) mutable {
        if (!mixingRef.empty()) {
            ctx.progress(0.0, "reading the mixing matrix");
            options.mixing.matrix = analysis::load_matrix(mixingRef);
        }
        // overview_spec opens the file (layout of the queries): here, off the GUI thread.
        analysis::SweepSpec spec = analysis::overview_spec(source, options, analysis::MetricOptions{});
        spec.given = {true, true, true, true};   // the panels show every option in use
        auto records = analysis::run_sweep(analysis::plan_sweep(spec), ctx);
        return std::make_shared<const analysis::SweepResult>(analysis::SweepResult{std::move(spec), std::move(records)});
    });
}

void MainWindow::startSweep(const QString& view,
                            std::function<std::shared_ptr<const analysis::SweepResult>(const analysis::JobContext&)> work)
{
    using SweepPtr = std::shared_ptr<const analysis::SweepResult>;
    SweepSlot& s = slot(view);
    m_lastSweepError.clear();
    auto done = [this, view](analysis::JobOutcome<SweepPtr> outcome) {
        auto shared = std::make_shared<analysis::JobOutcome<SweepPtr>>(std::move(outcome));
        QMetaObject::invokeMethod(
            this,
            [this, view, shared] {
                SweepSlot& s = slot(view);
                if (shared->id != s.job)
                    return;   // replaced by a newer sweep of the same kind
                s.running = false;
                updateSweepStatus();
                const QString what = view == m_overviewSlot->name ? tr("Model overview") : tr("Sweep");
                if (shared->cancelled) {
                    statusBar()->showMessage(tr("%1 cancelled").arg(what), 5000);
                    emit sweepFinished(view, false, tr("cancelled"));
                    return;
                }
                if (!shared->error.empty()) {
                    m_lastSweepError = tr("%1: %2").arg(what, QString::fromStdString(shared->error));
                    showMessage(m_lastSweepError, true);
                    statusBar()->showMessage(m_lastSweepError, 10000);
                    emit sweepFinished(view, false, m_lastSweepError);
                    return;
                }
                finishSweep(view, *shared->result);
                statusBar()->showMessage(tr("%1 done: %2 analyses").arg(what).arg(qsizetype((*shared->result)->records.size())), 5000);
                emit sweepFinished(view, true, QString());
            },
            Qt::QueuedConnection);
    };
    auto progress = [this, view](double fraction, const std::string& stage) {
        const QString text = QString::fromStdString(stage);
        QMetaObject::invokeMethod(
            this,
            [this, view, fraction, text] {
                SweepSlot& s = slot(view);
                if (!s.running)
                    return;
                s.fraction = fraction;
                s.stage = text;
                updateSweepStatus();
            },
            Qt::QueuedConnection);
    };
    s.running = true;
    s.activate = true;
    s.fraction = 0;
    s.stage = tr("starting");
    s.job = s.runner->submit<SweepPtr>(std::move(work), done, progress);
    updateSweepStatus();
}

void MainWindow::finishSweep(const QString& view, std::shared_ptr<const analysis::SweepResult> result)
{
    SweepSlot& s = slot(view);
    s.result = std::move(result);
    const bool created = s.view == nullptr;
    if (created) {
        s.view = view == m_overviewSlot->name ? createOverviewView(m_tabs) : createCurvesView(m_tabs);
        m_tabs->addTab(s.view, view == m_overviewSlot->name ? tr("Overview") : tr("Curves"));
        connect(s.view, &ResultView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 6000); });
    }
    s.view->setSweep(s.result);
    if (s.pendingState) {
        s.view->restoreState(*s.pendingState);
        s.pendingState.reset();
    } else if (view == m_curvesSlot->name && created) {
        s.view->setMetric(m_sweepParams->metric);
    }
    if (s.activate || m_pendingView == view)
        m_tabs->setCurrentWidget(s.view);
    if (m_pendingView == view)
        m_pendingView.clear();
    updateCentral();
}

void MainWindow::updateSweepStatus()
{
    QStringList stages;
    double fraction = 1.0;
    bool any = false;
    for (SweepSlot* s : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (s->running) {
            any = true;
            stages << tr("%1: %2").arg(s == m_overviewSlot.get() ? tr("overview") : tr("sweep"), s->stage);
            fraction = std::min(fraction, s->fraction);
        }
    m_sweepStage->setText(stages.join(QStringLiteral(" · ")));
    m_sweepProgress->setValue(int(fraction * 1000));
    m_sweepStage->setVisible(any);
    m_sweepProgress->setVisible(any);
    m_sweepCancel->setVisible(any);
}

bool MainWindow::exportSweepCsv(const QString& path, const QString& view, QString* error)
{
    const auto result = sweepResult(view);
    if (!result) {
        if (error)
            *error = tr("no %1 result to export yet").arg(view);
        return false;
    }
    QSaveFile out(path);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
        out.write(QByteArray::fromStdString(analysis::sweep_csv(result->records))) < 0 || !out.commit()) {
        if (error)
            *error = tr("%1: cannot write (%2)").arg(path, out.errorString());
        return false;
    }
    return true;
}

void MainWindow::chooseSweepCsv()
{
    // The sweep of the current tab when it shows one, else the curves.
    ResultView* v = currentView();
    QString view = (v && v == overviewView()) ? m_overviewSlot->name : m_curvesSlot->name;
    if (!hasSweepResult(view))
        view = hasSweepResult(m_overviewSlot->name) ? m_overviewSlot->name : m_curvesSlot->name;
    if (!hasSweepResult(view)) {
        showMessage(tr("No sweep yet: run Analysis > Sweep... or Analysis > Model Overview."), false);
        return;
    }
    const QString path = QFileDialog::getSaveFileName(this, tr("Export sweep CSV"),
                                                      QDir(m_lastExportFolder).filePath(view + QStringLiteral(".csv")),
                                                      tr("CSV (*.csv)"));
    if (path.isEmpty())
        return;
    QString error;
    if (exportSweepCsv(path, view, &error))
        statusBar()->showMessage(tr("Sweep written to %1").arg(path), 8000);
    else
        showMessage(error, true);
}

}  // namespace attnscope::widgets
