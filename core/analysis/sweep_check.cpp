#include "analysis/sweep_check.h"

#include <stdexcept>
#include <string>

#include "analysis/inputs.h"
#include "attention/mechanisms.h"

namespace attnscope::analysis {

void check_sweep_mechanisms(const SweepPlan& plan)
{
    const SweepSpec& spec = plan.spec;
    for (const SweepJob& job : plan.jobs) {
        for (std::size_t i = 0; i < job.points.size(); ++i) {
            const SweepPoint& point = job.points[i];
            attention::AttentionOptions options = point.options;
            if (job.unit && !options.mixing.head_matrices.empty())
                options = with_head_mixing(options, pair_heads(job.unit->source.q_ref, job.unit->source.k_ref, job.unit->source.selection));
            for (const attention::Mechanism m : spec.mechanisms) {
                const std::string problem = attention::mechanism_problem(m, options, point.n);
                if (problem.empty())
                    continue;
                // The point as the sweep names it: its M (points in the order of spec.values) or its N.
                const std::string where = spec.vary == 'm' && i < spec.values.size()
                                              ? "--vary m=" + std::to_string(spec.values[i])
                                              : "--vary n=" + std::to_string(point.n);
                throw std::invalid_argument(std::string(where).append(": ").append(attention::to_string(m)).append(": ").append(problem));
            }
        }
    }
}

}  // namespace attnscope::analysis
