// The data browser dock; see data_browser.h.
#include "data_browser.h"

#include <algorithm>

#include <QAction>
#include <QApplication>
#include <QFileInfo>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QMenu>
#include <QStyle>
#include <array>
#include <QRegularExpression>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "io/tensor_file.h"
#include "util/json_text.h"

namespace attnscope::widgets {

namespace {

enum Column { colName = 0, colRole = 1, colShape = 2, colType = 3 };
enum DataRole { roleFile = Qt::UserRole, roleTensor, roleKind, roleGroup };
enum Kind { kindFile = 0, kindGroup, kindTensor, kindSkipped, kindError };

QJsonObject toQt(const nlohmann::json& j)
{
    if (!j.is_object())
        return {};
    return QJsonDocument::fromJson(QByteArray::fromStdString(json_text(j))).object();
}

QString shapeText(const QVector<qint64>& shape)
{
    QStringList dims;
    for (qint64 s : shape)
        dims << QString::number(s);
    return QStringLiteral("[%1]").arg(dims.join(QStringLiteral(", ")));
}

QString attributesText(const QJsonObject& attrs)
{
    QStringList lines;
    for (auto it = attrs.begin(); it != attrs.end(); ++it) {
        QString value;
        if (it->isString())
            value = QStringLiteral("\"%1\"").arg(it->toString());
        else if (it->isDouble())
            value = QString::number(it->toDouble(), 'g', 10);
        else if (it->isArray())
            value = QString::fromUtf8(QJsonDocument(it->toArray()).toJson(QJsonDocument::Compact));
        else if (it->isBool())
            value = it->toBool() ? QStringLiteral("true") : QStringLiteral("false");
        else
            value = QString::fromUtf8(QJsonDocument(it->toObject()).toJson(QJsonDocument::Compact));
        if (value.size() > 120)
            value = value.left(117) + QStringLiteral("...");
        lines << QStringLiteral("@%1 = %2").arg(it.key(), value);
    }
    return lines.join(QLatin1Char('\n'));
}

}  // namespace

// The group items of one file's tree, made as tensor names need them: one per path component ('/'
// always; '.' too for safetensors keys such as layers.0.q).
class DataBrowser::GroupTree {
public:
    GroupTree(QTreeWidgetItem* fileItem, QString path, bool dotGroups, QIcon icon)
        : m_fileItem(fileItem), m_path(std::move(path)), m_dotGroups(dotGroups), m_icon(std::move(icon))
    {
    }

    // The item under which `name` is listed (its groups made when new), and the last component of the name.
    QTreeWidgetItem* parentOf(const QString& name, QString* leaf)
    {
        static const QRegularExpression slash(QStringLiteral("/"));
        static const QRegularExpression slashDot(QStringLiteral("[/.]"));
        QStringList parts = name.split(m_dotGroups ? slashDot : slash, Qt::SkipEmptyParts);
        *leaf = parts.isEmpty() ? name : parts.takeLast();
        QTreeWidgetItem* parent = m_fileItem;
        qsizetype pos = 0;
        for (const QString& part : parts) {
            pos = name.indexOf(part, pos) + part.size() + 1;
            const QString pathSoFar = name.left(pos);   // e.g. "/layers/3/"
            auto it = m_groups.find(pathSoFar);
            if (it == m_groups.end()) {
                auto* g = new QTreeWidgetItem(parent, {part});
                g->setData(colName, roleFile, m_path);
                g->setData(colName, roleKind, kindGroup);
                g->setData(colName, roleGroup, pathSoFar);
                g->setIcon(colName, m_icon);
                it = m_groups.insert(pathSoFar, g);
            }
            parent = *it;
        }
        return parent;
    }

private:
    QTreeWidgetItem* m_fileItem;
    QString m_path;
    bool m_dotGroups;
    QIcon m_icon;
    QHash<QString, QTreeWidgetItem*> m_groups;   // by the name's prefix up to and including the group
};

namespace {

const char* kBadge[3] = {"Q", "K", "V"};
const QColor kBadgeColour[3] = {QColor(31, 119, 180), QColor(214, 39, 40), QColor(44, 160, 44)};

}  // namespace

std::optional<TensorRole> roleFromName(const QString& name, QString* stem)
{
    static const QRegularExpression leafRe(
        QStringLiteral("^(.*?[_\\-])?(queries|query|keys|key|values|value|wq|wk|wv|q|k|v)"
                       "([_\\-](proj|states|state|act|acts|activations|out|output|input|in))?$"),
        QRegularExpression::CaseInsensitiveOption);
    const qsizetype cut = std::max(name.lastIndexOf(QLatin1Char('/')), name.lastIndexOf(QLatin1Char('.')));
    const QString dir = name.left(cut + 1);
    const QString leaf = name.mid(cut + 1);
    const auto m = leafRe.match(leaf);
    if (!m.hasMatch())
        return std::nullopt;
    const QString word = m.captured(2).toLower();
    const QChar c = word.startsWith(QLatin1Char('w')) ? word.at(1) : word.at(0);
    if (stem)
        *stem = (dir + m.captured(1) + QLatin1Char('*') + m.captured(3)).toLower();
    if (c == QLatin1Char('q'))
        return TensorRole::queries;
    if (c == QLatin1Char('k'))
        return TensorRole::keys;
    return TensorRole::values;
}

DataBrowser::DataBrowser(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    m_tree = new QTreeWidget(this);
    m_tree->setColumnCount(4);
    m_tree->setHeaderLabels({tr("Name"), tr("Role"), tr("Shape"), tr("Type")});
    // Names whole (a narrow dock scrolls sideways to the shapes and types, rather than cutting nested
    // names to nothing); the type column takes what is left.
    m_tree->header()->setStretchLastSection(true);
    m_tree->header()->setSectionResizeMode(colName, QHeaderView::ResizeToContents);
    m_tree->header()->setSectionResizeMode(colRole, QHeaderView::ResizeToContents);
    m_tree->header()->setSectionResizeMode(colShape, QHeaderView::ResizeToContents);
    m_tree->header()->setSectionResizeMode(colType, QHeaderView::Stretch);
    m_tree->setContextMenuPolicy(Qt::CustomContextMenu);
    m_tree->setUniformRowHeights(true);
    m_tree->setAlternatingRowColors(true);
    m_tree->setToolTip(tr("Right-click a tensor to use it as queries, keys or values"));
    connect(m_tree, &QWidget::customContextMenuRequested, this, &DataBrowser::showContextMenu);
    connect(m_tree, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item, int) {
        if (item && item->data(colName, roleKind).toInt() == kindFile)
            emit showFileRequested(item->data(colName, roleFile).toString());
    });
    layout->addWidget(m_tree);
}

bool DataBrowser::openFile(const QString& path, QString* error)
{
    const QString abs = QFileInfo(path).absoluteFilePath();
    for (const OpenFile& f : m_files)
        if (QFileInfo(f.path).absoluteFilePath() == abs)
            return true;

    auto* fileItem = new QTreeWidgetItem(m_tree);
    fileItem->setText(colName, QFileInfo(path).fileName());
    fileItem->setData(colName, roleFile, path);
    fileItem->setData(colName, roleKind, kindFile);
    fileItem->setIcon(colName, style()->standardIcon(QStyle::SP_FileIcon));

    std::unique_ptr<io::TensorFile> file;
    try {
        file = io::open_tensor_file(path.toStdString());
    } catch (const std::exception& e) {
        const QString message = QString::fromStdString(e.what());
        showOpenError(fileItem, path, message);
        if (error)
            *error = message;
        return false;
    }

    OpenFile entry;
    entry.path = path;
    const QJsonObject fileAttrs = toQt(file->file_attributes());
    const QString format = QString::fromStdString(std::string(file->format()));
    // The file row spans all columns so that long file names stay readable.
    fileItem->setText(colName, QStringLiteral("%1   (%2, %3)")
                                   .arg(QFileInfo(path).fileName(), format,
                                        file->tensors().size() == 1 ? tr("1 tensor") : tr("%1 tensors").arg(file->tensors().size())));
    fileItem->setFirstColumnSpanned(true);
    QString tip = QStringLiteral("%1 (%2)").arg(QFileInfo(path).absoluteFilePath(), format);
    if (!fileAttrs.isEmpty())
        tip += QLatin1Char('\n') + attributesText(fileAttrs);
    fileItem->setToolTip(colName, tip);

    GroupTree groups(fileItem, path, format == QLatin1String("safetensors"), style()->standardIcon(QStyle::SP_DirIcon));
    for (const auto& t : file->tensors()) {
        TensorEntry te;
        te.file = path;
        te.name = QString::fromStdString(t.name);
        for (auto s : t.shape)
            te.shape << s;
        te.dtype = QString::fromStdString(std::string(io::dtype_name(t.dtype)));
        te.attributes = toQt(t.attributes);
        te.fileAttributes = fileAttrs;
        entry.tensors.push_back(te);
        addTensorItem(groups, te);
    }
    for (const auto& s : file->skipped())
        addSkippedItem(groups, QString::fromStdString(s.name), QString::fromStdString(s.reason));
    m_files.push_back(std::move(entry));
    fileItem->setExpanded(true);
    // Expand small trees fully; big checkpoints stay collapsed below the first level.
    if (file->tensors().size() <= 24)
        m_tree->expandRecursively(m_tree->indexFromItem(fileItem));
    return true;
}

// A file that cannot be opened: its row in red with the error below it.
void DataBrowser::showOpenError(QTreeWidgetItem* fileItem, const QString& path, const QString& message)
{
    fileItem->setData(colName, roleKind, kindError);
    fileItem->setFirstColumnSpanned(true);
    fileItem->setForeground(colName, QBrush(QColor(180, 0, 0)));
    fileItem->setToolTip(colName, QStringLiteral("%1\n%2").arg(path, message));
    auto* err = new QTreeWidgetItem(fileItem, {message});
    err->setForeground(colName, QBrush(QColor(180, 0, 0)));
    err->setToolTip(colName, message);
    err->setFirstColumnSpanned(true);
    fileItem->setExpanded(true);
}

void DataBrowser::addTensorItem(GroupTree& groups, const TensorEntry& te)
{
    QString leaf;
    auto* item = new QTreeWidgetItem(groups.parentOf(te.name, &leaf));
    item->setText(colName, te.name.isEmpty() ? tr("(array)") : leaf);
    item->setText(colShape, shapeText(te.shape));
    item->setText(colType, te.dtype);
    item->setData(colName, roleFile, te.file);
    item->setData(colName, roleTensor, te.name);
    item->setData(colName, roleKind, kindTensor);
    QString ttip = QStringLiteral("%1\n%2 %3").arg(te.ref(), te.dtype, shapeText(te.shape));
    if (!te.attributes.isEmpty())
        ttip += QLatin1Char('\n') + attributesText(te.attributes);
    for (int c = 0; c < 4; ++c)
        item->setToolTip(c, ttip);
}

// An object the reader skipped: greyed, disabled, with the reason.
void DataBrowser::addSkippedItem(GroupTree& groups, const QString& name, const QString& reason)
{
    QString leaf;
    QTreeWidgetItem* parent = groups.parentOf(name, &leaf);
    auto* item = new QTreeWidgetItem(parent, {leaf});
    item->setText(colShape, tr("skipped"));
    item->setData(colName, roleKind, kindSkipped);
    item->setFlags(item->flags() & ~Qt::ItemIsEnabled);
    for (int c = 0; c < 4; ++c) {
        item->setForeground(c, QBrush(QColor(140, 140, 140)));
        item->setToolTip(c, QStringLiteral("%1: not readable as a tensor (%2)").arg(name, reason));
    }
    item->setText(colType, reason);
}

void DataBrowser::closeAll()
{
    m_tree->clear();
    m_files.clear();
    for (auto& a : m_assigned)
        a.reset();
    emit assignmentChanged();
}

bool DataBrowser::closeFile(const QString& path)
{
    const auto it = std::find_if(m_files.begin(), m_files.end(), [&](const OpenFile& f) { return f.path == path; });
    if (it == m_files.end())
        return false;
    m_files.erase(it);
    for (int i = 0; i < m_tree->topLevelItemCount(); ++i)
        if (m_tree->topLevelItem(i)->data(colName, roleFile).toString() == path)
            delete m_tree->takeTopLevelItem(i--);
    bool reassigned = false;
    for (auto& a : m_assigned)
        if (a && a->file == path) {
            a.reset();
            reassigned = true;
        }
    refreshBadges();
    // Closing a file that is not shown changes nothing the views show: no recomputation of the one that is.
    if (reassigned)
        emit assignmentChanged();
    else
        emit filesChanged();
    return true;
}

int DataBrowser::tensorCount(const QString& file) const
{
    for (const OpenFile& f : m_files)
        if (f.path == file)
            return static_cast<int>(f.tensors.size());
    return 0;
}

QString DataBrowser::currentFile() const
{
    const QTreeWidgetItem* item = m_tree->currentItem();
    return item ? item->data(colName, roleFile).toString() : QString();
}

QStringList DataBrowser::files() const
{
    QStringList out;
    for (const OpenFile& f : m_files)
        out << f.path;
    return out;
}

bool DataBrowser::autoAssign(const QString& file)
{
    if (assignGroup(file, QString()))
        return true;
    // A file with one unnamed tensor (.npy) takes its role from the file name: q.npy, keys.npy ...
    for (const OpenFile& f : m_files) {
        if (f.path != file || f.tensors.size() != 1 || !f.tensors[0].name.isEmpty())
            continue;
        if (const auto role = roleFromName(QFileInfo(f.path).completeBaseName())) {
            m_assigned[int(*role)] = f.tensors[0];
            refreshBadges();
            emit assignmentChanged();
            return true;
        }
    }
    return false;
}

bool DataBrowser::assignGroup(const QString& file, const QString& prefix)
{
    for (const OpenFile& f : m_files) {
        if (f.path != file)
            continue;
        // Stems in file order; the first with queries and keys wins.
        QStringList order;
        QHash<QString, std::array<int, 3>> found;
        for (int i = 0; i < f.tensors.size(); ++i) {
            const TensorEntry& t = f.tensors[i];
            if (!prefix.isEmpty() && !t.name.startsWith(prefix))
                continue;
            QString stem;
            const auto role = roleFromName(t.name, &stem);
            if (!role)
                continue;
            if (!found.contains(stem)) {
                found.insert(stem, {-1, -1, -1});
                order << stem;
            }
            auto& slot = found[stem][int(*role)];
            if (slot < 0)
                slot = i;
        }
        for (const QString& stem : order) {
            const auto idx = found.value(stem);
            if (idx[0] < 0 || idx[1] < 0)
                continue;
            for (int r = 0; r < 3; ++r) {
                if (idx[r] >= 0)
                    m_assigned[r] = f.tensors[idx[r]];
                else
                    m_assigned[r].reset();
            }
            refreshBadges();
            emit assignmentChanged();
            return true;
        }
    }
    return false;
}

bool DataBrowser::setAssignment(TensorRole role, const QString& file, const QString& name)
{
    for (const OpenFile& f : m_files) {
        if (f.path != file && QFileInfo(f.path).absoluteFilePath() != QFileInfo(file).absoluteFilePath())
            continue;
        for (const TensorEntry& t : f.tensors) {
            if (t.name == name || (t.name.startsWith(QLatin1Char('/')) && t.name.mid(1) == name)) {
                m_assigned[int(role)] = t;
                refreshBadges();
                emit assignmentChanged();
                return true;
            }
        }
    }
    return false;
}

bool DataBrowser::assignTensors(const QString& file, const QString& q, const QString& k, const QString& v)
{
    std::optional<TensorEntry> found[3];
    const QString names[3] = {q, k, v};
    for (const OpenFile& f : m_files)
        if (f.path == file)
            for (const TensorEntry& t : f.tensors)
                for (int r = 0; r < 3; ++r)
                    if (!names[r].isEmpty() && t.name == names[r])
                        found[r] = t;
    if (!found[0] || !found[1] || (!v.isEmpty() && !found[2]))
        return false;
    for (int r = 0; r < 3; ++r)
        m_assigned[r] = found[r];
    refreshBadges();
    emit assignmentChanged();
    return true;
}

void DataBrowser::clearAssignment(TensorRole role)
{
    m_assigned[int(role)].reset();
    refreshBadges();
    emit assignmentChanged();
}

std::optional<TensorEntry> DataBrowser::assigned(TensorRole role) const
{
    return m_assigned[int(role)];
}

std::optional<TensorEntry> DataBrowser::tensor(const QString& file, const QString& name) const
{
    for (const OpenFile& f : m_files)
        if (f.path == file)
            for (const TensorEntry& t : f.tensors)
                if (t.name == name)
                    return t;
    return std::nullopt;
}

QTreeWidgetItem* DataBrowser::findTensorItem(const QString& file, const QString& name) const
{
    QTreeWidgetItemIterator it(m_tree);
    while (*it) {
        QTreeWidgetItem* item = *it;
        if (item->data(colName, roleKind).toInt() == kindTensor && item->data(colName, roleFile).toString() == file &&
            item->data(colName, roleTensor).toString() == name)
            return item;
        ++it;
    }
    return nullptr;
}

void DataBrowser::refreshBadges()
{
    QTreeWidgetItemIterator it(m_tree);
    while (*it) {
        QTreeWidgetItem* item = *it;
        if (item->data(colName, roleKind).toInt() == kindTensor) {
            QStringList badges;
            int first = -1;
            for (int r = 0; r < 3; ++r) {
                const auto& a = m_assigned[r];
                if (a && a->file == item->data(colName, roleFile).toString() &&
                    a->name == item->data(colName, roleTensor).toString()) {
                    badges << QString::fromLatin1(kBadge[r]);
                    if (first < 0)
                        first = r;
                }
            }
            QFont f = item->font(colName);
            f.setBold(!badges.isEmpty());
            for (int c = 0; c < 4; ++c)
                item->setFont(c, f);
            item->setText(colRole, badges.join(QLatin1Char('+')));
            item->setForeground(colRole, first >= 0 ? QBrush(kBadgeColour[first]) : QBrush());
            item->setTextAlignment(colRole, Qt::AlignCenter);
        }
        ++it;
    }
}

void DataBrowser::showContextMenu(const QPoint& pos)
{
    QTreeWidgetItem* item = m_tree->itemAt(pos);
    if (!item)
        return;
    const int kind = item->data(colName, roleKind).toInt();
    const QString file = item->data(colName, roleFile).toString();
    QMenu menu(this);
    if (kind == kindTensor) {
        const QString name = item->data(colName, roleTensor).toString();
        const QString labels[3] = {tr("Use as &queries (Q)"), tr("Use as &keys (K)"), tr("Use as &values (V)")};
        for (int r = 0; r < 3; ++r)
            menu.addAction(labels[r], this, [this, r, file, name] { setAssignment(TensorRole(r), file, name); });
        if (m_assigned[2] && m_assigned[2]->file == file && m_assigned[2]->name == name)
            menu.addAction(tr("Do not use as values"), this, [this] { clearAssignment(TensorRole::values); });
    } else if (kind == kindGroup || kind == kindFile) {
        const QString prefix = kind == kindGroup ? item->data(colName, roleGroup).toString() : QString();
        if (kind == kindGroup) {
            QAction* a = menu.addAction(tr("Use Q/K/V of this group"), this, [this, file, prefix] { assignGroup(file, prefix); });
            a->setEnabled(!prefix.isEmpty());
        } else {
            // Back to a file as it was left (its layer and tensors), not its first layer: the window's showFile.
            menu.addAction(tr("&Show this file"), this, [this, file] { emit showFileRequested(file); });
            menu.addAction(tr("Assign Q/K/V from &names"), this, [this, file] { assignGroup(file, QString()); });
        }
        if (kind == kindFile) {
            menu.addSeparator();
            menu.addAction(tr("&Close this file"), this, [this, file] { closeFile(file); });
        }
    } else {
        return;
    }
    menu.exec(m_tree->viewport()->mapToGlobal(pos));
}

}  // namespace attnscope::widgets
