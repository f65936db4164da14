// The coupled fleet: round robin against the independent fleet (bit for bit), each router's
// choice worked by hand, the stale metrics view, and crash, retry, loss, drain, add and the
// control tick on small cases whose timing follows from a linear iteration cost.
#include <doctest/doctest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "serving_fakes.hpp"
#include "serving_llama8b.hpp"
#include "sim/random.hpp"
#include "tolerance.hpp"
#include "workloads/serving_fleet_sim.hpp"
#include "workloads/serving_replicas.hpp"
#include "workloads/serving_router.hpp"

using namespace ctwin;
using namespace ctwin::test;

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

FleetSpec llama_fleet(int replicas, RouterPolicy policy) {
  FleetSpec f;
  FleetPool p;
  p.name = "h100";
  p.deployment = llama8b_h100();
  p.scheduler = scheduler();
  p.replicas = replicas;
  f.pools.push_back(p);
  f.router.policy = policy;
  return f;
}

// A pool of `replicas` replicas of LinearCost (1 ms + 10 us per query token + 0.1 us per K/V
// token read) and `blocks` KV blocks of 16 tokens.
FleetSpec linear_fleet(int replicas, RouterPolicy policy, std::int64_t blocks = 1000) {
  FleetSpec f;
  FleetPool p;
  p.name = "linear";
  p.replicas = replicas;
  p.cost = std::make_shared<LinearCost>();
  p.gpu_blocks = blocks;
  f.pools.push_back(p);
  f.router.policy = policy;
  return f;
}

FleetRun run_requests(const FleetSpec& f, std::vector<Request> rs) {
  VectorSource src(std::move(rs));
  return run_fleet(f, src, FleetTraffic{});
}

std::vector<RouterReplicaView> open_views(int n) { return std::vector<RouterReplicaView>(n, {true, ReplicaLoad{}}); }

Request grouped(std::int64_t id, std::int32_t prompt, std::int32_t shared, std::int64_t group) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = 10;
  r.shared_prefix_tokens = shared;
  r.prefix_group = group;
  return r;
}

void check_same(const ServingResult& a, const ServingResult& b) {
  CHECK(a.arrived_requests == b.arrived_requests);
  CHECK(a.completed_requests == b.completed_requests);
  CHECK(a.iterations == b.iterations);
  CHECK(a.input_tokens == b.input_tokens);
  CHECK(a.output_tokens == b.output_tokens);
  CHECK(a.prefill_tokens_computed == b.prefill_tokens_computed);
  CHECK(a.makespan_s == b.makespan_s);
  for (auto [x, y] : {std::pair{a.ttft_s, b.ttft_s}, {a.tpot_s, b.tpot_s}, {a.e2e_s, b.e2e_s}}) {
    CHECK(x.p50 == y.p50);
    CHECK(x.p90 == y.p90);
    CHECK(x.p99 == y.p99);
    CHECK(x.mean == y.mean);
    CHECK(x.count == y.count);
  }
  CHECK(a.gpu_time.decode_s == b.gpu_time.decode_s);
  CHECK(a.gpu_time.idle_s == b.gpu_time.idle_s);
  CHECK(a.kv_mean_utilization == b.kv_mean_utilization);
  CHECK(a.kv_peak_utilization == b.kv_peak_utilization);
}

}  // namespace

TEST_CASE("fleet: round robin in the coupled loop equals the independent round-robin fleet bit for bit") {
  const TrafficSpec t = poisson(40, 3);
  const ServingReplicasRun ind = run_serving_replicas(llama8b_h100(), scheduler(), t, 4, ServingLoop::fast, 1);
  const FleetRun f = run_fleet(llama_fleet(4, RouterPolicy::round_robin), t);
  REQUIRE(f.refusal.empty());
  REQUIRE(ind.merged.completed_requests > 100);
  check_same(f.merged, ind.merged);
  check_same(f.pools[0].merged, ind.merged);
  REQUIRE(f.router.routed.size() == 4);
  for (std::size_t k = 0; k < 4; ++k) CHECK(f.router.routed[k] == ind.replicas[k].arrived_requests);
}

TEST_CASE("router least_outstanding, two replicas: ties to the lower id, answered requests free a replica") {
  Router r(RouterSpec{.policy = RouterPolicy::least_outstanding}, -1, 1);
  r.add_replica();
  r.add_replica();
  const auto v = open_views(2);
  CHECK(r.route(grouped(0, 10, 0, -1), v) == 0);  // {0, 0}: the lower id
  CHECK(r.route(grouped(1, 10, 0, -1), v) == 1);  // {1, 0}
  CHECK(r.route(grouped(2, 10, 0, -1), v) == 0);  // {1, 1}
  r.completed(1);                                 // {2, 0}
  CHECK(r.route(grouped(3, 10, 0, -1), v) == 1);  // -> {2, 1}
  CHECK(r.route(grouped(4, 10, 0, -1), v) == 1);  // -> {2, 2}
  auto closed = v;
  closed[1].accepting = false;
  CHECK(r.route(grouped(5, 10, 0, -1), closed) == 0);
  CHECK(r.outstanding(0) == 3);
  CHECK(r.outstanding(1) == 2);
  closed[0].accepting = false;
  CHECK(r.route(grouped(6, 10, 0, -1), closed) == -1);
}

TEST_CASE("router power_of_two: the two replicas drawn by (seed, id), the less loaded of them wins") {
  RouterSpec s{.policy = RouterPolicy::power_of_two};
  s.seed = 5;
  Router r(s, -1, 1);
  for (int k = 0; k < 8; ++k) r.add_replica();
  const auto v = open_views(8);
  int second_won = 0;
  for (std::int64_t id = 0; id < 40; ++id) {
    // The draws, independently: i of 8, j of the other 7.
    const auto u = [&](std::uint64_t purpose) {
      return uniform01(mix64(mix64(5) ^ static_cast<std::uint64_t>(id)) ^ purpose);
    };
    const int i = static_cast<int>(u(0) * 8);
    int j = static_cast<int>(u(1) * 7);
    if (j >= i) ++j;
    const int expect = r.outstanding(j) < r.outstanding(i) ? j : i;
    second_won += expect == j;
    CAPTURE(id);
    CHECK(r.route(grouped(id, 10, 0, -1), v) == expect);
  }
  CHECK(second_won > 0);  // the load comparison mattered
}

TEST_CASE("router session_affinity: a session's turns after its first stay where its first went") {
  // Sessions are prefix groups >= 4; three turns each, so two carry the session's group.
  Router r(RouterSpec{.policy = RouterPolicy::session_affinity}, 4, 3);
  for (int k = 0; k < 3; ++k) r.add_replica();
  const auto v = open_views(3);
  CHECK(r.route(grouped(0, 100, 50, 7), v) == 0);  // new session: least outstanding
  CHECK(r.route(grouped(1, 100, 0, -1), v) == 1);  // no session: least outstanding
  CHECK(r.route(grouped(2, 100, 50, 2), v) == 2);  // a system-prompt group is no session
  CHECK(r.route(grouped(3, 100, 0, -1), v) == 0);  // {1, 1, 1}: the lower id
  CHECK(r.route(grouped(4, 100, 60, 7), v) == 0);  // session 7's last turn, despite the load {2, 1, 1}
  CHECK(r.route(grouped(5, 100, 70, 7), v) == 1);  // forgotten: {3, 1, 1}, as a new session
  auto down = v;
  down[1].accepting = false;
  CHECK(r.route(grouped(6, 100, 80, 7), down) == 2);  // its replica stopped taking requests
}

TEST_CASE("router prefix_aware: the longest match wins when the load is balanced; hit rate by hand") {
  RouterSpec s{.policy = RouterPolicy::prefix_aware};
  s.cache_threshold = 0.5;
  s.balance_abs_threshold = 1;
  s.balance_rel_threshold = 1.0001;
  Router r(s, -1, 1);
  r.add_replica();
  r.add_replica();
  const auto v = open_views(2);
  // Four requests of group 3, 800 shared tokens of 1000.
  CHECK(r.route(grouped(0, 1000, 800, 3), v) == 0);  // nothing matches: the least loaded
  CHECK(r.route(grouped(1, 1000, 800, 3), v) == 0);  // 0.8 > 0.5 on replica 0; loads {1, 0} balanced
  CHECK(r.route(grouped(2, 1000, 800, 3), v) == 1);  // loads {2, 0}: 2 - 0 > 1, imbalanced
  CHECK(r.route(grouped(3, 1000, 800, 3), v) == 0);  // loads {2, 1}; both match 800: the lower id
  CHECK(r.route(grouped(4, 1000, 400, 9), v) == 1);  // a new group: the least loaded, {3, 1}
  // Matched where it went: 0 + 800 + 0 + 800 + 0 of 5000 prompt tokens.
  CHECK(r.stats().matched_tokens == 1600);
  CHECK(r.stats().prompt_tokens == 5000);
  CHECK(r.stats().hit_rate() == rel_approx(0.32, 1e-12));
  CHECK(r.stats().cache_routed == 2);
  // A match at or under the threshold goes to the least loaded.
  CHECK(r.route(grouped(5, 2000, 800, 3), v) == 1);  // 0.4 <= 0.5; loads {3, 2}
}

TEST_CASE("router prefix_aware: a tree over its token budget forgets its least recently used group") {
  RouterSpec s{.policy = RouterPolicy::prefix_aware};
  s.max_tree_tokens = 1500;
  s.balance_abs_threshold = 100;
  Router r(s, -1, 1);
  r.add_replica();
  const auto v = open_views(1);
  r.route(grouped(0, 1000, 800, 1), v);
  r.route(grouped(1, 1000, 600, 2), v);  // 1400 tokens
  r.route(grouped(2, 1000, 800, 1), v);  // group 1 used again: matched 800
  r.route(grouped(3, 1000, 500, 3), v);  // 1900 > 1500: group 2 (least recent) goes
  r.route(grouped(4, 1000, 600, 2), v);  // matched 0
  CHECK(r.stats().matched_tokens == 800);
}

TEST_CASE("fleet prefix_aware on multi-turn sessions: a higher real prefix hit rate than round robin") {
  TrafficSpec t = poisson(30, 3);
  t.sessions.turns = 4;
  t.sessions.active = 13;  // coprime with 4: round robin scatters a session's turns
  t.input.min = 200;
  t.input.max = 400;
  t.output.min = 50;
  t.output.max = 100;
  FleetSpec rr = llama_fleet(4, RouterPolicy::round_robin);
  rr.pools[0].scheduler.prefix_caching = PrefixCaching::hash_lru;
  FleetSpec pa = rr;
  pa.router.policy = RouterPolicy::prefix_aware;
  const FleetRun a = run_fleet(rr, t), b = run_fleet(pa, t);
  REQUIRE(a.merged.completed_requests == b.merged.completed_requests);
  CHECK(b.merged.prefix_hit_rate > a.merged.prefix_hit_rate + 0.1);
  CHECK(b.router.hit_rate() > 0.3);
  // The router's view does not exceed what the caches really held (same prefix model).
  CHECK(b.router.hit_rate() >= b.merged.prefix_hit_rate - 0.05);
  // Determinism: the same scenario twice.
  const FleetRun c = run_fleet(pa, t);
  check_same(b.merged, c.merged);
  CHECK(b.router.routed == c.router.routed);
}

TEST_CASE("fleet least_kv: a stale view (metrics_interval_s) changes the choice worked by hand") {
  // r0 (1000-token prompt, 2000 tokens out) at 0 goes to replica 0; small requests at 0.5, 0.6
  // and 0.7 s. Exact view: replica 0 holds ~100 blocks, replica 1 a few, so all three go to 1.
  // Refreshed every 10 s (last at t = 0, all empty): the KV ties and the router's own count
  // decides: {1, 0} -> 1, {1, 1} -> 0, {2, 1} -> 1.
  const std::vector<Request> rs{req(0, 1000, 2000), req(0.5, 16, 2000), req(0.6, 16, 2000), req(0.7, 16, 2000)};
  FleetSpec f = linear_fleet(2, RouterPolicy::least_kv);
  const FleetRun exact = run_requests(f, rs);
  CHECK(exact.router.routed == std::vector<std::int64_t>{1, 3});
  f.router.metrics_interval_s = 10;
  const FleetRun stale = run_requests(f, rs);
  CHECK(stale.router.routed == std::vector<std::int64_t>{2, 2});
  CHECK(stale.merged.completed_requests == 4);
}

TEST_CASE("fleet crash: held requests are retried elsewhere (prompt recomputed) or lost, by policy") {
  // Round robin: r0 (100 in, 1000 out: ~1.1 s) to replica 0, r1 (100 in, 10 out) to replica 1.
  // Replica 0 crashes at 0.5 s, never to restart.
  const std::vector<Request> rs{req(0, 100, 1000), req(0, 100, 10)};
  FleetSpec f = linear_fleet(2, RouterPolicy::round_robin);
  f.events.push_back({0.5, FleetEventKind::crash, 0, 0, -1});
  const FleetRun retry = run_requests(f, rs);
  CHECK(retry.crashes == 1);
  CHECK(retry.retried == 1);
  CHECK(retry.lost == 0);
  CHECK(retry.merged.completed_requests == 2);
  CHECK(retry.router.routed == std::vector<std::int64_t>{1, 2});
  CHECK(retry.merged.prefill_tokens_computed == 300);  // r0's prompt twice, r1's once
  // r0 restarts at ~0.5 s and decodes 999 steps of >= 1 ms: done after 1.5 s from its arrival.
  CHECK(retry.merged.e2e_s.p99 > 1.5);
  CHECK(retry.merged.arrived_requests == 2);

  f.retry = RetryPolicy::lose;
  const FleetRun lose = run_requests(f, rs);
  CHECK(lose.retried == 0);
  CHECK(lose.lost == 1);
  CHECK(lose.merged.completed_requests == 1);
  CHECK(lose.merged.prefill_tokens_computed == 200);

  f.retry = RetryPolicy::retry;
  f.max_retries = 0;
  CHECK(run_requests(f, rs).lost == 1);
}

TEST_CASE("fleet crash and restart: the replica takes requests again restart_s later") {
  // r0 -> 0, r1 -> 1, r0's retry -> 1 (replica 0 down), r2 at 3 s -> 0 (restarted at ~1.5 s).
  const std::vector<Request> rs{req(0, 100, 1000), req(0, 100, 10), req(3, 100, 10)};
  FleetSpec f = linear_fleet(2, RouterPolicy::round_robin);
  f.events.push_back({0.5, FleetEventKind::crash, 0, 0, 1.0});
  CHECK(run_requests(f, rs).router.routed == std::vector<std::int64_t>{2, 2});
  f.events[0].restart_s = 5.0;  // still down at 3 s
  CHECK(run_requests(f, rs).router.routed == std::vector<std::int64_t>{1, 3});
}

TEST_CASE("fleet drain: the replica finishes what it holds and takes nothing new") {
  // r0 (long) -> 0; replica 0 drains at 0.5 s; r1, r2, r3 go to replica 1; nothing is lost.
  const std::vector<Request> rs{req(0, 100, 1000), req(1, 100, 10), req(2, 100, 10), req(3, 100, 10)};
  FleetSpec f = linear_fleet(2, RouterPolicy::round_robin);
  f.events.push_back({0.5, FleetEventKind::drain, 0, 0, -1});
  const FleetRun d = run_requests(f, rs);
  CHECK(d.router.routed == std::vector<std::int64_t>{1, 3});
  CHECK(d.merged.completed_requests == 4);
  CHECK(d.lost == 0);
  // r0 decoded to its end on replica 0: 1000 tokens once.
  CHECK(d.merged.prefill_tokens_computed == 400);
  CHECK(d.merged.e2e_s.count == 4);
}

TEST_CASE("fleet add: a replica serves only after its cold start") {
  // One replica; one added at 0 with a 1 s cold start. Round robin skips it while it starts:
  // 0.5 s -> 0, 0.6 s -> 0 (replica 1 still starting), 1.5 s -> 1, 1.6 s -> 0.
  const std::vector<Request> rs{req(0.5, 100, 10), req(0.6, 100, 10), req(1.5, 100, 10), req(1.6, 100, 10)};
  FleetSpec f = linear_fleet(1, RouterPolicy::round_robin);
  f.pools[0].cold_start_s = 1;
  f.events.push_back({0, FleetEventKind::add, 0, 0, -1});
  const FleetRun a = run_requests(f, rs);
  CHECK(a.router.routed == std::vector<std::int64_t>{3, 1});
  CHECK(a.pools[0].replicas_made == 2);
  CHECK(a.merged.completed_requests == 4);
  f.pools[0].cold_start_s = 0;  // serving at once: strict alternation
  CHECK(run_requests(f, rs).router.routed == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("fleet control tick: the hook's desired count adds and drains replicas") {
  // Ticks every second from 1 s: want 2 replicas at the first, 1 from the second on (the newest,
  // replica 1, drains). Requests at 0.5 (-> 0), 1.2, 1.4 (both up: -> 1, 0), 2.5 (-> 0).
  const std::vector<Request> rs{req(0.5, 100, 10), req(1.2, 100, 10), req(1.4, 100, 10), req(2.5, 100, 10)};
  FleetSpec f = linear_fleet(1, RouterPolicy::round_robin);
  std::vector<double> seen;
  f.control.interval_s = 1;
  f.control.desired = [&](const FleetMetrics& m) {
    seen.push_back(m.t_s);
    return std::vector<int>{m.t_s < 1.5 ? 2 : 1};
  };
  const FleetRun c = run_requests(f, rs);
  CHECK(c.router.routed == std::vector<std::int64_t>{3, 1});
  CHECK(c.merged.completed_requests == 4);
  REQUIRE(seen.size() >= 2);
  CHECK(seen[0] == rel_approx(1.0, 1e-12));
  CHECK(seen[1] == rel_approx(2.0, 1e-12));
}

TEST_CASE("fleet: an event naming a missing replica is refused") {
  FleetSpec f = linear_fleet(2, RouterPolicy::round_robin);
  f.events.push_back({0.1, FleetEventKind::crash, 0, 5, -1});
  CHECK_THROWS_AS(run_requests(f, {req(0, 10, 10), req(0.2, 10, 10)}), std::invalid_argument);
  f.events[0].pool = 3;
  CHECK_THROWS_AS(run_requests(f, {req(0, 10, 10)}), std::invalid_argument);
}
