// What a training run will cost the host before it runs: simulated GPUs, ops, dependencies,
// events, trace events and bytes, and the host memory the simulation will take
// (estimate_training_run). Built from a small folded sample of the same layout and
// extrapolated, so even absurd configurations estimate in milliseconds (docs/resource-limits.md).
#pragma once

#include <cstdint>

#include "topology/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"

namespace ctwin {

struct TrainingOptions;

struct RunEstimate {
  int gpus = 0;                         // GPUs of the layout
  int simulated_gpus = 0;               // the ones simulated (one data-parallel replica when folded)
  bool folded = false;                  // as simulate_training will run it (noise and flows unfold)
  int micro_batches = 0;                // per data-parallel replica
  bool exact = false;                   // the sample was the run's own program: counts are exact
  bool micro_batch_fold = false;        // three short runs stand for the step (micro_batch_fold)
  std::uint64_t ops = 0;                // StepProgram ops = engine tasks (over the runs when folded)
  std::uint64_t deps = 0;               // dependencies, late ones included
  std::uint64_t calls = 0;              // collective calls (an upper bound unfolded: DP calls are shared)
  std::uint64_t events = 0;             // engine events over every simulated step
  std::uint64_t flows = 0;              // with flow fidelity: collective member ops, a lower bound on flows
  std::uint64_t trace_events = 0;       // op events of the trace (whether or not one is asked for)
  std::uint64_t trace_arrows = 0;       // its arrows: pipeline transfers, collectives' rings up to a cap
  std::uint64_t trace_bytes_ctt = 0;    // the .ctt file's size
  std::uint64_t trace_bytes_json = 0;   // the .json file's size
  std::uint64_t program_bytes = 0;      // host bytes of the program, task graph and executor
  std::uint64_t trace_host_bytes = 0;   // host bytes of the trace in memory (0 without opt.trace)
  std::uint64_t host_bytes = 0;         // program_bytes + trace_host_bytes
  std::uint64_t folded_host_bytes = 0;  // host_bytes were one data-parallel replica to stand for all
};

// Host bytes per unit, from the sizes of the structures a run holds at its peak (the program,
// its task graph, the executor's per-task state and the trace), times the measured allocation
// overhead (vector growth).
struct RunCostModel {
  double bytes_per_op = 0;
  double bytes_per_dep = 0;
  double bytes_per_call = 0;
  double bytes_per_trace_event = 0;
  double overhead = 1;
};
RunCostModel run_cost_model();

// Estimates the run simulate_training(m, cfg, cluster, opt) would do, without building it: a
// folded program of a few micro-batches is built (and simulated, to count events, and with
// opt.trace its trace written to memory to measure it) once or twice and scaled to the run's micro-batches and
// replicas. Counts are exact when the run itself is small enough to be the sample; ops and dependencies are linear in
// micro-batches (from pp on) and in replicas, so they are exact too.
// `count_events` false skips simulating the samples when no trace is asked for (events then
// stay 0): the memory decision needs only the program's size, and `ctwin run` saves the time.
RunEstimate estimate_training_run(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                  const TrainingOptions& opt, bool count_events = true);

}  // namespace ctwin
