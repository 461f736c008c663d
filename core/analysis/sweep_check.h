#pragma once
// Whether every mechanism of a planned sweep can run at every point, checked before anything is computed
// (headers only): the rule each point's operator applies (attention::mechanism_problem: masks, blocks, a
// loaded mixing matrix against the point's block count, normalisation, decay, gates), with a per-head mixing
// matrix taken for each unit's head as the run takes it. A front end that approves sweeps before running them
// (the desktop app's sweep dialog) calls it after plan_sweep, so that it approves exactly what will run.
#include "analysis/sweep.h"

namespace attnscope::analysis {

// Throws std::invalid_argument naming the point and the mechanism ("--vary m=1: mhla: mixing matrix w.h5:/mc is
// 16x16 but there are M=1 blocks (expected 1x1)") at the first that cannot run; InputError when a unit's heads
// do not pair or a per-head mixing file does not fit the queries' heads.
void check_sweep_mechanisms(const SweepPlan& plan);

}  // namespace attnscope::analysis
