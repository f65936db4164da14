#include "realrun/driver.hpp"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include <unistd.h>

#include "plan_parts.hpp"
#include "realrun/cpu_device.hpp"
#include "sim/error.hpp"
#include "topology/cluster_json.hpp"
#include "workloads/layer_ops.hpp"

namespace ctwin::realrun {

RealrunConfig read_realrun_config(const JsonObject& o) {
  const ParamReader r(o, realrun_params);
  RealrunConfig c;
  if (r.has("ranks")) c.ranks = static_cast<int>(r.integer("ranks"));
  c.warmup = static_cast<int>(r.integer("warmup"));
  c.repeats = static_cast<int>(r.integer("repeats"));
  c.collective_min_bytes = r.number("collective_min_bytes");
  c.collective_max_bytes = r.number("collective_max_bytes");
  c.collective_size_factor = r.number("collective_size_factor");
  c.sweep = r.boolean("sweep");
  c.sweep_max_scale = r.number("sweep_max_scale");
  c.timeout_s = r.number("timeout_s");
  if (r.has("iterations")) {
    const Json& a = o.raw("iterations");
    if (!a.is_array() || a.empty()) o.fail("iterations", "found " + shown(a), "a non-empty array of iterations");
    for (std::size_t i = 0; i < a.size(); ++i) {
      const std::string path = o.child("iterations") + "/" + std::to_string(i);
      if (!a[i].is_object()) throw InputError(o.file(), path, "found " + shown(a[i]), "an iteration object");
      const JsonObject e(a[i], path, o.file());
      e.only({"prefill", "decode"});
      c.iterations.push_back(read_iteration_shape(e));
      if (c.iterations.back().kind().empty()) {
        throw InputError(o.file(), path, "an empty iteration", "\"prefill\", \"decode\" or both");
      }
    }
  }
  if (c.collective_max_bytes < c.collective_min_bytes) {
    throw InputError(o.file(), o.path() + "/collective_max_bytes",
                     "is below collective_min_bytes (" + std::to_string(c.collective_min_bytes) + ")",
                     "a largest size at least the smallest");
  }
  return c;
}

std::vector<double> collective_sweep_sizes(const RealrunConfig& c) {
  std::vector<double> out;
  for (double s = c.collective_min_bytes; s <= c.collective_max_bytes * (1 + 1e-9); s *= c.collective_size_factor) {
    const double b = std::max(4.0, std::floor(s / 4) * 4);
    if (out.empty() || b > out.back()) out.push_back(b);
  }
  return out;
}

namespace {

const char* phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::forward:
      return "forward";
    case StepPhase::backward:
      return "backward";
    case StepPhase::recompute:
      return "recompute";
    case StepPhase::step:
      return "step";
  }
  return "";
}

// `c` with one GEMM dimension (0: m, 1: n, 2: k) scaled; FLOPs follow the dimension, bytes the
// sum of the three operand sizes.
OpCost scaled_gemm(const OpCost& c, int dim, double scale) {
  OpCost s = c;
  double* d = dim == 0 ? &s.m : dim == 1 ? &s.n : &s.k;
  *d = std::round(*d * scale);
  const double before = c.m * c.k + c.k * c.n + c.m * c.n;
  const double after = s.m * s.k + s.k * s.n + s.m * s.n;
  s.flops = c.flops * (*d / (dim == 0 ? c.m : dim == 1 ? c.n : c.k));
  s.bytes = c.bytes * after / before;
  return s;
}

// A barrier for the driver's rank threads that a failing rank breaks instead of leaving the
// others waiting for ever.
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock lk(mu_);
    if (broken_) throw Broken();
    const std::size_t gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lk, [&] { return gen_ != gen || broken_; });
    if (gen_ == gen) throw Broken();
  }
  void breakdown() {
    {
      std::lock_guard lk(mu_);
      broken_ = true;
    }
    cv_.notify_all();
  }
  struct Broken : std::runtime_error {
    Broken() : std::runtime_error("another rank failed") {}
  };

 private:
  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
  std::size_t gen_ = 0;
  bool broken_ = false;
};

// Per-repeat maximum over the ranks that took part (the slowest rank's time, as nccl-tests
// reports), then order statistics over the repeats.
calibrate::Stats slowest_rank_stats(const std::vector<std::vector<double>>& per_rank) {
  std::vector<double> worst;
  for (const auto& samples : per_rank) {
    if (samples.empty()) continue;
    if (worst.empty()) worst.assign(samples.size(), 0.0);
    for (std::size_t i = 0; i < samples.size(); ++i) worst[i] = std::max(worst[i], samples[i]);
  }
  return calibrate::stats_of(worst);
}

double median_of(std::vector<double> v) { return calibrate::stats_of(std::move(v)).median_s; }

// Rank r's call of a planned collective, or none when r is no member of its communicator. A
// two-member send_recv sends from the first member to the second.
std::optional<CollectiveRequest> request_of(const RealrunPlan& plan, const PlannedCollective& pc, int r) {
  const CommSpec& spec = plan.comms[pc.comm];
  const auto at = std::find(spec.ranks.begin(), spec.ranks.end(), r);
  if (at == spec.ranks.end()) return std::nullopt;
  const auto member = static_cast<int>(at - spec.ranks.begin());
  CollectiveRequest req{pc.op, spec.id, pc.bytes, -1, true};
  if (pc.op == CollectiveOp::send_recv && spec.ranks.size() == 2) {
    req.peer = spec.ranks[1 - static_cast<std::size_t>(member)];
    req.send = member == 0;
  }
  return req;
}

// samples[entry][rank][repeat], filled for this process's ranks [first, first + local), made
// whole from every process's block. A rank outside an entry's communicator has no samples; it
// travels as `repeats` negative values, the one thing a duration never is.
void gather_samples(const ProcessGroup& world, int first, int local, int repeats,
                    std::vector<std::vector<std::vector<double>>>& samples) {
  const auto per_rank = static_cast<std::size_t>(repeats);
  std::vector<double> mine;
  mine.reserve(samples.size() * static_cast<std::size_t>(local) * per_rank);
  for (const auto& entry : samples) {
    for (int r = first; r < first + local; ++r) {
      const auto& v = entry[static_cast<std::size_t>(r)];
      if (v.empty()) {
        mine.insert(mine.end(), per_rank, -1.0);
      } else {
        if (v.size() != per_rank) throw std::logic_error("realrun: a rank timed a different number of repeats");
        mine.insert(mine.end(), v.begin(), v.end());
      }
    }
  }
  const std::vector<double> all = world.all_gather(mine);
  if (all.size() != mine.size() * static_cast<std::size_t>(world.count)) {
    throw std::runtime_error("realrun: the processes gathered measurements of different sizes");
  }
  std::size_t at = 0;
  for (int p = 0; p < world.count; ++p) {
    for (auto& entry : samples) {
      for (int i = 0; i < local; ++i) {
        auto& v = entry[static_cast<std::size_t>(p * local + i)];
        v.assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                 all.begin() + static_cast<std::ptrdiff_t>(at + per_rank));
        at += per_rank;
        if (!v.empty() && v.front() < 0) v.clear();
      }
    }
  }
}

}  // namespace

void add_gemm_sweep(const RealrunConfig& c, std::vector<PlannedOp>& ops, std::unordered_set<OpCost, OpCostHash>& seen) {
  if (!c.sweep) return;
  const std::size_t step_ops = ops.size();
  for (std::size_t i = 0; i < step_ops; ++i) {
    const OpCost base = ops[i].op;
    if (base.kind != OpKind::gemm && base.kind != OpKind::grouped_gemm) continue;
    for (int dim = 0; dim < 3; ++dim) {
      for (double s = 1 / c.sweep_max_scale; s <= c.sweep_max_scale * (1 + 1e-9); s *= 2) {
        if (std::abs(s - 1) < 1e-9) continue;
        const OpCost v = scaled_gemm(base, dim, s);
        const double rows = base.kind == OpKind::grouped_gemm ? v.m / std::max(1.0, v.groups) : v.m;
        if (rows < 1 || v.n < 1 || v.k < 1) continue;
        if (seen.insert(v).second) ops.push_back(PlannedOp{v, "sweep", "", ""});
      }
    }
  }
}

RealrunPlan plan_realrun(const RealrunJob& job) {
  if (job.serving) return plan_serving_realrun(job);
  if (!job.config.iterations.empty()) {
    throw InputError(job.scenario_file, "/realrun/iterations", "found in a training scenario",
                     "no /realrun/iterations (serving iterations are a serving scenario's)");
  }
  if (job.model.attention_window > 0) {
    throw InputError(job.scenario_file, "/model/attention_window",
                     "sliding-window attention (" + std::to_string(job.model.attention_window) + " tokens)",
                     "attention_window 0: realrun's attention kernels have no window yet");
  }
  RealrunPlan plan;
  const Cluster cluster = build_cluster(job.cluster);
  TrainingOptions opt = job.options;
  opt.fold = false;  // every rank runs its own ops
  opt.fold_ranks = false;
  opt.trace = false;
  opt.progress = {};
  plan.program = build_training_step(job.model, job.training, cluster, opt);
  const StepProgram& p = plan.program;
  plan.ranks = static_cast<int>(p.gpus.size());
  if (job.config.ranks != 0 && job.config.ranks != plan.ranks) {
    throw InputError(
        job.scenario_file, "/realrun/ranks",
        std::to_string(job.config.ranks) + " ranks for a layout of " + std::to_string(plan.ranks) + " GPUs",
        "the layout's GPU count (tp x pp x dp x cp), or no /realrun/ranks");
  }

  // Ops: each distinct kernel shape once, named after its first use.
  std::vector<std::int64_t> first(p.costs.size(), -1);
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    const std::uint32_t c = p.ops[i].cost;
    if (c != kNoStepCost && first[c] < 0) first[c] = static_cast<std::int64_t>(i);
  }
  std::unordered_set<OpCost, OpCostHash> seen;
  auto with_dtype = [&](OpCost c) {
    if (!c.dtype) c.dtype = job.training.precision.compute;
    return c;
  };
  for (std::size_t c = 0; c < p.costs.size(); ++c) {
    PlannedOp op{with_dtype(p.costs[c]), "step", "", ""};
    if (first[c] >= 0) {
      const StepOp& s = p.ops[static_cast<std::size_t>(first[c])];
      op.name = p.names.str(s.name);
      op.phase = phase_name(s.phase);
    }
    if (seen.insert(op.op).second) plan.ops.push_back(std::move(op));
  }
  add_gemm_sweep(job.config, plan.ops, seen);

  // Communicators: every group the step issues a call on, labelled by its kind.
  std::map<int, int> device_of_rank;
  for (std::size_t i = 0; i < p.gpus.size(); ++i) device_of_rank[p.gpus[i].rank] = static_cast<int>(i);
  std::vector<std::string> label(p.groups.size());
  for (const StepOp& op : p.ops) {
    if (!op.call.valid()) continue;
    auto& l = label[p.calls[op.call.value].group];
    if (l.empty()) l = to_string(static_cast<CommGroup>(op.group));
  }
  std::vector<std::int64_t> comm_of_group(p.groups.size(), -1);
  std::vector<std::pair<std::uint32_t, CollectiveOp>> pairs;  // (comm index, op) in order of first use
  std::map<std::pair<std::uint32_t, int>, std::set<double>> exact;
  for (const StepCall& call : p.calls) {
    if (comm_of_group[call.group] < 0) {
      CommSpec spec;
      spec.id = call.group;
      spec.label = label[call.group];
      for (GpuId g : p.groups[call.group]) {
        const auto it = device_of_rank.find(static_cast<int>(g.value));
        if (it == device_of_rank.end()) throw std::logic_error("realrun: a group member outside the step's GPUs");
        spec.ranks.push_back(it->second);
      }
      comm_of_group[call.group] = static_cast<std::int64_t>(plan.comms.size());
      plan.comms.push_back(std::move(spec));
    }
    const auto comm = static_cast<std::uint32_t>(comm_of_group[call.group]);
    const std::pair<std::uint32_t, int> key{comm, static_cast<int>(call.op)};
    if (!exact.contains(key)) pairs.emplace_back(comm, call.op);
    exact[key].insert(call.bytes);
  }
  const std::vector<double> sweep = collective_sweep_sizes(job.config);
  for (const auto& [comm, op] : pairs) {
    std::set<double> sizes(sweep.begin(), sweep.end());
    const auto& ex = exact[{comm, static_cast<int>(op)}];
    sizes.insert(ex.begin(), ex.end());
    for (double b : sizes) {
      if (b > 0) plan.collectives.push_back(PlannedCollective{op, comm, b});
    }
  }
  // Overlap: the step's largest GEMM beside each communicator's largest call (its first
  // operation's), the pairing whose slowdown a step feels most.
  std::int64_t gemm = -1;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    const PlannedOp& o = plan.ops[i];
    if (o.origin != "step" || o.op.kind != OpKind::gemm) continue;
    if (gemm < 0 || o.op.flops > plan.ops[static_cast<std::size_t>(gemm)].op.flops) gemm = static_cast<std::int64_t>(i);
  }
  if (gemm >= 0) {
    std::vector<std::int64_t> largest(plan.comms.size(), -1);
    for (std::size_t i = 0; i < plan.collectives.size(); ++i) {
      const PlannedCollective& c = plan.collectives[i];
      std::int64_t& l = largest[c.comm];
      if (l < 0) {
        l = static_cast<std::int64_t>(i);
      } else {
        const PlannedCollective& best = plan.collectives[static_cast<std::size_t>(l)];
        if (c.op == best.op && c.bytes > best.bytes) l = static_cast<std::int64_t>(i);
      }
    }
    for (std::int64_t l : largest) {
      if (l >= 0) plan.overlaps.push_back({static_cast<std::uint32_t>(gemm), static_cast<std::uint32_t>(l)});
    }
  }
  return plan;
}

calibrate::HostInfo cpu_host_info(int ranks) {
  calibrate::HostInfo h;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) h.hostname = host;
  h.cpu = cpu_model_name();
  h.cores = static_cast<int>(std::thread::hardware_concurrency());
  h.ranks = ranks;
  h.nodes = 1;
  h.versions = nlohmann::json::object();
  h.versions["eigen"] = cpu_eigen_version();
#if defined(__clang__)
  h.versions["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  h.versions["compiler"] = std::string("gcc ") + __VERSION__;
#endif
  return h;
}

calibrate::Measurements run_realrun(const RealrunJob& job, const RealrunPlan& plan, const std::vector<Device*>& devices,
                                    const RealrunProgress& progress, const ProcessGroup* world) {
  const int n = plan.ranks;
  const int procs = world != nullptr ? world->count : 1;
  const int local = static_cast<int>(devices.size());
  if (local * procs != n) {
    throw std::invalid_argument("realrun: " + std::to_string(local) + " devices in each of " + std::to_string(procs) +
                                " process(es) for a step of " + std::to_string(n) + " ranks");
  }
  const int first = world != nullptr ? world->index * local : 0;  // global rank of devices[0]
  const StepProgram& p = plan.program;
  const RealrunConfig& cfg = job.config;
  const int warmup = cfg.warmup, repeats = cfg.repeats;

  // Each GPU's ops in program order, and every op's dependencies (its own, then late ones).
  std::vector<std::vector<std::uint32_t>> gpu_ops(p.gpus.size());
  for (std::uint32_t i = 0; i < p.ops.size(); ++i) gpu_ops[p.ops[i].gpu].push_back(i);
  std::vector<std::vector<std::uint32_t>> late(p.ops.size());
  for (const StepLateDep& d : p.late_deps) late[d.after.value].push_back(d.before.value);
  std::vector<int> comm_index(p.groups.size(), -1);  // training: the program's groups
  for (std::size_t c = 0; c < plan.comms.size() && plan.iterations.empty(); ++c) {
    comm_index[plan.comms[c].id] = static_cast<int>(c);
  }

  // samples[entry][rank][repeat]
  using Samples = std::vector<std::vector<std::vector<double>>>;
  Samples op_s(plan.ops.size(), std::vector<std::vector<double>>(static_cast<std::size_t>(n)));
  Samples coll_s(plan.collectives.size(), std::vector<std::vector<double>>(static_cast<std::size_t>(n)));
  std::vector<std::vector<double>> step_s(static_cast<std::size_t>(n));
  Samples alone_s(plan.overlaps.size(), std::vector<std::vector<double>>(static_cast<std::size_t>(n)));
  Samples over_s(plan.overlaps.size(), std::vector<std::vector<double>>(static_cast<std::size_t>(n)));
  std::vector<int> overlap_calls(plan.overlaps.size(), 1);
  Samples iter_s(plan.iterations.size(), std::vector<std::vector<double>>(static_cast<std::size_t>(n)));
  const bool serving = !plan.iterations.empty();
  const double total = static_cast<double>(plan.ops.size() + plan.collectives.size() + plan.overlaps.size() +
                                           (serving ? plan.iterations.size() : 1));

  HostBarrier local_barrier(local);
  std::mutex err_mu;
  std::exception_ptr error;
  auto rank_main = [&](int r) {
    Device& d = *devices[static_cast<std::size_t>(r - first)];
    // Every rank of the job: this process's threads, then (one thread) the other processes.
    auto barrier_wait = [&] {
      local_barrier.wait();
      if (procs > 1) {
        if (r == first) world->barrier();
        local_barrier.wait();
      }
    };
    auto report = [&](const char* phase, double done) {
      if (r == 0 && progress) progress(phase, done / total);
    };
    // Times `issue` (which enqueues one run on stream 0) `repeats` times after `warmup`
    // untimed runs: events before and after each run, read after one synchronize.
    auto time_runs = [&](const std::function<void()>& issue) {
      for (int w = 0; w < warmup; ++w) issue();
      std::vector<std::pair<EventHandle, EventHandle>> ev;
      for (int i = 0; i < repeats; ++i) {
        const EventHandle a = d.record(0);
        issue();
        ev.emplace_back(a, d.record(0));
      }
      d.synchronize();
      std::vector<double> t;
      for (const auto& [a, b] : ev) t.push_back(d.elapsed_s(a, b));
      return t;
    };

    for (const CommSpec& spec : plan.comms) {
      if (std::find(spec.ranks.begin(), spec.ranks.end(), r) != spec.ranks.end()) d.create_comm(spec, cfg.timeout_s);
    }
    barrier_wait();
    // Every rank runs each kernel at once, as every GPU of a step does.
    for (std::size_t i = 0; i < plan.ops.size(); ++i) {
      const OpCost& op = plan.ops[i].op;
      op_s[i][static_cast<std::size_t>(r)] = time_runs([&] { d.launch(0, op); });
      barrier_wait();
      report("ops", static_cast<double>(i + 1));
    }
    for (std::size_t i = 0; i < plan.collectives.size(); ++i) {
      if (const auto req = request_of(plan, plan.collectives[i], r)) {
        coll_s[i][static_cast<std::size_t>(r)] = time_runs([&] { d.collective(0, *req); });
      }
      barrier_wait();
      report("collectives", static_cast<double>(plan.ops.size() + i + 1));
    }
    // Overlap: the GEMM on stream 0 while `calls` collectives run back to back on stream 1.
    if (!plan.overlaps.empty()) {
      if (r == first) {
        // Enough calls to outlast the kernel, from the slowest rank's medians (agreed by every
        // process, since every member must issue the same number).
        std::vector<double> need(plan.overlaps.size(), 1.0);
        for (std::size_t i = 0; i < plan.overlaps.size(); ++i) {
          double gemm_s = 0, coll_s_max = 0;
          for (int k = first; k < first + local; ++k) {
            const auto& g = op_s[plan.overlaps[i].op][static_cast<std::size_t>(k)];
            const auto& c = coll_s[plan.overlaps[i].collective][static_cast<std::size_t>(k)];
            if (!g.empty()) gemm_s = std::max(gemm_s, median_of(g));
            if (!c.empty()) coll_s_max = std::max(coll_s_max, median_of(c));
          }
          need[i] = coll_s_max > 0 ? gemm_s / coll_s_max : 1.0;
        }
        if (procs > 1) {
          const std::vector<double> all = world->all_gather(need);
          for (std::size_t i = 0; i < need.size(); ++i) {
            for (int q = 0; q < procs; ++q)
              need[i] = std::max(need[i], all[static_cast<std::size_t>(q) * need.size() + i]);
          }
        }
        for (std::size_t i = 0; i < need.size(); ++i)
          overlap_calls[i] = static_cast<int>(std::clamp(std::ceil(1.5 * need[i]), 1.0, 10000.0));
      }
      barrier_wait();
      for (std::size_t i = 0; i < plan.overlaps.size(); ++i) {
        const OpCost& gemm = plan.ops[plan.overlaps[i].op].op;
        if (const auto req = request_of(plan, plan.collectives[plan.overlaps[i].collective], r)) {
          alone_s[i][static_cast<std::size_t>(r)] = time_runs([&] { d.launch(0, gemm); });
          std::vector<double>& t = over_s[i][static_cast<std::size_t>(r)];
          for (int it = 0; it < warmup + repeats; ++it) {
            for (int c = 0; c < overlap_calls[i]; ++c) d.collective(1, *req);
            const EventHandle a = d.record(0);
            d.launch(0, gemm);
            const EventHandle b = d.record(0);
            d.synchronize();
            if (it >= warmup) t.push_back(d.elapsed_s(a, b));
          }
        }
        barrier_wait();
        report("overlap", static_cast<double>(plan.ops.size() + plan.collectives.size() + i + 1));
      }
    }
    if (serving) {
      // Serving iterations: each rank issues the iteration's forward pass in order on the compute
      // stream, TP collectives in line (the cost model adds them, exposed, to the compute), and
      // the iteration's time is from an event before its first op to one after its last.
      const CommSpec* tp = plan.comms.empty() ? nullptr : &plan.comms[0];
      for (std::size_t i = 0; i < plan.iterations.size(); ++i) {
        const PlannedIteration& pi = plan.iterations[i];
        for (int it = 0; it < warmup + repeats; ++it) {
          barrier_wait();
          const EventHandle start = d.record(0);
          for (const IterationOp& op : pi.ops) {
            if (!op.collective) {
              d.launch(0, op.cost);
            } else if (tp != nullptr) {
              d.collective(0, CollectiveRequest{op.op, tp->id, op.bytes, -1, true});
            }
          }
          const EventHandle end = d.record(0);
          d.synchronize();
          if (it >= warmup) iter_s[i][static_cast<std::size_t>(r)].push_back(d.elapsed_s(start, end));
        }
        report("iterations",
               static_cast<double>(plan.ops.size() + plan.collectives.size() + plan.overlaps.size() + i + 1));
      }
      return;
    }
    // Steps: the program replayed, each op on its stream after its dependencies' events.
    std::vector<EventHandle> ev(p.ops.size());
    for (int it = 0; it < warmup + repeats; ++it) {
      barrier_wait();
      const EventHandle start = d.record(0);
      for (int s = 1; s < kStepStreams; ++s) d.wait(s, start);
      for (std::uint32_t oi : gpu_ops[static_cast<std::size_t>(r)]) {
        const StepOp& op = p.ops[oi];
        const int s = static_cast<int>(op.stream);
        auto dep = [&](std::uint32_t di) {
          const StepOp& o = p.ops[di];
          if (o.gpu == op.gpu && o.stream != op.stream && di < oi) d.wait(s, ev[di]);
        };
        for (std::uint32_t k = op.deps_begin; k < op.deps_end; ++k) dep(p.deps[k].value);
        for (std::uint32_t di : late[oi]) dep(di);
        if (op.call.valid()) {
          const StepCall& call = p.calls[op.call.value];
          const CommSpec& spec = plan.comms[static_cast<std::size_t>(comm_index[call.group])];
          CollectiveRequest req{call.op, spec.id, call.bytes, -1, true};
          if (call.op == CollectiveOp::send_recv && spec.ranks.size() == 2) {
            const bool first_member = spec.ranks[0] == r;
            req.peer = spec.ranks[first_member ? 1 : 0];
            req.send = first_member;
          }
          d.collective(s, req);
        } else if (op.cost != kNoStepCost) {
          d.launch(s, p.costs[op.cost]);
        }
        ev[oi] = d.record(s);
      }
      std::vector<EventHandle> ends;
      for (int s = 0; s < kStepStreams; ++s) ends.push_back(d.record(s));
      d.synchronize();
      double t = 0;
      for (EventHandle e : ends) t = std::max(t, d.elapsed_s(start, e));
      if (it >= warmup) step_s[static_cast<std::size_t>(r)].push_back(t);
    }
    report("steps", total);
  };

  std::vector<std::thread> threads;
  for (int r = first; r < first + local; ++r) {
    threads.emplace_back([&, r] {
      try {
        rank_main(r);
      } catch (const HostBarrier::Broken&) {
        // another rank's error is the one to report
      } catch (...) {
        {
          std::lock_guard lk(err_mu);
          if (!error) error = std::current_exception();
        }
        local_barrier.breakdown();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  if (procs > 1) {
    gather_samples(*world, first, local, repeats, op_s);
    gather_samples(*world, first, local, repeats, coll_s);
    std::vector<std::vector<std::vector<double>>> steps{std::move(step_s)};
    gather_samples(*world, first, local, repeats, steps);
    step_s = std::move(steps[0]);
    gather_samples(*world, first, local, repeats, alone_s);
    gather_samples(*world, first, local, repeats, over_s);
    gather_samples(*world, first, local, repeats, iter_s);
  }

  calibrate::Measurements m;
  m.backend = job.backend;
  m.created_by = job.created_by;
  m.scenario_file = job.scenario_file;
  m.scenario = job.scenario;
  m.host = cpu_host_info(n);
  m.host.cpu = devices[0]->name().rfind("cpu: ", 0) == 0 ? devices[0]->name().substr(5) : m.host.cpu;
  ClusterSpec discovered = job.cluster;
  discovered.nodes = 1;
  discovered.gpus_per_node = n;
  m.cluster = nlohmann::json::parse(cluster_to_json(discovered).dump());
  m.warmup = warmup;
  m.repeats = repeats;
  for (std::size_t i = 0; i < plan.ops.size(); ++i) {
    calibrate::OpMeasurement om;
    om.op = plan.ops[i].op;
    om.origin = plan.ops[i].origin;
    om.name = plan.ops[i].name;
    om.phase = plan.ops[i].phase;
    om.rank = 0;
    om.stats = slowest_rank_stats(op_s[i]);
    m.ops.push_back(std::move(om));
  }
  for (std::size_t i = 0; i < plan.collectives.size(); ++i) {
    const PlannedCollective& pc = plan.collectives[i];
    const CommSpec& spec = plan.comms[pc.comm];
    calibrate::CollectiveMeasurement cm;
    cm.op = pc.op;
    cm.group = spec.label;
    cm.ranks = spec.ranks;
    const bool ring =
        pc.op == CollectiveOp::all_reduce || pc.op == CollectiveOp::all_gather || pc.op == CollectiveOp::reduce_scatter;
    cm.algorithm = ring ? "ring" : "direct";
    cm.protocol = "";
    cm.bytes = pc.bytes;
    cm.stats = slowest_rank_stats(coll_s[i]);
    if (cm.stats.median_s > 0) {
      cm.algbw_gbyte_per_s = pc.bytes / cm.stats.median_s / 1e9;
      cm.busbw_gbyte_per_s = cm.algbw_gbyte_per_s * bus_factor(pc.op, static_cast<int>(spec.ranks.size()));
    }
    m.collectives.push_back(std::move(cm));
  }
  for (std::size_t i = 0; i < plan.overlaps.size(); ++i) {
    const PlannedCollective& pc = plan.collectives[plan.overlaps[i].collective];
    calibrate::OverlapMeasurement v;
    v.op = plan.ops[plan.overlaps[i].op].op;
    v.collective = pc.op;
    v.group = plan.comms[pc.comm].label;
    v.bytes = pc.bytes;
    v.calls = overlap_calls[i];
    v.alone = slowest_rank_stats(alone_s[i]);
    v.overlapped = slowest_rank_stats(over_s[i]);
    m.overlaps.push_back(std::move(v));
  }
  for (std::size_t i = 0; i < plan.iterations.size(); ++i) {
    calibrate::StepMeasurement sm;
    sm.kind = std::string(plan.iterations[i].shape.kind());
    sm.layout = {{"tp", job.serving->deployment.tp}, {"pp", job.serving->deployment.pp}};
    sm.shape = plan.iterations[i].shape;
    sm.stats = slowest_rank_stats(iter_s[i]);
    for (const auto& s : iter_s[i]) sm.per_rank_median_s.push_back(median_of(s));
    m.steps.push_back(std::move(sm));
  }
  if (serving) return m;
  calibrate::StepMeasurement sm;
  sm.kind = "training_step";
  const Parallelism& par = job.training.parallel;
  sm.layout = {{"tp", par.tp}, {"pp", par.pp}, {"dp", par.dp}, {"cp", par.cp}, {"ep", par.ep}};
  // With experts: their TP size as run (1 when folded, else tp), so the record says which.
  if (par.ep > 1) sm.layout["etp"] = expert_tp(par);
  sm.stats = slowest_rank_stats(step_s);
  for (const auto& s : step_s) sm.per_rank_median_s.push_back(median_of(s));
  m.steps.push_back(std::move(sm));
  return m;
}

}  // namespace ctwin::realrun
