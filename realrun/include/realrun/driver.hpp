// realrun's driver: what to run on a job's devices and how it is timed, whatever the backend.
// From a training scenario's step program (build_training_step) it measures
//   ops:         every distinct kernel shape of the step (StepProgram::costs), plus GEMMs swept
//                around them (each of m, n, k scaled by powers of 2 up to sweep_max_scale);
//   collectives: every (communicator, operation) the step issues, over a size sweep plus the
//                step's exact sizes, with nccl-tests' busbw;
//   steps:       the step replayed on the devices, each op on its stream in program order,
//                dependencies as events, collectives as rendezvous of their group;
// and returns the measurements file's struct (docs/measurements.md, docs/realrun.md).
// From a serving scenario's replica it measures the same three things for a set of iterations
// (prefill chunks, decode batches, mixed): each iteration's op list is the serving cost model's
// own (ServingCostModel::iteration_ops), and a "step" is one iteration replayed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/measurements.hpp"
#include "realrun/device.hpp"
#include "realrun/realrun_config.hpp"
#include "topology/cluster.hpp"
#include "workloads/model.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_deploy_params.hpp"
#include "workloads/serving_iteration.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin::realrun {

// A serving scenario's replica as realrun replays it: the TP ranks of one stage, BF16 weights,
// no proposer (plan_realrun refuses the rest with the scenario key to change).
struct ServingReplayJob {
  ServingDeployment deployment;  // priced by the scenario's profile, as `ctwin run` prices it
  SchedulerConfig scheduler;     // the limits every iteration must respect
};

// What realrun runs for one training scenario (or, with `serving`, one serving replica).
struct RealrunJob {
  std::string backend = "cpu";
  std::string created_by = "ctwin";
  std::string scenario_file;
  nlohmann::json scenario = nlohmann::json::object();  // as run, overrides applied
  ModelSpec model;
  TrainingConfig training;
  ClusterSpec cluster;      // the scenario's cluster (the discovered one is written from it)
  TrainingOptions options;  // the scenario's; realrun builds the step unfolded
  RealrunConfig config;
  std::optional<ServingReplayJob> serving;  // set for a serving scenario: model, training, options unused
};

struct PlannedOp {
  OpCost op;
  std::string origin;  // "step" or "sweep"
  std::string name, phase;
};
struct PlannedCollective {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::uint32_t comm = 0;  // index into RealrunPlan::comms
  double bytes = 0;
};

// A kernel timed alone and beside a communicator's collectives (OverlapMeasurement).
struct PlannedOverlap {
  std::uint32_t op = 0;          // index into RealrunPlan::ops: the step's largest GEMM
  std::uint32_t collective = 0;  // index into RealrunPlan::collectives: the comm's largest call
};

// One serving iteration to replay: its shape and one rank's forward pass (every TP rank runs the
// same list; a collective's ranks are the TP group).
struct PlannedIteration {
  IterationShape shape;
  std::vector<IterationOp> ops;
};

// Everything the driver will run, decided before any device is touched (deterministic).
struct RealrunPlan {
  StepProgram program;                       // training: the step replayed
  std::vector<PlannedIteration> iterations;  // serving: replayed instead of a training step
  std::vector<PlannedOp> ops;
  std::vector<CommSpec> comms;  // CommSpec::id is the program's group index
  std::vector<PlannedCollective> collectives;
  std::vector<PlannedOverlap> overlaps;  // one a communicator, when the step has a GEMM
  int ranks = 0;
};

// A training scenario's plan, or (job.serving set) a serving replica's. InputError (exit 2) for
// what cannot be replayed: ranks other than the layout's, and for serving pipeline stages, a
// speculative proposer, quantized weights, a replica whose weights do not fit, or an iteration
// the scheduler could never run (check_iteration_shape).
RealrunPlan plan_realrun(const RealrunJob& job);

// The iterations realrun measures for a serving replica unless /realrun/iterations lists them,
// from the scheduler's limits (B = max_num_batched_tokens, S = max_num_seqs, L = max_model_len):
// prefill chunks of B/4, B/2 and B tokens (at most L) on an empty cache; with chunked prefill a
// prompt's next chunk (min(B, L - B) after B, when L > B); decode batches of 1, S/2 and S at
// contexts L/4 and L/2; and with chunked prefill two mixed iterations as the scheduler forms them
// (the decodes first, a prompt's chunk filling the token budget): S/2 decodes at L/4 and S - 1
// at L/2. Duplicates and shapes needing more than `num_gpu_blocks` KV blocks are left out.
std::vector<IterationShape> default_serving_iterations(const SchedulerConfig& s, std::int64_t num_gpu_blocks);

// The sizes of the collective sweep: min, min*factor, ... up to max (each rounded down to a
// multiple of 4 bytes, at least 4).
std::vector<double> collective_sweep_sizes(const RealrunConfig& c);

// The job's other processes, when its ranks are spread over several (one per GPU under mpirun
// or srun). Every process holds the same number of consecutive ranks, process k the k-th block.
// Both calls are made by one thread of each process, at the same points of the run on all.
struct ProcessGroup {
  int index = 0;  // this process's place in the job
  int count = 1;  // processes in the job
  std::function<void()> barrier;
  // Every process's `mine`, concatenated in process order (all of the same length).
  std::function<std::vector<double>(const std::vector<double>& mine)> all_gather;
  // Every process's bytes, of any length, in process order (ctwin sweep's results).
  std::function<std::vector<std::string>(const std::string& mine)> all_gather_bytes;
};

// Runs the plan on `devices` and fills the measurements. Without `world`, the devices are every
// global rank, in rank order; with it, this process's block of ranks (the file is complete on
// every process). `progress` gets a phase name and the fraction done.
using RealrunProgress = std::function<void(const std::string& phase, double fraction)>;
calibrate::Measurements run_realrun(const RealrunJob& job, const RealrunPlan& plan, const std::vector<Device*>& devices,
                                    const RealrunProgress& progress = {}, const ProcessGroup* world = nullptr);

// Host facts for the measurements file: hostname, CPU model, cores, compiler and Eigen versions.
calibrate::HostInfo cpu_host_info(int ranks);

}  // namespace ctwin::realrun
