// Pieces of realrun's planning shared by the training plan (driver.cpp) and the serving one
// (serving_plan.cpp); internal to realrun.
#pragma once

#include <unordered_set>
#include <vector>

#include "realrun/driver.hpp"

namespace ctwin::realrun {

// With c.sweep, each GEMM of `ops` (those there now) with one of m, n, k scaled by powers of 2
// from 1 / sweep_max_scale to sweep_max_scale, appended once each (origin "sweep").
void add_gemm_sweep(const RealrunConfig& c, std::vector<PlannedOp>& ops, std::unordered_set<OpCost, OpCostHash>& seen);

// plan_realrun for a serving job (job.serving set).
RealrunPlan plan_serving_realrun(const RealrunJob& job);

}  // namespace ctwin::realrun
