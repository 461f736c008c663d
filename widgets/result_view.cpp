#include "result_view.h"

#include <QEvent>
#include <QLabel>

namespace attnscope::widgets {

namespace {

// A label that covers its parent (a result view) and follows its size: the picture underneath shows
// through greyed (out of date) or the cleared view shows only the reason (not computed).
class NoticeLabel : public QLabel {
public:
    explicit NoticeLabel(QWidget* parent) : QLabel(parent)
    {
        setAlignment(Qt::AlignCenter);
        setWordWrap(true);
        setMargin(24);
        setAttribute(Qt::WA_TransparentForMouseEvents, false);   // a stale picture is not clickable
        parent->installEventFilter(this);
        setGeometry(parent->rect());
    }

protected:
    bool eventFilter(QObject* watched, QEvent* event) override
    {
        if (watched == parentWidget() && event->type() == QEvent::Resize)
            setGeometry(parentWidget()->rect());
        return QLabel::eventFilter(watched, event);
    }
};

}  // namespace

void ResultView::setNotice(Freshness freshness, const QString& text)
{
    m_freshness = freshness;
    if (freshness == Freshness::current) {
        if (m_notice)
            m_notice->hide();
        return;
    }
    if (!m_notice)
        m_notice = new NoticeLabel(this);
    const bool stale = freshness == Freshness::outOfDate;
    m_notice->setStyleSheet(stale ? QStringLiteral("QLabel { background: rgba(236, 236, 236, 205); color: #5a4a00; "
                                                   "font-size: 13pt; font-weight: bold; }")
                                  : QStringLiteral("QLabel { background: palette(window); color: #444; font-size: 13pt; }"));
    m_notice->setText(text);
    m_notice->setGeometry(rect());
    m_notice->raise();
    m_notice->show();
}

QString ResultView::noticeText() const
{
    return m_notice && m_freshness != Freshness::current ? m_notice->text() : QString();
}

}  // namespace attnscope::widgets
