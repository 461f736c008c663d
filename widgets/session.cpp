// Session files: relative paths, atomic writing, checked reading; see session.h.
#include "session.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>

#include <cerrno>
#include <functional>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "analysis/measure.h"
#include "analysis/session_rules.h"
#include "util/error.h"
#include "util/output.h"

namespace attnscope::widgets {

// Qt has parsed the document already; what it writes back fails to parse only where a string held an
// unpaired UTF-16 surrogate escape ("\ud800"), which Qt keeps and nlohmann refuses.
nlohmann::json sessionDocumentForCore(const QJsonObject& session)
{
    try {
        return nlohmann::json::parse(QJsonDocument(session).toJson(QJsonDocument::Compact).toStdString());
    } catch (const nlohmann::json::exception&) {
        throw InputError("not a session: it holds text that is not valid Unicode (an unpaired \\u surrogate escape)");
    }
}

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

namespace {

// FILE[:NAME]: the file part as sessionStoredPath / sessionResolvedPath, the tensor name kept.
QString mapReference(const QString& ref, const std::function<QString(const QString&)>& mapFile)
{
    const qsizetype colon = ref.indexOf(QLatin1Char(':'));
    return colon < 0 ? mapFile(ref) : mapFile(ref.left(colon)) + ref.mid(colon);
}

}  // namespace

QString sessionStoredReference(const QString& sessionFile, const QString& ref)
{
    return mapReference(ref, [&](const QString& f) { return sessionStoredPath(sessionFile, f); });
}

QString sessionResolvedReference(const QString& sessionFile, const QString& stored)
{
    return mapReference(stored, [&](const QString& f) { return sessionResolvedPath(sessionFile, f); });
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
    // Opened without blocking and checked to be a regular file before anything is read: a FIFO would wait
    // for a writer forever, a device never ends (docs/security.md "Sessions").
    const int fd = ::open(QFile::encodeName(path).constData(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return fail(QString::fromLocal8Bit(std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return fail(QObject::tr("is not a regular file (a FIFO, device or socket is never read as a session)"));
    }
    QFile in;
    if (!in.open(fd, QIODevice::ReadOnly, QFileDevice::AutoCloseHandle)) {
        ::close(fd);
        return fail(in.errorString());
    }
    if (in.size() > 64 * 1024 * 1024)
        return fail(QObject::tr("too large for a session file"));
    QJsonParseError pe;
    const QJsonDocument doc = QJsonDocument::fromJson(in.readAll(), &pe);
    if (pe.error != QJsonParseError::NoError)
        return fail(QObject::tr("not valid JSON (%1 at byte %2)").arg(pe.errorString()).arg(pe.offset));
    if (!doc.isObject())
        return fail(QObject::tr("not a session (expected a JSON object)"));
    const QJsonObject o = doc.object();
    // Every key the app reads, checked before anything acts on the session (docs/security.md "Sessions").
    try {
        analysis::check_session_document(sessionDocumentForCore(o), analysis::default_memory_limit());
    } catch (const std::exception& e) {
        return fail(QString::fromStdString(e.what()));
    }
    return o;
}

QStringList generatedSessionPaths(const QJsonObject& session, const QString& sessionFile)
{
    QStringList out;
    const QJsonObject recipes = session.value(QStringLiteral("generate")).toObject();
    for (auto it = recipes.begin(); it != recipes.end(); ++it)
        if (analysis::session_recipe_name_problem(it.key().toStdString()).empty())   // the others are refused on loading
            out << sessionResolvedPath(sessionFile, it.key());
    return out;
}

bool generateSessionData(const QJsonObject& session, const QString& sessionFile, QStringList* made, QString* error)
{
    if (!session.contains(QStringLiteral("generate")))
        return true;
    try {
        const std::filesystem::path dir(QFile::encodeName(QFileInfo(sessionFile).absolutePath()).toStdString());
        for (const auto& p : analysis::make_session_data(sessionDocumentForCore(session), dir, analysis::default_memory_limit()))
            if (made)
                *made << QFile::decodeName(QByteArray::fromStdString(p.string()));
    } catch (const std::exception& e) {
        if (error)
            *error = QString::fromStdString(e.what());
        return false;
    }
    return true;
}

}  // namespace attnscope::widgets
