// JobRunner: queue depth one, cancellation between stages, no exception crosses the thread.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/job.h"

using namespace attnscope::analysis;
using namespace std::chrono_literals;

namespace {

// Collects outcomes delivered on the worker thread.
template <class R>
struct Collector {
    std::mutex m;
    std::condition_variable cv;
    std::vector<JobOutcome<R>> outcomes;
    void add(JobOutcome<R> o)
    {
        std::lock_guard lock(m);
        outcomes.push_back(std::move(o));
        cv.notify_all();
    }
    bool wait_for(std::size_t n, std::chrono::milliseconds timeout = 10s)
    {
        std::unique_lock lock(m);
        return cv.wait_for(lock, timeout, [&] { return outcomes.size() >= n; });
    }
};

}  // namespace

TEST(Job, DeliversResultAndProgress)
{
    JobRunner runner;
    Collector<int> c;
    std::atomic<int> progress_calls{0};
    const auto id = runner.submit<int>(
        [](const JobContext& ctx) {
            ctx.progress(0.5, "half");
            return 42;
        },
        [&](JobOutcome<int> o) { c.add(std::move(o)); }, [&](double f, const std::string& s) {
            EXPECT_DOUBLE_EQ(f, 0.5);
            EXPECT_EQ(s, "half");
            ++progress_calls;
        });
    ASSERT_TRUE(c.wait_for(1));
    EXPECT_EQ(c.outcomes[0].id, id);
    ASSERT_TRUE(c.outcomes[0].result.has_value());
    EXPECT_EQ(*c.outcomes[0].result, 42);
    EXPECT_EQ(progress_calls.load(), 1);
}

TEST(Job, ExceptionsBecomeErrors)
{
    JobRunner runner;
    Collector<int> c;
    runner.submit<int>([](const JobContext&) -> int { throw std::invalid_argument("blocks M=300 exceeds tokens N=196"); },
                       [&](JobOutcome<int> o) { c.add(std::move(o)); });
    ASSERT_TRUE(c.wait_for(1));
    EXPECT_FALSE(c.outcomes[0].result.has_value());
    EXPECT_EQ(c.outcomes[0].error, "blocks M=300 exceeds tokens N=196");
    EXPECT_FALSE(c.outcomes[0].cancelled);
}

TEST(Job, NewRequestCancelsRunningAndReplacesPending)
{
    JobRunner runner;
    Collector<int> c;
    std::atomic<bool> started{false};
    auto slow = [&](int value) {
        return [&, value](const JobContext& ctx) {
            started = true;
            for (int i = 0; i < 500; ++i) {   // up to 5 s unless cancelled
                ctx.check();
                std::this_thread::sleep_for(10ms);
            }
            return value;
        };
    };
    auto done = [&](JobOutcome<int> o) { c.add(std::move(o)); };
    const auto first = runner.submit<int>(slow(1), done);
    while (!started)
        std::this_thread::sleep_for(1ms);
    const auto second = runner.submit<int>(slow(2), done);     // waits, then is replaced
    const auto third = runner.submit<int>([](const JobContext&) { return 3; }, done);
    ASSERT_TRUE(c.wait_for(2));
    std::this_thread::sleep_for(50ms);
    ASSERT_EQ(c.outcomes.size(), 2u);                          // the replaced job never ran
    EXPECT_EQ(c.outcomes[0].id, first);
    EXPECT_TRUE(c.outcomes[0].cancelled);
    EXPECT_EQ(c.outcomes[1].id, third);
    EXPECT_EQ(*c.outcomes[1].result, 3);
    EXPECT_NE(second, third);
}

TEST(Job, CancelReportsJobsThatHadNotStarted)
{
    JobRunner runner;
    Collector<int> c;
    std::atomic<bool> release{false};
    auto done = [&](JobOutcome<int> o) { c.add(std::move(o)); };
    runner.submit<int>([&](const JobContext&) {
        while (!release)
            std::this_thread::sleep_for(1ms);
        return 1;   // ignores cancellation on purpose: the waiting job must still be reported
    }, done);
    std::this_thread::sleep_for(10ms);
    const auto waiting = runner.submit<int>([](const JobContext& ctx) {
        ctx.check();
        return 2;
    }, done);
    runner.cancel();
    release = true;
    ASSERT_TRUE(c.wait_for(2));
    EXPECT_EQ(c.outcomes[1].id, waiting);
    EXPECT_TRUE(c.outcomes[1].cancelled);
}

TEST(Job, CancelAndDestroyWhileRunning)
{
    Collector<int> c;
    {
        JobRunner runner;
        runner.submit<int>(
            [](const JobContext& ctx) {
                for (;;) {
                    ctx.check();
                    std::this_thread::sleep_for(1ms);
                }
                return 0;
            },
            [&](JobOutcome<int> o) { c.add(std::move(o)); });
        std::this_thread::sleep_for(20ms);
        EXPECT_TRUE(runner.busy());
        runner.cancel();
        ASSERT_TRUE(c.wait_for(1));
        EXPECT_TRUE(c.outcomes[0].cancelled);
        std::atomic<bool> second_started{false};
        runner.submit<int>([&](const JobContext& ctx) {
            second_started = true;
            for (;;) {
                ctx.check();
                std::this_thread::sleep_for(1ms);
            }
            return 0;
        }, [&](JobOutcome<int> o) { c.add(std::move(o)); });
        while (!second_started)
            std::this_thread::sleep_for(1ms);
    }   // the destructor cancels the running job and joins
    ASSERT_EQ(c.outcomes.size(), 2u);
    EXPECT_TRUE(c.outcomes[1].cancelled);
}
