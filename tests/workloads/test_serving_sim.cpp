// The serving replica loop against hand-worked timelines with a closed-form cost
// (LinearCost: a + b x query tokens + c x K/V tokens) and an obviously correct KV cache.
#include <doctest/doctest.h>

#include <map>

#include "fake_kv_cache.hpp"
#include "serving_fakes.hpp"
#include "tolerance.hpp"
#include "workloads/serving_sim.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

constexpr double kTol = 1e-9;  // picosecond rounding per iteration

struct Run {
  ServingResult res;
  std::map<std::int64_t, RequestRecord> recs;
  std::vector<IterationRecord> iters;
};

Run run(std::vector<Request> rs, SchedulerConfig c, std::int64_t blocks = 1000, std::int64_t host_blocks = 0,
        std::vector<RequestClass> cls = {RequestClass{}}, ReplicaOptions o = {}, bool reference = false) {
  VectorSource src(std::move(rs), std::move(cls));
  FakeKvCache kv(blocks, c.block_size, host_blocks);
  LinearCost cost;
  Run out;
  o.hooks.on_request = [&](const RequestRecord& r) { out.recs[r.request.id] = r; };
  o.hooks.on_iteration = [&](const IterationRecord& r) { out.iters.push_back(r); };
  out.res = reference ? simulate_replica_reference(src, kv, cost, c, o) : simulate_replica(src, kv, cost, c, o);
  CHECK(src.completed_count() == out.res.completed_requests + out.res.rejected_requests);
  CHECK(kv.used_blocks() == 0);
  return out;
}

double decode_step(const LinearCost& m, std::int64_t seqs, double kv_sum) {
  return m.a_s + m.b_s * static_cast<double>(seqs) + m.c_s * kv_sum;
}

}  // namespace

TEST_CASE("serving sim: one request alone: TTFT one prefill, TPOT the decode steps, e2e their sum") {
  const LinearCost m;
  const auto r = run({req(0.25, 100, 5)}, SchedulerConfig{});
  const double ttft = m.prefill(100, 100);
  double decode = 0;
  for (int g = 1; g <= 4; ++g) decode += decode_step(m, 1, 100 + g);  // context after the step
  CHECK(r.res.completed_requests == 1);
  CHECK(r.res.iterations == 5);
  CHECK(r.res.ttft_s.mean == rel_approx(ttft, kTol));
  CHECK(r.res.tpot_s.mean == rel_approx(decode / 4, kTol));
  CHECK(r.res.e2e_s.mean == rel_approx(ttft + decode, kTol));
  CHECK(r.res.queueing_s.mean == abs_approx(0, 1e-12));  // seconds
  CHECK(r.res.makespan_s == rel_approx(0.25 + ttft + decode, kTol));
  CHECK(r.res.gpu_time.idle_s == rel_approx(0.25, 1e-9));
  CHECK(r.res.gpu_time.overhead_s == rel_approx(5 * m.a_s, kTol));
  CHECK(r.res.input_tokens == 100);
  CHECK(r.res.output_tokens == 5);
  CHECK(r.res.prefill_tokens_computed == 100);
  // 100 + 4 tokens in 16-token blocks: 7 of 1000 at the peak.
  CHECK(r.res.kv_peak_utilization == rel_approx(7.0 / 1000, 1e-12));
  CHECK(r.res.slo_attainment == rel_approx(1, 1e-12));
}

TEST_CASE("serving sim: decode first: a running request decodes beside a newcomer's prefill") {
  const LinearCost m;
  // r1 arrives during r0's prefill and is prefilled in iteration 2 beside r0's first decode.
  const auto r = run({req(0, 100, 3), req(0.0005, 50, 2)}, SchedulerConfig{});
  const double t1 = m.prefill(100, 100);
  const double t2 = m.a_s + m.b_s * (1 + 50) + m.c_s * (101 + 50);
  REQUIRE(r.iters.size() >= 2);
  CHECK(r.iters[1].shape.decode_seqs == 1);
  CHECK(r.iters[1].shape.prefill_tokens == 50);
  CHECK(r.recs.at(1).first_token.seconds() == rel_approx(t1 + t2, kTol));
  CHECK(r.recs.at(1).first_scheduled.seconds() == rel_approx(t1, kTol));
  // Iteration 3 decodes both: r0 (context 102) finishes its third token, r1 (51) its second.
  const double t3 = decode_step(m, 2, 102 + 51);
  CHECK(r.recs.at(0).finish.seconds() == rel_approx(t1 + t2 + t3, kTol));
  CHECK(r.recs.at(1).finish.seconds() == rel_approx(t1 + t2 + t3, kTol));
  CHECK(r.res.queueing_s.mean == rel_approx((t1 - 0.0005) / 2, kTol));
}

TEST_CASE("serving sim: chunked prefill splits a 3000-token prompt over a 1024-token budget") {
  const LinearCost m;
  SchedulerConfig c;
  c.max_num_batched_tokens = 1024;
  const auto r = run({req(0, 3000, 2)}, c);
  REQUIRE(r.iters.size() == 4);
  CHECK(r.iters[0].shape.prefill_tokens == 1024);
  CHECK(r.iters[1].shape.prefill_tokens == 1024);
  CHECK(r.iters[2].shape.prefill_tokens == 952);
  CHECK(r.iters[1].shape.prefill_kv_tokens == rel_approx(2048, 1e-12));
  // The second chunk's 1024 queries see the 1024 before them and a triangle of their own.
  CHECK(r.iters[1].shape.prefill_attended_pairs == rel_approx(1024.0 * 1024 + 1024.0 * 1025 / 2, 1e-12));
  CHECK(r.iters[3].shape.decode_seqs == 1);
  const double ttft = 3 * m.a_s + 3000 * m.b_s + m.c_s * (1024 + 2048 + 3000);
  CHECK(r.res.ttft_s.mean == rel_approx(ttft, kTol));
  CHECK(r.res.e2e_s.mean == rel_approx(ttft + decode_step(m, 1, 3001), kTol));
}

TEST_CASE("serving sim: decodes take their tokens from the budget first, a chunk the rest") {
  const LinearCost m;
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  // r1 arrives during r0's prefill; in iteration 2 r0's decode takes 1 token, r1's chunk 63.
  const auto r = run({req(0, 10, 5), req(0.0005, 200, 2)}, c);
  REQUIRE(r.iters.size() >= 3);
  CHECK(r.iters[1].shape.decode_seqs == 1);
  CHECK(r.iters[1].shape.prefill_tokens == 63);
  CHECK(r.iters[2].shape.prefill_tokens == 63);
  const double t1 = m.prefill(10, 10);
  CHECK(r.iters[1].end.seconds() == rel_approx(t1 + m.a_s + 64 * m.b_s + m.c_s * (11 + 63), kTol));
}

TEST_CASE("serving sim: without chunked prefill a prompt runs whole in a prefill-only iteration") {
  const LinearCost m;
  SchedulerConfig c;
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 1024;
  const auto r = run({req(0, 100, 3), req(0.0005, 50, 2)}, c);
  REQUIRE(r.iters.size() >= 2);
  CHECK(r.iters[1].shape.decode_seqs == 0);  // r1's prefill alone, r0 waits
  CHECK(r.iters[1].shape.prefill_tokens == 50);
  const double t1 = m.prefill(100, 100), t2 = m.prefill(50, 50);
  CHECK(r.recs.at(1).first_token.seconds() == rel_approx(t1 + t2, kTol));
  CHECK(r.recs.at(0).finish.seconds() ==
        rel_approx(t1 + t2 + decode_step(m, 2, 101 + 51) + decode_step(m, 1, 102), kTol));
}

TEST_CASE("serving sim: preemption by recompute when blocks run out, exact timeline") {
  const LinearCost m;
  SchedulerConfig c;  // block_size 16; 3 blocks
  // Both prefill 16 tokens (1 block each). At the first decode each needs a second block: r0
  // takes the last one, r1 finds none and, the latest, is preempted: recomputed after r0 ends.
  const auto r = run({req(0, 16, 20), req(0, 16, 20)}, c, 3);
  const double t1 = m.prefill(32, 32);
  double r0 = t1;
  for (int g = 1; g <= 19; ++g) r0 += decode_step(m, 1, 16 + g);
  double r1 = r0 + m.prefill(17, 17);  // prompt + its one generated token, recomputed
  for (int g = 2; g <= 19; ++g) r1 += decode_step(m, 1, 16 + g);
  CHECK(r.res.preemptions_recompute == 1);
  CHECK(r.res.preemptions_swap == 0);
  CHECK(r.recs.at(1).preemptions == 1);
  CHECK(r.recs.at(0).finish.seconds() == rel_approx(r0, kTol));
  CHECK(r.recs.at(1).first_token.seconds() == rel_approx(t1, kTol));  // its first token stands
  CHECK(r.recs.at(1).finish.seconds() == rel_approx(r1, kTol));
  CHECK(r.res.prefill_tokens_computed == 32 + 17);
  CHECK(r.res.kv_peak_utilization == rel_approx(1, 1e-12));
}

TEST_CASE("serving sim: preemption by swap charges the transfers over the host link") {
  const LinearCost m;
  SchedulerConfig c;
  c.preemption = PreemptionMode::swap;
  ReplicaOptions o;
  o.kv_block_bytes = 1e6;
  o.host_link_bytes_per_s = 1e9;  // 1 ms a block
  const auto r = run({req(0, 16, 20), req(0, 16, 20)}, c, 3, 10, {RequestClass{}}, o);
  const double t1 = m.prefill(32, 32), swap = 1e-3;
  double r0 = t1 + swap;  // r1's one block out, charged to iteration 2
  for (int g = 1; g <= 19; ++g) r0 += decode_step(m, 1, 16 + g);
  double r1 = r0 + swap;  // back in, and decoding from where it stopped
  for (int g = 1; g <= 19; ++g) r1 += decode_step(m, 1, 16 + g);
  CHECK(r.res.preemptions_swap == 1);
  CHECK(r.res.preemptions_recompute == 0);
  CHECK(r.res.swapped_blocks == 2);
  CHECK(r.recs.at(0).finish.seconds() == rel_approx(r0, kTol));
  CHECK(r.recs.at(1).finish.seconds() == rel_approx(r1, kTol));
  CHECK(r.res.prefill_tokens_computed == 32);
  CHECK(r.res.gpu_time.swap_s == rel_approx(2 * swap, kTol));
}

TEST_CASE("serving sim: swap falls back to recompute when host blocks run out") {
  SchedulerConfig c;
  c.preemption = PreemptionMode::swap;
  ReplicaOptions o;
  o.kv_block_bytes = 1e6;
  o.host_link_bytes_per_s = 1e9;
  const auto r = run({req(0, 16, 20), req(0, 16, 20)}, c, 3, 0, {RequestClass{}}, o);
  CHECK(r.res.preemptions_swap == 0);
  CHECK(r.res.preemptions_recompute == 1);
}

TEST_CASE("serving sim: priority policy serves the lower priority value first, FCFS arrival") {
  SchedulerConfig c;
  c.max_num_seqs = 1;
  const std::vector<RequestClass> cls{{.name = "batch", .priority = 1}, {.name = "chat", .priority = 0}};
  const std::vector<Request> rs{req(0, 10, 3, 0), req(0, 10, 3, 1), req(0, 10, 3, 0)};
  c.policy = SchedulingPolicy::priority;
  const auto p = run(rs, c, 1000, 0, cls);
  CHECK(p.recs.at(1).finish < p.recs.at(0).finish);
  CHECK(p.recs.at(0).finish < p.recs.at(2).finish);
  c.policy = SchedulingPolicy::fcfs;
  const auto f = run(rs, c, 1000, 0, cls);
  CHECK(f.recs.at(0).finish < f.recs.at(1).finish);
  CHECK(f.recs.at(1).finish < f.recs.at(2).finish);
  // Each runs alone: prefill + 2 decodes, one after another.
  const LinearCost m;
  const double one = m.prefill(10, 10) + decode_step(m, 1, 11) + decode_step(m, 1, 12);
  CHECK(p.recs.at(2).finish.seconds() == rel_approx(3 * one, kTol));
}

TEST_CASE("serving sim: static batching runs a batch to its end, no joins") {
  const LinearCost m;
  SchedulerConfig c;
  c.max_num_seqs = 2;
  const std::vector<Request> rs{req(0, 10, 2), req(0, 10, 4), req(0, 10, 2)};
  c.batching = BatchingMode::static_batching;
  const auto s = run(rs, c);
  const double t1 = m.prefill(20, 20);
  const double end = t1 + decode_step(m, 2, 22) + decode_step(m, 1, 12) + decode_step(m, 1, 13);
  CHECK(s.recs.at(2).first_scheduled.seconds() == rel_approx(end, kTol));
  CHECK(s.recs.at(2).finish.seconds() == rel_approx(end + m.prefill(10, 10) + decode_step(m, 1, 11), kTol));
  // Continuous batching lets r2 in as soon as r0 leaves, after iteration 2.
  c.batching = BatchingMode::continuous;
  const auto k = run(rs, c);
  CHECK(k.recs.at(2).first_scheduled.seconds() == rel_approx(t1 + decode_step(m, 2, 22), kTol));
}

TEST_CASE("serving sim: requests that can never fit are rejected and counted, never hang") {
  SchedulerConfig c;
  c.max_model_len = 100;
  // 90 + 20 > max_model_len; 40 + 30 - 1 tokens need 5 blocks of a 4-block cache; 10 + 5 fits.
  const auto r = run({req(0, 90, 20), req(0, 40, 30), req(0, 10, 5)}, c, 4);
  CHECK(r.res.arrived_requests == 3);
  CHECK(r.res.rejected_requests == 2);
  CHECK(r.res.completed_requests == 1);
  CHECK(r.recs.at(0).rejected);
  CHECK(r.recs.at(1).rejected);
  CHECK_FALSE(r.recs.at(2).rejected);
  CHECK(r.res.slo_attainment == rel_approx(1.0 / 3, 1e-12));
  // Without chunked prefill, a prompt beyond the budget too.
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 512;
  c.max_model_len = 0;
  const auto n = run({req(0, 600, 2), req(0, 500, 2)}, c);
  CHECK(n.res.rejected_requests == 1);
  CHECK(n.res.completed_requests == 1);
}

TEST_CASE("serving sim: offline throughput, closed form") {
  const LinearCost m;
  constexpr int n = 64, p = 128, o = 32;
  std::vector<Request> rs(n, req(0, p, o));
  const auto r = run(rs, SchedulerConfig{}, 100000);
  double makespan = m.prefill(n * p, n * p);
  for (int g = 1; g < o; ++g) makespan += decode_step(m, n, n * (p + g));
  CHECK(r.res.makespan_s == rel_approx(makespan, kTol));
  CHECK(r.res.requests_per_s == rel_approx(n / makespan, kTol));
  CHECK(r.res.output_tokens_per_s == rel_approx(n * o / makespan, kTol));
  CHECK(r.res.input_tokens_per_s == rel_approx(n * p / makespan, kTol));
  const auto& g = r.res.gpu_time;
  CHECK(g.prefill_s + g.decode_s + g.overhead_s + g.comm_s + g.draft_s + g.swap_s + g.idle_s ==
        rel_approx(makespan, 1e-12));
}

TEST_CASE("serving sim: goodput counts requests meeting every SLO of their class") {
  const LinearCost m;
  // Class 0: TTFT SLO between one prefill and two; class 1: none.
  const double ttft_slo = 1.5 * m.prefill(100, 100);
  const std::vector<RequestClass> cls{{.name = "tight", .ttft_slo_s = ttft_slo}, {.name = "loose"}};
  SchedulerConfig c;
  c.max_num_seqs = 1;
  // Run one after another: r0 meets its TTFT, r1 (tight) waits for r0 and misses, r2 (loose) meets.
  const auto r = run({req(0, 100, 2, 0), req(0, 100, 2, 0), req(0, 100, 2, 1)}, c, 1000, 0, cls);
  CHECK(r.recs.at(0).met_slo);
  CHECK_FALSE(r.recs.at(1).met_slo);
  CHECK(r.recs.at(2).met_slo);
  CHECK(r.res.slo_attainment == rel_approx(2.0 / 3, 1e-12));
  CHECK(r.res.goodput_requests_per_s == rel_approx(2 / r.res.makespan_s, 1e-12));
}

TEST_CASE("serving sim: speculative decoding with certain acceptance emits 1 + k tokens a step") {
  const LinearCost m;
  SchedulerConfig c;
  c.num_speculative_tokens = 3;
  c.acceptance_rate = 1;
  const auto r = run({req(0, 100, 9)}, c);
  // Prefill emits token 1; two steps of 4 tokens emit 2..9. Context after a step: 100 + g + k.
  REQUIRE(r.iters.size() == 3);
  CHECK(r.iters[1].shape.decode_tokens == 4);
  CHECK(r.iters[1].shape.decode_kv_tokens == rel_approx(100 + 1 + 3, 1e-12));
  CHECK(r.iters[1].shape.decode_attended_pairs == rel_approx(4.0 * 104 - 6, 1e-12));
  const double e2e = m.prefill(100, 100) + (m.a_s + 4 * m.b_s + m.c_s * 104) + (m.a_s + 4 * m.b_s + m.c_s * 108);
  CHECK(r.res.e2e_s.mean == rel_approx(e2e, kTol));
  // Rate 0: one token a step, as without drafts, at the cost of verifying 4.
  c.acceptance_rate = 0;
  CHECK(run({req(0, 100, 9)}, c).res.iterations == 9);
}

// The request overhead (API server, tokenizer) delays when the scheduler sees a request: TTFT
// and end-to-end grow by it, queueing (from the scheduler) and TPOT do not, and a second
// request arriving during the first's overhead joins the same first iteration.
TEST_CASE("serving sim: a request overhead is in TTFT and e2e, not in queueing or TPOT") {
  const LinearCost m;
  for (const bool reference : {false, true}) {
    CAPTURE(reference);
    ReplicaOptions o;
    o.request_overhead = seconds(0.002);
    const auto r =
        run({req(0.25, 100, 5), req(0.2505, 60, 1)}, SchedulerConfig{}, 1000, 0, {RequestClass{}}, o, reference);
    // First iteration at 0.252: request 0 alone (request 1 is seen at 0.2525).
    const double t1 = m.prefill(100, 100);
    REQUIRE(r.iters.size() >= 2);
    CHECK(r.iters[0].start.seconds() == rel_approx(0.252, 1e-12));
    CHECK(r.iters[0].shape.prefill_tokens == 100);
    CHECK(r.recs.at(0).first_token.seconds() == rel_approx(0.252 + t1, kTol));
    CHECK(r.recs.at(0).received.seconds() == rel_approx(0.252, 1e-12));
    CHECK((r.recs.at(0).first_token - r.recs.at(0).request.arrival).seconds() == rel_approx(0.002 + t1, kTol));
    // Request 1 waits at the scheduler from 0.2525 to the end of the first iteration.
    CHECK(r.recs.at(1).first_scheduled.seconds() == rel_approx(0.252 + t1, kTol));
    CHECK(r.res.queueing_s.mean == rel_approx((0.252 + t1 - 0.2525) / 2, 1e-6));
    CHECK(r.res.gpu_time.idle_s == rel_approx(0.252, 1e-9));
  }
}

// TensorRT-LLM's guaranteed_no_evict: a request starts only when its whole prompt + output fits,
// reserved up front. 10 blocks of 16: request 0 (100 + 40, 139 tokens: 9 blocks) leaves one
// block, so request 1 (20 + 5: 2 blocks) waits for it to finish; under max_utilization it starts
// at once beside it (7 + 2 blocks).
TEST_CASE("serving sim: guaranteed_no_evict admits only what fits to the end and never preempts") {
  for (const bool reference : {false, true}) {
    CAPTURE(reference);
    SchedulerConfig c;
    c.capacity = CapacityPolicy::guaranteed_no_evict;
    const auto r = run({req(0, 100, 40), req(0, 20, 5)}, c, 10, 0, {RequestClass{}}, ReplicaOptions{}, reference);
    CHECK(r.res.completed_requests == 2);
    CHECK(r.res.preemptions_recompute == 0);
    REQUIRE(!r.iters.empty());
    CHECK(r.iters[0].shape.prefill_seqs == 1);
    CHECK(r.iters[0].kv_used_blocks == 9);  // the whole reservation at once
    CHECK(r.recs.at(1).first_scheduled == r.recs.at(0).finish);
    CHECK(r.res.iterations == 40 + 5);
    CHECK(r.res.kv_peak_utilization == rel_approx(0.9, 1e-12));
    SchedulerConfig m;
    const auto u = run({req(0, 100, 40), req(0, 20, 5)}, m, 10, 0, {RequestClass{}}, ReplicaOptions{}, reference);
    CHECK(u.iters[0].shape.prefill_seqs == 2);  // both start at once
    CHECK(u.recs.at(1).first_scheduled == Time{0});
  }
}
