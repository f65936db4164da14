// Layer-wise KV streaming in disaggregated serving (KvTransferMode::layerwise) against
// hand-worked timelines. Llama-3-8B on one H100 (32 layers, 131072 KV bytes per token in BF16),
// the cost model's own iteration prices for the prefill span D, one link of bandwidth bw and
// latency lat. A request's prefill runs in K iterations over [s, e] (D = e - s), split into
// n = K x 32 steps of D / n and B / n bytes each. The model (workloads/serving_disagg.hpp):
// the stream of (n - 1) B / n bytes leaves at s + D / n, after lat, at most at B / D; the last
// step's B / n bytes follow once the stream is through. Alone on the link:
//   stream done = s + D/n + lat + max((n-1) B / (n bw), (n-1) D / n)
//               = lat + max(s + D/n + (n-1) B / (n bw), e)
//   landed      = stream done + (B/n) / bw
//               = lat + max(s + D/n + B / bw, e + B / (n bw)).
// The report's transfer time is the exposed part, landed - e; the overlapped part is e - (s + D/n).
#include <doctest/doctest.h>

#include <cstdint>

#include "serving_llama8b.hpp"
#include "tolerance.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_disagg.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

constexpr double kTol = 1e-9;  // relative, on the ~0.1 s prefill spans
constexpr double kPs = 1e-11;  // seconds: a few picoseconds, the engine's clock rounding per event
constexpr double kLayers = 32;
constexpr double kBytesPerToken = 131072;

TrafficSpec fixed_traffic(int n, std::int32_t prompt, std::int32_t output, bool offline) {
  TrafficSpec t;
  t.seed = 3;
  t.arrival.process = offline ? ArrivalProcess::offline : ArrivalProcess::constant;
  t.arrival.rate_per_s = 1;
  t.requests = n;
  t.input.dist = LengthDist::fixed;
  t.input.value = prompt;
  t.output.dist = LengthDist::fixed;
  t.output.value = output;
  return t;
}

double prefill_batch_s(const ServingCostModel& cost, int prompts, std::int64_t tokens) {
  BatchShape b;
  for (int i = 0; i < prompts; ++i) add_prefill_chunk(b, tokens, 0);
  return cost.iteration(b).total_s;
}

DisaggregatedRun run(const ServingDeployment& d, double bw, double lat, KvTransferMode mode, const TrafficSpec& t,
                     const SchedulerConfig& sched = scheduler()) {
  DisaggregationSpec spec{.prefill = d, .decode = d, .link_bytes_per_s = bw, .link_latency_s = lat};
  spec.kv_transfer = mode;
  return run_disaggregated(spec, sched, sched, t);
}

}  // namespace

TEST_CASE("serving disagg layerwise: one request, link-bound and production-bound, hand-worked") {
  const ServingDeployment d = llama8b_h100();
  const ServingCostModel cost(d);
  const double lat = 20e-6, b = 2000 * kBytesPerToken, n = kLayers;  // one iteration: K = 1
  const double pf = prefill_batch_s(cost, 1, 2000);                  // D
  REQUIRE(b / pf > 1e9);  // the prefill produces KV faster than 1 GB/s and slower than 1000 GB/s
  REQUIRE(b / pf < 1000e9);
  for (const double bw : {1e9, 1000e9}) {
    CAPTURE(bw);
    const DisaggregatedRun after = run(d, bw, lat, KvTransferMode::after_prefill, fixed_traffic(1, 2000, 4, false));
    const DisaggregatedRun lw = run(d, bw, lat, KvTransferMode::layerwise, fixed_traffic(1, 2000, 4, false));
    REQUIRE(lw.merged.completed_requests == 1);
    CHECK(lw.prefill_s.mean == rel_approx(pf, kTol));
    // after_prefill: the whole KV after the first token, lat + B / bw.
    CHECK(after.transfer_s.mean == abs_approx(lat + b / bw, kPs));
    CHECK(after.transfer_overlapped_s.mean == 0);
    // layerwise, exposed: landed - e = lat + max(B / bw - (n-1) D / n, B / (n bw)).
    const double exposed = lat + std::max(b / bw - (n - 1) / n * pf, b / (n * bw));
    CHECK(lw.transfer_s.mean == abs_approx(exposed, kPs));
    CHECK(lw.transfer_overlapped_s.mean == abs_approx((n - 1) / n * pf, kPs));
    // The first token is the prefill pool's either way; TPOT and E2E carry the transfer.
    CHECK(lw.merged.ttft_s.mean == after.merged.ttft_s.mean);
    CHECK(after.merged.e2e_s.mean - lw.merged.e2e_s.mean == rel_approx(lat + b / bw - exposed, 1e-6));
    CHECK(lw.kv_transfers == 1);
    CHECK(lw.kv_transfer_bytes == rel_approx(b, 1e-12));
    CHECK(lw.kv_peak_concurrent_transfers == 1);
  }
}

TEST_CASE("serving disagg layerwise: two prompts in one iteration share the link, max-min halves it") {
  // Both 2000-token prompts prefill in one iteration of D2 (two chunks of 2000), start and end
  // together. At 1 GB/s (link-bound: their caps B / D2 > bw / 2) each stream gets bw / 2, then
  // each tail: landed = s + D2/n + lat + 2 B / bw. At 1000 GB/s (production-bound: 2 B / D2 < bw)
  // the streams run at their caps and end at e + lat; the two tails share the link:
  // landed = e + lat + (B / n) / (bw / 2).
  const ServingDeployment d = llama8b_h100();
  const ServingCostModel cost(d);
  const double lat = 20e-6, b = 2000 * kBytesPerToken, n = kLayers;
  const double pf2 = prefill_batch_s(cost, 2, 2000);
  REQUIRE(b / pf2 > 0.5e9);
  REQUIRE(2 * b / pf2 < 1000e9);
  const DisaggregatedRun slow = run(d, 1e9, lat, KvTransferMode::layerwise, fixed_traffic(2, 2000, 3, true));
  REQUIRE(slow.merged.completed_requests == 2);
  CHECK(slow.prefill_s.mean == rel_approx(pf2, kTol));
  CHECK(slow.kv_peak_concurrent_transfers == 2);
  CHECK(slow.transfer_s.mean == abs_approx(lat + 2 * b / 1e9 - (n - 1) / n * pf2, kPs));
  const DisaggregatedRun fast = run(d, 1000e9, lat, KvTransferMode::layerwise, fixed_traffic(2, 2000, 3, true));
  CHECK(fast.transfer_s.mean == abs_approx(lat + 2 * b / (n * 1000e9), kPs));
  CHECK(fast.transfer_overlapped_s.mean == abs_approx((n - 1) / n * pf2, kPs));
}

TEST_CASE("serving disagg layerwise: a stream is held to the prefill's rate, leaving the rest of a link") {
  // Two 2000-token prompts D / 2 apart on two prefill replicas (links of 1e15 B/s) into one decode
  // replica whose link is bw = 4 r, r = B / D the prefill's production rate. Request 0's stream
  // runs at r (its cap, below a fair share) and is through at e0 + lat; its tail of B / n bytes
  // then shares the decode link with request 1's stream, still capped at r: max-min gives the
  // tail bw - r = 3 r. Request 1's tail, at e0 + D/2 + lat, is alone: 4 r.
  // exposed0 = lat + (B/n) / (3 r), exposed1 = lat + (B/n) / (4 r).
  const ServingDeployment d = llama8b_h100();
  const ServingCostModel cost(d);
  const double lat = 20e-6, b = 2000 * kBytesPerToken, n = kLayers;
  const double pf = prefill_batch_s(cost, 1, 2000), r = b / pf;
  TrafficSpec t = fixed_traffic(2, 2000, 3, false);
  t.arrival.rate_per_s = 2 / pf;
  DisaggregationSpec spec{.prefill = d,
                          .decode = d,
                          .prefill_replicas = 2,
                          .link_bytes_per_s = 1e15,
                          .link_latency_s = lat,
                          .decode_link_bytes_per_s = 4 * r};
  spec.kv_transfer = KvTransferMode::layerwise;
  const DisaggregatedRun lw = run_disaggregated(spec, scheduler(), scheduler(), t);
  REQUIRE(lw.merged.completed_requests == 2);
  CHECK(lw.prefill_s.mean == rel_approx(pf, kTol));
  CHECK(lw.prefill_queueing_s.mean == abs_approx(0, kPs));
  CHECK(lw.kv_peak_concurrent_transfers == 2);
  const double exposed0 = lat + b / n / (3 * r), exposed1 = lat + b / n / (4 * r);
  CHECK(lw.transfer_s.mean == abs_approx((exposed0 + exposed1) / 2, kPs));
}

TEST_CASE("serving disagg layerwise: a chunked prompt streams in iterations x layers steps") {
  // 2000 tokens under a 512-token budget: chunks of 512, 512, 512, 464 in four iterations back to
  // back (K = 4, n = 128 steps). Production-bound at 1000 GB/s: exposed = lat + (B / 128) / bw,
  // overlapped = (127 / 128) D with D the four iterations' span.
  const ServingDeployment d = llama8b_h100();
  const ServingCostModel cost(d);
  SchedulerConfig c = scheduler();
  c.max_num_batched_tokens = 512;
  const double lat = 20e-6, b = 2000 * kBytesPerToken, bw = 1000e9, n = 4 * kLayers;
  BatchShape s1, s2, s3, s4;
  add_prefill_chunk(s1, 512, 0);
  add_prefill_chunk(s2, 512, 512);
  add_prefill_chunk(s3, 512, 1024);
  add_prefill_chunk(s4, 464, 1536);
  const double span =
      cost.iteration(s1).total_s + cost.iteration(s2).total_s + cost.iteration(s3).total_s + cost.iteration(s4).total_s;
  const DisaggregatedRun lw = run(d, bw, lat, KvTransferMode::layerwise, fixed_traffic(1, 2000, 4, false), c);
  REQUIRE(lw.merged.completed_requests == 1);
  CHECK(lw.prefill_s.mean == rel_approx(span, kTol));
  CHECK(lw.transfer_s.mean == abs_approx(lat + b / (n * bw), kPs));
  CHECK(lw.transfer_overlapped_s.mean == abs_approx((n - 1) / n * span, kPs));
}

TEST_CASE("serving disagg layerwise: with one layer nothing overlaps and the run is after_prefill's") {
  // n = 1 step: the KV exists only at the first token, so both modes move it whole then.
  ServingDeployment d = llama8b_h100();
  d.model.layers = 1;
  const TrafficSpec t = fixed_traffic(20, 1500, 20, false);
  const DisaggregatedRun a = run(d, 2e9, 50e-6, KvTransferMode::after_prefill, t);
  const DisaggregatedRun l = run(d, 2e9, 50e-6, KvTransferMode::layerwise, t);
  REQUIRE(a.merged.completed_requests == 20);
  CHECK(l.transfer_s.mean == a.transfer_s.mean);
  CHECK(l.merged.e2e_s.mean == a.merged.e2e_s.mean);
  CHECK(l.merged.tpot_s.p99 == a.merged.tpot_s.p99);
  CHECK(l.transfer_overlapped_s.mean == 0);
  CHECK(DisaggregationSpec{}.kv_transfer == KvTransferMode::after_prefill);  // the default
}

TEST_CASE("serving disagg layerwise: under load the exposed transfer never exceeds after_prefill's") {
  // Poisson-like stream, two prefill replicas on one decode replica with its own 20 GB/s link: the
  // stream starts earlier and carries no more bytes, so each request's KV lands no later on
  // average, and the bytes moved are the same.
  const ServingDeployment d = llama8b_h100();
  TrafficSpec t = fixed_traffic(200, 3000, 30, false);
  t.arrival.process = ArrivalProcess::poisson;
  t.arrival.rate_per_s = 8;
  DisaggregationSpec spec{.prefill = d,
                          .decode = d,
                          .prefill_replicas = 2,
                          .link_bytes_per_s = 10e9,
                          .link_latency_s = 10e-6,
                          .decode_link_bytes_per_s = 20e9};
  const DisaggregatedRun a = run_disaggregated(spec, scheduler(), scheduler(), t);
  spec.kv_transfer = KvTransferMode::layerwise;
  const DisaggregatedRun l = run_disaggregated(spec, scheduler(), scheduler(), t);
  REQUIRE(a.merged.completed_requests == 200);
  REQUIRE(l.merged.completed_requests == 200);
  CHECK(l.kv_transfer_bytes == a.kv_transfer_bytes);
  CHECK(l.transfer_s.mean < a.transfer_s.mean);
  CHECK(l.merged.e2e_s.mean < a.merged.e2e_s.mean);
  CHECK(l.transfer_overlapped_s.mean > 0);
}
