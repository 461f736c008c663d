#pragma once
// A plain worker pool for coarse work items (batch units): body(i) for i = 0 .. count-1 on `threads`
// threads, the calling thread among them, indices handed out in order. No exception may escape `body`
// (catch inside: an exception would end the program).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace attnscope {

// `body` returns false to stop: no further index is handed out (those running finish).
inline void parallel_for(std::size_t count, int threads, const std::function<bool(std::size_t)>& body)
{
    std::atomic<std::size_t> next{0};
    std::atomic<bool> stop{false};
    auto worker = [&] {
        while (!stop.load()) {
            const std::size_t i = next++;
            if (i >= count)
                return;
            if (!body(i))
                stop = true;
        }
    };
    const std::size_t extra = std::min<std::size_t>(count, static_cast<std::size_t>(std::max(threads, 1))) - (count ? 1 : 0);
    std::vector<std::thread> pool;
    for (std::size_t t = 0; t < extra; ++t)
        pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool)
        t.join();
}

}  // namespace attnscope
