// The core computes on a worker thread; the calling thread waits without the GIL and wakes every 50 ms to
// check for signals (Ctrl+C) and to pass progress on (bridge.h, run_released).
#include <chrono>
#include <condition_variable>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "bridge.h"
#include "kernels/kernels.h"
#include "util/error.h"

namespace attnscope::python {

namespace {

struct Shared {
    std::mutex mutex;
    std::condition_variable wake;
    bool done = false;
    std::exception_ptr error;
    std::optional<std::pair<double, std::string>> progress;   // the latest report not yet passed on
};


// Calls that set the thread count (--threads, process-wide in OpenBLAS and the kernels) hold this exclusively,
// every other call shares it: a count set for one call is never seen by another, and is put back after it.
std::shared_timed_mutex& thread_count_mutex()
{
    static std::shared_timed_mutex mutex;
    return mutex;
}

// Calls of the module running on this Python thread: more than one when a progress callback calls attnscope.
thread_local int t_calls_here = 0;

// The lock a call holds on thread_count_mutex(): taken without the GIL (the holders may need it for their
// progress callbacks), 50 ms at a time, so that Ctrl+C still raises while waiting. A call made from a progress
// callback runs inside its caller's turn and takes nothing (waiting would wait for its own caller).
class ThreadCountTurn {
public:
    explicit ThreadCountTurn(bool exclusive)
    {
        if (t_calls_here > 0) {
            if (exclusive)
                throw py::value_error("threads: a call made from another call's progress callback runs on the "
                                      "threads of that call; give threads= to the outer call");
            return;
        }
        for (;;) {
            bool got = false;
            {
                py::gil_scoped_release released;
                if (exclusive) {
                    m_exclusive = std::unique_lock(thread_count_mutex(), std::defer_lock);
                    got = m_exclusive.try_lock_for(std::chrono::milliseconds(50));
                } else {
                    m_shared = std::shared_lock(thread_count_mutex(), std::defer_lock);
                    got = m_shared.try_lock_for(std::chrono::milliseconds(50));
                }
            }
            if (got)
                break;
            if (PyErr_CheckSignals() != 0)
                throw py::error_already_set();
        }
    }

private:
    std::unique_lock<std::shared_timed_mutex> m_exclusive;
    std::shared_lock<std::shared_timed_mutex> m_shared;
};

// t_calls_here for the duration of one call.
struct CallHere {
    CallHere() { ++t_calls_here; }
    ~CallHere() { --t_calls_here; }
    CallHere(const CallHere&) = delete;
    CallHere& operator=(const CallHere&) = delete;
};

}  // namespace

// The core's exceptions in Python's terms, with the command line's messages (app/cli_common.h, guarded).
[[noreturn]] void raise_mapped(const std::exception_ptr& error)
{
    try {
        std::rethrow_exception(error);
    } catch (const MemoryLimitError& e) {
        throw py::value_error(std::string(e.what()) + "; set the limit with max_memory=");
    } catch (const MissingFileError& e) {
        PyErr_SetString(PyExc_FileNotFoundError, e.what());
        throw py::error_already_set();
    } catch (const InputError& e) {
        throw py::value_error(e.what());
    } catch (const std::invalid_argument& e) {
        throw py::value_error(e.what());
    } catch (const std::out_of_range& e) {
        throw py::value_error(e.what());
    } catch (const std::filesystem::filesystem_error& e) {
        std::string where = e.path1().string();
        if (!e.path2().empty())
            where += ", " + e.path2().string();
        throw py::value_error((where.empty() ? std::string() : where + ": ") + e.code().message());
    } catch (const analysis::JobCancelled&) {
        PyErr_SetNone(PyExc_KeyboardInterrupt);   // only reached after a signal, whose error is raised first
        throw py::error_already_set();
    } catch (const std::bad_alloc&) {
        throw;   // pybind11 raises MemoryError
    } catch (const std::exception& e) {
        throw std::runtime_error(std::string("internal: ") + e.what());
    }
}

void run_released(const CallArgs& call, const std::function<void(const analysis::JobContext&)>& work,
                  const py::object& progress)
{
    // Checked before anything runs, whatever the call's speed: a progress that is not callable would
    // otherwise be noticed only when the core first reports.
    if (!progress.is_none() && !PyCallable_Check(progress.ptr()))
        throw py::type_error("progress: expected a callable (fraction, stage) or None, got " +
                             std::string(py::str(progress.get_type().attr("__name__"))));
    const ThreadCountTurn turn(call.sets_threads);
    const CallHere here;
    auto shared = std::make_shared<Shared>();
    analysis::JobContext ctx;
    ctx.on_progress = [shared](double fraction, const std::string& stage) {
        const std::lock_guard lock(shared->mutex);
        shared->progress = std::make_pair(fraction, stage);
        shared->wake.notify_all();
    };

    std::optional<py::error_already_set> python_error;   // Ctrl+C, or the progress callback raised
    std::thread worker;
    {
        py::gil_scoped_release released;
        worker = std::thread([&work, &call, ctx, shared] {
            try {
                // This call's settings, in effect on the thread that reads its inputs; the thread count is put
                // back when the call ends (it holds the exclusive turn when it sets one).
                const io::ReadSettingsScope settings(call.read);
                std::optional<kernels::RestoreThreads> threads;
                if (call.sets_threads)
                    threads.emplace();
                kernels::check_environment();   // a misspelt ATTNSCOPE_* is refused, as by the command line
                work(ctx);
            } catch (...) {
                const std::lock_guard lock(shared->mutex);
                shared->error = std::current_exception();
            }
            const std::lock_guard lock(shared->mutex);
            shared->done = true;
            shared->wake.notify_all();
        });
    }
    for (;;) {
        bool done = false;
        std::optional<std::pair<double, std::string>> report;
        {
            py::gil_scoped_release released;
            std::unique_lock lock(shared->mutex);
            shared->wake.wait_for(lock, std::chrono::milliseconds(50), [&] { return shared->done || shared->progress; });
            done = shared->done;
            report.swap(shared->progress);
        }
        try {
            if (!done && PyErr_CheckSignals() != 0)
                throw py::error_already_set();
            // A report still pending when the work ended is passed on too: on a fast machine a whole call can end
            // before this thread first wakes, and its stages would otherwise never be seen (CI saw only "done").
            if (report && !progress.is_none())
                progress(report->first, report->second);
        } catch (py::error_already_set& e) {
            python_error.emplace(std::move(e));
            ctx.token.cancel();   // the core stops at its next check (between tiles, panels, mechanisms)
            break;
        }
        if (done)
            break;
    }
    {
        py::gil_scoped_release released;
        worker.join();
    }
    if (python_error)
        throw std::move(*python_error);
    if (shared->error)
        raise_mapped(shared->error);
    // The core's stages weigh their expected work, and fast paths end early (analyze reported its last stage at
    // about 0.55): a call that finished says so, so a progress bar reaches its end.
    if (!progress.is_none())
        progress(1.0, "done");
}

}  // namespace attnscope::python
