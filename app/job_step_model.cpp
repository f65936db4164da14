#include "job_step_model.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <stdexcept>

namespace ctwin {
namespace {}  // namespace

double checkpoint_bytes_per_gpu(const ModelSpec& m, const TrainingConfig& cfg) {
  const Parallelism& p = cfg.parallel;
  const Precision& pr = cfg.precision;
  // Every replica of a tensor is written once: dense tensors are held by dp x cp GPUs, routed
  // experts by dp x cp / ep. What is checkpointed per parameter: the weight, the FP32 master and
  // the optimizer states, whatever ZeRO or offloading does with them in memory (the FP8 weight
  // cache is rebuilt from the master, not saved).
  const double holders = static_cast<double>(std::max(1, p.dp)) * std::max(1, p.cp);
  const double per_param = pr.weight_bytes + pr.master_bytes + pr.optimizer_state_bytes;
  double sum = 0;
  for (int s = 0; s < p.pp; ++s) {
    const double params = stage_params(m, cfg, s);
    const double experts = stage_expert_params(m, cfg, s);
    sum += ((params - experts) / holders + experts / expert_data_parallel(p)) * per_param;
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
    // One slow GPU's stage of the simulated replica; the other replicas wait for it at the
    // data-parallel reduction.
    if (c.slow_stage < 0 || c.slow_stage >= p.pp) throw std::invalid_argument("step_model_run: no such slow stage");
    run.opt.stage_slowdown.assign(static_cast<std::size_t>(p.pp), 1.0);
    run.opt.stage_slowdown[static_cast<std::size_t>(c.slow_stage)] = c.slowdown;
  }
  return run;
}

double simulate_step_s(const ModelSpec& m, const TrainingConfig& cfg, const ClusterSpec& cluster,
                       const TrainingOptions& opt, const StepModelConfig& c) {
  const StepModelRun run = step_model_run(cfg, cluster, opt, c);
  return mean_step_s(simulate_training(m, run.cfg, build_cluster(run.cluster), run.opt));
}

std::vector<double> simulate_slow_stage_steps_s(const ModelSpec& m, const TrainingConfig& cfg,
                                                const ClusterSpec& cluster, const TrainingOptions& opt,
                                                StepModelConfig c) {
  std::vector<double> out;
  for (c.slow_stage = 0; c.slow_stage < cfg.parallel.pp; ++c.slow_stage) {
    out.push_back(simulate_step_s(m, cfg, cluster, opt, c));
  }
  return out;
}

double expected_slowest_step_s(std::vector<double> stage_steps_s, int slow_gpus) {
  if (stage_steps_s.empty() || slow_gpus < 1) throw std::invalid_argument("expected_slowest_step_s: nothing to draw");
  std::sort(stage_steps_s.begin(), stage_steps_s.end());
  const double n = static_cast<double>(stage_steps_s.size());
  double sum = 0, below = 0;
  for (std::size_t i = 0; i < stage_steps_s.size(); ++i) {
    const double at_most = std::pow((static_cast<double>(i) + 1) / n, slow_gpus);
    sum += stage_steps_s[i] * (at_most - below);
    below = at_most;
  }
  return sum;
}

double mean_step_s(const TrainingResult& r) {
  if (r.step_times_s.empty()) return r.step_time_s;
  return std::accumulate(r.step_times_s.begin(), r.step_times_s.end(), 0.0) /
         static_cast<double>(r.step_times_s.size());
}

}  // namespace ctwin
