// MainWindow, the window itself: construction (centre, docks, menus, status bar), the selected query and
// view, the title and the message bar. The start page, opening files, the explore computation, sessions,
// exports and sweeps are in main_window_welcome.cpp, main_window_files.cpp, main_window_explore.cpp,
// main_window_session.cpp, main_window_export.cpp and main_window_sweeps.cpp.
#include "main_window.h"

#include "io/selection.h"

#include <QAction>
#include <QCloseEvent>
#include <QCoreApplication>
#include <QDockWidget>
#include <QFileInfo>
#include <QFrame>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPainter>
#include <QProgressBar>
#include <QScreen>
#include <QScrollArea>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <functional>
#include <utility>

#include "data_browser.h"
#include "main_window_p.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"
#include "sweep_dialog.h"
#include "views.h"

namespace attnscope::widgets {

namespace {

constexpr int kDebounceMs = 150;

// The views' tabs, telling the window when a tab comes or goes (the Curves and Overview tabs open with
// their first run), so that the View menu's shortcuts follow the tabs.
class ViewTabs : public QTabWidget {
public:
    ViewTabs(QWidget* parent, std::function<void()> changed) : QTabWidget(parent), m_changed(std::move(changed)) {}
    // The window is going: its pages are deleted after it, and their tabs go without telling it.
    void forget() { m_changed = [] {}; }

protected:
    void tabInserted(int index) override { QTabWidget::tabInserted(index); m_changed(); }
    void tabRemoved(int index) override { QTabWidget::tabRemoved(index); m_changed(); }

private:
    std::function<void()> m_changed;
};

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

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent), m_explore(std::make_unique<GuiJob<ExploreResultPtr>>()), m_curvesSlot(std::make_unique<SweepSlot>()),
      m_overviewSlot(std::make_unique<SweepSlot>()), m_heads(std::make_unique<HeadsSlot>()),
      m_depth(std::make_unique<DepthSlot>()), m_sweepParams(std::make_unique<SweepParams>())
{
    m_curvesSlot->name = QStringLiteral("curves");
    m_overviewSlot->name = QStringLiteral("overview");
    setWindowTitle(QStringLiteral("AttnScope"));
    setAcceptDrops(true);
    setDockOptions(QMainWindow::AnimatedDocks | QMainWindow::AllowTabbedDocks);
    buildCentral();
    buildDocks();
    m_debounce.setSingleShot(true);
    m_debounce.setInterval(kDebounceMs);
    connect(&m_debounce, &QTimer::timeout, this, &MainWindow::startComputation);

    buildMenus();
    buildStatusBar();
    setUpComputation();
    setUpSweepSlot(*m_curvesSlot);
    setUpSweepSlot(*m_overviewSlot);
    setUpHeads();
    setUpDepth();
    updateCentral();
    fitToScreen();
}

// The jobs join their workers when they are destroyed, before the widgets their handlers touch.
MainWindow::~MainWindow()
{
    if (auto* tabs = dynamic_cast<ViewTabs*>(m_tabs))
        tabs->forget();
}

// ---------------------------------------------------------------------------------------------- setup

// Centre: message bar above a stack of (welcome page | view tabs).
void MainWindow::buildCentral()
{
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
    m_tabs = new ViewTabs(m_stack, [this] { updateViewActions(); });
    m_tabs->setDocumentMode(true);
    // Tabs carry one short word each (the full title in the tool tip and the View menu); a window narrower
    // still shortens them rather than hiding tabs behind arrows.
    m_tabs->setElideMode(Qt::ElideRight);
    m_tabs->setUsesScrollButtons(false);
    m_views = createAllViews(m_tabs);
    for (ResultView* v : m_views) {
        m_tabs->setTabToolTip(m_tabs->addTab(v, v->tabLabel()), v->viewTitle());
        connect(v, &ResultView::querySelected, this, &MainWindow::setQuery);
        connect(v, &ResultView::statusMessage, this, [this](const QString& text) { statusBar()->showMessage(text, 6000); });
    }
    m_stack->addWidget(m_tabs);
    // An explicit minimum keeps a view's long unwrapped label from squeezing the docks off screen.
    m_stack->setMinimumSize(420, 300);
    cl->addWidget(m_stack, 1);
    setCentralWidget(central);
}

QDockWidget* MainWindow::addDock(const QString& title, const QString& objectName, QWidget* content, Qt::DockWidgetArea area)
{
    auto* dock = new QDockWidget(title, this);
    dock->setObjectName(objectName);
    dock->setWidget(content);
    addDockWidget(area, dock);
    return dock;
}

void MainWindow::buildDocks()
{
    m_browser = new DataBrowser(this);
    addDock(tr("Data"), QStringLiteral("dataDock"), m_browser, Qt::LeftDockWidgetArea);
    m_selection = new SelectionPanel(this);
    addDock(tr("Selection"), QStringLiteral("selectionDock"), scrolled(m_selection), Qt::LeftDockWidgetArea);
    m_mechanism = new MechanismPanel(this);
    addDock(tr("Mechanisms"), QStringLiteral("mechanismDock"), scrolled(m_mechanism), Qt::RightDockWidgetArea);

    connect(m_browser, &DataBrowser::assignmentChanged, this, &MainWindow::onAssignmentChanged);
    connect(m_browser, &DataBrowser::filesChanged, this, &MainWindow::onFilesChanged);
    connect(m_browser, &DataBrowser::showFileRequested, this, [this](const QString& file) {
        if (!showFile(file))
            showMessage(tr("%1 has no queries and keys the window can use: assign them from its tensors (right-click one).")
                            .arg(QFileInfo(file).fileName()),
                        true);
    });
    connect(m_selection, &SelectionPanel::changed, this, &MainWindow::onSelectionChanged);
    connect(m_selection, &SelectionPanel::layerRequested, this, &MainWindow::switchLayer);
    connect(m_mechanism, &MechanismPanel::changed, this, [this] {
        if (!m_settingPanels)
            m_userChangedOptions = true;   // an explicit choice: it stays with this file
        updateSweepProvenance();
        scheduleCompute();
    });
}

void MainWindow::buildMenus()
{
    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open..."), QKeySequence::Open, this, &MainWindow::chooseFiles);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    connect(m_recentMenu, &QMenu::aboutToShow, this, &MainWindow::fillRecentMenu);
    file->addAction(tr("&Close File"), QKeySequence::Close, this, [this] {
        // The file shown (that of the current queries); the one selected in the Data dock only when none is
        // shown. The dock's context menu closes any other ("Close this file").
        const auto q = m_browser->assigned(TensorRole::queries);
        const QString path = q ? q->file : m_browser->currentFile();
        if (path.isEmpty() || !m_browser->closeFile(path))
            statusBar()->showMessage(tr("No file to close"), 3000);
        updateTitle();
    });
    file->addAction(tr("Close &All Files"), this, [this] {
        m_browser->closeAll();
        m_sessionPath.clear();
        hideMessage();   // a message about a file that is closed now says nothing true any more
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

    m_viewMenu = menuBar()->addMenu(tr("&View"));
    m_viewMenu->addSeparator();
    for (QDockWidget* d : findChildren<QDockWidget*>())
        m_viewMenu->addAction(d->toggleViewAction());
    updateViewActions();

    auto* sel = menuBar()->addMenu(tr("&Selection"));
    QAction* next = sel->addAction(tr("&Next Head"), this, [this] { stepIndex(+1); });
    next->setShortcuts({QKeySequence(Qt::Key_PageDown), QKeySequence(Qt::ALT | Qt::Key_Right)});
    QAction* prev = sel->addAction(tr("&Previous Head"), this, [this] { stepIndex(-1); });
    prev->setShortcuts({QKeySequence(Qt::Key_PageUp), QKeySequence(Qt::ALT | Qt::Key_Left)});
    QAction* nextLayer = sel->addAction(tr("Next &Layer"), this, [this] { stepLayer(+1); });
    nextLayer->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_PageDown), QKeySequence(Qt::ALT | Qt::Key_Down)});
    QAction* prevLayer = sel->addAction(tr("Previous L&ayer"), this, [this] { stepLayer(-1); });
    prevLayer->setShortcuts({QKeySequence(Qt::CTRL | Qt::Key_PageUp), QKeySequence(Qt::ALT | Qt::Key_Up)});
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

void MainWindow::JobIndicator::setVisible(bool visible) const
{
    stage->setVisible(visible);
    progress->setVisible(visible);
    cancel->setVisible(visible);
}

// Added at the right of the status bar, hidden until the job runs.
MainWindow::JobIndicator MainWindow::addJobIndicator(int width, const QString& cancelText, const QString& cancelTip)
{
    JobIndicator j;
    j.stage = new ElidedLabel(this);
    j.progress = new QProgressBar(this);
    j.progress->setRange(0, 1000);
    j.progress->setFixedWidth(width);
    j.progress->setTextVisible(false);
    j.cancel = new QToolButton(this);
    j.cancel->setText(cancelText);
    j.cancel->setToolTip(cancelTip);
    statusBar()->addPermanentWidget(j.stage);
    statusBar()->addPermanentWidget(j.progress);
    statusBar()->addPermanentWidget(j.cancel);
    j.setVisible(false);
    return j;
}

// One action per tab, in tab order, before the docks' toggles: Ctrl+1 ... Ctrl+9, then Ctrl+0.
void MainWindow::updateViewActions()
{
    if (!m_viewMenu)
        return;
    for (QAction* a : std::as_const(m_viewActions)) {
        m_viewMenu->removeAction(a);
        a->deleteLater();
    }
    m_viewActions.clear();
    QAction* before = m_viewMenu->actions().value(0);
    for (int i = 0; i < m_tabs->count(); ++i) {
        QWidget* tab = m_tabs->widget(i);
        // The view's full title ("Singular value spectrum"); the sweep tabs' label is their title.
        const QString title = m_tabs->tabToolTip(i).isEmpty() ? m_tabs->tabText(i) : m_tabs->tabToolTip(i);
        auto* a = new QAction(title, m_viewMenu);
        connect(a, &QAction::triggered, this, [this, tab] {
            m_tabs->setCurrentWidget(tab);
            updateCentral();
        });
        if (i < 10)
            a->setShortcut(QKeySequence(QStringLiteral("Ctrl+%1").arg((i + 1) % 10)));
        m_viewMenu->insertAction(before, a);
        m_viewActions.append(a);
    }
}

void MainWindow::buildStatusBar()
{
    m_computeStatus = addJobIndicator(160, tr("Cancel"), tr("Cancel the running computation (Esc)"));
    connect(m_computeStatus.cancel, &QToolButton::clicked, this, &MainWindow::cancelComputation);
    m_info = new ElidedLabel(this);
    statusBar()->addPermanentWidget(m_info);
    m_sweepStatus = addJobIndicator(120, tr("Cancel sweep"), tr("Cancel the running sweeps (Analysis > Cancel Sweeps)"));
    connect(m_sweepStatus.cancel, &QToolButton::clicked, this, &MainWindow::cancelSweeps);
}

// The first window takes 92 % of the screen's available area, up to 1600 x 1000, never more than that area
// less room for a window manager's frame (unknown before the window is shown), and is centred on it; the
// docks take their shares of that width and height (docs/gui.md "Screen sizes"). The views, docks and
// status bar have small minimum sizes (wrapping tool rows, scrolled docks, elided status texts), so even
// 1280 x 720 shows every dock and the status bar.
void MainWindow::fitToScreen()
{
    const QScreen* screen = this->screen() ? this->screen() : QGuiApplication::primaryScreen();
    const QRect avail = screen ? screen->availableGeometry() : QRect(0, 0, 1600, 1000);
    const QSize frame(16, 40);
    const QSize size = QSize(std::min(1600, avail.width() * 92 / 100), std::min(1000, avail.height() * 92 / 100))
                           .boundedTo(avail.size() - frame)
                           .expandedTo(QSize(640, 480));
    resize(size);
    move(avail.left() + std::max(0, (avail.width() - size.width() - frame.width()) / 2),
         avail.top() + std::max(0, (avail.height() - size.height() - frame.height()) / 2));
    fitDocks();
}

void MainWindow::fitDocks()
{
    const QSize size = this->size();
    auto* data = findChild<QDockWidget*>(QStringLiteral("dataDock"));
    auto* selection = findChild<QDockWidget*>(QStringLiteral("selectionDock"));
    auto* mechanisms = findChild<QDockWidget*>(QStringLiteral("mechanismDock"));
    resizeDocks({data, mechanisms}, {std::min(270, size.width() / 5), std::min(285, size.width() * 22 / 100)}, Qt::Horizontal);
    resizeDocks({data, selection}, {size.height() * 55 / 100, size.height() * 35 / 100}, Qt::Vertical);
}

QSize ElidedLabel::minimumSizeHint() const
{
    return {fontMetrics().horizontalAdvance(QStringLiteral("…")) * 4, QLabel::minimumSizeHint().height()};
}

void ElidedLabel::paintEvent(QPaintEvent*)
{
    QPainter painter(this);
    const QRect r = contentsRect();
    const QString shown = fontMetrics().elidedText(text(), Qt::ElideRight, r.width());
    setToolTip(shown == text() ? QString() : text());
    painter.drawText(r, static_cast<int>(alignment()), shown);
}

void MainWindow::closeEvent(QCloseEvent* event)
{
    m_explore->cancel();
    cancelSweeps();
    QMainWindow::closeEvent(event);
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

bool MainWindow::stepLayer(int delta)
{
    const bool moved = m_selection->stepLayer(delta);
    if (!moved)
        statusBar()->showMessage(m_selection->currentLayer() < 0 && m_selection->stepAxis() != QLatin1Char('l')
                                     ? tr("These queries have no layers to step")
                                     : delta > 0 ? tr("Last layer") : tr("First layer"),
                                 2000);
    return moved;
}

void MainWindow::switchLayer(int layer)
{
    for (const analysis::LayerTensors& l : m_layers) {
        if (l.layer != layer)
            continue;
        const io::TensorRef &q = l.q_ref, &k = l.k_ref;
        const QString v = l.v_ref ? QString::fromStdString(l.v_ref->name) : QString();
        if (!m_browser->assignTensors(QString::fromStdString(q.file), QString::fromStdString(q.name),
                                      QString::fromStdString(k.name), v))
            statusBar()->showMessage(tr("Layer %1: its tensors are not in the Data dock").arg(layer), 4000);
        return;
    }
}

void MainWindow::jumpTo(int layer, int head)
{
    if (layer >= 0) {
        if (m_selection->layout().contains(QLatin1Char('l')))
            m_selection->setIndex(QLatin1Char('l'), layer);
        else if (m_selection->currentLayer() != layer)
            switchLayer(layer);
    }
    if (head >= 0)
        m_selection->setIndex(QLatin1Char('h'), head);
    setCurrentView(QStringLiteral("maps"));
    statusBar()->showMessage(layer >= 0 ? tr("Layer %1, head %2").arg(layer).arg(head) : tr("Head %1").arg(head), 4000);
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
    // A finished sweep or overview is data too: its tab stays reachable after Close All, and one that finishes
    // then opens its tab instead of finishing silently behind the start page.
    const bool haveData = !m_browser->files().isEmpty() || m_result || hasSweepResult(QStringLiteral("curves")) ||
                          hasSweepResult(QStringLiteral("overview"));
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

}  // namespace attnscope::widgets
