// The training simulation behind a whole job's step times (docs/jobs.md, "Step times"): the
// scenario's step re-simulated for each configuration the job engine asks about (fewer
// data-parallel replicas after an elastic shrink, a slow GPU, a background checkpoint write
// sharing the NICs), never scaled from the full cluster's step.
#pragma once

#include <vector>

#include "topology/cluster.hpp"
#include "workloads/memory.hpp"
#include "workloads/model.hpp"
#include "workloads/training.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

// Checkpoint bytes one GPU writes: the unique model state of its slice (its stage's weights, FP32
// master weights and optimizer states), each tensor split over the GPUs that hold a replica of
// it, as a sharded checkpoint (PyTorch DCP, Megatron's distributed checkpoint) writes every
// tensor once: dense tensors over dp x cp, routed experts over dp x cp / ep. The mean over
// pipeline stages (stages hold different layer counts), so bytes x GPUs is the whole checkpoint.
double checkpoint_bytes_per_gpu(const ModelSpec& m, const TrainingConfig& cfg);

// What a configuration changes in the scenario's step.
struct StepModelConfig {
  int dp = 1;                     // data-parallel replicas (the scenario's, or fewer after a shrink)
  bool keep_global_batch = true;  // fewer replicas run more accumulation (else the batch shrinks)
  int slow_gpus = 0;              // GPUs running slow (stragglers)
  double slowdown = 1;            // a slow GPU's kernel time factor
  int slow_stage = 0;             // the pipeline stage holding it
  double nic_fraction = 1;        // of each NIC's bandwidth left to training (a background write takes the rest)
};

// The layout and cluster of a configuration: dp replicas of the same model-parallel slice on
// just the nodes they need; the global batch kept (micro-batches per replica rounded up: the
// step waits for the replica with the most; the interleaved schedule's micro-batches rounded up to
// a multiple of pp, as it needs) or shrunk with the replicas (the same accumulation).
// A slow GPU: the kernels of its pipeline stage, in the simulated replica, `slowdown` times longer
// (its TP and CP peers wait for it at every collective, the other stages at its pipeline
// transfers, the other replicas at the gradient reduction). A background write: the NICs'
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

// The step with a slow GPU on each pipeline stage in turn (c.slow_stage ignored): pp simulations.
std::vector<double> simulate_slow_stage_steps_s(const ModelSpec& m, const TrainingConfig& cfg,
                                                const ClusterSpec& cluster, const TrainingOptions& opt,
                                                StepModelConfig c);

// The step with `slow_gpus` slow GPUs, each on a stage drawn uniformly and in a different
// replica, given the step with one on each stage (stage_steps_s): the slowest replica gates the
// step, so the expectation of the largest of slow_gpus draws,
// sum_i t_(i) ((i / pp)^k - ((i - 1) / pp)^k) over the sorted t_(1) <= ... <= t_(pp).
double expected_slowest_step_s(std::vector<double> stage_steps_s, int slow_gpus);

}  // namespace ctwin
