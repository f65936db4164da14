// Estimates a training run's size from a small folded sample (workloads/run_estimate.hpp).
#include "workloads/run_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/streams.hpp"
#include "sim/trace.hpp"
#include "workloads/step_program.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

namespace {

// What one folded sample of k micro-batches per replica holds.
struct Sample {
  double ops = 0, deps = 0, calls = 0, comm_ops = 0, events = 0;
  double trace_events = 0, trace_ctt = 0, trace_json = 0, trace_host = 0;
};

Sample measure(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster, const TrainingOptions& opt, int k,
               int replicas = 1) {
  TrainingConfig c = cfg;
  if (replicas > 1) c.parallel.dp = replicas;
  c.global_batch = c.micro_batch * c.parallel.dp * k;
  c.noise = NoiseSpec{};  // one step, no noise: the sample stays folded
  TrainingOptions o = opt;
  o.fold = replicas == 1;
  o.trace = true;
  o.flow_network = false;
  o.progress = nullptr;
  Sample s;
  {
    const StepProgram p = build_training_step(m, c, cluster, o);
    s.ops = static_cast<double>(p.ops.size());
    s.deps = static_cast<double>(p.deps.size() + p.late_deps.size());
    s.calls = static_cast<double>(p.calls.size());
    s.comm_ops = static_cast<double>(
        std::count_if(p.ops.begin(), p.ops.end(), [](const StepOp& op) { return op.call.valid(); }));
  }
  const TrainingResult r = simulate_training(m, c, cluster, o);
  s.events = static_cast<double>(r.events);
  const Trace& t = r.trace;
  s.trace_events = static_cast<double>(t.events.size());
  std::ostringstream ctt, json;
  write_trace_binary(t, ctt);
  write_chrome_trace(t, json);
  s.trace_ctt = static_cast<double>(ctt.tellp());
  s.trace_json = static_cast<double>(json.tellp());
  double samples = 0;
  for (const auto& ct : t.counters) samples += static_cast<double>(ct.samples.size());
  s.trace_host = static_cast<double>(t.events.size() * sizeof(TraceEvent) + t.arrows.size() * sizeof(TraceArrow)) +
                 samples * sizeof(std::pair<std::int64_t, double>) +
                 static_cast<double>(r.collectives.size() * sizeof(StepCollective));
  return s;
}

// The count at m micro-batches from samples at k1 < k2 (linear), or the sample itself.
double at(double c1, double c2, int k1, int k2, int m) {
  if (k2 == k1) return c1;
  return c1 + (c2 - c1) / (k2 - k1) * (m - k1);
}

std::uint64_t whole(double x) { return static_cast<std::uint64_t>(std::llround(std::max(0.0, x))); }

}  // namespace

RunCostModel run_cost_model() {
  RunCostModel c;
  // Per op: the program's StepOp, the graph's Task, the executor's timing, pending-dependency
  // count, successor offset and stream slot, and simulate_training's per-GPU op list.
  c.bytes_per_op = sizeof(StepOp) + sizeof(Task) + sizeof(TaskTiming) + 4 * sizeof(std::uint32_t);
  // Per dependency: the program's id, the graph's (before, after) pair, the executor's successor
  // and lower_step's dependency list.
  c.bytes_per_dep = sizeof(StepOpId) + sizeof(std::pair<std::uint32_t, std::uint32_t>) + sizeof(std::uint32_t);
  // Per call: the program's StepCall, the graph's member list and the executor's arrival count.
  c.bytes_per_call = sizeof(StepCall) + sizeof(std::vector<TaskId>) + 2 * sizeof(std::uint32_t);
  c.bytes_per_trace_event = sizeof(TraceEvent);
  // Vectors grown by doubling hold up to twice what they use, and a growing one is copied;
  // measured peak RSS over these sizes on llama and GPT layouts (tests/workloads/test_run_estimate.cpp).
  c.overhead = 1.1;
  return c;
}

RunEstimate estimate_training_run(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                  const TrainingOptions& opt) {
  const auto& par = cfg.parallel;
  RunEstimate e;
  e.gpus = par.tp * par.pp * par.dp * par.cp;
  const bool fold = opt.fold && !cfg.noise.active() && !opt.flow_network;
  const int replicas = fold ? 1 : par.dp;
  e.folded = fold && par.dp > 1;
  e.simulated_gpus = par.tp * par.pp * par.cp * replicas;
  const int mbs = std::max(1, cfg.grad_accum());
  e.micro_batches = mbs;
  // Samples of whole multiples of pp (interleaved schedules need them), past the pipeline's
  // warm-up, where each further micro-batch adds the same ops.
  const int unit = std::max(1, par.pp);
  int k1 = 2 * unit, k2 = 3 * unit;
  if (mbs <= k2) k1 = k2 = mbs;
  const Sample s1 = measure(m, cfg, cluster, opt, k1);
  const Sample s2 = k2 == k1 ? s1 : measure(m, cfg, cluster, opt, k2);
  e.exact = k1 == mbs && replicas == 1 && !cfg.noise.active() && !opt.flow_network;
  const double r = replicas;
  // What replicas share in the trace (its string table, lanes' names) and the engine (a DP
  // collective's one call): from an unfolded sample of the fewest replicas the layout allows.
  Sample shared1, shared2;  // at k1 and k2 micro-batches
  if (replicas > 1) {
    const int ep = std::max(1, par.ep);
    const int r2 = ep > 1 ? ep : 2;
    if (r2 <= replicas) {
      auto part = [&](double one, double two) { return (r2 * one - two) / (r2 - 1); };
      auto shared_of = [&](const Sample& folded, int k) {
        const Sample u = measure(m, cfg, cluster, opt, k, r2);
        Sample sh;
        sh.events = part(folded.events, u.events);
        sh.trace_ctt = part(folded.trace_ctt, u.trace_ctt);
        sh.trace_json = part(folded.trace_json, u.trace_json);
        return sh;
      };
      shared1 = shared_of(s1, k1);
      shared2 = k2 == k1 ? shared1 : shared_of(s2, k2);
    }
  }
  const double share = r - 1;  // shared parts counted once, not r times
  const int steps = std::max(1, cfg.noise.steps);
  e.ops = whole(r * at(s1.ops, s2.ops, k1, k2, mbs));
  e.deps = whole(r * at(s1.deps, s2.deps, k1, k2, mbs));
  e.calls = whole(r * at(s1.calls, s2.calls, k1, k2, mbs));
  e.events = whole(
      steps * (r * at(s1.events, s2.events, k1, k2, mbs) - share * at(shared1.events, shared2.events, k1, k2, mbs)));
  if (opt.flow_network) e.flows = whole(r * at(s1.comm_ops, s2.comm_ops, k1, k2, mbs));
  e.trace_events = whole(r * at(s1.trace_events, s2.trace_events, k1, k2, mbs));
  e.trace_bytes_ctt = whole(r * at(s1.trace_ctt, s2.trace_ctt, k1, k2, mbs) -
                            share * at(shared1.trace_ctt, shared2.trace_ctt, k1, k2, mbs));
  e.trace_bytes_json = whole(r * at(s1.trace_json, s2.trace_json, k1, k2, mbs) -
                             share * at(shared1.trace_json, shared2.trace_json, k1, k2, mbs));
  const RunCostModel c = run_cost_model();
  e.program_bytes =
      whole(c.overhead * (static_cast<double>(e.ops) * c.bytes_per_op + static_cast<double>(e.deps) * c.bytes_per_dep +
                          static_cast<double>(e.calls) * c.bytes_per_call));
  if (opt.trace) e.trace_host_bytes = whole(c.overhead * r * at(s1.trace_host, s2.trace_host, k1, k2, mbs));
  e.host_bytes = e.program_bytes + e.trace_host_bytes;
  return e;
}

}  // namespace ctwin
