#pragma once
// GuiJob: one core analysis::JobRunner seen from the GUI thread (private to widgets/).
//
// start() submits work to the runner (core/analysis/job.h: one worker, queue depth one, a new job
// replaces a waiting one and cancels the running one). Whatever the worker reports (the result, an
// error message, the cancellation, progress) is posted to the GUI thread by queued invocation and handed
// to the handlers there, but only while it comes from the latest job: the outcome or progress of a job
// that a newer start() or forget() superseded is dropped. Every outcome of the latest job first calls
// `ended` (running() is already false), then exactly one of `succeeded`, `failed` or `cancelled`.
// Destroying a GuiJob cancels and joins its worker; nothing is delivered after that.
#include <QObject>
#include <QString>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "analysis/job.h"

namespace attnscope::widgets {

template <class Result>
struct GuiJobHandlers {
    std::function<void()> ended;                                     // any outcome of the latest job
    std::function<void(const Result&)> succeeded;
    std::function<void(const QString& error)> failed;
    std::function<void()> cancelled;
    std::function<void(double fraction, const QString& stage)> progress;   // only while running()
};

template <class Result>
class GuiJob {
public:
    using Work = std::function<Result(const analysis::JobContext&)>;

    explicit GuiJob(GuiJobHandlers<Result> handlers = {}) : m_handlers(std::move(handlers)) {}
    GuiJob(const GuiJob&) = delete;
    GuiJob& operator=(const GuiJob&) = delete;

    void setHandlers(GuiJobHandlers<Result> handlers) { m_handlers = std::move(handlers); }

    void start(Work work)
    {
        const std::uint64_t ticket = ++m_tickets;
        m_ticket = ticket;
        m_running = true;
        auto done = [this, ticket](analysis::JobOutcome<Result> outcome) {
            auto shared = std::make_shared<analysis::JobOutcome<Result>>(std::move(outcome));
            QMetaObject::invokeMethod(&m_context, [this, ticket, shared] { deliver(ticket, *shared); }, Qt::QueuedConnection);
        };
        auto progress = [this, ticket](double fraction, const std::string& stage) {
            const QString text = QString::fromStdString(stage);
            QMetaObject::invokeMethod(
                &m_context,
                [this, ticket, fraction, text] {
                    if (ticket == m_ticket && m_running && m_handlers.progress)
                        m_handlers.progress(fraction, text);
                },
                Qt::QueuedConnection);
        };
        m_runner->template submit<Result>(std::move(work), std::move(done), std::move(progress));
    }

    // Asks the running job to stop; its cancellation is delivered like any outcome.
    void cancel()
    {
        if (m_running)
            m_runner->cancel();
    }

    // Cancels the running job and drops whatever it still reports: nothing of it is delivered.
    void forget()
    {
        cancel();
        m_running = false;
        m_ticket = ++m_tickets;
    }

    bool running() const { return m_running; }

private:
    void deliver(std::uint64_t ticket, const analysis::JobOutcome<Result>& outcome)
    {
        if (ticket != m_ticket)
            return;   // a newer job replaced this one
        m_running = false;
        if (m_handlers.ended)
            m_handlers.ended();
        if (outcome.cancelled) {
            if (m_handlers.cancelled)
                m_handlers.cancelled();
        } else if (!outcome.error.empty()) {
            if (m_handlers.failed)
                m_handlers.failed(QString::fromStdString(outcome.error));
        } else if (m_handlers.succeeded) {
            m_handlers.succeeded(*outcome.result);
        }
    }

    GuiJobHandlers<Result> m_handlers;
    std::uint64_t m_tickets = 0;   // start() and forget() calls so far
    std::uint64_t m_ticket = 0;    // the job whose reports are delivered
    bool m_running = false;
    // Lives on the GUI thread and receives the queued reports; destroyed after the runner has joined its
    // worker (members are destroyed in reverse order), which discards reports still queued.
    QObject m_context;
    std::unique_ptr<analysis::JobRunner> m_runner = std::make_unique<analysis::JobRunner>();
};

}  // namespace attnscope::widgets
