// Session files: relative paths, atomic writing, checked reading; see session.h.
#include "session.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include "analysis/measure.h"
#include "analysis/synth.h"
#include "util/error.h"
#include "util/output.h"

namespace attnscope::widgets {

QString sessionStoredPath(const QString& sessionFile, const QString& path)
{
    if (path.isEmpty())
        return path;
    const QDir dir = QFileInfo(sessionFile).absoluteDir();
    const QString abs = QFileInfo(path).absoluteFilePath();
    const QString rel = dir.relativeFilePath(abs);
    // Relative when it stays near the session (at most two levels up), else absolute.
    return rel.startsWith(QStringLiteral("../../../")) ? abs : rel;
}

QString sessionResolvedPath(const QString& sessionFile, const QString& stored)
{
    if (stored.isEmpty() || QFileInfo(stored).isAbsolute())
        return stored;
    return QDir::cleanPath(QFileInfo(sessionFile).absoluteDir().filePath(stored));
}

bool writeSessionFile(const QString& path, const QJsonObject& session, QString* error)
{
    // Serialised by Qt, written by the core's one writer (util/output.h): atomically, a full disk an
    // error that leaves nothing behind, a device or FIFO written in place and never replaced.
    try {
        write_text_output_file(QFile::encodeName(path).toStdString(), QJsonDocument(session).toJson(QJsonDocument::Indented).toStdString());
    } catch (const std::exception& e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return false;
    }
    return true;
}

std::optional<QJsonObject> readSessionFile(const QString& path, QString* error)
{
    auto fail = [&](const QString& why) -> std::optional<QJsonObject> {
        if (error)
            *error = QStringLiteral("%1: %2").arg(path, why);
        return std::nullopt;
    };
    QFile in(path);
    if (!in.open(QIODevice::ReadOnly))
        return fail(in.errorString());
    if (in.size() > 64 * 1024 * 1024)
        return fail(QObject::tr("too large for a session file"));
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(in.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError)
        return fail(QObject::tr("not valid JSON (%1 at byte %2)").arg(pe.errorString()).arg(pe.offset));
    if (!doc.isObject())
        return fail(QObject::tr("not a session (expected a JSON object)"));
    const QJsonObject o = doc.object();
    const QJsonValue v = o.value(QStringLiteral("attnscope_session"));
    if (!v.isDouble())
        return fail(QObject::tr("not an AttnScope session (no \"attnscope_session\" version)"));
    if (v.toInt() > kSessionVersion)
        return fail(QObject::tr("session version %1 is newer than this AttnScope understands (%2)").arg(v.toInt()).arg(kSessionVersion));
    return o;
}

QStringList generatedSessionPaths(const QJsonObject& session, const QString& sessionFile)
{
    QStringList out;
    const QJsonObject recipes = session.value(QStringLiteral("generate")).toObject();
    for (auto it = recipes.begin(); it != recipes.end(); ++it)
        out << sessionResolvedPath(sessionFile, it.key());
    return out;
}

bool generateSessionData(const QJsonObject& session, const QString& sessionFile, QStringList* made, QString* error)
{
    const QJsonObject recipes = session.value(QStringLiteral("generate")).toObject();
    for (auto it = recipes.begin(); it != recipes.end(); ++it) {
        const QString path = sessionResolvedPath(sessionFile, it.key());
        if (QFileInfo::exists(path))
            continue;
        const QJsonObject r = it.value().toObject();
        analysis::SynthOptions o;
        o.kind = r.value(QStringLiteral("kind")).toString(QStringLiteral("gaussian")).toStdString();
        o.n = r.value(QStringLiteral("n")).toInteger();
        o.d = r.value(QStringLiteral("d")).toInteger();
        o.heads = r.value(QStringLiteral("heads")).toInteger(1);
        o.seed = std::uint64_t(r.value(QStringLiteral("seed")).toInteger(0));
        for (const auto& g : r.value(QStringLiteral("grid")).toArray())
            o.grid.push_back(g.toInteger());
        try {
            if (!QDir().mkpath(QFileInfo(path).absolutePath()))
                throw InputError(path.toStdString() + ": cannot create its folder");
            analysis::write_synthetic_file(path.toStdString(), o, analysis::default_memory_limit());
        } catch (const std::exception& e) {
            if (error)
                *error = QObject::tr("cannot make %1 (the session's \"generate\" recipe): %2").arg(path, QString::fromStdString(e.what()));
            return false;
        }
        if (made)
            *made << path;
    }
    return true;
}

}  // namespace attnscope::widgets
