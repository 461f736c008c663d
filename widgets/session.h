#pragma once
// Session files (.attnscope): a readable, indented JSON document with everything needed to reopen an
// analysis: files, Q/K/V references, selection, every mechanism option, active view, selected query,
// each view's own state (zoom included) and the finished sweeps with their records ("sweeps": the curves'
// runs and the model overview, analysis::sweep_result_json each), so that reopening draws them without
// recomputing. Opening a session never starts a sweep. The main window builds and applies the document;
// this file reads and writes it.
// Paths are stored relative to the session file's folder when they lie below it or beside it, so a
// session travels with its data (docs/sessions/*.attnscope refer to ../../data/...).
#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <optional>

namespace attnscope::widgets {

inline constexpr int kSessionVersion = 1;

// `path` as stored in the session at `sessionFile` (relative when short, else absolute).
QString sessionStoredPath(const QString& sessionFile, const QString& path);
// A stored path resolved against the session file's folder.
QString sessionResolvedPath(const QString& sessionFile, const QString& stored);

// Data a session can make itself ("generate": stored path -> synthetic options {kind, n, d, heads, seed,
// grid}, as `attnscope synth` takes them): a session on data the repository does not ship (too large)
// opens from a clean checkout. Writes every such file that does not exist yet (its folder created) and
// lists them in *made. False and *error when a recipe is malformed or the file cannot be written.
bool generateSessionData(const QJsonObject& session, const QString& sessionFile, QStringList* made, QString* error);
// The resolved paths a session can generate.
QStringList generatedSessionPaths(const QJsonObject& session, const QString& sessionFile);

// Writes the document (indented) atomically. Returns false and sets *error on failure.
bool writeSessionFile(const QString& path, const QJsonObject& session, QString* error);
// Reads and checks the document (JSON object with "attnscope_session" <= kSessionVersion).
std::optional<QJsonObject> readSessionFile(const QString& path, QString* error);

}  // namespace attnscope::widgets
