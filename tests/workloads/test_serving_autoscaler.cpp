// The autoscaler against Kubernetes' HPA documentation (kubernetes.io, "Horizontal Pod
// Autoscaling": algorithm details, stabilization window, scaling policies), worked by hand:
// desiredReplicas = ceil(currentReplicas x currentMetricValue / desiredMetricValue), a 0.1
// tolerance, missing (starting) pods at the target on a scale-down and at 0 on a scale-up, the
// highest recommendation of the scale-down window, Pods/Percent limits per period; scale to zero
// as KEDA does it; cold starts from bytes and bandwidth; the warm pool.
#include <doctest/doctest.h>

#include "serving_llama8b.hpp"
#include "tolerance.hpp"
#include "workloads/serving_autoscaler.hpp"
#include "workloads/serving_cold_start.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

AutoscalerSpec queue_spec(int min_replicas, int max_replicas, double target = 100) {
  AutoscalerSpec s;
  s.metric = AutoscaleMetric::queue_length;
  s.target = target;
  s.min_replicas = min_replicas;
  s.max_replicas = max_replicas;
  return s;
}

// Every replica ready and reporting `per_replica` on average.
AutoscalerInput all_ready(int replicas, double per_replica) {
  return {.ready = replicas, .total = replicas, .metric = per_replica * replicas, .in_flight = 0};
}

Time at_s(int s) { return seconds(s); }

}  // namespace

TEST_CASE("HPA proposal: 3 replicas at 200 per replica against a target of 100 ask for 6") {
  const AutoscalerSpec s = queue_spec(1, 100);
  // ratio 200/100 = 2, ceil(3 x 2) = 6 (the docs' 200m vs 100m example).
  CHECK(metric_proposal(s, all_ready(3, 200)) == 6);
  // ratio 0.5 on 4 replicas: ceil(4 x 0.5) = 2.
  CHECK(metric_proposal(s, all_ready(4, 50)) == 2);
  // ratio 1.12 on 3: ceil(3.36) = 4.
  CHECK(metric_proposal(s, all_ready(3, 112)) == 4);
}

TEST_CASE("HPA proposal: a ratio within the 0.1 tolerance keeps the current count") {
  const AutoscalerSpec s = queue_spec(1, 100);
  // 1.08 on 3 replicas would be ceil(3.24) = 4 without the tolerance; 0.92 on 4 would be
  // ceil(3.68) = 4 either way, 0.92 on 10 would be ceil(9.2) = 10: use 0.91 on 10 -> ceil(9.1).
  CHECK(metric_proposal(s, all_ready(3, 108)) == 3);
  CHECK(metric_proposal(s, all_ready(10, 91)) == 10);
  // Just outside it: 0.89 on 10 -> ceil(8.9) = 9.
  CHECK(metric_proposal(s, all_ready(10, 89)) == 9);
  AutoscalerSpec tight = s;
  tight.tolerance = 0;
  CHECK(metric_proposal(tight, all_ready(3, 108)) == 4);
}

TEST_CASE("HPA proposal: starting replicas count at the target on a scale-down and at 0 on a scale-up") {
  const AutoscalerSpec s = queue_spec(1, 100);
  // Scale-down: 2 ready at 50 (sum 100), 2 starting. Ignoring them: ceil(2 x 0.5) = 1. HPA fills
  // the starting ones at the target: (100 + 2 x 100) / 4 / 100 = 0.75 -> ceil(0.75 x 4) = 3.
  CHECK(metric_proposal(s, {.ready = 2, .total = 4, .metric = 100.0}) == 3);
  // Scale-up: 2 ready at 150 (ratio 1.5), 2 starting. Ignoring them: ceil(2 x 1.5) = 3, a
  // scale-down from 4. Filled at 0: 300 / 4 / 100 = 0.75 < 1 reverses the direction: keep 4.
  CHECK(metric_proposal(s, {.ready = 2, .total = 4, .metric = 300.0}) == 4);
  // A scale-up that survives: 2 ready at 500 (sum 1000), 2 starting at 0: 1000 / 4 / 100 = 2.5
  // -> ceil(2.5 x 4) = 10.
  CHECK(metric_proposal(s, {.ready = 2, .total = 4, .metric = 1000.0}) == 10);
  // 2 ready at 114 (sum 228), 1 starting at 0: 228 / 300 = 0.76, the direction reversed: keep 3.
  CHECK(metric_proposal(s, {.ready = 2, .total = 3, .metric = 228.0}) == 3);
  // No ready replica: no metric, no proposal.
  CHECK(!metric_proposal(s, {.ready = 0, .total = 2, .metric = 0.0}));
  CHECK(!metric_proposal(s, {.ready = 2, .total = 2, .metric = std::nullopt}));
}

TEST_CASE("HPA proposal: ttft_p99_s is one fleet value scaled over the ready replicas") {
  AutoscalerSpec s = queue_spec(1, 100, 2.0);
  s.metric = AutoscaleMetric::ttft_p99_s;
  // p99 3 s against 2 s: ratio 1.5 x 4 ready = 6 (not 1.5 x 5 total = 8).
  CHECK(metric_proposal(s, {.ready = 4, .total = 5, .metric = 3.0}) == 6);
  // 2.1 s: within the tolerance, the current 5.
  CHECK(metric_proposal(s, {.ready = 4, .total = 5, .metric = 2.1}) == 5);
  // 1 s on 4 ready, 4 total: ratio 0.5 -> 2.
  CHECK(metric_proposal(s, {.ready = 4, .total = 4, .metric = 1.0}) == 2);
}

TEST_CASE("HPA sync: 3 replicas at twice the target scale to 6 at once (default scale-up 100% or 4 pods per 15 s)") {
  Autoscaler a(queue_spec(1, 100));
  const AutoscaleStep st = a.recommend(at_s(0), all_ready(3, 200));
  CHECK(st.proposal == 6);
  CHECK(st.stabilized == 6);
  CHECK(st.replicas == 6);
  CHECK(st.reason == AutoscaleReason::desired);
}

TEST_CASE("HPA sync: scale-down waits for the highest recommendation of the last 300 s") {
  Autoscaler a(queue_spec(1, 100));
  // t = 0: at target on 4 replicas -> 4 (recorded). Then every 15 s the metric asks for 2, except
  // at t = 30 where it asks for 3. The window (t - 300, t] keeps 4 until t = 300, 3 until t = 330.
  CHECK(a.recommend(at_s(0), all_ready(4, 100)).replicas == 4);
  int replicas = 4;
  for (int t = 15; t <= 345; t += 15) {
    const double per_replica = t == 30 ? 75.0 : 50.0;  // x 4 / 100: 3 or 2 replicas
    const int expected = t < 300 ? 4 : t < 330 ? 3 : 2;
    const AutoscaleStep st = a.recommend(at_s(t), all_ready(replicas, per_replica * 4 / replicas));
    CAPTURE(t);
    CHECK(st.replicas == expected);
    replicas = st.replicas;
  }
}

TEST_CASE("HPA sync: scale-up stabilization keeps the lowest recommendation of its window") {
  AutoscalerSpec s = queue_spec(1, 100);
  s.scale_up.stabilization_window_s = 60;
  Autoscaler a(s);
  // t = 0 asks for 2 (ratio 1 on 2 replicas), then 8 at t = 15, 30, 45, 60: the window (t - 60, t]
  // holds the 2 of t = 0 until t = 60, where the lowest is 8; the default policies allow
  // max(2 x 2 = 4, 2 + 4 = 6) = 6.
  CHECK(a.recommend(at_s(0), all_ready(2, 100)).replicas == 2);
  for (int t = 15; t <= 45; t += 15) CHECK(a.recommend(at_s(t), all_ready(2, 400)).replicas == 2);
  const AutoscaleStep st = a.recommend(at_s(60), all_ready(2, 400));
  CHECK(st.stabilized == 8);
  CHECK(st.replicas == 6);
  CHECK(st.reason == AutoscaleReason::rate_limited);
}

TEST_CASE("HPA rate policies: 1 to 10 goes 1, 5, 10 with Max (100% or 4 pods per 15 s) and 1, 2, 4, 8, 10 with Min") {
  // The metric asks for 10 at every sync: 1 replica at 1000 vs 100, then n replicas at 1000/n.
  const auto run = [](SelectPolicy select) {
    AutoscalerSpec s = queue_spec(1, 10);
    s.scale_up.select = select;
    Autoscaler a(s);
    std::vector<int> seen{1};
    for (int t = 0; seen.back() < 10 && t <= 150; t += 15)
      seen.push_back(a.recommend(at_s(t), all_ready(seen.back(), 1000.0 / seen.back())).replicas);
    return seen;
  };
  // Max: max(ceil(1 x 2) = 2, 1 + 4 = 5) = 5; then max(10, 9) = 10.
  CHECK(run(SelectPolicy::max) == std::vector<int>{1, 5, 10});
  // Min: min(2, 5) = 2; min(4, 6) = 4; min(8, 8) = 8; min(16, 12) = 12, capped at max 10.
  CHECK(run(SelectPolicy::min) == std::vector<int>{1, 2, 4, 8, 10});
  // Disabled: never scales up.
  AutoscalerSpec off = queue_spec(1, 10);
  off.scale_up.select = SelectPolicy::disabled;
  Autoscaler a(off);
  CHECK(a.recommend(at_s(0), all_ready(1, 1000)).replicas == 1);
}

TEST_CASE("HPA rate policies: changes made within a policy's period count against it") {
  Autoscaler a(queue_spec(1, 10));
  CHECK(a.recommend(at_s(0), all_ready(1, 1000)).replicas == 5);
  // 5 s later the period (now - 15 s, now] still holds the +4: it started at 1, so at most 5.
  const AutoscaleStep st = a.recommend(at_s(5), all_ready(5, 200));
  CHECK(st.replicas == 5);
  CHECK(st.reason == AutoscaleReason::rate_limited);
  // At t = 15 the +4 of t = 0 is no longer inside (0, 15]: 5 -> 10.
  CHECK(a.recommend(at_s(15), all_ready(5, 200)).replicas == 10);
}

TEST_CASE(
    "HPA rate policies: Percent is taken of the period-start count, rounded up for a scale-up and down for a "
    "scale-down") {
  AutoscalerSpec s = queue_spec(1, 100);
  s.scale_up.policies = {{ScalingPolicyType::percent, 10, 60}};
  s.scale_down = {.stabilization_window_s = 0, .policies = {{ScalingPolicyType::percent, 30, 60}}};
  Autoscaler a(s);
  // 10 replicas asking for 20: 10 x 1.1 = 11 exactly.
  CHECK(a.recommend(at_s(0), all_ready(10, 200)).replicas == 11);
  Autoscaler b(s);
  // 7 asking for 14: ceil(7 x 1.1) = ceil(7.7) = 8.
  CHECK(b.recommend(at_s(0), all_ready(7, 200)).replicas == 8);
  Autoscaler c(s);
  // 7 asking for 1: floor(7 x 0.7) = floor(4.9) = 4.
  CHECK(c.recommend(at_s(0), all_ready(7, 100.0 / 7)).replicas == 4);
}

TEST_CASE("HPA rate policies: Pods 1 per 60 s scale-down steps one replica a minute") {
  AutoscalerSpec s = queue_spec(1, 100);
  s.scale_down = {.stabilization_window_s = 0, .policies = {{ScalingPolicyType::pods, 1, 60}}};
  Autoscaler a(s);
  CHECK(a.recommend(at_s(0), all_ready(5, 10)).replicas == 4);
  CHECK(a.recommend(at_s(30), all_ready(4, 10)).replicas == 4);  // (-30, 30] holds the -1
  CHECK(a.recommend(at_s(60), all_ready(4, 10)).replicas == 3);
  s.scale_down.select = SelectPolicy::disabled;
  Autoscaler off(s);
  CHECK(off.recommend(at_s(0), all_ready(5, 10)).replicas == 5);
}

TEST_CASE("HPA scale-down: the larger of the policies' counts with selectPolicy Min, the smaller with Max") {
  AutoscalerSpec s = queue_spec(1, 100);
  s.scale_down = {.stabilization_window_s = 0,
                  .policies = {{ScalingPolicyType::pods, 2, 60}, {ScalingPolicyType::percent, 50, 60}}};
  // 10 replicas asking for 1: Pods allows 8, Percent 5. Max (the most change): 5; Min: 8.
  Autoscaler mx(s);
  CHECK(mx.recommend(at_s(0), all_ready(10, 10)).replicas == 5);
  s.scale_down.select = SelectPolicy::min;
  Autoscaler mn(s);
  CHECK(mn.recommend(at_s(0), all_ready(10, 10)).replicas == 8);
}

TEST_CASE("HPA bounds: above max_replicas scales to it, below min_replicas to it, the proposal is capped") {
  Autoscaler a(queue_spec(2, 6));
  AutoscaleStep st = a.recommend(at_s(0), all_ready(8, 100));
  CHECK(st.replicas == 6);
  CHECK(st.reason == AutoscaleReason::above_max);
  st = a.recommend(at_s(15), all_ready(1, 100));
  CHECK(st.replicas == 2);
  CHECK(st.reason == AutoscaleReason::below_min);
  Autoscaler b(queue_spec(2, 6));
  st = b.recommend(at_s(0), all_ready(4, 300));  // asks for 12; the rate allows 8; max 6
  CHECK(st.replicas == 6);
  CHECK(st.reason == AutoscaleReason::bounded);
  // No metric: unchanged.
  st = b.recommend(at_s(15), {.ready = 0, .total = 6, .metric = std::nullopt});
  CHECK(st.replicas == 6);
  CHECK(st.reason == AutoscaleReason::no_metric);
}

TEST_CASE("scale to zero: a request activates one replica; idle for the cooldown scales back to 0") {
  AutoscalerSpec s = queue_spec(0, 4);
  s.scale_to_zero_cooldown_s = 300;
  Autoscaler a(s);
  AutoscaleStep st = a.recommend(at_s(0), {.ready = 0, .total = 0, .metric = std::nullopt, .in_flight = 0});
  CHECK(st.replicas == 0);
  st = a.recommend(at_s(15), {.ready = 0, .total = 0, .metric = std::nullopt, .in_flight = 3});
  CHECK(st.replicas == 1);
  CHECK(st.reason == AutoscaleReason::activated);
  // Starting: no metric yet; requests still held (active at t = 30).
  st = a.recommend(at_s(30), {.ready = 0, .total = 1, .metric = std::nullopt, .in_flight = 3});
  CHECK(st.replicas == 1);
  // Served, then idle: the HPA (minimum 1) keeps 1 until 300 s after t = 30.
  for (int t = 45; t < 330; t += 15) {
    CAPTURE(t);
    CHECK(a.recommend(at_s(t), {.ready = 1, .total = 1, .metric = 0.0, .in_flight = 0}).replicas == 1);
  }
  st = a.recommend(at_s(330), {.ready = 1, .total = 1, .metric = 0.0, .in_flight = 0});
  CHECK(st.replicas == 0);
  CHECK(st.reason == AutoscaleReason::cooled_down);
  // And back: the next request activates one again.
  CHECK(a.recommend(at_s(345), {.ready = 0, .total = 0, .metric = std::nullopt, .in_flight = 1}).replicas == 1);
}

TEST_CASE("cold start: container start + weight bytes over min(storage, network) + engine init") {
  ColdStartSpec s;
  s.container_start_s = 20;
  s.storage_bytes_per_s = 2e9;
  s.network_bytes_per_s = 0;
  s.engine_init_s = 15;
  // 16 GB at 2 GB/s: 8 s; 20 + 8 + 15 = 43 s.
  CHECK(cold_start_s(s, 16e9) == rel_approx(43, 1e-12));
  // A 1 GB/s network path is the narrower one: 16 s; 51 s.
  s.network_bytes_per_s = 1e9;
  CHECK(cold_start_s(s, 16e9) == rel_approx(51, 1e-12));
  // A network faster than storage: storage's 8 s.
  s.network_bytes_per_s = 50e9;
  CHECK(cold_start_s(s, 16e9) == rel_approx(43, 1e-12));
}

TEST_CASE("cold start: Llama-3-8B in BF16 loads its 8.03e9 parameters' 16.06 GB, at any TP") {
  ServingDeployment d = llama8b_h100();
  // 8,030,261,248 parameters (Meta's Llama 3 8B model card), 2 bytes each; the RoPE cache and
  // TP-replicated norms add well under 0.1%.
  const double bytes = 2.0 * 8'030'261'248;
  CHECK(replica_weight_bytes(d) == rel_approx(bytes, 1e-3));
  d.tp = 2;
  CHECK(replica_weight_bytes(d) == rel_approx(bytes, 1e-3));
  d.tp = 1;
  // W8A8: 1 byte per GEMM weight; the embedding and the LM head (128256 x 4096 each) stay BF16.
  d.quantization = Quantization::fp8;
  const double vocab_params = 2.0 * 128256 * 4096;
  CHECK(replica_weight_bytes(d) == rel_approx((8'030'261'248 - vocab_params) * 1 + vocab_params * 2, 1e-3));
  // The documented default: 20 s + 16.06 GB / 2 GB/s + 20 s = 48.03 s.
  CHECK(cold_start_s(ColdStartSpec{}, bytes) == rel_approx(48.03, 1e-3));
}

TEST_CASE("warm pool: a ready slot starts in the warm time and refills a cold start later") {
  WarmPool pool(1, 60, 5);
  CHECK(pool.ready(at_s(0)) == 1);
  CHECK(pool.start(at_s(10)) == at_s(15));  // warm: 10 + 5
  CHECK(pool.ready(at_s(10)) == 0);         // refilling until 10 + 60 = 70
  // At t = 20 the slot is ready at 70: 70 + 5 = 75 beats a cold start's 20 + 60 = 80.
  CHECK(pool.start(at_s(20)) == at_s(75));
  // Its replacement started at 70, ready at 130: at t = 80, 130 + 5 = 135 beats 80 + 60 = 140.
  CHECK(pool.start(at_s(80)) == at_s(135));
  // Now ready at 190: at t = 100, 195 > 100 + 60 = 160: a cold start, and the slot stays.
  CHECK(pool.start(at_s(100)) == at_s(160));
  CHECK(pool.ready(at_s(190)) == 1);
  WarmPool none(0, 60, 5);
  CHECK(none.start(at_s(0)) == at_s(60));
}
