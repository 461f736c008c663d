#include "analysis/job.h"

namespace attnscope::analysis {

JobRunner::JobRunner() : m_worker([this] { loop(); }) {}

JobRunner::~JobRunner()
{
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
        m_pending.reset();
        if (m_running)
            m_running->cancel();
    }
    m_wake.notify_all();
    m_worker.join();
}

std::uint64_t JobRunner::submit_erased(Task task, std::function<void(double, const std::string&)> on_progress)
{
    std::uint64_t id;
    {
        std::lock_guard lock(m_mutex);
        id = m_next_id++;
        m_pending = Pending{std::move(task), std::move(on_progress), id, CancelToken{}};   // replaces a waiting job
        if (m_running)
            m_running->cancel();
    }
    m_wake.notify_all();
    return id;
}

void JobRunner::cancel()
{
    std::lock_guard lock(m_mutex);
    if (m_pending)
        m_pending->token.cancel();   // it still runs, reports `cancelled` at its first check
    if (m_running)
        m_running->cancel();
}

bool JobRunner::busy() const
{
    std::lock_guard lock(m_mutex);
    return m_pending.has_value() || m_running.has_value();
}

void JobRunner::loop()
{
    for (;;) {
        Pending job;
        JobContext ctx;
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [this] { return m_stop || m_pending.has_value(); });
            if (m_stop)
                return;
            job = std::move(*m_pending);
            m_pending.reset();
            ctx.token = job.token;
            m_running = ctx.token;
        }
        ctx.on_progress = std::move(job.on_progress);
        job.task(ctx, job.id);   // the task's own barrier catches every exception
        std::lock_guard lock(m_mutex);
        m_running.reset();
    }
}

}  // namespace attnscope::analysis
