#pragma once
// The desktop app's main window: a research notebook around one selection of queries and keys.
//
// Docks: the data browser (files, tensors, Q/K/V assignment), the selection panel (layout, index axes,
// prefix tokens, token grid) and the mechanism panel (every attention option). Centre: the six result
// views (maps, query, spectrum, entropy, mixing, metrics) as tabs. Any change of assignment, selection
// or options schedules one background computation (core analysis::explore on a JobRunner: queue depth
// one, a newer request replaces a pending one, the running one is cancelled); results come back to the
// GUI thread by queued invocation and a stale result (older job id) is dropped. Errors are shown in
// the window (message bar + status bar); nothing here computes.
#include <QHash>
#include <QJsonArray>
#include <QJsonObject>
#include <QMainWindow>
#include <QPointer>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "analysis/plan.h"

namespace attnscope::analysis {
struct ExploreRequest;
struct ExploreResult;
struct SweepResult;
struct TensorSource;
struct JobContext;
}

class QLabel;
class QMenu;
class QProgressBar;
class QStackedWidget;
class QTabWidget;
class QToolButton;
class QFrame;
class QAction;
class QDockWidget;

namespace attnscope::widgets {

class DataBrowser;
class SelectionPanel;
class MechanismPanel;
class ResultView;
class SweepView;
struct SweepParams;
struct SweepDataContext;
struct ExportOptions;
template <class Result>
class GuiJob;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Opens data files (headers only) and .attnscope sessions; errors show in the tree, the message
    // bar and the status bar. Assigns Q/K/V from names when nothing is assigned yet.
    void openFiles(const QStringList& paths);

    // Sessions (session.h). Loading restores everything and recomputes.
    bool loadSession(const QString& path, QString* error = nullptr);
    bool saveSession(const QString& path, QString* error = nullptr);
    QJsonObject sessionState(const QString& sessionFile) const;
    bool applySession(const QJsonObject& session, const QString& sessionFile, QString* error = nullptr);

    // False: never open a modal dialog (tests, --screenshot); questions take their safe answer
    // (a computation above the memory limit runs when it fits in physical memory).
    void setInteractive(bool interactive) { m_interactive = interactive; }

    // False: a change of data, selection or options no longer schedules a computation (one already
    // scheduled is dropped); computeNow() and loading a session still compute. `attnscope FILE...
    // --save-session` records what opening the files shows without computing it (docs/cli.md).
    void setAutoCompute(bool on);

    // Computation state.
    bool isComputing() const;                     // a change waits for the debounce or a job runs
    void computeNow();                            // starts the pending computation without the debounce
    void cancelComputation();
    // The result the views hold (possibly out of date: see resultIsCurrent()), or null.
    std::shared_ptr<const analysis::ExploreResult> result() const { return m_result; }
    // True when the views' result answers the current inputs and options (nothing changed since).
    bool resultIsCurrent() const { return m_result && m_resultCurrent; }
    QString lastError() const { return m_lastError; }

    // Query and views.
    int query() const { return m_query; }
    void setQuery(int token);
    QList<ResultView*> views() const { return m_views; }
    // The View menu's actions that switch to a tab, one per tab in tab order (Ctrl+1 ... Ctrl+9, Ctrl+0 for
    // the tenth): kept in step with the tabs, so the Curves and Overview tabs get theirs when they open.
    QList<QAction*> viewActions() const { return m_viewActions; }
    ResultView* currentView() const;
    void setCurrentView(const QString& name);
    bool stepIndex(int delta);                    // steps the head axis (or the first index axis)
    bool stepLayer(int delta);                    // steps the layer ('l' axis, or per-layer datasets)
    void switchLayer(int layer);                  // assigns that layer's per-layer datasets
    // Shows layer `layer` (-1: keep) and head `head` in the maps (a click on a model-overview cell).
    void jumpTo(int layer, int head);

    // Exports (File menu); false and *error on failure.
    bool exportMetricsCsv(const QString& path, QString* error = nullptr);
    bool exportMatrices(const QString& folder, QString* error = nullptr);
    // "All views into a folder": every exportable view that shows the current inputs (and the sweep views), at
    // `options` or, with `preset` (export_dialog.h), each at the preset's width and its own height. Returns the
    // errors; `exported` and `leftOut` (the views not computed for the current inputs, by name: Heads and Depth
    // until their tabs have been shown) say what the message names.
    QStringList exportEveryView(const QString& folder, const QString& format, const QString& preset,
                                const ExportOptions& options, int* exported = nullptr, QStringList* leftOut = nullptr);

    DataBrowser* dataBrowser() const { return m_browser; }
    SelectionPanel* selectionPanel() const { return m_selection; }
    MechanismPanel* mechanismPanel() const { return m_mechanism; }
    QString messageText() const;                  // the message bar's text ("" when hidden)
    void fitDocks();   // the docks' shares of the window's present size (fitToScreen, a screenshot's --size)

    // Sweeps (Analysis menu): each runs in the background on its own JobRunner (progress and Cancel in
    // the status bar) and opens its tab when done: "curves" (Sweep..., on the current data or synthetic
    // data) and "overview" (Model Overview: every layer x head of the current Q/K). Sessions store the
    // finished sweeps with their records and the views' states; loading a session never runs a sweep.
    // What the sweep dialog checks against: the current data, selection and options, the learned mixing
    // matrix read (a problem when it cannot be).
    SweepDataContext sweepDataContext() const;
    void runSweep(const SweepParams& params);
    void runOverview();
    bool isSweeping() const;
    void cancelSweeps();
    SweepView* curvesView() const;                // null until a sweep finished
    SweepView* overviewView() const;
    bool hasSweepResult(const QString& view) const;                         // "curves" or "overview"
    std::shared_ptr<const analysis::SweepResult> sweepResult(const QString& view) const;
    QString lastSweepError() const { return m_lastSweepError; }
    // The long-format CSV (analysis::sweep_csv) of the "curves" or "overview" sweep.
    bool exportSweepCsv(const QString& path, const QString& view, QString* error = nullptr);
    // The six result views plus the sweep views that have a result (what the export dialog exports).
    QList<ResultView*> exportableViews() const;
    QString exportFolder() const;   // where exports go unless the user says (defaultExportFolder, export_dialog.h)

signals:
    void computationStarted();
    // Every scheduled computation ends here (ok, or the error: bad selection, core failure, cancelled).
    void computationFinished(bool ok, const QString& error);
    // Every sweep ends here ("curves" or "overview"; ok, or the error / "cancelled").
    void sweepFinished(const QString& view, bool ok, const QString& error);
    // Every computation of the Heads view's page ends here (ok, or the error / "cancelled").
    void headsFinished(bool ok, const QString& error);
    // Every computation of the Depth view's products ends here (ok, or the error / "cancelled").
    void depthFinished(bool ok, const QString& error);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;

private:
    // The window itself (main_window.cpp).
    void buildCentral();
    void buildDocks();
    QDockWidget* addDock(const QString& title, const QString& objectName, QWidget* content, Qt::DockWidgetArea area);
    void buildMenus();
    void updateViewActions();
    void buildStatusBar();
    QWidget* buildWelcome();
    void fitToScreen();
    void chooseFiles();
    void addRecentFile(const QString& path);
    void fillRecentMenu();
    bool openOne(const QString& path, QString* error);

    void showMessage(const QString& text, bool error);
    void hideMessage();
    void updateTitle();
    void updateCentral();

    // A job's stage label, progress bar and Cancel button at the right of the status bar.
    struct JobIndicator {
        QLabel* stage = nullptr;
        QProgressBar* progress = nullptr;
        QToolButton* cancel = nullptr;
        void setVisible(bool visible) const;
    };
    JobIndicator addJobIndicator(int width, const QString& cancelText, const QString& cancelTip);

    // The explore computation (main_window_explore.cpp).
    void onAssignmentChanged();
    void onFilesChanged();
    void saveFileState(const QString& file);
    QJsonArray fileStatesState(const QString& sessionFile) const;   // main_window_session.cpp
    void restoreFileStates(const QJsonArray& states, const QString& sessionFile);
    bool showFile(const QString& file);
    QString noDataReason() const;
    void applyFileDefaults(const io::TensorRef& queries);
    void updateLayers();
    void updateHeadPairing();
    void onSelectionChanged();
    void scheduleCompute();
    void setUpComputation();
    void startComputation();
    bool buildRequest(analysis::ExploreRequest& request);
    bool approveMemory(analysis::ExploreRequest& request);
    void showResult(std::shared_ptr<const analysis::ExploreResult> result);
    void finishWithError(const QString& error);
    // The views' result no longer answers the inputs: greyed under `why` (kept for orientation).
    void markOutOfDate(const QString& why);
    // Nothing to show for the current inputs: the views are cleared, `why` says so.
    void clearResult(const QString& why);

    // Sessions (main_window_session.cpp).
    void chooseSessionToOpen();
    void chooseSessionToSave(bool saveAs);

    // Exports (main_window_export.cpp).
    void showExportDialog();
    void chooseMetricsCsv();
    void chooseMatricesFolder();
    void chooseSweepCsv();

    // Sweeps (main_window_sweeps.cpp).
    struct SweepSlot;
    SweepSlot& slot(const QString& view) const;
    void setUpSweepSlot(SweepSlot& s);
    void showSweepDialog();
    void refuseSweep(const QString& view, const QString& error);
    void startSweep(const QString& view, std::function<std::shared_ptr<const analysis::SweepResult>(const analysis::JobContext&)> work);
    void finishSweep(const QString& view, std::shared_ptr<const analysis::SweepResult> result);
    void updateSweepStatus();
    void resetSweeps();
    bool currentSource(analysis::TensorSource& source, QString* error) const;
    QString staleReason(const analysis::SweepResult& run, bool overview) const;
    void updateSweepProvenance();                          // marks runs that no longer match the current inputs
    void activateOverviewCell(int layer, int head);         // a click on the overview: on the overview's file
    void removeRun(SweepSlot& s, const QString& name);
    void showSweepRuns(SweepSlot& s);                       // the slot's tab: created when needed, given its runs
    void clearSweepError();                                 // hides a failed sweep's message
    QJsonObject sweepsState(const QString& sessionFile) const;   // finished runs for the session ("sweeps")
    // A session's runs (or a note); returns a message for the bar.
    QString restoreSweeps(const QJsonObject& session, const QString& sessionFile);

    // The Heads view (main_window_heads.cpp): its page computed for the request of the views' result while its
    // tab is current, on its own job (isComputing() includes it); a click on a head opens it in the Maps view.
    struct HeadsSlot;
    void setUpHeads();
    void updateHeads();
    void openHead(int head);

    // The Depth view (main_window_depth.cpp): the products of the layers of the views' queries' file, computed
    // for the request of the views' result and the view's alpha and heads while its tab is current, on its own job
    // (isComputing() includes it).
    struct DepthSlot;
    void setUpDepth();
    void updateDepth();

    std::unique_ptr<GuiJob<std::shared_ptr<const analysis::ExploreResult>>> m_explore;
    qint64 m_approvedTokens = -1;
    QTimer m_debounce;
    std::shared_ptr<const analysis::ExploreResult> m_result;
    QString m_lastError;
    QString m_attributeProblem;   // the queries' file has an attribute that cannot be used (applyFileDefaults)
    QString m_sessionPath;
    QString m_lastExportFolder;
    QString m_defaultsRef;                        // the queries whose file defaults the panels hold
    QString m_defaultsFile;                       // ... and their file
    bool m_userChangedOptions = false;            // the user changed an option since (an override for this file)
    bool m_settingPanels = false;                 // the window itself is setting the panels
    // One state per open file: what the window shows when it comes back to the file.
    struct FileState {
        QJsonObject mechanism, selection;         // the panels' states
        bool userChanged = false;                 // the user changed an option there
        QStringList tensors;                      // names of the queries, keys, values in the file
        int query = -1;                           // the selected query token (-1: none)
    };
    QHash<QString, FileState> m_fileStates;
    QStringList m_lastTensors;                    // the current file's tensor names (q, k, v)
    QString m_unusable;                           // why the file opened last cannot be shown (one tensor ...)
    QString m_unusableFile;                       // ... and that file
    std::vector<analysis::LayerTensors> m_layers; // per-layer datasets of the queries' file (may be empty)
    bool m_resultCurrent = false;                 // m_result answers the current inputs
    int m_query = -1;
    bool m_interactive = true;
    bool m_autoCompute = true;
    bool m_applyingSession = false;

    DataBrowser* m_browser = nullptr;
    SelectionPanel* m_selection = nullptr;
    MechanismPanel* m_mechanism = nullptr;
    QList<ResultView*> m_views;
    QStackedWidget* m_stack = nullptr;
    QTabWidget* m_tabs = nullptr;
    QFrame* m_messageBar = nullptr;
    QLabel* m_message = nullptr;
    JobIndicator m_computeStatus;
    QLabel* m_info = nullptr;
    QMenu* m_recentMenu = nullptr;
    QMenu* m_viewMenu = nullptr;
    QList<QAction*> m_viewActions;

    std::unique_ptr<SweepSlot> m_curvesSlot, m_overviewSlot;
    std::unique_ptr<HeadsSlot> m_heads;
    std::unique_ptr<DepthSlot> m_depth;
    std::unique_ptr<SweepParams> m_sweepParams;   // the dialog's last parameters
    QString m_lastSweepError;
    QString m_pendingView;                       // a session's active view that waits for its sweep
    JobIndicator m_sweepStatus;
};

}  // namespace attnscope::widgets
