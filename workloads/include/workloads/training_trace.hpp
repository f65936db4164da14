// A simulated training step as records: the collectives each GPU issued (from the program
// alone) and the full timeline trace (from a run): lanes per GPU and stream, every op, arrows
// for transfers and collectives, memory counters and a summary.
#pragma once

#include <vector>

#include "sim/streams.hpp"
#include "sim/trace.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// Every collective and pipeline transfer each simulated GPU issues, in issue order.
std::vector<StepCollective> step_collectives(const StepProgram& p);

// The trace of a run of `p` whose results are `res` (memory, breakdown, step time). `names`
// is the program's string table (p.names, moved in); `gpu_ops` as ops_by_gpu(p).
Trace training_trace(const StepProgram& p, Trace names, const std::vector<std::vector<std::uint32_t>>& gpu_ops,
                     const TaskGraph& graph, const StreamExecutor& exec, const TrainingConfig& cfg,
                     const Cluster& cluster, const TrainingResult& res);

}  // namespace ctwin
