// Estimates a training run's size from a small folded sample (workloads/run_estimate.hpp).
#include "workloads/run_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/streams.hpp"
#include "sim/trace.hpp"
#include "workloads/layout_check.hpp"
#include "workloads/step_program.hpp"
#include "workloads/step_run.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

namespace {

// What one folded sample of k micro-batches per replica holds.
struct Sample {
  int gpus = 0;  // simulated
  double ops = 0, deps = 0, calls = 0, comm_ops = 0, events = 0;
  double trace_events = 0, trace_ctt = 0, trace_json = 0, trace_host = 0;  // arrows not included
  double pipe_arrows = 0, coll_arrows = 0;  // pipeline-transfer arrows; collective ring arrows (uncapped)
  double arrow_ctt = 0, arrow_json = 0;     // bytes per arrow in either format
};

// The trace draws collectives as ring arrows until it holds this many arrows (training_trace.cpp).
constexpr double kMaxCollectiveArrows = 200000;

// Bytes of `t` in .ctt and .json.
std::pair<double, double> trace_sizes(const Trace& t) {
  std::ostringstream ctt, json;
  write_trace_binary(t, ctt);
  write_chrome_trace(t, json);
  return {static_cast<double>(ctt.tellp()), static_cast<double>(json.tellp())};
}

Sample measure(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster, const TrainingOptions& opt, int k,
               int replicas, bool count_events) {
  TrainingConfig c = cfg;
  if (replicas > 1) c.parallel.dp = replicas;
  c.global_batch = c.micro_batch * c.parallel.dp * k;
  c.noise = NoiseSpec{};  // one step, no noise: the sample stays folded
  TrainingOptions o = opt;
  // An unfolded run simulates every rank of every TP and CP group: so does its sample.
  o.fold_ranks = opt.fold_ranks && opt.fold && !cfg.noise.active() && !opt.flow_network;
  o.fold = replicas == 1;
  o.flow_network = false;
  o.progress = nullptr;
  Sample s;
  {
    const StepProgram p = build_training_step(m, c, cluster, o);
    s.gpus = static_cast<int>(p.gpus.size());
    s.ops = static_cast<double>(p.ops.size());
    s.deps = static_cast<double>(p.deps.size() + p.late_deps.size());
    s.calls = static_cast<double>(p.calls.size());
    // The trace's arrows, as training_trace draws them: one per pipeline transfer, and around
    // each collective of two or more simulated members one per member.
    std::vector<std::uint32_t> members(p.calls.size(), 0);
    std::vector<bool> pipe(p.calls.size(), false);
    for (const StepOp& op : p.ops) {
      if (!op.call.valid()) continue;
      ++s.comm_ops;
      ++members[op.call.value];
      if (op.stream == StepStream::pp_transfer) pipe[op.call.value] = true;
    }
    for (std::size_t r = 0; r < p.calls.size(); ++r) {
      if (pipe[r]) {
        if (p.calls[r].op == CollectiveOp::send_recv && members[r] == 2) ++s.pipe_arrows;
      } else if (members[r] >= 2) {
        s.coll_arrows += members[r];
      }
    }
    if (!o.trace) {
      // The engine's events from the program as built; simulate_training would build it again.
      if (count_events) {
        const LoweredStep lowered = lower_step(p);
        s.events = static_cast<double>(run_step(p, lowered, c, cluster, o, 0, 1).events);
      }
      return s;
    }
  }
  const TrainingResult r = simulate_training(m, c, cluster, o);
  s.events = static_cast<double>(r.events);
  const Trace& t = r.trace;
  s.trace_events = static_cast<double>(t.events.size());
  Trace lanes;  // the trace's lanes and strings alone, then with its arrows: what arrows add
  lanes.strings = t.strings;
  lanes.lanes = t.lanes;
  const auto [lanes_ctt, lanes_json] = trace_sizes(lanes);
  lanes.arrows = t.arrows;
  const auto [arrows_ctt, arrows_json] = trace_sizes(lanes);
  const auto [ctt, json] = trace_sizes(t);
  const double n = std::max<double>(1.0, static_cast<double>(t.arrows.size()));
  s.arrow_ctt = (arrows_ctt - lanes_ctt) / n;
  s.arrow_json = (arrows_json - lanes_json) / n;
  s.trace_ctt = ctt - (arrows_ctt - lanes_ctt);
  s.trace_json = json - (arrows_json - lanes_json);
  double samples = 0;
  for (const auto& ct : t.counters) samples += static_cast<double>(ct.samples.size());
  s.trace_host = static_cast<double>(t.events.size() * sizeof(TraceEvent)) +
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
  // Per call: the program's StepCall and the executor's member offset, arrival count and (most
  // calls of a folded step have one simulated member) member slot.
  c.bytes_per_call = sizeof(StepCall) + 3 * sizeof(std::uint32_t);
  c.bytes_per_trace_event = sizeof(TraceEvent);
  // Vectors grown by doubling hold up to twice what they use, and a growing one is copied;
  // measured peak RSS over these sizes on llama and GPT layouts (tests/workloads/test_run_estimate.cpp).
  c.overhead = 1.2;
  return c;
}

RunEstimate estimate_training_run(const ModelSpec& m, const TrainingConfig& cfg, const Cluster& cluster,
                                  const TrainingOptions& opt, bool count_events) {
  // What the run would refuse, refused first (not from a sample of other micro-batch counts).
  require_simulable_layout(m, cfg, cluster);
  const auto& par = cfg.parallel;
  RunEstimate e;
  e.gpus = par.tp * par.pp * par.dp * par.cp;
  const bool fold = opt.fold && !cfg.noise.active() && !opt.flow_network;
  const int replicas = fold ? 1 : par.dp;
  e.folded = fold && par.dp > 1;
  const int mbs = std::max(1, cfg.grad_accum());
  e.micro_batches = mbs;
  // Samples of whole multiples of pp (interleaved schedules need them): from pp micro-batches on
  // the pipeline's warm-up and cool-down are whole and each further micro-batch adds the same ops.
  const int unit = std::max(1, par.pp);
  int k1 = unit, k2 = 2 * unit;
  if (mbs <= k2) k1 = k2 = mbs;
  const Sample s1 = measure(m, cfg, cluster, opt, k1, 1, count_events);
  e.simulated_gpus = s1.gpus * replicas;  // TP and CP ranks folded as the run folds them
  const Sample s2 = k2 == k1 ? s1 : measure(m, cfg, cluster, opt, k2, 1, count_events);
  e.exact = k1 == mbs && replicas == 1 && !cfg.noise.active() && !opt.flow_network;
  const double r = replicas;
  // What replicas share in the trace (its string table, lanes' names) and the engine (a DP
  // collective's one call): from an unfolded sample of the fewest replicas the layout allows.
  // Only for a trace, whose file size it corrects by a few percent; the engine's events by less.
  Sample shared1, shared2;  // at k1 and k2 micro-batches
  shared1.coll_arrows = s1.coll_arrows;
  shared2.coll_arrows = s2.coll_arrows;
  if (replicas > 1 && opt.trace) {
    const int ep = std::max(1, par.ep);
    const int r2 = ep > 1 ? ep : 2;
    if (r2 <= replicas) {
      auto part = [&](double one, double two) { return (r2 * one - two) / (r2 - 1); };
      auto shared_of = [&](const Sample& folded, int k) {
        const Sample u = measure(m, cfg, cluster, opt, k, r2, count_events);
        Sample sh;
        sh.events = part(folded.events, u.events);
        sh.trace_ctt = part(folded.trace_ctt, u.trace_ctt);
        sh.trace_json = part(folded.trace_json, u.trace_json);
        sh.coll_arrows = u.coll_arrows / r2;  // unfolded, DP collectives draw rings too
        return sh;
      };
      shared1 = shared_of(s1, k1);
      shared2 = k2 == k1 ? shared1 : shared_of(s2, k2);
    }
  }
  const double share = r - 1;  // shared parts counted once, not r times
  const int steps = std::max(1, cfg.noise.steps);
  // Folded micro-batches: three short runs, one after the other. Tasks and events add up over
  // them; the host holds one program at a time, the longest.
  const MicroBatchFold mf = micro_batch_fold(cfg, opt);
  e.micro_batch_fold = mf.active();
  const std::vector<int> counts = mf.active() ? std::vector<int>{mf.at(0), mf.at(1), mf.at(2)} : std::vector<int>{mbs};
  const int longest = counts.back();
  auto over_runs = [&](double c1, double c2) {
    double sum = 0;
    for (const int n : counts) sum += at(c1, c2, k1, k2, n);
    return sum;
  };
  e.ops = whole(r * over_runs(s1.ops, s2.ops));
  e.deps = whole(r * over_runs(s1.deps, s2.deps));
  e.calls = whole(r * over_runs(s1.calls, s2.calls));
  e.events = whole(steps * (r * over_runs(s1.events, s2.events) - share * over_runs(shared1.events, shared2.events)));
  if (opt.flow_network) e.flows = whole(r * at(s1.comm_ops, s2.comm_ops, k1, k2, mbs));
  e.trace_events = whole(r * at(s1.trace_events, s2.trace_events, k1, k2, mbs));
  e.trace_bytes_ctt = whole(r * at(s1.trace_ctt, s2.trace_ctt, k1, k2, mbs) -
                            share * at(shared1.trace_ctt, shared2.trace_ctt, k1, k2, mbs));
  e.trace_bytes_json = whole(r * at(s1.trace_json, s2.trace_json, k1, k2, mbs) -
                             share * at(shared1.trace_json, shared2.trace_json, k1, k2, mbs));
  // Arrows: every pipeline transfer's, then collectives' rings while fewer than the cap.
  const double pipe = r * at(s1.pipe_arrows, s2.pipe_arrows, k1, k2, mbs);
  const double coll = r * at(shared1.coll_arrows, shared2.coll_arrows, k1, k2, mbs);
  const double arrows = opt.trace ? std::max(pipe, std::min(pipe + coll, kMaxCollectiveArrows)) : 0.0;
  e.trace_arrows = whole(arrows);
  e.trace_bytes_ctt += whole(arrows * s2.arrow_ctt);
  e.trace_bytes_json += whole(arrows * s2.arrow_json);
  const RunCostModel c = run_cost_model();
  e.program_bytes = whole(c.overhead * r *
                          (at(s1.ops, s2.ops, k1, k2, longest) * c.bytes_per_op +
                           at(s1.deps, s2.deps, k1, k2, longest) * c.bytes_per_dep +
                           at(s1.calls, s2.calls, k1, k2, longest) * c.bytes_per_call));
  const double trace_host = opt.trace ? c.overhead * at(s1.trace_host, s2.trace_host, k1, k2, mbs) : 0.0;
  e.trace_host_bytes = whole(r * trace_host + (opt.trace ? c.overhead * arrows * sizeof(TraceArrow) : 0.0));
  e.host_bytes = e.program_bytes + e.trace_host_bytes;
  e.folded_host_bytes = whole(e.host_bytes / r);
  return e;
}

}  // namespace ctwin
