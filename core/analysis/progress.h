#pragma once
// Progress of a job made of stages of unequal cost (analysis/job.h): each stage has a weight, and
// fractions of a stage become fractions of the whole job. Reports reach the job's callback at most every
// 50 ms (each report may be a queued call on a GUI thread); cancellation is checked on every call, so a
// long loop that reports often is also a loop that stops promptly.
#include <algorithm>
#include <chrono>
#include <string>

#include "analysis/job.h"

namespace attnscope::analysis {

class StageProgress {
public:
    // `total`: the sum of the weights of every stage the job will begin.
    StageProgress(const JobContext& ctx, double total) : m_ctx(ctx), m_total(total > 0 ? total : 1.0) {}

    // The previous stage is done; `stage` of weight `weight` starts (reported at once).
    void begin(const std::string& stage, double weight)
    {
        m_done += m_weight;
        m_weight = weight;
        m_stage = stage;
        report(0.0, true);
    }
    // `fraction` of the current stage is done.
    void at(double fraction) { report(fraction, false); }
    // Throws JobCancelled when the job was cancelled.
    void check() const { m_ctx.check(); }
    // Whether the job was cancelled (for callbacks that must not throw, and answer "stop" instead).
    bool cancelled() const { return m_ctx.token.cancelled(); }

private:
    void report(double fraction, bool force)
    {
        m_ctx.check();
        const auto now = std::chrono::steady_clock::now();
        if (!force && now - m_reported < std::chrono::milliseconds(50))
            return;
        m_reported = now;
        const double f = std::min(1.0, (m_done + std::clamp(fraction, 0.0, 1.0) * m_weight) / m_total);
        m_ctx.progress(f, m_stage);
    }

    const JobContext& m_ctx;
    double m_total, m_done = 0, m_weight = 0;
    std::string m_stage;
    std::chrono::steady_clock::time_point m_reported{};
};

}  // namespace attnscope::analysis
