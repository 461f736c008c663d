#pragma once
// Session files (.attnscope): a readable, indented JSON document with everything needed to reopen an
// analysis: files, Q/K/V references, selection, every mechanism option, active view, selected query,
// each view's own state (zoom included) and the finished sweeps with their records ("sweeps": the curves'
// runs and the model overview, analysis::sweep_result_json each), so that reopening draws them without
// recomputing. Opening a session never starts a sweep. The main window builds and applies the document;
// this file reads and writes it.
// Every path in a session (data files, tensors' files, the learned mixing file) is relative to the session
// file's folder (stored so when it lies at most two levels above it, else absolute), so a session travels
// with its data and opens from any working directory (docs/*.attnscope refer to ../data/...). A session is
// data: it never names a file to write; what it may make and how it is checked are the core's rules
// (analysis/session_rules.h, docs/security.md "Sessions").
#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <optional>

#include "analysis/session_rules.h"

namespace attnscope::widgets {

inline constexpr int kSessionVersion = analysis::kSessionVersion;

// `path` as stored in the session at `sessionFile` (relative when short, else absolute).
QString sessionStoredPath(const QString& sessionFile, const QString& path);
// A stored path resolved against the session file's folder.
QString sessionResolvedPath(const QString& sessionFile, const QString& stored);
// The same for a tensor reference FILE[:NAME] (gated's gates): its file part is mapped, the name kept.
QString sessionStoredReference(const QString& sessionFile, const QString& ref);
QString sessionResolvedReference(const QString& sessionFile, const QString& stored);

// Data a session can make itself ("generate": name -> synthetic options {kind, n, d, heads, seed, grid}, as
// `attnscope synth` takes them): a session on data the repository does not ship (too large) opens from a
// clean checkout. A name is a plain .h5 name inside the session's folder, at most one subfolder deep
// (analysis::session_recipe_name_problem). Writes every such file that does not exist yet (its subfolder
// created) and lists them in *made. False and *error (naming the recipe's key) when a recipe is refused, and
// then nothing is written, or when a file cannot be written (what this call made is removed again).
bool generateSessionData(const QJsonObject& session, const QString& sessionFile, QStringList* made, QString* error);
// The resolved paths a session can generate.
QStringList generatedSessionPaths(const QJsonObject& session, const QString& sessionFile);

// The document as the core's session rules take it (analysis::check_session_document). Throws InputError
// for text Qt kept that is not valid Unicode (an unpaired surrogate escape).
nlohmann::json sessionDocumentForCore(const QJsonObject& session);

// Writes the document (indented) atomically. Returns false and sets *error on failure.
bool writeSessionFile(const QString& path, const QJsonObject& session, QString* error);
// Reads and checks the document: a JSON object with "attnscope_session" <= kSessionVersion whose keys pass
// analysis::check_session_document (types, ranges, recipes); *error names the file and the key at fault.
std::optional<QJsonObject> readSessionFile(const QString& path, QString* error);

}  // namespace attnscope::widgets
