#include "workloads/training_sim.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/error.hpp"
#include "workloads/model_dims.hpp"
#include "workloads/step_breakdown.hpp"
#include "workloads/step_program.hpp"
#include "workloads/step_run.hpp"
#include "workloads/training_trace.hpp"

namespace ctwin {

double model_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg) {
  if (m.is_generic()) {
    double fwd = 0;
    for (const auto& l : m.generic_layers) fwd += l.fwd_flops;
    return 3.0 * fwd * cfg.global_batch;  // forward plus a backward of twice its FLOPs
  }
  const ParamCounts pc = count_parameters(m);
  const double tokens = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  const double q_dim = model_dims(m).q_dim;
  // 6N per token for the weight GEMMs (2 forward, 4 backward), plus QK^T and PV: 4*s*h_q
  // forward per token per layer, 12*s*h_q with backward (Narayanan et al. 2021; PaLM App. B).
  return tokens * (6.0 * pc.matmul_per_token + 12.0 * m.layers * cfg.seq_len * q_dim);
}

double recompute_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg) {
  const double tokens = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  if (m.is_generic()) {
    double fwd = 0;
    for (const auto& l : m.generic_layers) fwd += l.fwd_flops;
    return cfg.recompute == Recompute::full ? fwd * cfg.global_batch : 0.0;
  }
  const ParamCounts pc = count_parameters(m);
  const ModelDims d = model_dims(m);
  // Hardware FLOPs of recomputation are the FLOPs of the kernels the step program runs again
  // (phase "recompute"), so HFU - MFU is exactly the recomputed work over the simulated time.
  // The attention core's forward per token per layer: unfused attention's two s x s batched
  // GEMMs, 2 s a (d_qk + d_v) (= 4 s h_q, the non-causal count model FLOPs use); flash
  // attention's causal kernel does half of that, s a (d_qk + d_v).
  const double core_standard = 2.0 * m.layers * cfg.seq_len * m.heads * (d.qk_head_dim + d.pv_head_dim) * tokens;
  const bool flash = cfg.attention == AttentionKernel::flash;
  switch (cfg.recompute) {
    case Recompute::none:
      return 0;
    case Recompute::selective:
      // Megatron's selective recomputation re-runs the core attention. Flash attention keeps no
      // scores and its backward already recomputes them (inside its backward kernel): selective
      // adds nothing. Unfused attention runs QK^T, softmax and PV forward again.
      return flash ? 0.0 : core_standard;
    case Recompute::full: {
      // Every layer's forward again; the LM head and embedding are not recomputed.
      const double layer_weights = pc.active_per_token - pc.embedding - pc.lm_head - pc.norms;
      return 2.0 * layer_weights * tokens + (flash ? core_standard / 2 : core_standard);
    }
  }
  return 0;
}

TrainingResult simulate_training(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                 const TrainingOptions& opt) {
  const auto& par = cfg.parallel;
  TrainingOptions eff = opt;
  // Noise breaks the symmetry between replicas, and flow fidelity needs every replica's traffic
  // on the links: simulate all of them.
  if (cfg.noise.active() || opt.flow_network) eff.fold = false;
  StepProgram p = build_training_step(m, cfg, cluster, eff);
  const LoweredStep lowered = lower_step(p);
  const int steps = std::max(1, cfg.noise.steps);
  std::vector<double> step_times;
  StepRun first;  // the first step is kept for the breakdown and trace
  std::uint64_t events = 0;
  for (int step = 0; step < steps; ++step) {
    StepRun run = run_step(p, lowered, cfg, cluster, eff, step, steps);
    step_times.push_back(run.step_time_s);
    events += run.events;
    if (step == 0) first = std::move(run);
  }
  const StreamExecutor& exec = *first.exec;
  TrainingResult res;
  const int gpus = par.tp * par.pp * par.dp * par.cp;
  res.gpus = gpus;
  res.simulated_gpus = static_cast<int>(p.gpus.size());
  res.grad_accum = cfg.grad_accum();
  res.events = events;
  res.folded = p.folded;
  res.tp_folded = p.tp_folded;
  res.cp_folded = p.cp_folded;
  res.step_times_s = step_times;
  {
    std::vector<double> sorted = step_times;
    std::sort(sorted.begin(), sorted.end());
    // Nearest-rank percentiles.
    auto pct = [&](double q) { return sorted[static_cast<std::size_t>(std::ceil(q * sorted.size())) - 1]; };
    res.step_time_p50_s = pct(0.5);
    res.step_time_p99_s = pct(0.99);
  }
  res.tasks = lowered.graph.task_count();
  res.step_time_s = exec.makespan().seconds();
  res.tokens_per_step = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  res.tokens_per_s = res.tokens_per_step / res.step_time_s;
  res.model_flops_per_step = model_flops_per_step(m, cfg);
  res.hardware_flops_per_step = res.model_flops_per_step + recompute_flops_per_step(m, cfg);
  res.peak_tflops = cluster.spec.gpu.peak_flops(cfg.precision.compute) / 1e12;
  res.tflops_per_gpu = res.model_flops_per_step / res.step_time_s / gpus / 1e12;
  res.hw_tflops_per_gpu = res.hardware_flops_per_step / res.step_time_s / gpus / 1e12;
  res.mfu = res.tflops_per_gpu / res.peak_tflops;
  res.hfu = res.hw_tflops_per_gpu / res.peak_tflops;
  res.memory = estimate_memory(m, cfg, cluster.spec.gpu.hbm_bytes);
  for (int s = 0; s < par.pp; ++s)
    res.stage_memory.push_back(estimate_stage_memory(m, cfg, cluster.spec.gpu.hbm_bytes, s));

  // Where GPU 0's time went, and each stage's busy share. A GPU's compute and optimizer ops all
  // run on its compute stream, one at a time, so the breakdown's compute and optimizer parts are
  // the sums of their durations: one pass over the ops gives every stage's, instead of a sweep
  // per stage (the sweep stays for any op that breaks the rule).
  const bool pipelined = par.pp > 1;
  std::vector<std::uint32_t> gpu0_ops;
  std::vector<std::int64_t> compute_ps(p.gpus.size(), 0), optimizer_ps(p.gpus.size(), 0);
  bool serial = true;
  for (std::uint32_t t = 0; t < p.ops.size(); ++t) {
    const StepOp& op = p.ops[t];
    if (op.gpu == 0) gpu0_ops.push_back(t);
    if (op.cls != OpClass::compute && op.cls != OpClass::optimizer) continue;
    serial = serial && op.stream == StepStream::compute;
    const TaskTiming& tm = exec.timing(TaskId(t));
    if (tm.end > tm.start) (op.cls == OpClass::compute ? compute_ps : optimizer_ps)[op.gpu] += (tm.end - tm.start).ps;
  }
  res.breakdown = step_breakdown(p, gpu0_ops, exec, pipelined);
  std::vector<std::vector<std::uint32_t>> gpu_ops;
  if (opt.trace || !serial) gpu_ops = ops_by_gpu(p);
  res.stage_utilization.assign(par.pp, 0.0);
  for (std::uint32_t g = 0; g < p.gpus.size(); ++g) {
    const auto& c = p.gpus[g];
    if (c.tp != 0 || c.cp != 0 || c.dp != 0) continue;
    double busy_s = 0;
    if (c.pp == 0) {
      busy_s = res.breakdown.compute_s + res.breakdown.optimizer_s;
    } else if (serial) {
      // As step_breakdown adds them: each part in seconds, then the sum.
      busy_s = static_cast<double>(compute_ps[g]) * 1e-12 + static_cast<double>(optimizer_ps[g]) * 1e-12;
    } else {
      const auto bd = step_breakdown(p, gpu_ops[g], exec, pipelined);
      busy_s = bd.compute_s + bd.optimizer_s;
    }
    res.stage_utilization[c.pp] = busy_s / res.step_time_s;
  }

  if (opt.trace) {
    res.collectives = step_collectives(p);
    Trace names = std::move(p.names);  // the trace keeps the program's string table
    res.trace = training_trace(p, std::move(names), gpu_ops, lowered.graph, exec, cfg, cluster, res);
  }
  return res;
}

}  // namespace ctwin
