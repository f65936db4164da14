// The fleet loop running the policies: the HPA autoscaler's replicas serving only after their cold
// start (its decisions worked by hand at each tick), and admission control's rejections counted
// into the fleet's result.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "serving_fakes.hpp"
#include "tolerance.hpp"
#include "workloads/serving_autoscaler.hpp"
#include "workloads/serving_fleet_sim.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

// `replicas` replicas of LinearCost running one sequence at a time (max_num_seqs 1), 4000 blocks.
FleetSpec one_at_a_time(int replicas) {
  FleetSpec f;
  FleetPool p;
  p.name = "linear";
  p.replicas = replicas;
  p.cost = std::make_shared<LinearCost>();
  p.gpu_blocks = 4000;
  p.scheduler.max_num_seqs = 1;
  p.scheduler.max_model_len = 100000;
  f.pools.push_back(p);
  return f;
}

FleetRun run_requests(const FleetSpec& f, std::vector<Request> rs) {
  VectorSource src(std::move(rs));
  return run_fleet(f, src, FleetTraffic{});
}

}  // namespace

TEST_CASE("fleet + HPA: added replicas serve after the cold start; desired counts by hand") {
  // 10 requests at 0 on 2 replicas (round robin: 5 each, one running, 4 waiting), each 24000
  // output tokens: about 24 s + 0.1 us x 24000^2 / 2 = 53 s, so none finishes before 45 s and the
  // queue stays at 8. Target 1 waiting per replica, tick every 15 s, cold start 20 s.
  //  t=15: ready 2, value 8 / 2 = 4 -> ceil(2 x 4) = 8; scale-up limit max(2 + 4 pods, 2 x 200%)
  //        = 6: 4 added (serving from 35 s).
  //  t=30: ready 2, total 6; the 4 starting count 0 on a scale-up: 8 / (6 x 1) = 1.33 ->
  //        ceil(6 x 1.33) = 8 (the add at 15 is outside (15, 30], so the limit is from 6: 10).
  //  t=45: ready 6, total 8: 8 / (8 x 1) = 1 within the tolerance -> 8 kept.
  std::vector<Request> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(req(0, 10, 24000));
  FleetSpec f = one_at_a_time(2);
  f.pools[0].cold_start_s = 20;
  AutoscalerSpec hpa;
  hpa.metric = AutoscaleMetric::queue_length;
  hpa.target = 1;
  hpa.min_replicas = 2;
  hpa.max_replicas = 16;
  auto scaler = std::make_shared<Autoscaler>(hpa);
  f.control.interval_s = 15;
  f.control.desired = [scaler](const FleetMetrics& m) {
    const FleetPoolMetrics& p = m.pools[0];
    AutoscalerInput in;
    in.ready = p.serving;
    in.total = p.serving + p.starting;
    in.metric = static_cast<double>(p.waiting);
    in.in_flight = p.outstanding;
    return std::vector<int>{scaler->recommend(seconds(m.t_s), in).replicas};
  };
  const FleetRun r = run_requests(f, rs);
  REQUIRE(r.timeline.size() >= 3);
  const int serving[] = {2, 2, 6}, starting[] = {0, 4, 2}, desired[] = {6, 8, 8};
  for (std::size_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    const FleetTick& t = r.timeline[k];
    CHECK(t.t_s == rel_approx(15.0 * static_cast<double>(k + 1), 1e-12));
    CHECK(t.pools[0].serving == serving[k]);
    CHECK(t.pools[0].starting == starting[k]);
    CHECK(t.pools[0].waiting == 8);
    REQUIRE(t.desired.size() == 1);
    CHECK(t.desired[0] == desired[k]);
  }
  CHECK(r.timeline.size() == static_cast<std::size_t>(r.control_ticks));
  CHECK(r.merged.completed_requests == 10);
}

TEST_CASE("fleet admission: queue-length rejections are counted, in rejected_requests and SLO attainment") {
  // 10 requests at 0 on 2 replicas, at most 3 queued: at 0 no replica has stepped, so the k-th
  // arrival sees k - 1 queued (in the inboxes): 3 accepted, 7 rejected for queue length.
  std::vector<Request> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(req(0, 100, 10));
  FleetSpec f = one_at_a_time(2);
  f.admission = AdmissionSpec{};
  f.admission->max_queued = 3;
  const FleetRun r = run_requests(f, rs);
  REQUIRE(r.admission);
  CHECK(r.admission->count(AdmissionResult::accepted) == 3);
  CHECK(r.admission->count(AdmissionResult::queue_length) == 7);
  CHECK(r.admission->count(AdmissionResult::queue_length, 0) == 7);
  CHECK(r.merged.completed_requests == 3);
  CHECK(r.merged.rejected_requests == 7);
  CHECK(r.merged.arrived_requests == 10);
  // No SLO: every completed request meets it; the rejected ones do not.
  CHECK(r.merged.slo_attainment == rel_approx(0.3, 1e-12));
  // Without admission all 10 complete and nothing is counted.
  f.admission.reset();
  const FleetRun all = run_requests(f, rs);
  CHECK(!all.admission);
  CHECK(all.merged.completed_requests == 10);
  CHECK(all.merged.rejected_requests == 0);
}

TEST_CASE("fleet control: an add's start time from the hook (a warm pool) replaces the cold start") {
  // 1 replica, cold start 20 s; the hook wants 2 from the first tick (10 s) on. With a 3 s start
  // the added replica serves at 13 s, so the tick at 20 s sees 2 serving; with the cold start it
  // would still be starting (until 30 s).
  std::vector<Request> rs;
  for (int i = 0; i < 30; ++i) rs.push_back(req(i, 100, 10));
  FleetSpec f = one_at_a_time(1);
  f.pools[0].cold_start_s = 20;
  f.control.interval_s = 10;
  f.control.desired = [](const FleetMetrics&) { return std::vector<int>{2}; };
  f.control.start_s = [](int, double) { return 3.0; };
  const FleetRun warm = run_requests(f, rs);
  REQUIRE(warm.timeline.size() >= 2);
  CHECK(warm.timeline[1].pools[0].serving == 2);
  CHECK(warm.timeline[1].pools[0].starting == 0);
  f.control.start_s = nullptr;
  const FleetRun cold = run_requests(f, rs);
  REQUIRE(cold.timeline.size() >= 2);
  CHECK(cold.timeline[1].pools[0].serving == 1);
  CHECK(cold.timeline[1].pools[0].starting == 1);
}
