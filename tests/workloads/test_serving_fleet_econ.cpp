// The fleet's economics, random failures and scale from zero, on small fleets of a fixed-cost
// iteration (every iteration 10 ms, so each time below is worked by hand): the replica-seconds
// each pool held by state and what they cost, the exponential crash process against its
// closed form (replicas x T / MTBF crashes), a request held at the router for a cold start, and
// the busy time behind the gpu_utilization metric.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "serving_fakes.hpp"
#include "tolerance.hpp"
#include "workloads/serving_energy.hpp"
#include "workloads/serving_fleet_sim.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

// Every iteration takes c_s, charged to prefill when it has prompt tokens, else to decode.
struct FixedCost final : IterationCostModel {
  double c_s = 0.01;
  IterationTime iteration(const BatchShape& s) const override {
    IterationTime t;
    (s.prefill_tokens > 0 ? t.prefill_s : t.decode_s) = c_s;
    t.total_s = c_s;
    return t;
  }
};

FleetSpec fixed_fleet(int replicas, double cold_start_s = 0) {
  FleetSpec f;
  FleetPool p;
  p.name = "fixed";
  p.replicas = replicas;
  p.cold_start_s = cold_start_s;
  p.cost = std::make_shared<FixedCost>();
  p.gpu_blocks = 4000;
  p.scheduler.max_model_len = 100000;
  f.pools.push_back(p);
  return f;
}

FleetRun run_requests(const FleetSpec& f, std::vector<Request> rs) {
  VectorSource src(std::move(rs));
  return run_fleet(f, src, FleetTraffic{});
}

constexpr double kC = 0.01;  // FixedCost's iteration

}  // namespace

TEST_CASE("fleet replica-seconds: starting, serving, draining and down, each by hand") {
  // Replica 0 serves from 0. Replica 1 is added at 1 s (cold start 2 s: starting 1..3), serves
  // 3..5 and is drained at 5 with nothing held. Replica 0 crashes at 6.5 and is down 1.5 s.
  // Requests: 100 in, 1 out (one 10 ms iteration) at 0 and 10 s; 100 in, 50 out at 4.0 s goes
  // to replica 1 (round robin; replica 0 took the first).
  FleetSpec f = fixed_fleet(1, 2.0);
  f.events.push_back({1.0, FleetEventKind::add, 0, 0, -1});
  f.events.push_back({5.0, FleetEventKind::drain, 0, 1, -1});
  f.events.push_back({6.5, FleetEventKind::crash, 0, 0, 1.5});
  const FleetRun r = run_requests(f, {req(0, 100, 1), req(4.0, 100, 50), req(10.0, 100, 1)});
  REQUIRE(r.merged.completed_requests == 3);
  CHECK(r.router.routed == std::vector<std::int64_t>{2, 1});
  // The last request ends the run at 10 s + one iteration.
  const double end = 10.0 + kC;
  CHECK(r.end_s == rel_approx(end, 1e-9));
  const ReplicaSeconds& rs = r.pools[0].replica_s;
  CHECK(rs.starting_s == rel_approx(2.0, 1e-9));
  // Replica 1's 50-token request (4.0 .. 4.5) is done before its drain at 5: no draining time.
  CHECK(rs.serving_s == rel_approx(6.5 + (end - 8.0) + 2.0, 1e-9));
  CHECK(rs.draining_s == abs_approx(0.0, 1e-12));
  CHECK(rs.down_s == rel_approx(1.5, 1e-9));
  CHECK(r.pools[0].crashes == 1);

  // Drained while busy: replica 1 holds the 50-token request (4.0 .. 4.5) when drained at 4.2.
  f.events[1].t_s = 4.2;
  const FleetRun d = run_requests(f, {req(0, 100, 1), req(4.0, 100, 50), req(10.0, 100, 1)});
  const ReplicaSeconds& ds = d.pools[0].replica_s;
  CHECK(ds.draining_s == rel_approx(4.0 + 50 * kC - 4.2, 1e-9));
  CHECK(ds.serving_s == rel_approx(6.5 + (end - 8.0) + 1.2, 1e-9));
}

TEST_CASE("fleet cost: GPU-hours from the replica-seconds a pool held, at its own price, by hand") {
  // Two GPUs per replica, 5,400 replica-seconds held: 3 GPU-hours at $2 = $6, whatever the span.
  ServingPool p;
  p.replicas = 3;  // made; the replica-seconds, not replicas x span, are paid for
  p.gpus_per_replica = 2;
  p.gpu_hour_usd = 2.0;
  p.replica_s = 5400;
  p.gpu_time.prefill_s = 100;
  p.gpu_time.decode_s = 300;
  p.power.tdp_w = 700;
  p.power.idle_w = 100;
  const ServingEconomics e = serving_economics(std::span(&p, 1), 10000, 1'000'000, 500'000);
  CHECK(e.gpu_hours == rel_approx(3.0, 1e-12));
  CHECK(e.total_usd == rel_approx(6.0, 1e-12));
  // Input pays the prefill share of the working time: 100 / 400 of $6 for a million tokens.
  CHECK(e.usd_per_million_input_tokens == rel_approx(1.5, 1e-12));
  CHECK(e.usd_per_million_output_tokens == rel_approx(4.5 / 0.5, 1e-12));
  // Energy: 2 GPUs x (100 s at 700 W + 300 s at 100 + 0.6 x 600 W + (5400 - 400) s idle at 100 W).
  const double j = 2 * (100 * 700.0 + 300 * 460.0 + 5000 * 100.0);
  CHECK(e.energy_j == rel_approx(j, 1e-12));
  CHECK(e.joules_per_token == rel_approx(j / 1.5e6, 1e-12));
  CHECK(e.average_power_w == rel_approx(j / (2 * 5400.0), 1e-12));
  // A pool that scaled to zero and made no replica at the end still pays what it held.
  p.replicas = 0;
  CHECK(serving_economics(std::span(&p, 1), 10000, 1, 1).gpu_hours == rel_approx(3.0, 1e-12));
}

TEST_CASE("fleet cost: an autoscaled fleet pays for the replicas it held, not its max_replicas") {
  // One replica at 0; the hook wants 3 from the tick at 1 s to the one at 3 s (2 added, cold
  // start 0.5 s: starting 1 .. 1.5, serving 1.5 .. 3, then drained idle), 1 after. The last
  // request at 5 s ends the run at 5.01 s.
  FleetSpec f = fixed_fleet(1, 0.5);
  f.control.interval_s = 1;
  f.control.desired = [](const FleetMetrics& m) { return std::vector<int>{m.t_s < 2.5 ? 3 : 1}; };
  const FleetRun r = run_requests(f, {req(0, 100, 1), req(5.0, 100, 1)});
  const double end = 5.0 + kC;
  CHECK(r.end_s == rel_approx(end, 1e-9));
  const ReplicaSeconds& rs = r.pools[0].replica_s;
  CHECK(rs.starting_s == rel_approx(2 * 0.5, 1e-9));
  CHECK(rs.serving_s == rel_approx(end + 2 * 1.5, 1e-9));
  CHECK(rs.billed_s() == rel_approx(end + 4.0, 1e-9));
}

TEST_CASE("random crashes: the count over a long run is replicas x T / MTBF (Poisson), deterministic") {
  // 4 replicas, MTBF 1 h, restart at once; a short request every 60 s for 400 h keeps the run
  // going. Crashes form a Poisson process of rate 4 per hour: mean 4 x T, standard deviation
  // sqrt(4 x T); the check allows 4 standard deviations.
  FleetSpec f = fixed_fleet(4);
  f.random_failures = {.mtbf_hours = 1.0, .restart_s = 0.0, .seed = 7};
  std::vector<Request> rs;
  for (int k = 0; k < 400 * 60; ++k) rs.push_back(req(60.0 * k, 10, 1));
  const FleetRun r = run_requests(f, rs);
  const double t_h = r.end_s / 3600;
  const double mean = 4 * t_h / 1.0;
  const double tol = 4 * std::sqrt(mean);
  CAPTURE(r.random_crashes);
  CHECK(std::fabs(static_cast<double>(r.random_crashes) - mean) <= tol);
  CHECK(r.crashes == r.random_crashes);
  CHECK(r.merged.completed_requests + r.lost == static_cast<std::int64_t>(rs.size()));
  // The same seed, the same crashes.
  CHECK(run_requests(f, rs).random_crashes == r.random_crashes);
}

TEST_CASE("random crashes: each keeps its replica down for the restart time, the pool's cold start by default") {
  // 2 replicas, MTBF 0.5 h, restart from the pool's cold start (40 s): down time = crashes x 40 s.
  FleetSpec f = fixed_fleet(2, 40.0);
  f.random_failures = {.mtbf_hours = 0.5, .restart_s = -1, .seed = 3};
  std::vector<Request> rs;
  for (int k = 0; k < 20 * 60; ++k) rs.push_back(req(60.0 * k, 10, 1));
  const FleetRun r = run_requests(f, rs);
  REQUIRE(r.random_crashes > 10);
  CHECK(r.pools[0].replica_s.down_s == rel_approx(40.0 * static_cast<double>(r.random_crashes), 1e-9));
  // A crash that finds requests retries them; none is lost with the default single retry here
  // (a 10 ms request rarely meets a crash).
  CHECK(r.merged.completed_requests + r.lost == static_cast<std::int64_t>(rs.size()));
}

TEST_CASE("scale from zero: the first request waits exactly the cold start plus its own service") {
  // No replica; the router holds the request at 1 s and activates one (cold start 5 s). It serves
  // at 6 s: one 10 ms prefill iteration gives the first token, TTFT = 5 + 0.01 s.
  FleetSpec f = fixed_fleet(0, 5.0);
  f.control.hold_when_empty = true;
  const FleetRun r = run_requests(f, {req(1.0, 100, 1)});
  REQUIRE(r.merged.completed_requests == 1);
  CHECK(r.held == 1);
  CHECK(r.unrouted == 0);
  CHECK(r.held_ttft_s.count == 1);
  CHECK(r.held_ttft_s.p50 == rel_approx(5.0 + kC, 0.005));  // the histogram's 0.5%
  CHECK(r.merged.ttft_s.mean == rel_approx(5.0 + kC, 1e-9));
  CHECK(r.pools[0].replica_s.starting_s == rel_approx(5.0, 1e-9));
  CHECK(r.pools[0].replicas_made == 1);

  // A second request during the cold start is held too, and one replica is started, not two.
  const FleetRun two = run_requests(f, {req(1.0, 100, 1), req(3.0, 100, 1)});
  CHECK(two.held == 2);
  CHECK(two.pools[0].replicas_made == 1);
  CHECK(two.merged.completed_requests == 2);
  // Without holding, the same requests find no replica and are unrouted.
  f.control.hold_when_empty = false;
  CHECK(run_requests(f, {req(1.0, 100, 1)}).unrouted == 1);
}

TEST_CASE("gpu_utilization: the busy seconds of the pool's serving replicas since the last tick, by hand") {
  // Two replicas, ticks every second. Round robin: 10 in / 5 out (5 iterations, 0.05 s) to
  // replica 0 and 10 in / 3 out (0.03 s) to replica 1 at 0; at 1.5 s, 10 in / 20 out (0.2 s)
  // to replica 0. Busy: 0.08 s in the first interval, 0.2 s in the second, 0 in the third.
  FleetSpec f = fixed_fleet(2);
  std::vector<double> busy;
  f.control.interval_s = 1;
  f.control.desired = [&](const FleetMetrics& m) {
    busy.push_back(m.pools[0].busy_s);
    return std::vector<int>{};
  };
  run_requests(f, {req(0, 10, 5), req(0, 10, 3), req(1.5, 10, 20), req(3.5, 10, 1)});
  REQUIRE(busy.size() >= 3);
  CHECK(busy[0] == rel_approx(8 * kC, 1e-9));
  CHECK(busy[1] == rel_approx(20 * kC, 1e-9));
  CHECK(busy[2] == abs_approx(0.0, 1e-12));
  // The metric the HPA reads is busy_s / interval_s per replica: 0.08 / 1 s over 2 replicas.
  CHECK(busy[0] / 1.0 / 2 == rel_approx(0.04, 1e-9));
}

TEST_CASE("scale from zero: held requests go after every replica that starts serving at that instant") {
  // Two empty pools, each with a 5 s cold start: the request at 1 s starts one replica in each;
  // both serve at 6 s. Least outstanding spreads the two held requests over them (one each),
  // rather than giving both to the replica whose start came first.
  FleetSpec f = fixed_fleet(0, 5.0);
  f.pools.push_back(f.pools[0]);
  f.pools[1].name = "fixed2";
  f.router.policy = RouterPolicy::least_outstanding;
  f.control.hold_when_empty = true;
  const FleetRun r = run_requests(f, {req(1.0, 100, 1), req(1.1, 100, 1)});
  CHECK(r.held == 2);
  CHECK(r.pools[0].replicas_made == 1);
  CHECK(r.pools[1].replicas_made == 1);
  CHECK(r.router.routed == std::vector<std::int64_t>{1, 1});
  CHECK(r.merged.ttft_s.mean == rel_approx((5.0 + kC + 4.9 + kC) / 2, 1e-9));
}

TEST_CASE("a draining replica that crashes does not come back") {
  // Replica 0 holds a 10 s request (100 in, 1000 out), drains at 1 s and crashes at 2 s with a
  // 1 s restart: it was leaving, so it stays gone. The retried request and those at 5 and 6 s
  // all go to replica 1 (restarted at 3 s, replica 0 would have taken one of them).
  FleetSpec f = fixed_fleet(2);
  f.events.push_back({1.0, FleetEventKind::drain, 0, 0, -1});
  f.events.push_back({2.0, FleetEventKind::crash, 0, 0, 1.0});
  const FleetRun r = run_requests(f, {req(0, 100, 1000), req(0, 100, 1), req(5.0, 100, 1), req(6.0, 100, 1)});
  CHECK(r.crashes == 1);
  CHECK(r.retried == 1);
  CHECK(r.router.routed == std::vector<std::int64_t>{1, 4});
  CHECK(r.pools[0].replica_s.down_s == abs_approx(0.0, 1e-12));
  CHECK(r.pools[0].replica_s.draining_s == rel_approx(1.0, 1e-9));
}
