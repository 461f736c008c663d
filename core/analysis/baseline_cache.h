#pragma once
// The content-free baseline A0 (docs/maths.md 2.2) depends on the shape of an analysis, never on its data: N,
// the mask, the blocks, the mixing matrix, decay and gates, the normalisation, and the metric options that
// shape its measurement. One process measures it once per distinct setting: every head, layer, input and sweep
// point of an analyze, sweep or batch run, the desktop app's views and the Python module share this cache.
//
// Threading: get_or_compute may be called from any thread. The first caller of a key computes while holding
// no lock; later callers of the same key wait for that result instead of computing it again (checking their
// own cancel token every 50 ms). When the computation throws (a cancelled job, an error), the key is dropped
// and the exception reaches its own caller only; a waiter then computes the value itself. Values are
// immutable once stored (shared_ptr<const>), so a result is the same object for every caller. The cache holds
// at most capacity() settings, dropping the least recently used finished one.
#include <cstdint>
#include <functional>
#include <future>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "analysis/measure.h"

namespace attnscope::analysis {

// What measure_baseline adds to a MechanismResult: the baseline (or none) and the warnings that go with it.
struct CachedBaseline {
    std::optional<BaselineResult> baseline;
    std::vector<std::string> warnings;
};

class BaselineCache {
public:
    explicit BaselineCache(std::size_t capacity = 64) : m_capacity(capacity > 0 ? capacity : 1) {}

    // The value of `key`: stored, being computed by another thread (waited for; `progress`, when given, is
    // checked for cancellation while waiting), or computed now by `compute` and stored.
    std::shared_ptr<const CachedBaseline> get_or_compute(const std::string& key,
                                                         const std::function<CachedBaseline()>& compute,
                                                         const StageProgress* progress = nullptr);

    struct Stats {
        std::uint64_t hits = 0;       // answered from a stored or in-flight value
        std::uint64_t computed = 0;   // computations started
        std::size_t size = 0;         // settings held
    };
    Stats stats() const;
    std::size_t capacity() const { return m_capacity; }
    void set_capacity(std::size_t capacity);
    void clear();

private:
    using Value = std::shared_ptr<const CachedBaseline>;
    struct Entry {
        std::shared_future<Value> value;
        std::list<std::string>::iterator use;   // position in m_order (most recent first)
    };
    void evict_locked();

    mutable std::mutex m_mutex;
    std::size_t m_capacity;
    std::map<std::string, Entry> m_entries;
    std::list<std::string> m_order;
    std::uint64_t m_hits = 0, m_computed = 0;
};

// The process-wide cache measure_baseline uses.
BaselineCache& baseline_cache();

}  // namespace attnscope::analysis
