#include "workloads/step_run.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "sim/random.hpp"
#include "topology/network.hpp"
#include "workloads/training_sim.hpp"

namespace ctwin {

LoweredStep lower_step(const StepProgram& p) {
  LoweredStep l;
  TaskGraph& g = l.graph;
  l.streams.reserve(p.gpus.size());
  for (std::size_t i = 0; i < p.gpus.size(); ++i) {
    // Pipeline transfers hold no stream (a stage posts its sends and receives as they come), so
    // StepStream::pp_transfer maps to none and the GPU gets four engine streams.
    const StreamId compute = g.add_stream(), dp = g.add_stream(), tp = g.add_stream(), cp = g.add_stream();
    // Offloading's PCIe directions and host CPU, only where the program has such ops.
    const StreamId h2d = p.offload ? g.add_stream() : StreamId::none();
    const StreamId d2h = p.offload ? g.add_stream() : StreamId::none();
    const StreamId host = p.offload ? g.add_stream() : StreamId::none();
    l.streams.push_back({compute, dp, StreamId::none(), tp, cp, h2d, d2h, host});
  }
  g.reserve(p.ops.size(), p.deps.size() + p.late_deps.size());
  for (std::size_t r = 0; r < p.calls.size(); ++r) g.add_rendezvous();
  std::vector<TaskId> deps;
  auto late = p.late_deps.begin();
  // Late dependencies go in where the builder added them, so the graph's edges keep its order.
  auto replay_late = [&](std::size_t position) {
    for (; late != p.late_deps.end() && late->position == position; ++late) {
      g.add_dep(TaskId(late->before.value), TaskId(late->after.value));
    }
  };
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    replay_late(i);
    const StepOp& op = p.ops[i];
    deps.clear();
    for (std::uint32_t k = op.deps_begin; k < op.deps_end; ++k) deps.emplace_back(p.deps[k].value);
    const StreamId s = l.streams[op.gpu][static_cast<int>(op.stream)];
    if (op.call.valid()) {
      g.add_member(s, RendezvousId(op.call.value), deps);
    } else {
      g.add_task(s, op.duration, deps);
    }
  }
  replay_late(p.ops.size());
  return l;
}

std::size_t StepCallHash::operator()(const StepCall& c) const {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &c.bytes, sizeof bits);
  return mix64(mix64(std::uint64_t{c.group} << 8 | static_cast<std::uint64_t>(c.op)) ^ bits);
}

std::vector<Time> analytical_call_times(const StepProgram& p, const Cluster& cluster, const CollectiveOptions& options,
                                        const std::vector<MeasuredCollective>* measured) {
  std::unordered_map<StepCall, Time, StepCallHash> memo;
  std::vector<Time> t(p.calls.size());
  for (std::size_t r = 0; r < p.calls.size(); ++r) {
    const StepCall& c = p.calls[r];
    auto [it, fresh] = memo.try_emplace(c);
    if (fresh)
      it->second =
          table_or_analytical_time(cluster, CollectiveCall{c.op, p.groups[c.group], c.bytes}, options, measured);
    t[r] = it->second;
  }
  return t;
}

StepRun run_step(const StepProgram& p, const LoweredStep& lowered, const TrainingConfig& cfg, const Cluster& cluster,
                 const TrainingOptions& opt, int step, int steps) {
  StepRun out;
  out.engine = std::make_unique<Engine>();
  out.exec = std::make_unique<StreamExecutor>(*out.engine, lowered.graph);
  Engine* engine = out.engine.get();
  StreamExecutor* x = out.exec.get();
  std::unique_ptr<CollectiveRunner> runner;
  std::vector<Time> call_time;
  if (opt.flow_network) {
    // Collectives as flows sharing the cluster's links.
    runner = std::make_unique<CollectiveRunner>(*engine, cluster, Fidelity::flow, opt.collectives);
    x->on_rendezvous([x, &p, run = runner.get()](RendezvousId r, Time) {
      const StepCall& c = p.calls[r.value];
      run->start(CollectiveCall{c.op, p.groups[c.group], c.bytes}, [x, r] { x->finish_rendezvous(r); });
    });
  } else {
    // Alpha-beta times depend on the call alone: each distinct (group, op, bytes) is priced once.
    call_time = analytical_call_times(p, cluster, opt.collectives, opt.measured_collectives.get());
    x->on_rendezvous([x, engine, t = call_time.data()](RendezvousId r, Time) {
      engine->schedule_in(t[r.value], [x, r] { x->finish_rendezvous(r); });
    });
  }
  const double slow = cfg.overlap_slowdown;
  const auto& noise = cfg.noise;
  const auto& stage_slow = opt.stage_slowdown;
  const bool slow_stages = std::any_of(stage_slow.begin(), stage_slow.end(), [](double f) { return f != 1.0; });
  if (slow > 0 || noise.active() || slow_stages) {
    // A counter-based generator, so a kernel's noise depends only on (seed, step, task).
    const auto mix = mix64;
    const auto uniform = uniform01;
    const std::uint64_t base = mix(cfg.seed * 0x100000001b3ull + static_cast<std::uint64_t>(step));
    std::vector<double> gpu_factor(p.gpus.size(), 1.0);
    for (std::size_t g = 0; g < gpu_factor.size(); ++g) {
      const auto stage = static_cast<std::size_t>(p.gpus[g].pp);
      if (stage < stage_slow.size()) gpu_factor[g] = stage_slow[stage];
      if (noise.straggler_probability > 0 && uniform(base ^ mix(g + 1)) < noise.straggler_probability) {
        gpu_factor[g] *= noise.straggler_slowdown;
      }
    }
    const auto& streams = lowered.streams;
    x->on_duration([&, x, base, gpu_factor](TaskId t, Time) {
      const StepOp& mt = p.ops[t.value];
      const Time d = mt.duration;
      if (mt.cls != OpClass::compute && mt.cls != OpClass::optimizer) return d;
      double f = gpu_factor[mt.gpu];
      if (slow > 0 && (x->busy(streams[mt.gpu][1]) || x->busy(streams[mt.gpu][3]))) f *= 1.0 + slow;
      if (noise.kernel_jitter > 0) {
        // Box-Muller from two uniforms keyed by the task.
        const double u1 = uniform(base ^ mix(2 * std::uint64_t{t.value} + 1000003));
        const double u2 = uniform(base ^ mix(2 * std::uint64_t{t.value} + 1000004));
        const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
        f *= std::exp(noise.kernel_jitter * z);
      }
      return f == 1.0 ? d : Time{std::llround(static_cast<double>(d.ps) * f)};
    });
  }
  x->start();
  if (opt.progress) {
    // Slices of a million events keep the progress line live on long runs.
    while (engine->run_events(1u << 20) > 0) {
      opt.progress((step + static_cast<double>(x->done_count()) / lowered.graph.task_count()) / steps);
    }
  } else {
    engine->run();
  }
  if (!x->all_done()) throw std::logic_error("simulate_training: the step graph deadlocked");
  out.step_time_s = x->makespan().seconds();
  out.events = engine->dispatched();
  if (runner && opt.busiest_links > 0) {
    out.busiest_links = busiest_links(*runner->flows(), *runner->routes(), out.step_time_s, opt.busiest_links);
  }
  return out;
}

}  // namespace ctwin
