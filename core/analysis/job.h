#pragma once
// Background jobs with progress and cancellation, for the desktop app (and any caller that must not
// block): one worker thread, queue depth one.
//
// submit() hands a job to the worker. If a job is running it is asked to cancel; a job still waiting
// is replaced (a view that asks again while a job runs replaces the pending request). A job checks
// JobContext::check() between stages; check() throws JobCancelled once cancelled. No exception ever
// crosses the thread: every outcome (result, error message, cancelled) reaches `done`, which runs on
// the worker thread; a GUI posts it to its own thread (queued invocation). A cancelled job that had not
// started yet still runs, with its token already cancelled, so that it reports `cancelled` at once.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace attnscope::analysis {

struct JobCancelled : std::exception {
    const char* what() const noexcept override { return "cancelled"; }
};

class CancelToken {
public:
    CancelToken() : m_flag(std::make_shared<std::atomic<bool>>(false)) {}
    void cancel() const { m_flag->store(true); }
    bool cancelled() const { return m_flag->load(); }

private:
    std::shared_ptr<std::atomic<bool>> m_flag;
};

struct JobContext {
    CancelToken token;
    std::function<void(double fraction, const std::string& stage)> on_progress;   // may be empty

    // Throws JobCancelled when the job was cancelled.
    void check() const
    {
        if (token.cancelled())
            throw JobCancelled();
    }
    // Reports progress (fraction in [0, 1]) and checks for cancellation.
    void progress(double fraction, const std::string& stage) const
    {
        check();
        if (on_progress)
            on_progress(fraction, stage);
    }
};

template <class Result>
struct JobOutcome {
    std::uint64_t id = 0;            // the submit() number
    std::optional<Result> result;    // set on success
    std::string error;               // set on failure (the exception's message)
    bool cancelled = false;
};

class JobRunner {
public:
    JobRunner();
    ~JobRunner();   // cancels what runs, drops what waits, joins the worker
    JobRunner(const JobRunner&) = delete;
    JobRunner& operator=(const JobRunner&) = delete;

    // Runs work(ctx) on the worker; `done` receives the outcome. Returns the job's id.
    template <class Result>
    std::uint64_t submit(std::function<Result(const JobContext&)> work, std::function<void(JobOutcome<Result>)> done,
                         std::function<void(double, const std::string&)> on_progress = {})
    {
        return submit_erased([work = std::move(work), done = std::move(done)](const JobContext& ctx, std::uint64_t id) {
            JobOutcome<Result> outcome;
            outcome.id = id;
            try {
                outcome.result.emplace(work(ctx));
            } catch (const JobCancelled&) {
                outcome.cancelled = true;
            } catch (const std::bad_alloc&) {
                outcome.error = "out of memory";
            } catch (const std::exception& e) {
                outcome.error = e.what();
            } catch (...) {
                outcome.error = "unknown failure";
            }
            if (done)
                done(std::move(outcome));
        }, std::move(on_progress));
    }

    // Cancels the running job and the waiting one: both still report (cancelled) through their `done`,
    // so a caller waiting for an outcome always gets one. (A waiting job replaced by submit() is dropped
    // without a report: its caller asked for something newer.)
    void cancel();
    // True while a job runs or waits.
    bool busy() const;

private:
    using Task = std::function<void(const JobContext&, std::uint64_t)>;
    std::uint64_t submit_erased(Task task, std::function<void(double, const std::string&)> on_progress);
    void loop();

    struct Pending {
        Task task;
        std::function<void(double, const std::string&)> on_progress;
        std::uint64_t id;
        CancelToken token;
    };
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    std::optional<Pending> m_pending;
    std::optional<CancelToken> m_running;
    std::uint64_t m_next_id = 1;
    bool m_stop = false;
    std::thread m_worker;
};

}  // namespace attnscope::analysis
