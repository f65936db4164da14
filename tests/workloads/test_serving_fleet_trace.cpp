// The fleet trace (serving_fleet_trace.hpp): lifecycle spans and per-state counters of a small
// linear-cost fleet whose add, drain, crash and restart times are set by hand; the interval
// counters on hand-made records; the autoscaler's marks; KV transfer arrows against the closed
// form of a lone transfer; and that the hooks change nothing (the FleetRun bit for bit, the
// trace byte for byte for the same seed).
#include <doctest/doctest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "serving_fakes.hpp"
#include "serving_llama8b.hpp"
#include "tolerance.hpp"
#include "workloads/serving_fleet_sim.hpp"
#include "workloads/serving_fleet_trace.hpp"
#include "workloads/serving_memory.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

FleetSpec linear_fleet(int replicas, std::int64_t blocks = 1000) {
  FleetSpec f;
  FleetPool p;
  p.name = "linear";
  p.replicas = replicas;
  p.cost = std::make_shared<LinearCost>();
  p.gpu_blocks = blocks;
  f.pools.push_back(p);
  f.router.policy = RouterPolicy::round_robin;
  return f;
}

std::int64_t ps(double s) { return seconds(s).ps; }

std::uint32_t lane_of(const Trace& t, const std::string& process, const std::string& thread) {
  for (std::uint32_t l = 0; l < t.lanes.size(); ++l)
    if (t.str(t.lanes[l].process) == process && t.str(t.lanes[l].thread) == thread) return l;
  FAIL("no lane " << process << " / " << thread);
  return kNoIndex;
}

std::vector<TraceEvent> events_on(const Trace& t, std::uint32_t lane) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : t.events)
    if (e.lane == lane) out.push_back(e);
  return out;
}

const TraceCounterTrack& counter_of(const Trace& t, const std::string& process, const std::string& name) {
  for (const TraceCounterTrack& c : t.counters)
    if (t.str(c.process) == process && t.str(c.name) == name) return c;
  FAIL("no counter " << process << " / " << name);
  return t.counters.front();
}

// The counter's value at t: its last sample at or before t (0 before the first).
double value_at(const TraceCounterTrack& c, std::int64_t t_ps) {
  double v = 0;
  for (const auto& [at, x] : c.samples)
    if (at <= t_ps) v = x;
  return v;
}

struct Span {
  std::string kind;
  std::int64_t start_ps, end_ps;
};
std::vector<Span> spans_on(const Trace& t, std::uint32_t lane) {
  std::vector<Span> out;
  for (const TraceEvent& e : events_on(t, lane)) out.push_back({t.str(e.kind), e.start_ps, e.start_ps + e.dur_ps});
  return out;
}

void check_span(const Span& s, const std::string& kind, std::int64_t start_ps, std::int64_t end_ps) {
  CAPTURE(kind);
  CHECK(s.kind == kind);
  CHECK(s.start_ps == start_ps);
  CHECK(s.end_ps == end_ps);
}

// One pool of one replica (id 0) and a 1 s cold start. r0 (100 in, 1000 out: > 1 s of 1 ms
// steps) at 0 goes to replica 0; replica 1 is added at 0.5 (serves from 1.5); replica 0 drains
// at 0.8 (finishes r0, then is gone); replica 1 crashes at 3 (idle: the crash lands at 3),
// restarts 1 s later, and drains at 6 (idle: gone at once, the run's last event).
FleetSpec lifecycle_fleet() {
  FleetSpec f = linear_fleet(1);
  f.pools[0].cold_start_s = 1;
  f.events.push_back({0.5, FleetEventKind::add, 0, 0, -1});
  f.events.push_back({0.8, FleetEventKind::drain, 0, 0, -1});
  f.events.push_back({3.0, FleetEventKind::crash, 0, 1, 1.0});
  f.events.push_back({6.0, FleetEventKind::drain, 0, 1, -1});
  return f;
}

Trace lifecycle_trace(FleetRun* out = nullptr) {
  FleetSpec f = lifecycle_fleet();
  FleetTraceCollector c({"linear"});
  f.hooks = c.fleet_hooks();
  VectorSource src({req(0, 100, 1000)});
  FleetRun run = run_fleet(f, src, FleetTraffic{});
  if (out) *out = run;
  return c.build(run);
}

}  // namespace

TEST_CASE("fleet trace: lifecycle spans start and end where add, drain, crash and restart put them") {
  const Trace t = lifecycle_trace();
  // Replica 0 serves from 0, drains at 0.8 until its last iteration (r0's last token) ends.
  const std::vector<TraceEvent> iters = events_on(t, lane_of(t, "linear", "#0 iterations"));
  REQUIRE(iters.size() == 1000);  // one prefill, 999 decode steps
  const std::int64_t done_ps = iters.back().start_ps + iters.back().dur_ps;
  CHECK(done_ps > ps(1.0));  // 1000 iterations of at least 1 ms
  CHECK(t.str(iters.front().kind) == "prefill");
  CHECK(t.str(iters.back().kind) == "decode");
  const std::vector<Span> r0 = spans_on(t, lane_of(t, "linear", "#0"));
  REQUIRE(r0.size() == 2);
  check_span(r0[0], "serving", 0, ps(0.8));
  check_span(r0[1], "draining", ps(0.8), done_ps);
  // Replica 1: starting [0.5, 1.5], serving to the crash at 3, down to 4, serving to its drain at 6.
  const std::vector<Span> r1 = spans_on(t, lane_of(t, "linear", "#1"));
  REQUIRE(r1.size() == 5);
  check_span(r1[0], "starting", ps(0.5), ps(1.5));
  check_span(r1[1], "serving", ps(1.5), ps(3.0));
  check_span(r1[2], "crash", ps(3.0), ps(3.0));
  check_span(r1[3], "down", ps(3.0), ps(4.0));
  check_span(r1[4], "serving", ps(4.0), ps(6.0));
  // Replica 1 never had a request: its iteration lane is empty.
  CHECK(events_on(t, lane_of(t, "linear", "#1 iterations")).empty());
}

TEST_CASE("fleet trace: replicas per state step at each add, drain, crash and restart") {
  const Trace t = lifecycle_trace();
  const auto& serving = counter_of(t, "linear", "serving");
  const auto& starting = counter_of(t, "linear", "starting");
  const auto& draining = counter_of(t, "linear", "draining");
  const auto& down = counter_of(t, "linear", "down");
  const std::int64_t done_ps = [&] {
    const auto it = events_on(t, lane_of(t, "linear", "#0 iterations"));
    return it.back().start_ps + it.back().dur_ps;
  }();
  // (time, serving, starting, draining, down), worked from the events above.
  struct Row {
    std::int64_t t_ps;
    double serving, starting, draining, down;
  };
  const std::vector<Row> rows{{0, 1, 0, 0, 0},       {ps(0.5), 1, 1, 0, 0},     {ps(0.8) - 1, 1, 1, 0, 0},
                              {ps(0.8), 0, 1, 1, 0}, {done_ps - 1, 0, 1, 1, 0}, {done_ps, 0, 1, 0, 0},
                              {ps(1.5), 1, 0, 0, 0}, {ps(3.0), 0, 0, 0, 1},     {ps(4.0), 1, 0, 0, 0},
                              {ps(6.0), 0, 0, 0, 0}};
  for (const Row& r : rows) {
    const std::int64_t at = r.t_ps;
    CAPTURE(at);
    CHECK(value_at(serving, at) == r.serving);
    CHECK(value_at(starting, at) == r.starting);
    CHECK(value_at(draining, at) == r.draining);
    CHECK(value_at(down, at) == r.down);
  }
  // One request routed in [0, 1): 1 per second there, none after.
  const auto& rate = counter_of(t, "linear", "arrivals_per_s");
  CHECK(value_at(rate, 0) == 1.0);
  CHECK(value_at(rate, ps(1.0)) == 0.0);
}

TEST_CASE("fleet trace: interval counters sum waiting and average KV use over live replicas, by hand") {
  // Pool a: replicas 0 and 1 serving from 0 (400 blocks each); replica 1 crashes at 1.2. Pool b:
  // replica 2 starting at 0.2, serving from 1.5 (100 blocks). Records out of time order across
  // replicas, in order within each.
  FleetTraceCollector c({"a", "b"});
  c.state(0, 0, FleetReplicaState::serving, Time{0});
  c.state(1, 0, FleetReplicaState::serving, Time{0});
  c.state(2, 1, FleetReplicaState::starting, seconds(0.2));
  auto it = [](double start_s, double end_s, std::int64_t waiting, std::int64_t kv) {
    IterationRecord r;
    r.start = seconds(start_s);
    r.end = seconds(end_s);
    r.shape.decode_seqs = 1;
    r.shape.decode_tokens = 1;
    r.waiting = waiting;
    r.kv_used_blocks = kv;
    return r;
  };
  c.iteration(0, it(0.1, 0.2, 3, 100));
  c.iteration(0, it(0.9, 1.1, 5, 200));
  c.iteration(1, it(0.5, 0.6, 1, 50));
  c.state(1, 0, FleetReplicaState::down, seconds(1.2));
  c.iteration(0, it(1.5, 1.6, 0, 300));
  c.state(2, 1, FleetReplicaState::serving, seconds(1.5));
  c.iteration(2, it(2.2, 2.5, 4, 10));
  for (const auto& [id, at] : std::vector<std::pair<int, double>>{{0, 0.1}, {1, 0.3}, {0, 0.95}, {0, 1.5}, {2, 2.1}})
    c.routed(id, seconds(at));
  c.routed(-1, seconds(0.4));  // unrouted: no pool's
  const Trace t = c.build({400, 100}, {}, {});
  // Each interval [b, b + 1) s shows the last report of each live replica before its end.
  // a: [0,1): waiting 5 + 1, KV (200 + 50) / (2 x 400), 3 arrivals; [1,2): replica 1 down:
  // waiting 0, KV 300 / 400, 1 arrival; [2,3): the same, no arrival.
  const auto& qa = counter_of(t, "a", "queue_length");
  const auto& ka = counter_of(t, "a", "kv_utilization");
  const auto& ra = counter_of(t, "a", "arrivals_per_s");
  CHECK(value_at(qa, 0) == 6.0);
  CHECK(value_at(ka, 0) == rel_approx(250.0 / 800, 1e-12));
  CHECK(value_at(ra, 0) == 3.0);
  CHECK(value_at(qa, ps(1)) == 0.0);
  CHECK(value_at(ka, ps(1)) == rel_approx(300.0 / 400, 1e-12));
  CHECK(value_at(ra, ps(1)) == 1.0);
  CHECK(value_at(ka, ps(2)) == rel_approx(300.0 / 400, 1e-12));
  CHECK(value_at(ra, ps(2)) == 0.0);
  // b: starting in [0,1) (not counted), serving idle in [1,2), waiting 4 and 10 / 100 in [2,3).
  const auto& qb = counter_of(t, "b", "queue_length");
  const auto& kb = counter_of(t, "b", "kv_utilization");
  const auto& rb = counter_of(t, "b", "arrivals_per_s");
  CHECK(value_at(qb, 0) == 0.0);
  CHECK(value_at(kb, ps(1)) == 0.0);
  CHECK(value_at(qb, ps(2)) == 4.0);
  CHECK(value_at(kb, ps(2)) == rel_approx(0.1, 1e-12));
  CHECK(value_at(rb, ps(2)) == 1.0);
  CHECK(value_at(rb, ps(1)) == 0.0);
  // Lanes: each pool numbers its own replicas; fleet id 2 is pool b's replica 0.
  CHECK(events_on(t, lane_of(t, "b", "#0 iterations")).size() == 1);
  const std::vector<Span> r2 = spans_on(t, lane_of(t, "b", "#0"));
  REQUIRE(r2.size() == 2);
  check_span(r2[0], "starting", ps(0.2), ps(1.5));
  check_span(r2[1], "serving", ps(1.5), ps(2.5));  // open to the last time recorded
}

TEST_CASE("fleet trace: the autoscaler's decisions are marks and a desired counter at its ticks") {
  // Ticks every second from 1 s: want 2 replicas at the first tick, 1 from the second on (the
  // newest, replica 1, drains; idle, it is gone at once). Requests at 0.5, 1.2, 1.4 and 2.5 s.
  FleetSpec f = linear_fleet(1);
  f.control.interval_s = 1;
  f.control.desired = [](const FleetMetrics& m) { return std::vector<int>{m.t_s < 1.5 ? 2 : 1}; };
  FleetTraceCollector c({"linear"});
  f.hooks = c.fleet_hooks();
  VectorSource src({req(0.5, 100, 10), req(1.2, 100, 10), req(1.4, 100, 10), req(2.5, 100, 10)});
  const FleetRun run = run_fleet(f, src, FleetTraffic{});
  const Trace t = c.build(run);
  const std::vector<TraceEvent> marks = events_on(t, lane_of(t, "fleet", "autoscaler"));
  REQUIRE(marks.size() == 2);
  CHECK(marks[0].start_ps == ps(1.0));
  CHECK(t.str(marks[0].kind) == "scale_up");
  CHECK(t.str(marks[0].name) == "linear: 1 -> 2");
  CHECK(marks[1].start_ps == ps(2.0));
  CHECK(t.str(marks[1].kind) == "scale_down");
  CHECK(t.str(marks[1].name) == "linear: 2 -> 1");
  const auto& desired = counter_of(t, "linear", "desired");
  CHECK(value_at(desired, ps(1.0)) == 2.0);
  CHECK(value_at(desired, ps(2.0)) == 1.0);
  // The added replica (no cold start) serves from the first tick to the second.
  const std::vector<Span> r1 = spans_on(t, lane_of(t, "linear", "#1"));
  REQUIRE(r1.size() == 1);
  check_span(r1[0], "serving", ps(1.0), ps(2.0));
}

namespace {

TrafficSpec poisson(double rate_per_s, double duration_s) {
  TrafficSpec t;
  t.seed = 11;
  t.arrival.rate_per_s = rate_per_s;
  t.duration_s = duration_s;
  t.input.dist = LengthDist::uniform;
  t.input.min = 10;
  t.input.max = 2000;
  t.output.dist = LengthDist::uniform;
  t.output.min = 1;
  t.output.max = 200;
  return t;
}

// Three replicas under Poisson traffic with every lifecycle event and a control tick that
// follows the queue: the busiest case the hooks see.
FleetSpec busy_fleet() {
  FleetSpec f = linear_fleet(3, 400);
  f.pools[0].cold_start_s = 0.5;
  f.router.policy = RouterPolicy::least_outstanding;
  f.events.push_back({1.0, FleetEventKind::add, 0, 0, -1});
  f.events.push_back({2.0, FleetEventKind::crash, 0, 1, 0.7});
  f.events.push_back({3.0, FleetEventKind::drain, 0, 2, -1});
  f.control.interval_s = 0.5;
  f.control.desired = [](const FleetMetrics& m) {
    const auto& p = m.pools[0];
    return std::vector<int>{p.waiting > 4 ? p.serving + p.starting + p.down + 1 : std::max(3, p.serving - 1)};
  };
  return f;
}

void check_same(const FleetRun& a, const FleetRun& b) {
  CHECK(a.merged.completed_requests == b.merged.completed_requests);
  CHECK(a.merged.makespan_s == b.merged.makespan_s);
  CHECK(a.merged.ttft_s.mean == b.merged.ttft_s.mean);
  CHECK(a.merged.ttft_s.p99 == b.merged.ttft_s.p99);
  CHECK(a.merged.tpot_s.mean == b.merged.tpot_s.mean);
  CHECK(a.merged.e2e_s.mean == b.merged.e2e_s.mean);
  CHECK(a.merged.iterations == b.merged.iterations);
  CHECK(a.merged.gpu_time.idle_s == b.merged.gpu_time.idle_s);
  CHECK(a.router.routed == b.router.routed);
  CHECK(a.retried == b.retried);
  CHECK(a.lost == b.lost);
  CHECK(a.crashes == b.crashes);
  CHECK(a.control_ticks == b.control_ticks);
  REQUIRE(a.timeline.size() == b.timeline.size());
  for (std::size_t i = 0; i < a.timeline.size(); ++i) CHECK(a.timeline[i].desired == b.timeline[i].desired);
}

std::string chrome(const Trace& t) {
  std::ostringstream o;
  write_chrome_trace(t, o);
  return o.str();
}
std::string binary(const Trace& t) {
  std::ostringstream o;
  write_trace_binary(t, o);
  return o.str();
}

}  // namespace

TEST_CASE("fleet trace: a run with the hooks gives the FleetRun of a run without, bit for bit") {
  const FleetSpec plain = busy_fleet();
  const FleetRun a = run_fleet(plain, poisson(40, 8));
  FleetSpec traced = busy_fleet();
  FleetTraceCollector c({"linear"});
  traced.hooks = c.fleet_hooks();
  const FleetRun b = run_fleet(traced, poisson(40, 8));
  REQUIRE(a.merged.completed_requests > 200);
  REQUIRE(a.crashes == 1);
  REQUIRE(a.pools[0].replicas_made > 4);  // the tick added some
  check_same(a, b);
  // Every iteration the fleet ran is on an iteration lane (under 16 replicas: all traced).
  const Trace t = c.build(b);
  std::int64_t iterations = 0;
  for (const TraceEvent& e : t.events) {
    const std::string k = t.str(e.kind);
    iterations += k == "prefill" || k == "decode" || k == "mixed";
  }
  CHECK(iterations == b.merged.iterations);
}

TEST_CASE("fleet trace: the same seed gives a byte-identical trace, Chrome JSON and binary") {
  auto once = [] {
    FleetSpec f = busy_fleet();
    FleetTraceCollector c({"linear"});
    f.hooks = c.fleet_hooks();
    return c.build(run_fleet(f, poisson(40, 8)));
  };
  const Trace a = once(), b = once();
  CHECK(!a.events.empty());
  CHECK(chrome(a) == chrome(b));
  CHECK(binary(a) == binary(b));
  // And it reads back as written.
  std::istringstream in(binary(a));
  const Trace back = read_trace_binary(in, "fleet.ctt");
  CHECK(back.events.size() == a.events.size());
  CHECK(back.counters.size() == a.counters.size());
}

TEST_CASE("fleet trace: iteration lanes only for the first iteration_replicas replicas") {
  FleetSpec f = busy_fleet();
  FleetTraceOptions o;
  o.iteration_replicas = 2;
  FleetTraceCollector c({"linear"}, o);
  f.hooks = c.fleet_hooks();
  const FleetRun run = run_fleet(f, poisson(40, 8));
  const Trace t = c.build(run);
  int iteration_lanes = 0, replica_lanes = 0;
  for (const TraceLane& l : t.lanes) {
    const std::string th = t.str(l.thread);
    iteration_lanes += th.ends_with(" iterations");
    replica_lanes += th.starts_with("#") && !th.ends_with(" iterations");
  }
  CHECK(iteration_lanes == 2);
  CHECK(replica_lanes == run.pools[0].replicas_made);  // a lifecycle lane each
}

TEST_CASE("disaggregated trace: a KV transfer is an arrow from its prefill replica's lane to its decode replica's") {
  // Two 2000-token prompts at 0 on two prefill replicas (round robin: request k on replica k),
  // each KV alone on its replica's 1 GB/s link to decode replica k (request id mod 2): it leaves
  // at the prefill's first token (the end of that replica's one prefill iteration) and lands
  // b / bw + L later, b = 2000 x 131072 bytes (docs: serving_disagg.hpp).
  const ServingDeployment d = llama8b_h100();
  const double bw = 1e9, lat = 50e-6, b = 2000 * kv_bytes_per_token(d);
  DisaggregationSpec spec{.prefill = d,
                          .decode = d,
                          .prefill_replicas = 2,
                          .decode_replicas = 2,
                          .link_bytes_per_s = bw,
                          .link_latency_s = lat};
  TrafficSpec traffic;
  traffic.seed = 3;
  traffic.arrival.process = ArrivalProcess::offline;
  traffic.requests = 2;
  traffic.input.dist = LengthDist::fixed;
  traffic.input.value = 2000;
  traffic.output.dist = LengthDist::fixed;
  traffic.output.value = 3;
  FleetTraceCollector c({"prefill", "decode"});
  const DisaggregatedRun plain = run_disaggregated(spec, scheduler(), scheduler(), traffic);
  const DisaggregatedRun run =
      run_disaggregated(spec, scheduler(), scheduler(), traffic, ServingLoop::fast, c.disagg_hooks(2, 2));
  CHECK(run.merged.e2e_s.mean == plain.merged.e2e_s.mean);
  CHECK(run.transfer_s.mean == plain.transfer_s.mean);
  const Trace t = c.build(run);
  REQUIRE(t.arrows.size() == 2);
  for (int k = 0; k < 2; ++k) {
    CAPTURE(k);
    const std::string name = std::string("#").append(std::to_string(k));
    const std::uint32_t from = lane_of(t, "prefill", name), to = lane_of(t, "decode", name);
    const TraceArrow* a = nullptr;
    for (const TraceArrow& x : t.arrows)
      if (x.from_lane == from) a = &x;
    REQUIRE(a != nullptr);
    CHECK(a->to_lane == to);
    const std::vector<TraceEvent> pre = events_on(t, lane_of(t, "prefill", name + " iterations"));
    REQUIRE(pre.size() == 1);
    CHECK(a->from_ps == pre[0].start_ps + pre[0].dur_ps);
    // A picosecond for the flow engine's clock.
    CHECK(static_cast<double>(a->to_ps - a->from_ps) * 1e-12 == abs_approx(b / bw + lat, 2e-12));
    // The decode replica takes it when it lands: its first iteration starts there.
    const std::vector<TraceEvent> dec = events_on(t, lane_of(t, "decode", name + " iterations"));
    REQUIRE(dec.size() == 2);  // output 3: two decode steps after the prefill's first token
    CHECK(dec[0].start_ps == a->to_ps);
  }
  // Both transfers overlap: two link lanes, a kv_transfer span each, matching the arrows.
  int transfer_spans = 0;
  for (const TraceEvent& e : t.events)
    if (t.str(e.kind) == "kv_transfer") {
      ++transfer_spans;
      CHECK(e.start_ps == t.arrows[0].from_ps);
      CHECK(e.start_ps + e.dur_ps == t.arrows[0].to_ps);
    }
  CHECK(transfer_spans == 2);
  CHECK(lane_of(t, "kv transfers", "link 1") != kNoIndex);
  // Prefill arrivals: two requests at 0 on the prefill pool; the decode pool's when KV landed.
  CHECK(value_at(counter_of(t, "prefill", "arrivals_per_s"), 0) == 2.0);
  CHECK(value_at(counter_of(t, "decode", "arrivals_per_s"), 0) == 2.0);
}
