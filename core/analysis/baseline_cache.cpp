#include "analysis/baseline_cache.h"

#include <chrono>
#include <exception>

namespace attnscope::analysis {

namespace {

bool ready(const std::shared_future<std::shared_ptr<const CachedBaseline>>& f)
{
    return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

std::shared_ptr<const CachedBaseline> BaselineCache::get_or_compute(const std::string& key,
                                                                    const std::function<CachedBaseline()>& compute,
                                                                    const StageProgress* progress)
{
    for (;;) {
        std::shared_future<Value> pending;
        std::promise<Value> promise;
        {
            std::lock_guard lock(m_mutex);
            if (const auto it = m_entries.find(key); it != m_entries.end()) {
                m_order.splice(m_order.begin(), m_order, it->second.use);
                ++m_hits;
                pending = it->second.value;
            } else {
                m_order.push_front(key);
                m_entries.emplace(key, Entry{promise.get_future().share(), m_order.begin()});
                ++m_computed;
                evict_locked();
            }
        }
        if (pending.valid()) {
            // Another caller computes (or computed) it: wait, staying cancellable.
            while (pending.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready)
                if (progress)
                    progress->check();
            try {
                return pending.get();
            } catch (...) {
                continue;   // that computation failed or was cancelled, and its key is gone: compute it here
            }
        }
        try {
            Value v = std::make_shared<const CachedBaseline>(compute());
            promise.set_value(v);
            return v;
        } catch (...) {
            {
                std::lock_guard lock(m_mutex);
                if (const auto it = m_entries.find(key); it != m_entries.end()) {
                    m_order.erase(it->second.use);
                    m_entries.erase(it);
                }
            }
            promise.set_exception(std::current_exception());
            throw;
        }
    }
}

void BaselineCache::evict_locked()
{
    // Least recently used first; a value still being computed stays (its waiters hold its future).
    for (auto it = m_order.end(); m_entries.size() > m_capacity && it != m_order.begin();) {
        --it;
        const auto e = m_entries.find(*it);
        if (!ready(e->second.value))
            continue;
        m_entries.erase(e);
        it = m_order.erase(it);
    }
}

BaselineCache::Stats BaselineCache::stats() const
{
    std::lock_guard lock(m_mutex);
    return {m_hits, m_computed, m_entries.size()};
}

void BaselineCache::set_capacity(std::size_t capacity)
{
    std::lock_guard lock(m_mutex);
    m_capacity = capacity > 0 ? capacity : 1;
    evict_locked();
}

void BaselineCache::clear()
{
    std::lock_guard lock(m_mutex);
    for (auto it = m_order.begin(); it != m_order.end();) {
        const auto e = m_entries.find(*it);
        if (ready(e->second.value)) {
            m_entries.erase(e);
            it = m_order.erase(it);
        } else {
            ++it;
        }
    }
    m_hits = m_computed = 0;
}

BaselineCache& baseline_cache()
{
    static BaselineCache cache;
    return cache;
}

}  // namespace attnscope::analysis
