#include "workloads/training_sim.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "sim/error.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/model_dims.hpp"
#include "workloads/pipeline_split.hpp"
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
  // A windowed layer counts the tokens its queries attend to (attention_span_tokens).
  return tokens * (6.0 * pc.matmul_per_token + 12.0 * attention_span_tokens(m, cfg.seq_len) * q_dim);
}

double recompute_flops_per_step(const ModelSpec& m, const TrainingConfig& cfg) {
  const double tokens = static_cast<double>(cfg.global_batch) * cfg.seq_len;
  if (m.is_generic()) {
    if (cfg.recompute != Recompute::full) return 0.0;
    const std::vector<bool> rec = recomputed_layers(static_cast<int>(m.generic_layers.size()), cfg);
    double again = 0;
    for (std::size_t l = 0; l < rec.size(); ++l) again += rec[l] ? m.generic_layers[l].fwd_flops : 0.0;
    return again * cfg.global_batch;
  }
  const ParamCounts pc = count_parameters(m);
  const ModelDims d = model_dims(m);
  // Hardware FLOPs of recomputation are the FLOPs of the kernels the step program runs again
  // (phase "recompute"), so HFU - MFU is exactly the recomputed work over the simulated time.
  // The attention core's forward per token per layer: unfused attention's two s x s batched
  // GEMMs, 2 s a (d_qk + d_v) (= 4 s h_q, the non-causal count model FLOPs use); flash
  // attention's causal kernel does half of that, s a (d_qk + d_v).
  const double core_standard = 2.0 * m.layers * cfg.seq_len * m.heads * (d.qk_head_dim + d.pv_head_dim) * tokens;
  const bool flash = cfg.attention != AttentionKernel::standard;
  // Flash attention skips a sliding window's masked tiles (layer_ops' causal_pairs).
  const double core_flash =
      2.0 * attention_span_tokens(m, cfg.seq_len) * m.heads * (d.qk_head_dim + d.pv_head_dim) * tokens;
  switch (cfg.recompute) {
    case Recompute::none:
      return 0;
    case Recompute::selective:
      // Megatron-Core's selective recomputation re-runs the core attention forward in backward:
      // unfused QK^T, softmax and PV, or a fused kernel's causal forward.
      return flash ? core_flash / 2 : core_standard;
    case Recompute::full: {
      // Every layer's forward again; the LM head and embedding are not recomputed.
      const double layer_weights = pc.active_per_token - pc.embedding - pc.lm_head - pc.norms;
      const double gemms = 2.0 * layer_weights * tokens, core = flash ? core_flash / 2 : core_standard;
      // The block method reruns some layers only: each part in the share of it those layers hold
      // (a MoE layer's active experts, a windowed layer's span, as the step program runs them).
      const std::vector<bool> rec = recomputed_layers(m.layers, cfg);
      if (std::all_of(rec.begin(), rec.end(), [](bool b) { return b; })) return gemms + core;
      const double expert = d.expert_params * (m.moe.top_k + m.moe.shared_experts) + d.router_params;
      double w_all = 0, w_rec = 0, span_all = 0, span_rec = 0;
      for (int l = 0; l < m.layers; ++l) {
        const bool moe = m.moe_layer(l);
        const double w = d.attention_params + (moe ? expert : d.dense_mlp_params);
        const double span = !flash                ? 1.0
                            : m.windowed_layer(l) ? 2 * causal_pairs(cfg.seq_len, m.attention_window) / cfg.seq_len
                                                  : static_cast<double>(cfg.seq_len);
        w_all += w;
        span_all += span;
        if (rec[static_cast<std::size_t>(l)]) w_rec += w, span_rec += span;
      }
      return gemms * w_rec / w_all + core * span_rec / span_all;
    }
  }
  return 0;
}

MicroBatchFold micro_batch_fold(const TrainingConfig& cfg, const TrainingOptions& opt) {
  MicroBatchFold f;
  if (!opt.fold || !opt.fold_micro_batches || opt.trace || opt.flow_network || cfg.noise.active()) return f;
  const int m = cfg.grad_accum();
  if (opt.micro_batch_fold_plan) {
    const auto [first, stride] = *opt.micro_batch_fold_plan;
    if (first >= 1 && stride >= 1 && first + 2 * stride < m && (m - first) % stride == 0) {
      f.first = first;
      f.stride = stride;
    }
    return f;
  }
  // A zero-bubble order is built from the costs for the whole count at once: 40 micro-batches do
  // not run as 12 plus 28 more periods (a TP2 PP2 step differed by 0.3%), so it is never folded.
  if (cfg.parallel.schedule == PipelineSchedule::zero_bubble) return f;
  const int pp = std::max(1, cfg.parallel.pp);
  // The steady state may repeat every other micro-batch rather than every one (two streams
  // whose ops interleave differently on odd and even micro-batches: seen on TP2 PP2 layouts), so
  // the runs stand two apart; interleaving's groups of pp make it pp, or 2 pp for odd pp.
  const bool interleaved = cfg.parallel.schedule == PipelineSchedule::interleaved && cfg.parallel.virtual_stages > 1;
  const int stride = interleaved ? (pp % 2 == 0 ? pp : 2 * pp) : 2;
  // The warm-up (pp - 1 forwards on the first stage, plus (chunks - 1) x pp interleaved) over
  // and a pipeline's worth of steady micro-batches after it.
  const int chunks = interleaved ? cfg.parallel.virtual_stages : 1;
  int first = std::max((chunks + 1) * pp, 4);
  first += ((m - first) % stride + stride) % stride;  // congruent to m modulo stride
  // Worth it only when the three short runs hold fewer micro-batches than the step.
  if (m <= 3 * first + 3 * stride) return f;
  f.first = first;
  f.stride = stride;
  return f;
}

namespace {

// The program and its first step's run, kept for the trace (the executor refers to the graph:
// held in one place on the heap).
struct KeptRun {
  StepProgram p;
  LoweredStep lowered;
  StepRun first;
  std::vector<std::vector<std::uint32_t>> gpu_ops;
};

// What one simulated program gives: the result's simulation figures, and in whole picoseconds
// what folding micro-batches extends.
struct ProgramRun {
  TrainingResult res;              // step times, events, tasks, folding flags (the breakdown: below)
  Time makespan{};                 // the first step's
  StepBreakdownPs breakdown_ps{};  // GPU 0's
  // Each stage's compute and optimizer time (its first GPU).
  std::vector<std::array<std::int64_t, 2>> stage_busy_ps;
  std::unique_ptr<KeptRun> kept;  // with TrainingOptions::trace
};

ProgramRun simulate_program(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                            const TrainingOptions& eff) {
  const auto& par = cfg.parallel;
  auto kept = std::make_unique<KeptRun>();
  kept->p = build_training_step(m, cfg, cluster, eff);
  const StepProgram& p = kept->p;
  kept->lowered = lower_step(p);
  const LoweredStep& lowered = kept->lowered;
  const int steps = std::max(1, cfg.noise.steps);
  ProgramRun out;
  TrainingResult& res = out.res;
  StepRun& first = kept->first;  // the first step is kept for the breakdown and trace
  std::uint64_t events = 0;
  for (int step = 0; step < steps; ++step) {
    StepRun run = run_step(p, lowered, cfg, cluster, eff, step, steps);
    res.step_times_s.push_back(run.step_time_s);
    events += run.events;
    if (step == 0) first = std::move(run);
  }
  const StreamExecutor& exec = *first.exec;
  res.simulated_gpus = static_cast<int>(p.gpus.size());
  res.busiest_links = first.busiest_links;
  res.events = events;
  res.folded = p.folded;
  res.tp_folded = p.tp_folded;
  res.cp_folded = p.cp_folded;
  res.tasks = lowered.graph.task_count();
  out.makespan = exec.makespan();
  res.step_time_s = out.makespan.seconds();

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
  out.breakdown_ps = step_breakdown_ps(p, gpu0_ops, exec, pipelined);
  std::vector<std::vector<std::uint32_t>>& gpu_ops = kept->gpu_ops;
  if (eff.trace || !serial) gpu_ops = ops_by_gpu(p);
  out.stage_busy_ps.assign(par.pp, {0, 0});
  for (std::uint32_t g = 0; g < p.gpus.size(); ++g) {
    const auto& c = p.gpus[g];
    if (c.tp != 0 || c.cp != 0 || c.dp != 0) continue;
    std::array<std::int64_t, 2> busy{};
    if (c.pp == 0) {
      busy = {out.breakdown_ps[0], out.breakdown_ps[1]};
    } else if (serial) {
      busy = {compute_ps[g], optimizer_ps[g]};
    } else {
      const StepBreakdownPs bd = step_breakdown_ps(p, gpu_ops[g], exec, pipelined);
      busy = {bd[0], bd[1]};
    }
    out.stage_busy_ps[c.pp] = busy;
  }

  if (eff.trace) out.kept = std::move(kept);
  return out;
}

// The value `periods` strides past c, from three values a stride apart that grow by the same
// step; nullopt where they do not. Within the step (checked first), so it cannot overflow.
std::optional<std::int64_t> extend(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t periods) {
  if (c - b != b - a) return std::nullopt;
  return c + (c - b) * periods;
}

// The step at cfg's micro-batch count from runs at f.at(0..2), or nullopt where the three do
// not grow evenly.
std::optional<ProgramRun> extrapolate(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                      const TrainingOptions& eff, const MicroBatchFold& f) {
  std::array<ProgramRun, 3> runs;
  for (int i = 0; i < 3; ++i) {
    TrainingConfig c = cfg;
    c.global_batch = c.micro_batch * c.parallel.dp * f.at(i);
    TrainingOptions o = eff;
    if (eff.progress) o.progress = [&, i](double x) { eff.progress((i + x) / 3.0); };
    runs[i] = simulate_program(m, c, cluster, o);
  }
  const auto& [r0, r1, r2] = runs;
  // GPU 0's breakdown splits [0, makespan), so its parts growing evenly (checked below) imply
  // the step time does; this only leaves early.
  const std::int64_t d1 = (r1.makespan - r0.makespan).ps, d2 = (r2.makespan - r1.makespan).ps;
  if (d1 != d2) return std::nullopt;
  const std::int64_t periods = (cfg.grad_accum() - f.at(2)) / f.stride;
  ProgramRun out;
  // The whole step must fit the clock as the unfolded run's would (it throws the same).
  const __int128 end = static_cast<__int128>(r2.makespan.ps) + static_cast<__int128>(d2) * periods;
  if (end > std::numeric_limits<std::int64_t>::max()) throw TimeOverflow();
  out.makespan = Time{static_cast<std::int64_t>(end)};
  // Every part of the breakdown and every stage's busy time must grow by equal steps too.
  for (std::size_t k = 0; k < out.breakdown_ps.size(); ++k) {
    const auto v = extend(r0.breakdown_ps[k], r1.breakdown_ps[k], r2.breakdown_ps[k], periods);
    if (!v) return std::nullopt;
    out.breakdown_ps[k] = *v;
  }
  for (std::size_t s = 0; s < r2.stage_busy_ps.size(); ++s) {
    std::array<std::int64_t, 2> busy{};
    for (std::size_t k = 0; k < 2; ++k) {
      const auto v = extend(r0.stage_busy_ps[s][k], r1.stage_busy_ps[s][k], r2.stage_busy_ps[s][k], periods);
      if (!v) return std::nullopt;
      busy[k] = *v;
    }
    out.stage_busy_ps.push_back(busy);
  }
  TrainingResult& res = out.res;
  res.simulated_gpus = r2.res.simulated_gpus;
  res.folded = r2.res.folded;
  res.tp_folded = r2.res.tp_folded;
  res.cp_folded = r2.res.cp_folded;
  res.simulated_micro_batches = {f.at(0), f.at(1), f.at(2)};
  for (const ProgramRun& r : runs) {
    res.events += r.res.events;
    res.tasks += r.res.tasks;
  }
  res.step_time_s = out.makespan.seconds();
  res.step_times_s = {res.step_time_s};
  return out;
}

}  // namespace

TrainingResult simulate_training(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                 const TrainingOptions& opt) {
  const auto& par = cfg.parallel;
  TrainingOptions eff = opt;
  // Noise breaks the symmetry between replicas, and flow fidelity needs every replica's traffic
  // on the links: simulate all of them.
  if (cfg.noise.active() || opt.flow_network) eff.fold = false;
  std::optional<ProgramRun> run;
  if (const MicroBatchFold f = micro_batch_fold(cfg, eff); f.active()) {
    // The whole step's limits (micro-batch count, a step time the engine's clock holds) hold
    // however few micro-batches are simulated.
    require_simulable_layout(m, cfg, cluster);
    run = extrapolate(m, cfg, cluster, eff, f);
  }
  if (!run) run = simulate_program(m, cfg, cluster, eff);
  TrainingResult res = std::move(run->res);
  res.breakdown = to_seconds(run->breakdown_ps);
  const int gpus = par.tp * par.pp * par.dp * par.cp;
  res.gpus = gpus;
  res.grad_accum = cfg.grad_accum();
  {
    std::vector<double> sorted = res.step_times_s;
    std::sort(sorted.begin(), sorted.end());
    // Nearest-rank percentiles.
    auto pct = [&](double q) { return sorted[static_cast<std::size_t>(std::ceil(q * sorted.size())) - 1]; };
    res.step_time_p50_s = pct(0.5);
    res.step_time_p99_s = pct(0.99);
  }
  res.step_time_s = run->makespan.seconds();
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
  res.stage_utilization.assign(par.pp, 0.0);
  // As the breakdown adds them: each part in seconds, then the sum.
  for (int s = 0; s < par.pp; ++s) {
    const auto& busy = run->stage_busy_ps[static_cast<std::size_t>(s)];
    res.stage_utilization[s] =
        (static_cast<double>(busy[0]) * 1e-12 + static_cast<double>(busy[1]) * 1e-12) / res.step_time_s;
  }

  if (run->kept) {  // a trace (never with folded micro-batches)
    KeptRun& k = *run->kept;
    res.collectives = step_collectives(k.p);
    Trace names = std::move(k.p.names);  // the trace keeps the program's string table
    res.trace = training_trace(k.p, std::move(names), k.gpu_ops, k.lowered.graph, *k.first.exec, cfg, cluster, res);
  }
  return res;
}

}  // namespace ctwin
