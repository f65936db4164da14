// Runs a StepProgram: lowers it onto the stream executor's task graph (op i becomes task i,
// call i rendezvous i) and simulates one step on the event engine, collectives through the
// cluster's network model, with the configured noise and overlap slowdown applied to kernels.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "sim/engine.hpp"
#include "sim/streams.hpp"
#include "topology/cluster.hpp"
#include "topology/link_load.hpp"
#include "topology/network.hpp"
#include "workloads/measured_tables.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training.hpp"

namespace ctwin {

struct TrainingOptions;

struct LoweredStep {
  TaskGraph graph;
  std::vector<std::array<StreamId, kStepStreams>> streams;  // per GPU, by StepStream
};

// The program as a task graph: the same ops, dependencies and calls, in the same order.
LoweredStep lower_step(const StepProgram& p);

// Each call's time at the analytical fidelity (topology/network.hpp analytical_collective_time,
// or a measured curve of `measured` covering the call: table_or_analytical_time), by call index.
std::vector<Time> analytical_call_times(const StepProgram& p, const Cluster& cluster, const CollectiveOptions& options,
                                        const std::vector<MeasuredCollective>* measured = nullptr);

struct StepRun {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<StreamExecutor> exec;  // the tasks' timings
  std::uint64_t events = 0;
  double step_time_s = 0;
  // At flow fidelity, the links the step loaded most (TrainingOptions::busiest_links of them).
  std::vector<LinkLoad> busiest_links;
};

// Simulates step `step` of `steps` (noise draws are keyed by cfg.seed and the step).
// opt.progress hears the fraction of all `steps` done. Throws std::logic_error on a deadlock.
StepRun run_step(const StepProgram& p, const LoweredStep& lowered, const TrainingConfig& cfg, const Cluster& cluster,
                 const TrainingOptions& opt, int step, int steps);

}  // namespace ctwin
