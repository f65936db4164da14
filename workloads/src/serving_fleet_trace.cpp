#include "workloads/serving_fleet_trace.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "workloads/serving_trace.hpp"

namespace ctwin {
namespace {

const char* state_name(FleetReplicaState s) {
  switch (s) {
    case FleetReplicaState::starting:
      return "starting";
    case FleetReplicaState::serving:
      return "serving";
    case FleetReplicaState::draining:
      return "draining";
    case FleetReplicaState::down:
      return "down";
    case FleetReplicaState::gone:
      break;
  }
  return "gone";
}

bool alive(FleetReplicaState s) { return s == FleetReplicaState::serving || s == FleetReplicaState::draining; }

}  // namespace

FleetTraceCollector::FleetTraceCollector(std::vector<std::string> pools, FleetTraceOptions opt)
    : pool_names_(std::move(pools)), opt_(opt), interval_ps_(seconds(opt.counter_interval_s).ps) {
  if (pool_names_.empty()) throw std::invalid_argument("fleet trace: no pool");
  if (!(interval_ps_ > 0)) throw std::invalid_argument("fleet trace: counter_interval_s must be > 0");
  arrivals_.resize(pool_names_.size());
}

FleetHooks FleetTraceCollector::fleet_hooks() {
  FleetHooks h;
  h.on_state = [this](int id, int pool, FleetReplicaState s, Time t) { state(id, pool, s, t); };
  h.on_iteration = [this](int id, const IterationRecord& it) { iteration(id, it); };
  h.on_route = [this](int id, const Request&, Time t) { routed(id, t); };
  h.on_crash = [this](int id, Time t) { crash(id, t); };
  return h;
}

DisaggHooks FleetTraceCollector::disagg_hooks(int prefill_replicas, int decode_replicas) {
  if (pool_names_.size() != 2) throw std::invalid_argument("fleet trace: a disaggregated run has two pools");
  prefill_replicas_ = prefill_replicas;
  for (int k = 0; k < prefill_replicas + decode_replicas; ++k)
    state(k, k < prefill_replicas ? 0 : 1, FleetReplicaState::serving, Time{0});
  DisaggHooks h;
  h.on_iteration = [this](int pool, int k, const IterationRecord& it) {
    iteration(pool == 0 ? k : prefill_replicas_ + k, it);
  };
  h.on_request = [this](int pool, int k, const RequestRecord& r) {
    routed(pool == 0 ? k : prefill_replicas_ + k, r.request.arrival);
  };
  h.on_transfer = [this](int from, int to, std::int64_t, Time start, Time end, double) {
    transfer(from, prefill_replicas_ + to, start, end);
  };
  return h;
}

FleetTraceCollector::Replica& FleetTraceCollector::replica(int id) {
  if (id < 0) throw std::invalid_argument("fleet trace: a negative replica id");
  const auto i = static_cast<std::size_t>(id);
  if (replicas_.size() <= i) replicas_.resize(i + 1);
  return replicas_[i];
}

std::int64_t FleetTraceCollector::bin_of(std::int64_t t_ps) const {
  return std::max<std::int64_t>(0, t_ps) / interval_ps_;
}

void FleetTraceCollector::report(Replica& r, std::int64_t t_ps, std::int64_t waiting, std::int64_t kv_used,
                                 bool is_alive) {
  const std::int64_t b = bin_of(t_ps);
  if (!r.bins.empty() && r.bins.back().bin >= b) {
    r.bins.back() = Bin{r.bins.back().bin, waiting, kv_used, is_alive};
    return;
  }
  r.bins.push_back(Bin{b, waiting, kv_used, is_alive});
}

void FleetTraceCollector::state(int id, int pool, FleetReplicaState s, Time t) {
  if (pool < 0 || pool >= static_cast<int>(pool_names_.size()))
    throw std::invalid_argument("fleet trace: replica " + std::to_string(id) + " names pool " + std::to_string(pool));
  Replica& r = replica(id);
  r.pool = pool;
  states_.push_back(StateRec{t.ps, static_cast<std::int64_t>(states_.size()), id, s});
  report(r, t.ps, 0, 0, alive(s));
  end_ps_ = std::max(end_ps_, t.ps);
}

void FleetTraceCollector::iteration(int id, const IterationRecord& it) {
  Replica& r = replica(id);
  if (id < opt_.iteration_replicas)
    r.iters.push_back(Iter{it.start.ps, it.end.ps, it.shape.prefill_tokens, it.shape.decode_seqs});
  report(r, it.start.ps, it.waiting, it.kv_used_blocks, true);
  end_ps_ = std::max(end_ps_, it.end.ps);
}

void FleetTraceCollector::routed(int id, Time t) {
  end_ps_ = std::max(end_ps_, t.ps);
  if (id < 0) return;  // no replica took it
  const int pool = replica(id).pool;
  if (pool < 0) return;
  auto& a = arrivals_[static_cast<std::size_t>(pool)];
  const auto b = static_cast<std::size_t>(bin_of(t.ps));
  if (a.size() <= b) a.resize(b + 1, 0);
  ++a[b];
}

void FleetTraceCollector::crash(int id, Time t) {
  replica(id).crashes_ps.push_back(t.ps);
  end_ps_ = std::max(end_ps_, t.ps);
}

void FleetTraceCollector::transfer(int from, int to, Time start, Time end) {
  replica(from);
  replica(to);
  transfers_.push_back(Transfer{from, to, start.ps, end.ps});
  end_ps_ = std::max(end_ps_, end.ps);
}

Trace FleetTraceCollector::build(const std::vector<std::int64_t>& kv_blocks, const std::vector<FleetTick>& ticks,
                                 std::vector<std::pair<std::string, double>> summary) const {
  Trace tr;
  const std::size_t np = pool_names_.size();
  const auto nr = replicas_.size();
  // A lane's label is "process / thread": the pool's name and "#K" keep it short.
  const std::vector<std::string>& proc = pool_names_;

  // The autoscaler's lane first, above the pools (added below, once its marks are known).
  const std::uint32_t scale_lane = ticks.empty() ? kNoIndex : tr.add_lane("fleet", "autoscaler", "fleet", 0, 0);

  // Lanes: pool by pool, each replica's lifecycle lane then (traced ones) its iteration lane.
  std::vector<std::uint32_t> life_lane(nr, kNoIndex), iter_lane(nr, kNoIndex);
  std::vector<int> index_in_pool(nr, 0);
  for (std::size_t p = 0; p < np; ++p) {
    int k = 0;
    for (std::size_t id = 0; id < nr; ++id) {
      if (replicas_[id].pool != static_cast<int>(p)) continue;
      index_in_pool[id] = k;
      const std::string name = std::string("#").append(std::to_string(k)), group = "pool " + proc[p];
      const auto pid = static_cast<std::uint32_t>(p + 1), tid = static_cast<std::uint32_t>(2 * k);
      life_lane[id] = tr.add_lane(proc[p], name, group, pid, tid);
      if (static_cast<int>(id) < opt_.iteration_replicas)
        iter_lane[id] = tr.add_lane(proc[p], name + " iterations", group, pid, tid + 1);
      ++k;
    }
  }

  // Lifecycle spans and the replicas-per-state counters, in time order (ties: as recorded).
  std::vector<StateRec> order = states_;
  std::sort(order.begin(), order.end(),
            [](const StateRec& a, const StateRec& b) { return a.t_ps != b.t_ps ? a.t_ps < b.t_ps : a.seq < b.seq; });
  constexpr int kStates = 4;  // starting, serving, draining, down (gone is not counted)
  const char* const state_counter[kStates] = {"starting", "serving", "draining", "down"};
  std::vector<TraceCounterTrack> per_state(np * kStates);
  std::vector<std::vector<int>> count(np, std::vector<int>(kStates, 0));
  for (std::size_t p = 0; p < np; ++p) {
    for (int s = 0; s < kStates; ++s) {
      TraceCounterTrack& c = per_state[p * kStates + static_cast<std::size_t>(s)];
      c.process = tr.intern(proc[p]);
      c.pid = static_cast<std::uint32_t>(p + 1);
      c.name = tr.intern(state_counter[s]);
      c.samples.emplace_back(0, 0.0);
    }
  }
  struct Open {
    bool has = false;
    FleetReplicaState s = FleetReplicaState::gone;
    std::int64_t since = 0;
  };
  std::vector<Open> open(nr);
  auto close = [&](std::size_t id, std::int64_t t_ps) {
    Open& o = open[id];
    if (!o.has || o.s == FleetReplicaState::gone || t_ps <= o.since) return;
    TraceEvent e;
    e.lane = life_lane[id];
    e.start_ps = o.since;
    e.dur_ps = t_ps - o.since;
    e.name = e.kind = tr.intern(state_name(o.s));
    tr.events.push_back(e);
  };
  for (const StateRec& r : order) {
    const auto id = static_cast<std::size_t>(r.replica);
    const auto p = static_cast<std::size_t>(replicas_[id].pool);
    close(id, r.t_ps);
    Open& o = open[id];
    if (o.has && o.s != FleetReplicaState::gone) --count[p][static_cast<std::size_t>(o.s)];
    o = Open{true, r.s, r.t_ps};
    if (r.s != FleetReplicaState::gone) ++count[p][static_cast<std::size_t>(r.s)];
    for (int s = 0; s < kStates; ++s)
      sample_counter(per_state[p * kStates + static_cast<std::size_t>(s)], r.t_ps,
                     static_cast<double>(count[p][static_cast<std::size_t>(s)]));
  }
  for (std::size_t id = 0; id < nr; ++id) close(id, end_ps_);
  for (auto& c : per_state) tr.counters.push_back(std::move(c));

  // Crash marks.
  const std::uint32_t k_crash = tr.intern("crash");
  for (std::size_t id = 0; id < nr; ++id) {
    for (const std::int64_t t : replicas_[id].crashes_ps) {
      TraceEvent e;
      e.lane = life_lane[id];
      e.start_ps = t;
      e.name = e.kind = k_crash;
      tr.events.push_back(e);
    }
  }

  // Iterations of the traced replicas, named by their batch.
  std::unordered_map<std::uint64_t, std::uint32_t> batch_name;
  for (std::size_t id = 0; id < nr; ++id) {
    if (iter_lane[id] == kNoIndex) continue;
    for (const Iter& it : replicas_[id].iters) {
      const std::uint64_t key =
          static_cast<std::uint64_t>(it.prefill_tokens) << 32 ^ static_cast<std::uint64_t>(it.decode_seqs);
      auto [name, fresh] = batch_name.try_emplace(key, 0);
      if (fresh) {
        name->second = tr.intern("prefill " + std::to_string(it.prefill_tokens) + " tok + decode " +
                                 std::to_string(it.decode_seqs) + " seq");
      }
      TraceEvent e;
      e.lane = iter_lane[id];
      e.start_ps = it.start_ps;
      e.dur_ps = it.end_ps - it.start_ps;
      e.name = name->second;
      e.kind = tr.intern(batch_kind(it.prefill_tokens, it.decode_seqs));
      tr.events.push_back(e);
    }
  }

  // Interval counters: arrivals, waiting and KV use per pool.
  const std::int64_t bins = bin_of(end_ps_) + 1;
  const double interval_s = opt_.counter_interval_s;
  for (std::size_t p = 0; p < np; ++p) {
    std::vector<std::int64_t> waiting(static_cast<std::size_t>(bins), 0), kv_used(static_cast<std::size_t>(bins), 0),
        live(static_cast<std::size_t>(bins), 0);
    for (std::size_t id = 0; id < nr; ++id) {
      if (replicas_[id].pool != static_cast<int>(p)) continue;
      const auto& rec = replicas_[id].bins;
      Bin cur{0, 0, 0, false};
      std::size_t i = 0;
      for (std::int64_t b = 0; b < bins; ++b) {
        for (; i < rec.size() && rec[i].bin <= b; ++i) cur = rec[i];
        if (!cur.alive) continue;
        const auto bi = static_cast<std::size_t>(b);
        waiting[bi] += cur.waiting;
        kv_used[bi] += cur.kv_used;
        ++live[bi];
      }
    }
    auto counter = [&](const char* name) {
      TraceCounterTrack c;
      c.process = tr.intern(proc[p]);
      c.pid = static_cast<std::uint32_t>(p + 1);
      c.name = tr.intern(name);
      return c;
    };
    TraceCounterTrack rate = counter("arrivals_per_s"), queue = counter("queue_length"), kv = counter("kv_utilization");
    const std::int64_t blocks = p < kv_blocks.size() ? kv_blocks[p] : 0;
    for (std::int64_t b = 0; b < bins; ++b) {
      const auto bi = static_cast<std::size_t>(b);
      const std::int64_t t = b * interval_ps_;
      const std::int64_t n = bi < arrivals_[p].size() ? arrivals_[p][bi] : 0;
      sample_counter(rate, t, static_cast<double>(n) / interval_s);
      sample_counter(queue, t, static_cast<double>(waiting[bi]));
      if (blocks > 0)
        sample_counter(
            kv, t, live[bi] > 0 ? static_cast<double>(kv_used[bi]) / (static_cast<double>(live[bi]) * blocks) : 0.0);
    }
    tr.counters.push_back(std::move(rate));
    tr.counters.push_back(std::move(queue));
    if (blocks > 0) tr.counters.push_back(std::move(kv));
  }

  // The autoscaler: its desired count per pool and a mark where it asked for a change.
  if (!ticks.empty()) {
    const std::uint32_t lane = scale_lane;
    const std::uint32_t k_up = tr.intern("scale_up"), k_down = tr.intern("scale_down");
    std::vector<TraceCounterTrack> desired(np);
    for (std::size_t p = 0; p < np; ++p) {
      desired[p].process = tr.intern(proc[p]);
      desired[p].pid = static_cast<std::uint32_t>(p + 1);
      desired[p].name = tr.intern("desired");
    }
    for (const FleetTick& tk : ticks) {
      const std::int64_t t = seconds(tk.t_s).ps;
      for (std::size_t p = 0; p < tk.desired.size() && p < np && p < tk.pools.size(); ++p) {
        const FleetPoolMetrics& m = tk.pools[p];
        const int have = m.serving + m.starting + m.down;
        const int want = tk.desired[p];
        sample_counter(desired[p], t, want);
        if (want == have) continue;
        TraceEvent e;
        e.lane = lane;
        e.start_ps = t;
        e.kind = want > have ? k_up : k_down;
        e.name = tr.intern(proc[p] + ": " + std::to_string(have) + " -> " + std::to_string(want));
        tr.events.push_back(e);
      }
    }
    for (auto& c : desired)
      if (!c.samples.empty()) tr.counters.push_back(std::move(c));
  }

  // KV transfers: a span each on interval-partitioned link lanes, and an arrow between the
  // replicas' lifecycle lanes.
  if (!transfers_.empty()) {
    std::vector<Transfer> ts = transfers_;
    std::sort(ts.begin(), ts.end(), [](const Transfer& a, const Transfer& b) {
      if (a.start_ps != b.start_ps) return a.start_ps < b.start_ps;
      if (a.end_ps != b.end_ps) return a.end_ps < b.end_ps;
      return a.from != b.from ? a.from < b.from : a.to < b.to;
    });
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    spans.reserve(ts.size());
    for (const Transfer& x : ts) spans.emplace_back(x.start_ps, x.end_ps);
    const std::vector<std::uint32_t> slot = assign_slots(spans);
    std::vector<std::uint32_t> slot_lane;
    const auto pid = static_cast<std::uint32_t>(np + 1);
    const std::uint32_t k_kv = tr.intern("kv_transfer"), arrow_name = tr.intern("kv transfer");
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const Transfer& x = ts[i];
      while (slot_lane.size() <= slot[i]) {
        const auto s = static_cast<std::uint32_t>(slot_lane.size());
        slot_lane.push_back(tr.add_lane("kv transfers", "link " + std::to_string(s), "kv transfers", pid, s));
      }
      const auto from = static_cast<std::size_t>(x.from), to = static_cast<std::size_t>(x.to);
      TraceEvent e;
      e.lane = slot_lane[slot[i]];
      e.start_ps = x.start_ps;
      e.dur_ps = x.end_ps - x.start_ps;
      e.kind = k_kv;
      e.name = tr.intern(
          pool_names_[static_cast<std::size_t>(replicas_[from].pool)] + " " + std::to_string(index_in_pool[from]) +
          " -> " + pool_names_[static_cast<std::size_t>(replicas_[to].pool)] + " " + std::to_string(index_in_pool[to]));
      tr.events.push_back(e);
      tr.arrows.push_back(TraceArrow{life_lane[from], life_lane[to], x.start_ps, x.end_ps, arrow_name});
    }
  }

  canonicalize(tr);
  tr.summary = std::move(summary);
  return tr;
}

namespace {

std::vector<std::pair<std::string, double>> headline(const ServingResult& res) {
  return {{"makespan_s", res.makespan_s},
          {"ttft_p50_s", res.ttft_s.p50},
          {"ttft_p99_s", res.ttft_s.p99},
          {"tpot_p50_s", res.tpot_s.p50},
          {"tpot_p99_s", res.tpot_s.p99},
          {"e2e_p50_s", res.e2e_s.p50},
          {"e2e_p99_s", res.e2e_s.p99},
          {"requests_per_second", res.requests_per_s},
          {"output_tokens_per_second", res.output_tokens_per_s},
          {"goodput_requests_per_second", res.goodput_requests_per_s},
          {"slo_attainment", res.slo_attainment},
          {"completed_requests", static_cast<double>(res.completed_requests)},
          {"rejected_requests", static_cast<double>(res.rejected_requests)},
          {"iterations", static_cast<double>(res.iterations)}};
}

}  // namespace

Trace FleetTraceCollector::build(const FleetRun& run) const {
  std::vector<std::int64_t> blocks;
  int made = 0;
  for (const FleetPoolResult& p : run.pools) {
    blocks.push_back(p.capacity.num_gpu_blocks);
    made += p.replicas_made;
  }
  auto s = headline(run.merged);
  s.emplace_back("replicas_made", made);
  s.emplace_back("crashes", static_cast<double>(run.crashes));
  s.emplace_back("retried_requests", static_cast<double>(run.retried));
  s.emplace_back("lost_requests", static_cast<double>(run.lost));
  s.emplace_back("unrouted_requests", static_cast<double>(run.unrouted));
  s.emplace_back("control_ticks", static_cast<double>(run.control_ticks));
  return build(blocks, run.timeline, std::move(s));
}

Trace FleetTraceCollector::build(const DisaggregatedRun& run) const {
  auto s = headline(run.merged);
  s.emplace_back("kv_transfers", static_cast<double>(run.kv_transfers));
  s.emplace_back("kv_transfer_bytes", run.kv_transfer_bytes);
  s.emplace_back("transfer_p50_s", run.transfer_s.p50);
  s.emplace_back("transfer_p99_s", run.transfer_s.p99);
  s.emplace_back("kv_peak_concurrent_transfers", run.kv_peak_concurrent_transfers);
  return build({run.prefill_capacity.num_gpu_blocks, run.decode_capacity.num_gpu_blocks}, {}, std::move(s));
}

}  // namespace ctwin
