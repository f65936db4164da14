#include "workloads/layout_search.hpp"

#include <algorithm>
#include <cstdio>

#include "workloads/layout_check.hpp"
#include "workloads/step_program.hpp"

namespace ctwin {

namespace {

std::vector<int> powers_of_two_up_to(int n) {
  std::vector<int> v;
  for (int x = 1; x <= n; x *= 2) v.push_back(x);
  return v;
}

std::vector<int> divisors_up_to(int n, int cap) {
  std::vector<int> v;
  for (int d = 1; d <= std::min(n, cap); ++d) {
    if (n % d == 0) v.push_back(d);
  }
  return v;
}

template <class T>
std::vector<T> or_default(const std::vector<T>& given, std::vector<T> def) {
  return given.empty() ? def : given;
}

double gib(double bytes) { return bytes / (1024.0 * 1024 * 1024); }

}  // namespace

std::vector<TrainingConfig> enumerate_training_layouts(const ModelSpec& m, const TrainingConfig& base,
                                                       const Cluster& cluster, const LayoutSpace& space) {
  const int gpus = cluster.gpu_count();
  const int layers = m.is_generic() ? static_cast<int>(m.generic_layers.size()) : m.layers;
  const auto tps = or_default(space.tp, powers_of_two_up_to(cluster.spec.gpus_per_node));
  const auto pps = or_default(space.pp, divisors_up_to(gpus, std::max(1, layers)));
  const auto cps = or_default(space.cp, powers_of_two_up_to(16));
  const auto eps =
      or_default(space.ep, m.moe.enabled() ? divisors_up_to(m.moe.experts, m.moe.experts) : std::vector{1});
  const auto vss = or_default(space.virtual_stages, std::vector{1, 2, 3, 4, 5, 6, 7, 8});
  const auto zeros = or_default(space.zero_stage, std::vector{0, 1, 2, 3});
  const auto mbs = or_default(space.micro_batch, std::vector{1, 2, 4, 8});
  // Selective recomputation frees only unfused attention's scores; with a fused kernel it runs the
  // kernel's forward again and frees nothing, so it never beats "none": searched only if asked.
  const auto rcs = or_default(space.recompute, base.attention == AttentionKernel::standard
                                                   ? std::vector{Recompute::none, Recompute::selective, Recompute::full}
                                                   : std::vector{Recompute::none, Recompute::full});

  std::vector<TrainingConfig> out;
  for (int tp : tps) {
    // Tensor parallelism all-reduces every layer: it stays on NVLink, inside a node.
    if (tp > cluster.spec.gpus_per_node) continue;
    for (int pp : pps) {
      for (int cp : cps) {
        const long long model_par = 1ll * tp * pp * cp;
        if (model_par > gpus || gpus % model_par != 0) continue;
        const int dp = static_cast<int>(gpus / model_par);
        for (int ep : eps) {
          for (int vs : vss) {
            if (vs > 1 && pp < 2) continue;
            for (int zero : zeros) {
              // ZeRO-2/3 (DeepSpeed, FSDP) shard across data-parallel ranks of a whole model copy.
              if (zero >= 2 && pp > 1) continue;
              if (zero > 0 && dp == 1) continue;  // nothing to shard over
              for (int mb : mbs) {
                for (Recompute rc : rcs) {
                  TrainingConfig c = base;
                  Parallelism& p = c.parallel;
                  p.tp = tp;
                  p.pp = pp;
                  p.cp = cp;
                  p.dp = dp;
                  p.ep = ep;
                  p.zero_stage = zero;
                  p.sequence_parallel = tp > 1;
                  p.virtual_stages = vs;
                  p.schedule = vs > 1 ? PipelineSchedule::interleaved : PipelineSchedule::one_f_one_b;
                  // The stage split is the layout's to choose: an even one.
                  p.pipeline_layers.clear();
                  p.first_stage_layers = p.last_stage_layers = -1;
                  p.account_for_embedding = p.account_for_loss = false;
                  c.micro_batch = mb;
                  c.recompute = rc;
                  if (check_training_layout(m, c, cluster).empty()) out.push_back(std::move(c));
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

std::optional<std::string> memory_refusal_reason(const MemoryBreakdown& mb) {
  if (!mb.oom) return std::nullopt;
  struct Term {
    const char* name;
    double bytes;
  } terms[] = {{"activations", mb.activations},    {"weights", mb.weights},          {"gradients", mb.grads},
               {"optimizer states", mb.optimizer}, {"ZeRO-3 gathered", mb.gathered}, {"recompute", mb.recompute}};
  std::stable_sort(std::begin(terms), std::end(terms), [](const Term& a, const Term& b) { return a.bytes > b.bytes; });
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "out of memory: peak %.1f GiB over the %.1f GiB of a GPU by %.1f GiB; %s %.1f GiB, %s %.1f GiB",
                gib(mb.peak), gib(mb.capacity), gib(mb.peak - mb.capacity), terms[0].name, gib(terms[0].bytes),
                terms[1].name, gib(terms[1].bytes));
  return std::string(buf);
}

std::optional<double> step_time_lower_bound_s(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                              const TrainingOptions& opt) {
  if (cfg.noise.active()) return std::nullopt;
  const int accum = cfg.grad_accum();
  const int pp = std::max(1, cfg.parallel.pp);
  if (accum <= 0) return std::nullopt;
  // pp micro-batches: a whole number for every schedule (interleaved needs a multiple of pp).
  const int few = std::min(accum, pp);
  TrainingConfig small = cfg;
  small.global_batch = few * cfg.micro_batch * cfg.parallel.dp;
  TrainingOptions o;
  o.fold = true;
  o.cost_model = opt.cost_model;
  o.collectives = opt.collectives;
  o.measured_collectives = opt.measured_collectives;
  const StepProgram prog = build_training_step(m, small, cluster, o);

  // Per GPU: compute-stream seconds per micro-batch in forward and in backward (with
  // recomputation), and once per step.
  struct Work {
    double fwd = 0, bwd = 0, once = 0;
  };
  std::vector<Work> work(prog.gpus.size());
  for (const StepOp& op : prog.ops) {
    if (op.stream != StepStream::compute) continue;
    Work& w = work[op.gpu];
    const double s = op.duration.seconds();
    switch (op.phase) {
      case StepPhase::forward:
        w.fwd += s;
        break;
      case StepPhase::backward:
      case StepPhase::recompute:
        w.bwd += s;
        break;
      case StepPhase::step:
        w.once += s;
        break;
    }
  }
  const double scale = static_cast<double>(accum) / few;
  // Each stage's quickest GPU, per micro-batch and once per step: the chains below pass through
  // some GPU of each stage, so the least of them is what a bound may count.
  constexpr double kUnset = -1;
  std::vector<double> stage_fwd(pp, kUnset), stage_bwd(pp, kUnset), stage_once(pp, kUnset);
  auto keep_min = [](double& x, double v) { x = x == kUnset ? v : std::min(x, v); };
  for (std::size_t g = 0; g < prog.gpus.size(); ++g) {
    const int s = prog.gpus[g].pp;
    keep_min(stage_fwd[s], work[g].fwd / few);
    keep_min(stage_bwd[s], work[g].bwd / few);
    keep_min(stage_once[s], work[g].once);
  }
  for (int s = 0; s < pp; ++s) {
    if (stage_fwd[s] == kUnset) stage_fwd[s] = stage_bwd[s] = stage_once[s] = 0;
  }
  // Micro-batch 0 reaches stage s after each earlier stage's forward of it; after stage s's last
  // backward, the last micro-batch's gradient goes back through every earlier stage, each of
  // which then steps its optimizer. Only for 1F1B and GPipe: an interleaved stage starts after a
  // chunk of each earlier one, and zero-bubble defers weight gradients past the chain.
  const PipelineSchedule sched = cfg.parallel.schedule;
  const bool chains =
      (sched == PipelineSchedule::one_f_one_b || sched == PipelineSchedule::gpipe) && cfg.parallel.virtual_stages <= 1;
  double bound = 0;
  for (std::size_t g = 0; g < prog.gpus.size(); ++g) {
    const Work& w = work[g];
    const int s = prog.gpus[g].pp;
    const double own = (w.fwd + w.bwd) * scale;
    double fill = 0, after = w.once;
    if (chains) {
      for (int j = 0; j < s; ++j) fill += stage_fwd[j];
      double back = 0;
      for (int j = s - 1; j >= 0; --j) {
        back += stage_bwd[j];
        after = std::max(after, back + stage_once[j]);
      }
    }
    bound = std::max(bound, fill + own + after);
  }
  return bound;
}

std::string layout_label(const Parallelism& par, int micro_batch, Recompute rc) {
  std::string s = "TP" + std::to_string(par.tp) + " PP" + std::to_string(par.pp);
  if (par.virtual_stages > 1) s += " VP" + std::to_string(par.virtual_stages);
  s += " DP" + std::to_string(par.dp);
  if (par.cp > 1) s += " CP" + std::to_string(par.cp);
  if (par.ep > 1) s += " EP" + std::to_string(par.ep);
  if (par.ep > 1 && experts_folded(par)) s += " ETP1";
  s += " ZeRO" + std::to_string(par.zero_stage) + " mb" + std::to_string(micro_batch);
  s += std::string(" rc:") + to_string(rc);
  return s;
}

}  // namespace ctwin
