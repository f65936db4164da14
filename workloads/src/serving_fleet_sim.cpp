#include "workloads/serving_fleet_sim.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "sim/quantile_histogram.hpp"
#include "sim/random.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_run.hpp"

namespace ctwin {
namespace {

constexpr Time kNever{std::numeric_limits<std::int64_t>::max()};

class Fleet;

// A replica's inbox: the requests the router sent it, in routing order; completions go back to
// the fleet (the router's count, a closed-loop user).
class Inbox final : public TrafficSource {
 public:
  Inbox(Fleet& f, int id, const std::vector<RequestClass>& classes) : fleet_(f), id_(id), classes_(classes) {}
  std::optional<Time> next_arrival() const override {
    if (q_.empty()) return std::nullopt;
    return q_.front().arrival;
  }
  Request pop() override {
    const Request r = q_.front();
    q_.pop_front();
    return r;
  }
  void completed(const Request& r, Time t) override;
  bool exhausted() const override { return q_.empty(); }
  const std::vector<RequestClass>& classes() const override { return classes_; }
  void push(const Request& r) { q_.push_back(r); }
  bool empty() const { return q_.empty(); }
  std::size_t size() const { return q_.size(); }

 private:
  Fleet& fleet_;
  int id_;
  const std::vector<RequestClass>& classes_;
  std::deque<Request> q_;
};

// One life of a replica, from its start (t = 0, an add, a restart) to its end (the traffic's,
// a drain, a crash): a fresh KV cache, so a restart has nothing cached.
struct Incarnation {
  Incarnation(Fleet& f, int id, const std::vector<RequestClass>& classes) : inbox(f, id, classes) {}
  Inbox inbox;
  std::unique_ptr<PrefixKvCache> kv;
  ReplicaOptions options;
  std::optional<SteppableReplica> rep;
  bool has_work() const { return rep->busy() || !inbox.empty(); }
};

using SlotState = FleetReplicaState;

struct Slot {
  int pool = 0;
  int index = 0;  // in its pool
  SlotState state = SlotState::serving;
  std::unique_ptr<Incarnation> inc;
  std::uint32_t gen = 0;  // incarnations begun; older heap entries and completions are stale
  bool queued = false;    // has a live entry in the ready heap
  ServingLatencyHistograms hist;
  std::vector<ServingResult> results;  // each finished incarnation's
  Time since{0};                       // in `state` since
  double busy_s = 0, busy_mark_s = 0;  // iteration seconds in all; at the last tick
};

struct PoolRuntime {
  KvCapacity capacity;
  std::shared_ptr<const IterationCostModel> cost;
  std::int64_t arrivals = 0;  // since the last control tick
  std::vector<double> ttfts;  // first tokens since the last control tick (with a control hook)
  ReplicaSeconds replica_s;
  std::int64_t crashes = 0;
  // KV offloading: every host tier the pool's replicas had (the one pooled tier, or one per
  // incarnation), kept for the statistics.
  std::vector<std::shared_ptr<KvHostTier>> offload_tiers;
};

// Nearest rank: the ceil(q n)-th smallest; nullopt for none.
std::optional<double> nearest_rank(std::vector<double>& v, double q) {
  if (v.empty()) return std::nullopt;
  const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct TimedId {  // ordered by (time, id): ties never depend on anything else
  Time t;
  int id;
  std::uint32_t gen;
  bool operator>(const TimedId& o) const { return t != o.t ? t > o.t : id > o.id; }
};

enum class Life : std::uint8_t { add, drain, crash, restart, serve };
struct LifeEvent {
  Time t;
  std::int64_t seq;  // ties: in the order made (the scenario's order first)
  Life kind;
  int pool;
  int slot;  // fleet replica id (add: unused)
  double restart_s;
  std::uint32_t gen = 0;  // a random crash: the incarnation it was drawn for
  bool operator>(const LifeEvent& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

struct Retry {
  Time t;
  std::int64_t seq;
  Request r;
  bool operator>(const Retry& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

template <class T>
using MinHeap = std::priority_queue<T, std::vector<T>, std::greater<>>;

// The replicas with work by (clock, id), smallest on top. A stepped replica that still has
// work goes back in place of the top (one sift down, where a pop and a push cost two).
class ReadyHeap {
 public:
  bool empty() const { return h_.empty(); }
  const TimedId& top() const { return h_.front(); }
  void push(const TimedId& e) {
    h_.push_back(e);
    std::push_heap(h_.begin(), h_.end(), std::greater<>{});
  }
  void pop() {
    std::pop_heap(h_.begin(), h_.end(), std::greater<>{});
    h_.pop_back();
  }
  void replace_top(const TimedId& e) {
    const std::size_t n = h_.size();
    std::size_t i = 0;
    while (true) {
      std::size_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && h_[c] > h_[c + 1]) ++c;
      if (!(e > h_[c])) break;
      h_[i] = h_[c];
      i = c;
    }
    h_[i] = e;
  }

 private:
  std::vector<TimedId> h_;
};

Time at_s(double s) { return seconds(s); }

class Fleet {
 public:
  Fleet(const FleetSpec& spec, TrafficSource& stream, const FleetTraffic& info, ServingLoop loop)
      : spec_(spec),
        info_(info),
        reference_(loop == ServingLoop::reference),
        stream_(&stream),
        router_(spec.router, info.session_group_base, info.session_turns) {
    if (spec.admission) admission_.emplace(*spec.admission);
  }

  FleetRun run() {
    FleetRun out;
    if (spec_.pools.empty()) throw std::invalid_argument("fleet: no pool");
    if (spec_.max_retries < 0) throw std::invalid_argument("fleet: max_retries must be >= 0");
    for (const FleetPool& p : spec_.pools) {
      if (p.replicas < 0) throw std::invalid_argument("fleet: pool " + p.name + " has a negative replica count");
      if (!(p.cold_start_s >= 0)) throw std::invalid_argument("fleet: pool " + p.name + " has cold_start_s < 0");
      PoolRuntime& rt = pools_.emplace_back();
      if (p.gpu_blocks > 0) {
        rt.capacity.num_gpu_blocks = p.gpu_blocks;
        rt.capacity.tokens = p.gpu_blocks * p.scheduler.block_size;
        rt.capacity.num_offload_blocks = p.offload_blocks;
      } else {
        rt.capacity = kv_capacity(p.deployment, p.scheduler);
      }
      if (!rt.capacity.refusal.empty() && out.refusal.empty())
        out.refusal = "pool " + p.name + ": " + rt.capacity.refusal;
      FleetPoolResult& pr = out.pools.emplace_back();
      pr.name = p.name;
      pr.capacity = rt.capacity;
    }
    if (!out.refusal.empty()) return out;
    for (std::size_t p = 0; p < spec_.pools.size(); ++p) {
      // A pooled host tier: each of the pool's first replicas brings its share.
      const FleetPool& fp = spec_.pools[p];
      if (fp.scheduler.kv_offloading_scope == KvOffloadScope::pool && pools_[p].capacity.num_offload_blocks > 0)
        pools_[p].offload_tiers.push_back(
            make_kv_host_tier(pools_[p].capacity.num_offload_blocks * std::max(1, fp.replicas)));
      if (spec_.pools[p].cost) {
        pools_[p].cost = spec_.pools[p].cost;
      } else {
        pools_[p].cost = std::make_shared<ServingCostModel>(spec_.pools[p].deployment);
      }
      for (int k = 0; k < spec_.pools[p].replicas; ++k)
        observe(make_slot(static_cast<int>(p), Time{0}, SlotState::serving), SlotState::serving, Time{0});
    }
    for (const FleetEvent& e : spec_.events) {
      if (e.pool < 0 || e.pool >= static_cast<int>(spec_.pools.size()))
        throw std::invalid_argument("fleet: an event names pool " + std::to_string(e.pool) + " of " +
                                    std::to_string(spec_.pools.size()));
      if (!(e.t_s >= 0)) throw std::invalid_argument("fleet: an event's t_s must be >= 0");
      life_.push({at_s(e.t_s), seq_++,
                  e.kind == FleetEventKind::add     ? Life::add
                  : e.kind == FleetEventKind::drain ? Life::drain
                                                    : Life::crash,
                  e.pool, e.replica, e.kind == FleetEventKind::add ? -1.0 : e.restart_s});
    }
    if (spec_.router.metrics_interval_s > 0) next_refresh_ = Time{0};
    if (spec_.control.interval_s > 0 && spec_.control.desired) next_tick_ = at_s(spec_.control.interval_s);
    loop();
    return collect(std::move(out));
  }

  void on_completed(int id, const Request& r, Time t) {
    completions_.push({t, id, slots_[static_cast<std::size_t>(id)].gen});
    if (admission_) done_.push_back(t);
    attempts_.erase(r.id);
    stream_->completed(r, t);
  }

 private:
  // ---- the loop: step the earliest replica while it starts before the next event; ties go to
  // the event (an arrival at t is routed before any replica steps at t)
  void loop() {
    while (true) {
      clean_ready();
      const Time ev = next_event();
      if (!ready_.empty() && ready_.top().t < ev) {
        step_top();
        continue;
      }
      if (ev == kNever) break;
      handle(ev);
    }
  }

  bool active() { return stream_->next_arrival() || !ready_.empty() || !retries_.empty() || !life_.empty(); }
  Time next_event() {
    Time ev = kNever;
    if (const auto a = stream_->next_arrival()) ev = std::min(ev, *a);
    if (!retries_.empty()) ev = std::min(ev, retries_.top().t);
    if (!life_.empty()) ev = std::min(ev, life_.top().t);
    if (active()) ev = std::min({ev, next_refresh_, next_tick_});
    if (!random_.empty() && active()) ev = std::min(ev, random_.top().t);
    return std::min(ev, release_t_);
  }

  void handle(Time ev) {
    if (!life_.empty() && life_.top().t == ev) {
      const LifeEvent e = life_.top();
      life_.pop();
      apply(e);
    } else if (!random_.empty() && random_.top().t == ev) {
      const LifeEvent e = random_.top();
      random_.pop();
      random_crash(e);
    } else if (release_t_ == ev) {  // after every replica that starts serving at ev
      release_t_ = kNever;
      release(ev);
    } else if (next_refresh_ == ev) {
      refresh();
      next_refresh_ = next_refresh_ + at_s(spec_.router.metrics_interval_s);
    } else if (next_tick_ == ev) {
      tick(ev);
      next_tick_ = next_tick_ + at_s(spec_.control.interval_s);
    } else if (!retries_.empty() && retries_.top().t == ev) {
      const Request r = retries_.top().r;
      retries_.pop();
      route(r, ev);
    } else {
      const Request r = stream_->pop();
      ++arrived_;
      if (admission_ && admission_->admit(r, ev, view(ev)) != AdmissionResult::accepted) {
        stream_->completed(r, ev);  // answered with an error: a closed-loop user goes on
        return;
      }
      route(r, ev);
    }
  }

  void clean_ready() {
    while (!ready_.empty()) {
      const TimedId& e = ready_.top();
      const Slot& s = slots_[static_cast<std::size_t>(e.id)];
      if (s.inc && s.gen == e.gen) return;
      ready_.pop();
    }
  }
  void enqueue(int id) {
    Slot& s = slots_[static_cast<std::size_t>(id)];
    if (s.queued || !s.inc || !s.inc->has_work()) return;
    s.queued = true;
    ready_.push({s.inc->rep->now(), id, s.gen});
  }
  void step_top() {
    const int id = ready_.top().id;
    Slot& s = slots_[static_cast<std::size_t>(id)];
    s.inc->rep->step();
    // Nothing a step calls back enqueues a replica: the top is still this one's entry.
    if (s.inc->has_work() && s.state != SlotState::draining) {
      ready_.replace_top({s.inc->rep->now(), id, s.gen});
      return;
    }
    ready_.pop();
    s.queued = false;
    if (s.state == SlotState::draining && !s.inc->has_work()) {
      observe(id, SlotState::gone, s.inc->rep->now());
      retire(s, s.inc->rep->now());
      return;
    }
    enqueue(id);
  }

  // ---- admission: what the router sees of the fleet at `t`
  FleetView view(Time t) {
    FleetView v;
    for (const Slot& s : slots_) {
      if (!s.inc) continue;
      v.queued += s.inc->rep->load().waiting;
      v.queued += static_cast<std::int64_t>(s.inc->inbox.size());
    }
    // Completions within the window, recorded by now (a replica steps a little past t at most).
    const double window_s = spec_.admission->ttft_window_s;
    const Time cutoff = t - at_s(window_s);
    while (!done_.empty() && done_.front() <= cutoff) done_.pop_front();
    const double span_s = std::min(window_s, t.seconds());
    if (!done_.empty() && span_s > 0) {
      const double rate_per_s = static_cast<double>(done_.size()) / span_s;
      v.estimated_wait_s = static_cast<double>(v.queued) / rate_per_s;
    }
    return v;
  }

  // ---- routing
  void route(const Request& r, Time t) {
    for (; !completions_.empty() && completions_.top().t <= t; completions_.pop()) {
      const TimedId& c = completions_.top();
      if (slots_[static_cast<std::size_t>(c.id)].gen == c.gen) router_.completed(c.id);
    }
    if (spec_.router.metrics_interval_s == 0 && spec_.router.policy == RouterPolicy::least_kv) refresh();
    const int k = router_.route(r, views_);
    if (k < 0 && spec_.control.hold_when_empty) {
      held_.push_back(r);
      held_ids_.insert(r.id);
      ++held_total_;
      activate(t);
      return;
    }
    if (spec_.hooks.on_route) spec_.hooks.on_route(k, r, t);
    if (k < 0) {
      ++unrouted_;
      attempts_.erase(r.id);
      stream_->completed(r, t);  // answered with an error: a closed-loop user goes on
      return;
    }
    Slot& s = slots_[static_cast<std::size_t>(k)];
    ++pools_[static_cast<std::size_t>(s.pool)].arrivals;
    // A retry arrived before now: the replica must not take it before it was sent.
    if (r.arrival < t) s.inc->rep->idle_until(t);
    s.inc->inbox.push(r);
    enqueue(k);
  }
  void refresh() {
    for (std::size_t k = 0; k < slots_.size(); ++k)
      views_[k].reported = slots_[k].inc ? slots_[k].inc->rep->load() : ReplicaLoad{};
  }

  // ---- lifecycle
  int make_slot(int pool, Time start, SlotState state) {
    const int id = static_cast<int>(slots_.size());
    Slot& s = slots_.emplace_back();
    s.pool = pool;
    s.index = made_[pool]++;
    s.state = state;
    s.since = start;
    router_.add_replica();
    views_.push_back({state == SlotState::serving, ReplicaLoad{}});
    begin(s, id, start);
    if (state == SlotState::serving) arm(id, start);
    return id;
  }
  void begin(Slot& s, int id, Time start) {
    const FleetPool& p = spec_.pools[static_cast<std::size_t>(s.pool)];
    PoolRuntime& rt = pools_[static_cast<std::size_t>(s.pool)];
    ++s.gen;
    s.queued = false;
    s.inc = std::make_unique<Incarnation>(*this, id, stream_->classes());
    Incarnation& in = *s.inc;
    // As run_serving_replica builds one replica; a replica's own host tier starts empty with it.
    KvOffload offload{nullptr, id};
    if (rt.capacity.num_offload_blocks > 0) {
      if (p.scheduler.kv_offloading_scope == KvOffloadScope::replica)
        rt.offload_tiers.push_back(make_kv_host_tier(rt.capacity.num_offload_blocks));
      offload.tier = rt.offload_tiers.back();
    }
    in.kv = make_kv_cache(rt.capacity.num_gpu_blocks, p.scheduler.block_size, rt.capacity.num_cpu_blocks,
                          p.scheduler.prefix_caching, offload, kv_window(p.deployment));
    in.options = replica_options(p.deployment, p.scheduler, rt.capacity, info_.seed);
    if (spec_.control.interval_s > 0 || spec_.hooks.on_iteration)
      in.options.hooks.on_iteration = [this, id, &b = s.busy_s](const IterationRecord& it) {
        b += (it.end - it.start).seconds();
        if (spec_.hooks.on_iteration) spec_.hooks.on_iteration(id, it);
      };
    if (admission_ || spec_.control.interval_s > 0 || spec_.control.hold_when_empty) {
      in.options.hooks.on_request = [this, &h = s.hist, pool = s.pool](const RequestRecord& r) {
        h.record(r);
        if (!held_ids_.empty()) held_first_token(r);
        if (r.rejected) return;
        const double ttft_s = (r.first_token - r.request.arrival).seconds();
        if (admission_) admission_->observe_ttft(r.first_token, ttft_s);
        pools_[static_cast<std::size_t>(pool)].ttfts.push_back(ttft_s);
      };
    } else {
      in.options.hooks.on_request = [&h = s.hist](const RequestRecord& r) { h.record(r); };
    }
    in.rep.emplace(in.inbox, *in.kv, *rt.cost, p.scheduler, in.options, start, reference_);
  }
  void observe(int id, SlotState state, Time t) {
    if (spec_.hooks.on_state) spec_.hooks.on_state(id, slots_[static_cast<std::size_t>(id)].pool, state, t);
  }
  void retire(Slot& s, Time t) {  // the incarnation ends with the result so far
    s.results.push_back(s.inc->rep->finish());
    s.inc.reset();
    s.queued = false;
    move(s, SlotState::gone, t);
  }
  // The slot changes state at t: the time in the old one is the pool's replica-seconds.
  void move(Slot& s, SlotState to, Time t) {
    t = std::max(t, s.since);
    const double d = (t - s.since).seconds();
    ReplicaSeconds& a = pools_[static_cast<std::size_t>(s.pool)].replica_s;
    switch (s.state) {
      case SlotState::starting:
        a.starting_s += d;
        break;
      case SlotState::serving:
        a.serving_s += d;
        break;
      case SlotState::draining:
        a.draining_s += d;
        break;
      case SlotState::down:
        a.down_s += d;
        break;
      case SlotState::gone:
        break;
    }
    s.state = to;
    s.since = t;
    end_ = std::max(end_, t);
  }
  int slot_of(int pool, int index) const {
    for (std::size_t k = 0; k < slots_.size(); ++k)
      if (slots_[k].pool == pool && slots_[k].index == index) return static_cast<int>(k);
    throw std::invalid_argument("fleet: pool " + spec_.pools[static_cast<std::size_t>(pool)].name + " has no replica " +
                                std::to_string(index));
  }

  void apply(const LifeEvent& e) {
    switch (e.kind) {
      case Life::add: {
        const double start_s =
            e.restart_s >= 0 ? e.restart_s : spec_.pools[static_cast<std::size_t>(e.pool)].cold_start_s;
        const Time from = e.t + at_s(start_s);
        const int id = make_slot(e.pool, from, SlotState::starting);
        slots_[static_cast<std::size_t>(id)].since = e.t;
        observe(id, SlotState::starting, e.t);
        life_.push({from, seq_++, Life::serve, e.pool, id, 0});
        return;
      }
      case Life::serve: {
        Slot& s = slots_[static_cast<std::size_t>(e.slot)];
        if (s.state != SlotState::starting) return;  // drained in its cold start
        move(s, SlotState::serving, e.t);
        views_[static_cast<std::size_t>(e.slot)].accepting = true;
        observe(e.slot, SlotState::serving, e.t);
        arm(e.slot, e.t);
        if (!held_.empty()) release_t_ = std::min(release_t_, e.t);
        return;
      }
      case Life::drain:
        drain(slot_of(e.pool, e.slot), e.t);
        return;
      case Life::crash:
        crash(slot_of(e.pool, e.slot), e.t, e.restart_s);
        return;
      case Life::restart: {
        Slot& s = slots_[static_cast<std::size_t>(e.slot)];
        if (s.state != SlotState::down) return;
        move(s, SlotState::serving, e.t);
        views_[static_cast<std::size_t>(e.slot)].accepting = true;
        begin(s, e.slot, e.t);
        observe(e.slot, SlotState::serving, e.t);
        arm(e.slot, e.t);
        if (!held_.empty()) release_t_ = std::min(release_t_, e.t);
        return;
      }
    }
  }

  void drain(int id, Time t) {
    Slot& s = slots_[static_cast<std::size_t>(id)];
    if (s.state != SlotState::serving && s.state != SlotState::starting) return;
    move(s, SlotState::draining, t);
    views_[static_cast<std::size_t>(id)].accepting = false;
    observe(id, SlotState::draining, t);
    if (!s.inc->has_work()) {
      observe(id, SlotState::gone, t);
      retire(s, t);
    }
  }

  void crash(int id, Time at, double restart_s) {
    Slot& s = slots_[static_cast<std::size_t>(id)];
    if (!s.inc) return;  // already down or gone
    ++crashes_;
    ++pools_[static_cast<std::size_t>(s.pool)].crashes;
    if (s.state == SlotState::draining) restart_s = -1;  // it was leaving: it does not come back
    // Every replica starting before `at` has stepped: this one's clock is at or past it, or it
    // is idle; the crash lands at that boundary.
    const Time t = std::max(at, s.inc->rep->now());
    if (spec_.hooks.on_crash) spec_.hooks.on_crash(id, t);
    std::vector<Request> held = s.inc->rep->abort();
    for (; !s.inc->inbox.empty();) held.push_back(s.inc->inbox.pop());
    retire(s, t);
    ++s.gen;  // its pending completions no longer count for the router
    router_.forget(id);
    views_[static_cast<std::size_t>(id)] = {};
    s.state = restart_s >= 0 ? SlotState::down : SlotState::gone;
    observe(id, s.state, t);
    if (restart_s >= 0) life_.push({t + at_s(restart_s), seq_++, Life::restart, s.pool, id, 0});
    for (const Request& r : held) {
      int& n = attempts_[r.id];
      if (spec_.retry == RetryPolicy::retry && n < spec_.max_retries) {
        ++n;
        ++retried_;
        retries_.push({t, seq_++, r});
      } else {
        ++lost_;
        attempts_.erase(r.id);
        stream_->completed(r, t);
      }
    }
  }

  // ---- random crashes: the incarnation serving from t draws its crash time
  void arm(int id, Time t) {
    const RandomFailures& f = spec_.random_failures;
    if (!(f.mtbf_hours > 0)) return;
    const Slot& s = slots_[static_cast<std::size_t>(id)];
    const std::uint64_t key = mix64(f.seed) ^ ((static_cast<std::uint64_t>(id) << 32) | s.gen);
    const double after_s = -std::log(uniform01(key)) * f.mtbf_hours * 3600;
    const double restart_s =
        f.restart_s >= 0 ? f.restart_s : spec_.pools[static_cast<std::size_t>(s.pool)].cold_start_s;
    random_.push({t + at_s(after_s), seq_++, Life::crash, s.pool, id, restart_s, s.gen});
  }
  void random_crash(const LifeEvent& e) {
    const Slot& s = slots_[static_cast<std::size_t>(e.slot)];
    if (s.gen != e.gen || (s.state != SlotState::serving && s.state != SlotState::draining)) return;
    ++random_crashes_;
    crash(e.slot, e.t, e.restart_s);
  }

  // ---- scale from zero: a pool with no replica gets one; held requests go once one serves
  void activate(Time t) {
    for (std::size_t p = 0; p < spec_.pools.size(); ++p) {
      bool any = false;
      for (const Slot& s : slots_)
        any = any || (s.pool == static_cast<int>(p) &&
                      (s.state == SlotState::serving || s.state == SlotState::starting || s.state == SlotState::down));
      if (any) continue;
      const double start_s = spec_.control.start_s ? spec_.control.start_s(static_cast<int>(p), t.seconds()) : -1;
      apply({t, seq_++, Life::add, static_cast<int>(p), 0, start_s});
    }
  }
  void release(Time t) {
    std::deque<Request> held;
    held.swap(held_);
    for (const Request& r : held) route(r, t);
  }
  void held_first_token(const RequestRecord& r) {
    const auto it = held_ids_.find(r.request.id);
    if (it == held_ids_.end()) return;
    held_ids_.erase(it);
    if (!r.rejected) held_ttft_.add((r.first_token - r.request.arrival).seconds());
  }

  // ---- the control tick (the autoscaler's hook)
  void tick(Time t) {
    ++ticks_;
    FleetMetrics m;
    m.t_s = t.seconds();
    m.interval_s = spec_.control.interval_s;
    m.pools.resize(spec_.pools.size());
    std::vector<int> kv_n(spec_.pools.size(), 0);
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      Slot& s = slots_[k];
      FleetPoolMetrics& p = m.pools[static_cast<std::size_t>(s.pool)];
      if (s.state == SlotState::serving) p.busy_s += s.busy_s - s.busy_mark_s;
      s.busy_mark_s = s.busy_s;
      p.held = static_cast<std::int64_t>(held_.size());
      p.serving += s.state == SlotState::serving;
      p.starting += s.state == SlotState::starting;
      p.draining += s.state == SlotState::draining;
      p.down += s.state == SlotState::down;
      p.outstanding += router_.outstanding(static_cast<int>(k));
      if (s.state == SlotState::serving) {
        const ReplicaLoad l = s.inc->rep->load();
        p.waiting += l.waiting;
        p.running += l.running;
        p.kv_utilization += l.kv_blocks > 0 ? static_cast<double>(l.kv_used_blocks) / l.kv_blocks : 0;
        ++kv_n[static_cast<std::size_t>(s.pool)];
      }
    }
    for (std::size_t p = 0; p < m.pools.size(); ++p) {
      if (kv_n[p] > 0) m.pools[p].kv_utilization /= kv_n[p];
      m.pools[p].arrivals = pools_[p].arrivals;
      pools_[p].arrivals = 0;
      m.pools[p].ttft_p99_s = nearest_rank(pools_[p].ttfts, 0.99);
      pools_[p].ttfts.clear();
    }
    const std::vector<int> want = spec_.control.desired(m);
    timeline_.push_back({m.t_s, m.pools, want});
    if (want.empty()) return;
    if (want.size() != spec_.pools.size())
      throw std::invalid_argument("fleet: the control hook must return one count per pool");
    for (std::size_t p = 0; p < want.size(); ++p) {
      const FleetPoolMetrics& x = m.pools[p];
      int have = x.serving + x.starting + x.down;
      for (; have < want[p]; ++have) {
        // restart_s carries the start time of an add (< 0: the pool's cold start).
        const double start_s = spec_.control.start_s ? spec_.control.start_s(static_cast<int>(p), m.t_s) : -1;
        apply({t, seq_++, Life::add, static_cast<int>(p), 0, start_s});
      }
      for (int k = static_cast<int>(slots_.size()) - 1; k >= 0 && have > std::max(0, want[p]); --k) {
        const Slot& s = slots_[static_cast<std::size_t>(k)];
        if (s.pool != static_cast<int>(p) || (s.state != SlotState::serving && s.state != SlotState::starting))
          continue;
        drain(k, t);
        --have;
      }
    }
  }

  // ---- the end
  FleetRun collect(FleetRun out) {
    Time end = end_;
    for (const Slot& s : slots_)
      if (s.inc) end = std::max(end, s.inc->rep->now());
    for (Slot& s : slots_) {
      if (s.inc) {
        retire(s, end);
      } else if (s.state != SlotState::gone) {
        move(s, SlotState::gone, end);  // down at the end
      }
    }
    for (; !held_.empty(); held_.pop_front()) {  // no replica ever came (a hook that kept none)
      ++unrouted_;
      stream_->completed(held_.front(), end);
    }
    std::vector<ServingResult> all;
    ServingLatencyHistograms all_h;
    for (std::size_t p = 0; p < spec_.pools.size(); ++p) {
      std::vector<ServingResult> rs;
      ServingLatencyHistograms h;
      FleetPoolResult& pr = out.pools[p];
      for (std::size_t k = 0; k < slots_.size(); ++k) {
        const Slot& s = slots_[k];
        if (s.pool != static_cast<int>(p)) continue;
        rs.insert(rs.end(), s.results.begin(), s.results.end());
        h.merge(s.hist);
        pr.routed.push_back(router_.stats().routed[k]);
      }
      pr.replicas_made = made_[static_cast<int>(p)];
      pr.merged = merge_serving_results(rs, h);
      pr.replica_s = pools_[p].replica_s;
      pr.crashes = pools_[p].crashes;
      for (const auto& tier : pools_[p].offload_tiers) add_host_tier_stats(pr.offload, host_tier_stats(*tier));
    }
    for (const Slot& s : slots_) {
      all.insert(all.end(), s.results.begin(), s.results.end());
      all_h.merge(s.hist);
    }
    out.merged = merge_serving_results(all, all_h);
    out.merged.arrived_requests = arrived_;
    out.router = router_.stats();
    out.retried = retried_;
    out.lost = lost_;
    out.unrouted = unrouted_;
    out.crashes = crashes_;
    out.random_crashes = random_crashes_;
    out.control_ticks = ticks_;
    out.end_s = end.seconds();
    out.held = held_total_;
    out.held_ttft_s = latency_summary(held_ttft_);
    out.timeline = std::move(timeline_);
    if (admission_) {
      // Rejected at the door: judged, never met their SLO.
      const std::int64_t rejected = admission_->counters().rejected();
      const auto judged = out.merged.completed_requests + out.merged.rejected_requests;
      out.merged.rejected_requests += rejected;
      if (judged + rejected > 0)
        out.merged.slo_attainment =
            out.merged.slo_attainment * static_cast<double>(judged) / static_cast<double>(judged + rejected);
      out.admission = admission_->counters();
    }
    return out;
  }

  const FleetSpec& spec_;
  const FleetTraffic& info_;
  bool reference_;
  TrafficSource* stream_;
  Router router_;
  std::vector<PoolRuntime> pools_;
  std::deque<Slot> slots_;  // by fleet replica id; a deque keeps each slot where hooks point
  std::vector<RouterReplicaView> views_;
  std::unordered_map<int, int> made_;  // replicas made per pool
  ReadyHeap ready_;                    // replicas with work, by (clock, id)
  MinHeap<TimedId> completions_;       // answered requests the router has not counted yet
  MinHeap<LifeEvent> life_;
  MinHeap<Retry> retries_;
  std::unordered_map<std::int64_t, int> attempts_;  // requests retried so far, until answered
  std::int64_t seq_ = 0;
  Time next_refresh_ = kNever;
  Time next_tick_ = kNever;
  std::optional<Admission> admission_;
  std::deque<Time> done_;  // completion times within the admission window
  std::vector<FleetTick> timeline_;
  std::int64_t arrived_ = 0, retried_ = 0, lost_ = 0, unrouted_ = 0, crashes_ = 0, ticks_ = 0;
  // Random crashes (RandomFailures) and scale from zero (FleetControl::hold_when_empty).
  MinHeap<LifeEvent> random_;
  std::int64_t random_crashes_ = 0;
  std::deque<Request> held_;  // at the router, waiting for a replica to serve
  std::unordered_set<std::int64_t> held_ids_;
  std::int64_t held_total_ = 0;
  QuantileHistogram held_ttft_;
  Time release_t_ = kNever;  // held requests go at this time
  Time end_{0};
};

void Inbox::completed(const Request& r, Time t) { fleet_.on_completed(id_, r, t); }

}  // namespace

FleetRun run_fleet(const FleetSpec& spec, const TrafficSpec& traffic, ServingLoop loop) {
  const auto stream = make_traffic(traffic);
  FleetTraffic info;
  info.seed = traffic.seed;
  if (traffic.sessions.turns > 1) {
    info.session_group_base = traffic.prefix.shared_tokens > 0 ? traffic.prefix.groups : 0;
    info.session_turns = traffic.sessions.turns;
  }
  return run_fleet(spec, *stream, info, loop);
}

FleetRun run_fleet(const FleetSpec& spec, TrafficSource& stream, const FleetTraffic& info, ServingLoop loop) {
  return Fleet(spec, stream, info, loop).run();
}

}  // namespace ctwin
