#include "job_step_model.hpp"

#include <algorithm>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "workloads/compute_model.hpp"

namespace ctwin {
namespace {

// Every kernel of the step `factor` times slower: a GPU whose clocks dropped (thermal or power
// throttling, a degraded HBM stack) runs its compute and its memory-bound kernels alike slower.
class SlowedCostModel final : public CostModel {
 public:
  SlowedCostModel(CostModelPtr base, double factor) : base_(std::move(base)), factor_(factor) {}
  double op_seconds(const OpCost& op) const override { return base_->op_seconds(op) * factor_; }

 private:
  CostModelPtr base_;
  double factor_;
};

}  // namespace

double checkpoint_bytes_per_gpu(const ModelSpec& m, const TrainingConfig& cfg, double capacity_bytes) {
  const Parallelism& p = cfg.parallel;
  const double dp = std::max(1, p.dp);
  double sum = 0;
  for (int s = 0; s < p.pp; ++s) {
    const MemoryBreakdown mb = estimate_stage_memory(m, cfg, capacity_bytes, s);
    // ZeRO-3 shards the weights over the replicas; below it each replica holds them whole.
    const double weights = p.zero_stage >= 3 ? mb.weights : mb.weights / dp;
    // ZeRO-1 and up shard the optimizer states (FP32 master weights and Adam's moments).
    const double optimizer = p.zero_stage >= 1 ? mb.optimizer : mb.optimizer / dp;
    sum += weights + optimizer;
  }
  return sum / std::max(1, p.pp);
}

StepModelRun step_model_run(const TrainingConfig& cfg, const ClusterSpec& cluster, const TrainingOptions& opt,
                            const StepModelConfig& c) {
  if (c.dp < 1) throw std::invalid_argument("step_model_run: dp must be >= 1");
  StepModelRun run{cfg, cluster, opt};
  Parallelism& p = run.cfg.parallel;
  const int full_dp = std::max(1, cfg.parallel.dp);
  p.dp = c.dp;
  const int per_step = cfg.micro_batch * c.dp;
  if (c.keep_global_batch) {
    // The same sequences over fewer replicas: each runs ceil(batch / (micro-batch x dp))
    // micro-batches, the step as long as the busiest replica's.
    int accum = (cfg.global_batch + per_step - 1) / per_step;
    // The interleaved schedule runs micro-batches in groups of pp: round up to a whole group.
    if (p.schedule == PipelineSchedule::interleaved && p.pp > 1) accum = (accum + p.pp - 1) / p.pp * p.pp;
    run.cfg.global_batch = accum * per_step;
  } else {
    run.cfg.global_batch = cfg.grad_accum() * per_step;
  }
  // The replicas' nodes only: the model-parallel slice's GPUs times the replicas.
  const long long slice = 1ll * p.tp * p.pp * p.cp;
  const long long gpus = slice * c.dp;
  run.cluster.nodes =
      static_cast<int>(std::min<long long>(cluster.nodes, (gpus + cluster.gpus_per_node - 1) / cluster.gpus_per_node));
  if (c.dp > full_dp) throw std::invalid_argument("step_model_run: more replicas than the scenario's");
  run.cluster.nic_gbyte_per_s = cluster.nic_gbyte_per_s * std::clamp(c.nic_fraction, 0.0, 1.0);
  run.opt.trace = false;
  run.opt.progress = nullptr;
  if (c.slow_gpus > 0 && c.slowdown != 1) {
    CostModelPtr base = opt.cost_model ? opt.cost_model : default_cost_model(cluster.gpu, cfg.precision.compute);
    run.opt.cost_model = std::make_shared<SlowedCostModel>(std::move(base), c.slowdown);
  }
  return run;
}

double simulate_step_s(const ModelSpec& m, const TrainingConfig& cfg, const ClusterSpec& cluster,
                       const TrainingOptions& opt, const StepModelConfig& c) {
  const StepModelRun run = step_model_run(cfg, cluster, opt, c);
  return mean_step_s(simulate_training(m, run.cfg, build_cluster(run.cluster), run.opt));
}

double mean_step_s(const TrainingResult& r) {
  if (r.step_times_s.empty()) return r.step_time_s;
  return std::accumulate(r.step_times_s.begin(), r.step_times_s.end(), 0.0) /
         static_cast<double>(r.step_times_s.size());
}

}  // namespace ctwin
