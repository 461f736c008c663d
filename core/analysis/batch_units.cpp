// The per-unit execution of a batch (analysis/batch_units.h): the exception barrier around each unit, the
// analysis of its mechanisms into records, and the progress reports.
#include "analysis/batch_units.h"

#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

#include "analysis/analyze.h"
#include "analysis/retrieval.h"
#include "analysis/inputs.h"
#include "io/tensor_file.h"
#include "kernels/kernels.h"
#include "util/error.h"
#include "util/parallel.h"

namespace attnscope::analysis {

using json = nlohmann::ordered_json;
using attention::Mechanism;

std::string HashCache::get(const std::string& file)
{
    {
        std::lock_guard lock(m_mutex);
        if (const auto it = m_sha.find(file); it != m_sha.end())
            return it->second;
    }
    const std::string sha = file_sha256(file);
    std::lock_guard lock(m_mutex);
    return m_sha[file] = sha;
}

namespace {

// Runs the units of one shard on the job's threads into the store: progress, failures and the first
// fatal error (results that cannot be saved) are gathered here.
class UnitRunner {
public:
    UnitRunner(const BatchPlan& plan, const BatchRunOptions& opt, const std::string& settings, ResultStore& store,
               HashCache& hashes, BatchReport& report)
        : m_plan(plan), m_opt(opt), m_settings(settings), m_store(store), m_hashes(hashes), m_report(report)
    {
    }

    void run(const std::vector<const BatchUnit*>& todo)
    {
        m_start = std::chrono::steady_clock::now();
        m_finished = m_report.skipped;
        m_limit = m_plan.memory_limit ? m_plan.memory_limit : default_memory_limit() / static_cast<unsigned>(m_opt.jobs);
        io::set_read_limit_bytes(m_limit);   // every unit's inputs are checked against it before they are read
        if (m_opt.jobs > 1)
            kernels::set_threads(1);   // parallel units instead of parallel BLAS
        parallel_for(todo.size(), m_opt.jobs, [&](std::size_t i) {
            if (m_opt.cancel.cancelled())
                return false;
            // The exception barrier (util/parallel.h: nothing may escape a worker): whatever run_one lets
            // through stops the batch with one error line instead of ending the process.
            try {
                return run_one(*todo[i]);
            } catch (const std::exception& e) {
                stop(todo[i]->key + ": " + e.what(), true);
            } catch (...) {
                stop(todo[i]->key + ": unknown exception", true);
            }
            return false;
        });
        if (!m_fatal.empty()) {
            const std::string text = m_fatal + "; the " + std::to_string(m_store.size()) +
                                     " records before it are kept: run the batch again to go on";
            if (m_internal)
                throw std::runtime_error(text);   // exit 1: a defect, not the user's input
            throw InputError(text);
        }
        m_report.cancelled = m_opt.cancel.cancelled();
    }

private:
    void stop(const std::string& why, bool internal = false)
    {
        std::lock_guard lock(m_mutex);
        if (m_fatal.empty()) {
            m_fatal = why;
            m_internal = internal;
        }
    }

    // False when the batch must stop (results can no longer be saved).
    bool run_one(const BatchUnit& u)
    {
        const auto unit_start = std::chrono::steady_clock::now();
        std::string failure;
        try {
            analyse(u);
        } catch (const AppendFailure& e) {
            stop(e.what());
            return false;
        } catch (const InputError& e) {
            failure = e.what();
        } catch (const std::invalid_argument& e) {
            failure = e.what();
        }
        finished(u, failure, unit_start);
        return true;
    }

    void analyse(const BatchUnit& u)
    {
        const std::string sha = m_hashes.get(u.file);
        const LoadedInputs in = load_inputs(u.source.q_ref, u.source.k_ref, std::nullopt, u.source.selection);
        const attention::AttentionOptions options = options_for_inputs(u.options, in);
        io::AxisSelection taken = u.source.selection;   // the retrieval targets of the batch element read
        for (const auto& [axis, index] : in.q.at)
            taken.at[axis] = index;
        const auto targets = load_retrieval_targets(u.source.q_ref, taken, in.q.values.rows(), options.causal);
        for (std::size_t mi = 0; mi < m_plan.mechanisms.size(); ++mi) {
            const Mechanism m = m_plan.mechanisms[mi];
            if (m_store.has(mechanism_key(u, m)))
                continue;
            const auto t0 = std::chrono::steady_clock::now();
            auto results = analyze(in.q.values, in.k.values, {m}, options, m_plan.metrics, m_limit, nullptr, nullptr,
                                   targets ? &*targets : nullptr);
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            json rec;
            rec["key"] = mechanism_key(u, m);
            rec["unit"] = u.index;
            rec["mechanism_index"] = mi;
            rec["settings"] = m_settings;
            rec["attnscope_version"] = ATTNSCOPE_VERSION;
            json input = in.input_json;
            if (!u.defaults_from_file.empty())
                input["defaults_from_file"] = u.defaults_from_file;
            input["file"] = u.display;
            input["sha256"] = sha;
            rec["input"] = std::move(input);
            rec["layer"] = u.layer ? json(*u.layer) : json();
            rec["head"] = u.head ? json(*u.head) : json();
            if (!u.at.empty()) {   // the unit's index on each axis given as `all` (its key spells them too)
                json at = json::object();
                for (const auto& [axis, index] : u.at)
                    at[std::string(1, axis)] = index;
                rec["unit_at"] = std::move(at);
            }
            const json result = result_json(results.front(), m_plan.metrics);
            for (const auto& [k, value] : result.items())
                rec[k] = value;
            rec["seconds"] = seconds;
            {
                std::lock_guard lock(m_mutex);
                if (!m_fatal.empty())
                    return;
            }
            m_store.append(rec);
            std::lock_guard lock(m_mutex);
            ++m_report.records;
        }
    }

    void finished(const BatchUnit& u, const std::string& failure, std::chrono::steady_clock::time_point unit_start)
    {
        std::lock_guard lock(m_mutex);
        ++m_finished;
        if (failure.empty())
            ++m_report.analysed;
        else
            m_report.failures.push_back(u.key + ": " + failure);
        if (!m_opt.on_progress)
            return;
        const auto now = std::chrono::steady_clock::now();
        BatchProgress p;
        p.done = m_finished;
        p.total = m_report.units;
        const std::size_t run = m_finished - m_report.skipped;
        if (run > 0)
            p.eta_seconds = std::chrono::duration<double>(now - m_start).count() / static_cast<double>(run) *
                            static_cast<double>(m_report.units - m_finished);
        p.label = u.key + (failure.empty() ? "" : " (failed)") +
                  fmt::format(" {:.2f}s", std::chrono::duration<double>(now - unit_start).count());
        m_opt.on_progress(p);
    }

    const BatchPlan& m_plan;
    const BatchRunOptions& m_opt;
    const std::string& m_settings;
    ResultStore& m_store;
    HashCache& m_hashes;
    BatchReport& m_report;
    std::mutex m_mutex;          // guards the report, the progress count and m_fatal
    std::string m_fatal;
    bool m_internal = false;
    std::size_t m_finished = 0;
    std::uint64_t m_limit = 0;
    std::chrono::steady_clock::time_point m_start;
};

}  // namespace

void run_units(const std::vector<const BatchUnit*>& todo, const BatchPlan& plan, const BatchRunOptions& opt,
               const std::string& settings, ResultStore& store, HashCache& hashes, BatchReport& report)
{
    UnitRunner(plan, opt, settings, store, hashes, report).run(todo);
}

}  // namespace attnscope::analysis
