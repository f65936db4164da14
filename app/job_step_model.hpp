// The training simulation behind a whole job's step times (docs/jobs.md, "Step times"): the
// scenario's step re-simulated for each configuration the job engine asks about (fewer
// data-parallel replicas after an elastic shrink, a slow GPU, a background checkpoint write
// sharing the NICs), never scaled from the full cluster's step.
#pragma once

#include "topology/cluster.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// Checkpoint bytes one GPU writes: the unique model state of its slice (its stage's weights and
// optimizer states, FP32 master weights included, as estimate_stage_memory sizes them), each
// replicated tensor split over the data-parallel replicas that hold it, as a sharded checkpoint
// (PyTorch DCP, Megatron's distributed checkpoint) writes every tensor once. ZeRO's shards are
// already per rank: ZeRO-1/2 shard the optimizer states, ZeRO-3 the weights too. The mean over
// pipeline stages (stages hold different layer counts), so bytes x GPUs is the whole checkpoint.
double checkpoint_bytes_per_gpu(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes);

// What a configuration changes in the scenario's step.
struct StepModelConfig {
  int dp = 1;                     // data-parallel replicas (the scenario's, or fewer after a shrink)
  bool keep_global_batch = true;  // fewer replicas run more accumulation (else the batch shrinks)
  int slow_gpus = 0;              // GPUs running slow (stragglers)
  double slowdown = 1;            // a slow GPU's kernel time factor
  double nic_fraction = 1;        // of each NIC's bandwidth left to training (a background write takes the rest)
};

// The layout and cluster of a configuration: dp replicas of the same model-parallel slice on
// just the nodes they need; the global batch kept (micro-batches per replica rounded up: the
// step waits for the replica with the most; the interleaved schedule's micro-batches rounded up to
// a multiple of pp, as it needs) or shrunk with the replicas (the same accumulation).
// A slow GPU: every kernel's time scaled by `slowdown` (the training simulation times one
// representative replica, so the slow GPU's stage sets the pace of every stage: an upper bound
// on one slow GPU, exact when every stage holds one). A background write: the NICs'
// bandwidth times nic_fraction.
struct StepModelRun {
  TrainingConfig cfg;
  ClusterSpec cluster;
  TrainingOptions opt;
};
StepModelRun step_model_run(const TrainingConfig& cfg, const ClusterSpec& cluster, const TrainingOptions& opt,
                            const StepModelConfig& c);

// The mean of a run's simulated steps (one without /training/noise).
double mean_step_s(const TrainingResult& r);

// Seconds per step of the configuration: the mean of the simulated steps (one without noise).
double simulate_step_s(const ModelSpec& m, const TrainingConfig& cfg, const ClusterSpec& cluster,
                       const TrainingOptions& opt, const StepModelConfig& c);

}  // namespace ctwin
