// MainWindow, sessions: choosing a session file, the session document of the window's state, and applying
// one (files, Q/K/V, selection, options, views, finished sweeps with their records). The file format is
// session.h's.
#include <QFileDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QStatusBar>
#include <QTabWidget>

#include "analysis/measure.h"
#include "analysis/session_rules.h"
#include "io/selection.h"
#include "io/tensor_file.h"
#include "curves.h"
#include "data_browser.h"
#include "main_window_p.h"
#include "mechanism_panel.h"
#include "result_view.h"
#include "selection_panel.h"
#include "session.h"
#include "sweep_dialog.h"
#include "util/json_text.h"

namespace attnscope::widgets {

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

// The state of every open file other than the one shown (whose state is the session's own selection and
// mechanism): what the window shows when it comes back to that file, with paths relative to the session.
QJsonArray MainWindow::fileStatesState(const QString& sessionFile) const
{
    QJsonArray states;
    const QStringList open = m_browser->files();
    for (const QString& file : open) {
        const auto it = m_fileStates.constFind(file);
        if (file == m_defaultsFile || it == m_fileStates.cend())
            continue;
        QJsonObject mechanism = it->mechanism;
        mechanism[QStringLiteral("mixing_file")] = sessionStoredPath(sessionFile, mechanism.value(QStringLiteral("mixing_file")).toString());
        mechanism[QStringLiteral("gates")] = sessionStoredReference(sessionFile, mechanism.value(QStringLiteral("gates")).toString());
        states.append(QJsonObject{{QStringLiteral("file"), sessionStoredPath(sessionFile, file)},
                                  {QStringLiteral("tensors"), QJsonArray::fromStringList(it->tensors)},
                                  {QStringLiteral("selection"), it->selection},
                                  {QStringLiteral("mechanism"), mechanism},
                                  {QStringLiteral("user_changed"), it->userChanged}});
    }
    return states;
}

// The other open files' states of a session (fileStatesState); entries of files it did not open are ignored.
void MainWindow::restoreFileStates(const QJsonArray& states, const QString& sessionFile)
{
    for (const auto& v : states) {
        const QJsonObject o = v.toObject();
        const QString file = sessionResolvedPath(sessionFile, o.value(QStringLiteral("file")).toString());
        if (!m_browser->files().contains(file) || file == m_defaultsFile)
            continue;
        FileState st;
        st.mechanism = o.value(QStringLiteral("mechanism")).toObject();
        st.mechanism[QStringLiteral("mixing_file")] =
            sessionResolvedPath(sessionFile, st.mechanism.value(QStringLiteral("mixing_file")).toString());
        st.mechanism[QStringLiteral("gates")] = sessionResolvedReference(sessionFile, st.mechanism.value(QStringLiteral("gates")).toString());
        st.selection = o.value(QStringLiteral("selection")).toObject();
        st.userChanged = o.value(QStringLiteral("user_changed")).toBool();
        for (const auto& t : o.value(QStringLiteral("tensors")).toArray())
            st.tensors << t.toString();
        m_fileStates.insert(file, st);
    }
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
    // The learned mixing file, like every path of a session, relative to the session file (the panel
    // holds it as chosen: absolute, or relative to the working directory).
    QJsonObject mechanism = m_mechanism->saveState();
    mechanism[QStringLiteral("mixing_file")] = sessionStoredPath(sessionFile, mechanism.value(QStringLiteral("mixing_file")).toString());
    mechanism[QStringLiteral("gates")] = sessionStoredReference(sessionFile, mechanism.value(QStringLiteral("gates")).toString());
    s[QStringLiteral("mechanism")] = mechanism;
    if (const QJsonArray states = fileStatesState(sessionFile); !states.isEmpty())
        s[QStringLiteral("file_states")] = states;
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
    // Finished sweeps with their records: a session shows them as they were and never starts a sweep.
    // The dialog's last parameters only fill the dialog again.
    const QJsonObject sweeps = sweepsState(sessionFile);
    if (!sweeps.isEmpty())
        s[QStringLiteral("sweeps")] = sweeps;
    if (m_sweepParams->toJson() != SweepParams().toJson())
        s[QStringLiteral("sweep_dialog")] = m_sweepParams->toJson();
    return s;
}

namespace {

QJsonObject toQt(const nlohmann::ordered_json& j)
{
    return QJsonDocument::fromJson(QByteArray::fromStdString(json_text(j))).object();
}

// Why the session's indices do not fit the data it opened ("" when they do): every axis index of
// "selection.at" within its axis of the queries' shape, "selection.prefix_tokens" below N, and the query a
// token (or -1). The panels would clamp them silently (head 99 of 4 drawn as head 3).
// A selection's indices (at.*, prefix_tokens) against the queries they select from; keys named under `key`.
QString selectionIndexProblem(const QJsonObject& selection, const std::string& key, const TensorEntry& queries_, const QString& layout)
{
    const TensorEntry* queries = &queries_;
    const bool fits = layout.size() == queries->shape.size();
    const QJsonObject at = selection.value(QStringLiteral("at")).toObject();
    for (auto it = at.begin(); it != at.end() && fits; ++it) {
        const qsizetype axis = layout.indexOf(it.key());
        if (axis < 0 || it.key() == QLatin1String("n") || it.key() == QLatin1String("d"))
            continue;   // not an index axis of this layout: unused
        const std::string p = analysis::session_index_problem(key + ".at." + it.key().toStdString(), it->toInteger(),
                                                              queries->shape[axis]);
        if (!p.empty()) {
            QStringList shape;
            for (qint64 n : queries->shape)
                shape << QString::number(n);
            return QString::fromStdString(p) + QObject::tr(" (the queries %1 have shape %2, layout %3)")
                                                   .arg(queries->ref(), shape.join(QStringLiteral(" x ")), layout);
        }
    }
    const qsizetype nAxis = layout.indexOf(QLatin1Char('n'));
    if (fits && nAxis >= 0 && selection.contains(QStringLiteral("prefix_tokens")))
        if (const std::string p = analysis::session_index_problem(
                key + ".prefix_tokens", selection.value(QStringLiteral("prefix_tokens")).toInteger(), queries->shape[nAxis]);
            !p.empty())
            return QString::fromStdString(p);
    return {};
}

QString sessionIndexProblem(const QJsonObject& s, const std::optional<TensorEntry>& queries, const QString& layout, qint64 tokens)
{
    if (!queries)
        return {};
    if (const QString p = selectionIndexProblem(s.value(QStringLiteral("selection")).toObject(), "selection", *queries, layout);
        !p.isEmpty())
        return p;
    if (tokens > 0 && s.contains(QStringLiteral("query")))
        if (const std::string p = analysis::session_index_problem("query", s.value(QStringLiteral("query")).toInteger(), tokens, true);
            !p.empty())
            return QString::fromStdString(p) + QObject::tr(" (a token of N=%1)").arg(tokens);
    return {};
}

}  // namespace

namespace {

// A stored run's data references (its spec's inputs, each record's input) mapped by `map`: relative to the
// session when saved, back to paths when read, like every path of a session. Synthetic runs name no file.
QJsonObject mapRunReferences(QJsonObject result, const std::function<QString(const QString&)>& map)
{
    QJsonObject spec = result.value(QStringLiteral("spec")).toObject();
    QJsonArray inputs = spec.value(QStringLiteral("inputs")).toArray();
    if (inputs.isEmpty())
        return result;
    for (qsizetype i = 0; i < inputs.size(); ++i) {
        QJsonObject in = inputs[i].toObject();
        for (const QString& key : {QStringLiteral("q"), QStringLiteral("k")})
            if (in.value(key).isString())
                in[key] = map(in.value(key).toString());
        inputs[i] = in;
    }
    spec[QStringLiteral("inputs")] = inputs;
    result[QStringLiteral("spec")] = spec;
    QJsonArray records = result.value(QStringLiteral("records")).toArray();
    for (qsizetype i = 0; i < records.size(); ++i) {
        QJsonObject r = records[i].toObject();
        if (r.value(QStringLiteral("input")).isString() && !r.value(QStringLiteral("input")).toString().isEmpty())
            r[QStringLiteral("input")] = map(r.value(QStringLiteral("input")).toString());
        records[i] = r;
    }
    result[QStringLiteral("records")] = records;
    return result;
}

}  // namespace

QJsonObject MainWindow::sweepsState(const QString& sessionFile) const
{
    const auto stored = [&sessionFile](const analysis::SweepResult& r) {
        return mapRunReferences(toQt(analysis::sweep_result_json(r)),
                                [&sessionFile](const QString& ref) { return sessionStoredReference(sessionFile, ref); });
    };
    QJsonObject out;
    QJsonArray curves;
    for (const CurveSet& run : m_curvesSlot->runs)
        curves.append(QJsonObject{{QStringLiteral("name"), run.name}, {QStringLiteral("result"), stored(*run.sweep)}});
    if (!curves.isEmpty())
        out[QStringLiteral("curves")] = curves;
    if (m_overviewSlot->result)
        out[QStringLiteral("overview")] = QJsonObject{{QStringLiteral("result"), stored(*m_overviewSlot->result)}};
    return out;
}

// The session's finished sweeps go back into their tabs as they were. Sessions of older versions kept a
// sweep's parameters ("sweep", "overview": true) to rerun it when opened; such a sweep is not rerun (it may
// never have finished): its tab says how to run it again.
QString MainWindow::restoreSweeps(const QJsonObject& s, const QString& sessionFile)
{
    QStringList problems;
    auto read = [&problems, &sessionFile](const QJsonValue& v) -> SweepResultPtr {
        try {
            const QJsonObject result = mapRunReferences(v.toObject().value(QStringLiteral("result")).toObject(), [&sessionFile](const QString& ref) {
                return sessionResolvedReference(sessionFile, ref);
            });
            const QByteArray text = QJsonDocument(result).toJson(QJsonDocument::Compact);
            return std::make_shared<const analysis::SweepResult>(analysis::sweep_result_from_json(nlohmann::json::parse(text.toStdString())));
        } catch (const std::exception& e) {
            problems << QString::fromStdString(e.what());
            return nullptr;
        }
    };
    const QJsonObject sweeps = s.value(QStringLiteral("sweeps")).toObject();
    for (const QJsonValue& v : sweeps.value(QStringLiteral("curves")).toArray())
        if (SweepResultPtr r = read(v)) {
            const QString name = v.toObject().value(QStringLiteral("name")).toString();
            m_curvesSlot->runs.append(CurveSet{r, name.isEmpty() ? curveSetName(*r) : name});
            m_curvesSlot->result = r;
        }
    if (sweeps.contains(QStringLiteral("overview")))
        if (SweepResultPtr r = read(sweeps.value(QStringLiteral("overview")))) {
            m_overviewSlot->runs = {CurveSet{r, QString()}};
            m_overviewSlot->result = r;
        }
    if (s.contains(QStringLiteral("sweep_dialog")))
        *m_sweepParams = SweepParams::fromJson(s.value(QStringLiteral("sweep_dialog")).toObject());
    QString message;
    if (s.contains(QStringLiteral("sweep")) && m_curvesSlot->runs.isEmpty()) {
        if (!s.contains(QStringLiteral("sweep_dialog")))
            *m_sweepParams = SweepParams::fromJson(s.value(QStringLiteral("sweep")).toObject());
        m_curvesSlot->note = tr("This session kept the settings of a sweep but not its curves (sessions of older versions).\n"
                                "It was not rerun: run it again from Analysis > Sweep... (the dialog holds its settings).");
        message = tr("The session's sweep was not rerun: run it again from Analysis > Sweep... (its settings are in the dialog).");
    }
    if (s.value(QStringLiteral("overview")).toBool() && m_overviewSlot->runs.isEmpty()) {
        m_overviewSlot->note = tr("This session kept a model overview but not its values (sessions of older versions).\n"
                                  "It was not rerun: run Analysis > Model Overview again.");
        const QString more = tr("The model overview was not rerun: run Analysis > Model Overview again.");
        message = message.isEmpty() ? more : message + QLatin1Char(' ') + more;
    }
    for (SweepSlot* slot : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (!slot->runs.isEmpty() || !slot->note.isEmpty())
            showSweepRuns(*slot);
    if (!problems.isEmpty()) {
        const QString more = tr("A stored sweep could not be read: %1").arg(problems.join(QStringLiteral("; ")));
        message = message.isEmpty() ? more : message + QLatin1Char(' ') + more;
    }
    return message;
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
    // The whole document is checked before the window lets go of what it shows: a refused session changes
    // nothing and writes nothing (docs/security.md "Sessions").
    try {
        analysis::check_session_document(sessionDocumentForCore(s), analysis::default_memory_limit());
    } catch (const std::exception& e) {
        const QString text = tr("session %1: %2").arg(sessionFile, QString::fromStdString(e.what()));
        if (error)
            *error = text;
        showMessage(text, true);
        return false;
    }
    m_debounce.stop();
    m_applyingSession = true;
    resetSweeps();
    m_browser->closeAll();
    m_result.reset();
    for (ResultView* v : m_views)
        v->setResult(nullptr);
    QStringList made;
    QString generateError;
    if (!generateSessionData(s, sessionFile, &made, &generateError))
        return fail(generateError);
    if (!made.isEmpty())
        statusBar()->showMessage(tr("Made %1 (the session's data, synthesised on first use)").arg(made.join(QStringLiteral(", "))), 8000);
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
    if (const QString p = sessionIndexProblem(s, m_browser->assigned(TensorRole::queries), m_selection->layout(), m_selection->tokens());
        !p.isEmpty())
        return fail(p);
    m_mechanism->setContext(m_selection->tokens(), m_selection->tokenGrid(), !m_selection->gridGuessed());
    m_mechanism->setFeatureDim(m_selection->features());
    QJsonObject mechanism = s.value(QStringLiteral("mechanism")).toObject();
    mechanism[QStringLiteral("mixing_file")] = sessionResolvedPath(sessionFile, mechanism.value(QStringLiteral("mixing_file")).toString());
    mechanism[QStringLiteral("gates")] = sessionResolvedReference(sessionFile, mechanism.value(QStringLiteral("gates")).toString());
    m_mechanism->restoreState(mechanism);
    // Every other open file's state is checked against that file's data like the session's own selection:
    // its indices within the shape of the queries it names (the window would clamp them in silence when it
    // came back to that file).
    const QJsonArray states = s.value(QStringLiteral("file_states")).toArray();
    for (qsizetype i = 0; i < states.size(); ++i) {
        const QJsonObject o = states[i].toObject();
        const QString file = sessionResolvedPath(sessionFile, o.value(QStringLiteral("file")).toString());
        const QJsonArray names = o.value(QStringLiteral("tensors")).toArray();
        if (!m_browser->files().contains(file) || names.isEmpty())
            continue;   // a file the session does not open is ignored; without tensors the names are guessed
        const std::string key = "file_states[" + std::to_string(i) + "]";
        const auto queries = m_browser->tensor(file, names[0].toString());
        if (!queries)
            return fail(QString::fromStdString(key + ".tensors[0]: ") + tr("no tensor '%1' in %2").arg(names[0].toString(), file));
        const QJsonObject selection = o.value(QStringLiteral("selection")).toObject();
        io::TensorInfo info;
        for (const qint64 n : queries->shape)
            info.shape.push_back(n);
        io::AxisSelection axes;
        axes.layout = selection.value(QStringLiteral("layout")).toString().toStdString();
        QString layout;
        try {
            layout = QString::fromStdString(io::resolve_layout(info, axes, key + ".selection.layout"));
        } catch (const std::exception& e) {
            return fail(QString::fromStdString(e.what()));
        }
        if (const QString p = selectionIndexProblem(selection, key + ".selection", *queries, layout); !p.isEmpty())
            return fail(p);
    }
    restoreFileStates(states, sessionFile);
    const QJsonObject views = s.value(QStringLiteral("views")).toObject();
    for (ResultView* v : m_views)
        if (views.contains(v->viewName()))
            v->restoreState(views.value(v->viewName()).toObject());
    for (SweepSlot* slot : {m_curvesSlot.get(), m_overviewSlot.get()})
        if (views.contains(slot->name))
            slot->pendingState = views.value(slot->name).toObject();
    const QString sweepMessage = restoreSweeps(s, sessionFile);
    setCurrentView(s.value(QStringLiteral("view")).toString(QStringLiteral("maps")));
    m_query = s.value(QStringLiteral("query")).toInt(-1);
    m_applyingSession = false;
    hideMessage();
    if (!sweepMessage.isEmpty()) {
        showMessage(sweepMessage, false);
        statusBar()->showMessage(sweepMessage, 10000);
    }
    updateCentral();
    updateTitle();
    computeNow();
    return true;
}

}  // namespace attnscope::widgets
