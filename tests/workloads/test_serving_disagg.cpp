// Disaggregated serving: a prefilled request (its prompt's KV computed elsewhere) in a replica
// against a hand-worked timeline, the fast loop against the reference on workloads mixing
// prefilled requests in, and the two-pass pool run (serving_disagg) against closed forms built
// from the cost model's own iteration prices (a prefill alone, decode steps alone) and the link's
// bytes / bandwidth + latency.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

#include "fake_kv_cache.hpp"
#include "serving_fakes.hpp"
#include "serving_llama8b.hpp"
#include "sim/random.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_disagg.hpp"
#include "workloads/serving_memory.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

constexpr double kTol = 1e-9;  // picosecond rounding per iteration

struct Outcome {
  ServingResult res;
  std::map<std::int64_t, RequestRecord> recs;
  std::vector<IterationRecord> iters;
};

Outcome simulate(bool fast, const std::vector<Request>& rs, const SchedulerConfig& c, std::int64_t blocks = 1000,
                 std::int64_t host_blocks = 0) {
  VectorSource src(rs, {RequestClass{}});
  FakeKvCache kv(blocks, c.block_size, host_blocks);
  LinearCost cost;
  ReplicaOptions o;
  o.kv_block_bytes = 2e6;
  o.host_link_bytes_per_s = 25e9;
  Outcome out;
  o.hooks.on_request = [&](const RequestRecord& r) { out.recs[r.request.id] = r; };
  o.hooks.on_iteration = [&](const IterationRecord& r) { out.iters.push_back(r); };
  out.res = fast ? simulate_replica(src, kv, cost, c, o) : simulate_replica_reference(src, kv, cost, c, o);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.used_host_blocks() == 0);
  return out;
}

Request prefilled(double arrival_s, std::int32_t prompt, std::int32_t output) {
  Request r = req(arrival_s, prompt, output);
  r.prefilled = true;
  return r;
}

using ctwin::test::llama8b_h100;
using ctwin::test::scheduler;

// `n` requests of `prompt` and `output` tokens: all at time 0 (offline), or one a second.
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

double prefill_alone_s(const ServingCostModel& cost, std::int64_t prompt) {
  BatchShape b;
  add_prefill_chunk(b, prompt, 0);
  return cost.iteration(b).total_s;
}
double decode_alone_s(const ServingCostModel& cost, std::int64_t context) {
  BatchShape b;
  add_decode_sequence(b, context, 0);
  return cost.iteration(b).total_s;
}

}  // namespace

TEST_CASE("serving disagg: a prefilled request computes no prefill, only its output - 1 decode steps") {
  const LinearCost m;
  SchedulerConfig c;
  for (const bool fast : {true, false}) {
    CAPTURE(fast);
    const Outcome r = simulate(fast, {prefilled(0.25, 100, 5)}, c);
    // Admitted at its arrival into a decode step of context 101, then 102, 103, 104: four
    // iterations, each a + b x 1 query token + c x context, no prefill token anywhere.
    double decode = 0;
    for (int g = 1; g <= 4; ++g) decode += m.a_s + m.b_s + m.c_s * (100 + g);
    CHECK(r.res.completed_requests == 1);
    CHECK(r.res.iterations == 4);
    CHECK(r.res.prefill_tokens_computed == 0);
    CHECK(r.res.gpu_time.prefill_s == 0);
    for (const auto& it : r.iters) CHECK(it.shape.prefill_tokens == 0);
    CHECK(r.res.output_tokens == 5);
    const RequestRecord& rec = r.recs.at(0);
    CHECK(rec.first_token == seconds(0.25));  // admitted at once: its first token came with it
    CHECK((rec.finish - rec.request.arrival).seconds() == rel_approx(decode, kTol));
    CHECK(r.res.tpot_s.mean == rel_approx(decode / 4, kTol));
    // 100 prompt tokens + the first decode step's token: 7 blocks of 16 at admission.
    CHECK(r.iters.front().kv_used_blocks == 7);
  }
}

TEST_CASE("serving disagg: a prefilled request costs what an aggregated run's decode part costs") {
  // The aggregated request's iterations after its prefill are the prefilled one's, step for step.
  SchedulerConfig c;
  const Outcome agg = simulate(true, {req(0, 300, 6)}, c);
  const Outcome dis = simulate(true, {prefilled(0, 300, 6)}, c);
  REQUIRE(agg.iters.size() == dis.iters.size() + 1);
  for (std::size_t i = 0; i < dis.iters.size(); ++i) {
    CHECK(dis.iters[i].shape.decode_kv_tokens == agg.iters[i + 1].shape.decode_kv_tokens);
    CHECK(dis.iters[i].cost.total_s == agg.iters[i + 1].cost.total_s);
  }
  const double agg_decode = (agg.recs.at(0).finish - agg.recs.at(0).first_token).seconds();
  CHECK((dis.recs.at(0).finish - dis.recs.at(0).first_token).seconds() == rel_approx(agg_decode, kTol));
}

TEST_CASE("serving disagg: a prefilled request arriving during a prefill joins the next decode batch") {
  // One running prefill of 64 tokens (no chunking), then a prefilled request arriving during it
  // decodes beside the next iteration's decode of the first: two decode sequences.
  SchedulerConfig c;
  const Outcome r = simulate(true, {req(0, 64, 3), prefilled(0.0001, 32, 3)}, c);
  const Outcome ref = simulate(false, {req(0, 64, 3), prefilled(0.0001, 32, 3)}, c);
  REQUIRE(r.iters.size() == 3);
  CHECK(r.iters[0].shape.prefill_tokens == 64);
  CHECK(r.iters[1].shape.decode_seqs == 2);
  CHECK(r.iters[1].shape.prefill_tokens == 0);
  CHECK(r.iters[1].shape.decode_kv_tokens == 65 + 33);
  CHECK(r.iters[2].shape.decode_seqs == 2);
  REQUIRE(ref.iters.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(ref.iters[i].end == r.iters[i].end);
}

TEST_CASE("serving disagg: fast and reference loops agree with prefilled requests") {
  int preempting = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    SchedulerConfig c;
    c.max_num_seqs = 4 + static_cast<int>(seed % 5) * 8;
    c.max_num_batched_tokens = std::max<std::int64_t>(c.max_num_seqs, 256 + static_cast<std::int64_t>(seed % 4) * 512);
    c.block_size = seed % 3 == 0 ? 1 : 16;
    c.enable_chunked_prefill = seed % 4 != 1;
    c.preemption = seed % 2 ? PreemptionMode::swap : PreemptionMode::recompute;
    c.batching = seed % 7 == 3 ? BatchingMode::static_batching : BatchingMode::continuous;
    c.capacity = seed % 5 == 2 ? CapacityPolicy::guaranteed_no_evict : CapacityPolicy::max_utilization;
    const std::int64_t blocks = (seed % 2 ? 60 : 200) * (c.block_size == 1 ? 16 : 1);
    const std::int64_t host = 400 * (c.block_size == 1 ? 16 : 1);
    std::vector<Request> rs;
    double t = 0;
    for (int i = 0; i < 200; ++i) {
      const auto key = [&](std::uint64_t p) { return mix64(seed * 1000003 + static_cast<std::uint64_t>(i) * 7 + p); };
      t += -std::log(uniform01(key(1))) / 60.0;
      Request r = req(t, 1 + static_cast<std::int32_t>(uniform01(key(2)) * 600),
                      2 + static_cast<std::int32_t>(uniform01(key(3)) * 100));
      r.prefilled = key(4) % 3 != 0;  // two in three
      rs.push_back(r);
    }
    CAPTURE(seed);
    const Outcome a = simulate(true, rs, c, blocks, host);
    const Outcome b = simulate(false, rs, c, blocks, host);
    CHECK(a.res.completed_requests + a.res.rejected_requests == 200);
    CHECK(a.res.completed_requests == b.res.completed_requests);
    CHECK(a.res.iterations == b.res.iterations);
    CHECK(a.res.prefill_tokens_computed == b.res.prefill_tokens_computed);
    CHECK(a.res.preemptions_recompute == b.res.preemptions_recompute);
    CHECK(a.res.preemptions_swap == b.res.preemptions_swap);
    CHECK(a.res.makespan_s == b.res.makespan_s);
    REQUIRE(a.iters.size() == b.iters.size());
    for (std::size_t i = 0; i < a.iters.size(); ++i) {
      CHECK(a.iters[i].end == b.iters[i].end);
      CHECK(a.iters[i].shape.prefill_tokens == b.iters[i].shape.prefill_tokens);
      CHECK(a.iters[i].shape.decode_seqs == b.iters[i].shape.decode_seqs);
      CHECK(a.iters[i].shape.decode_kv_tokens == b.iters[i].shape.decode_kv_tokens);
      CHECK(a.iters[i].kv_used_blocks == b.iters[i].kv_used_blocks);
      if (a.iters[i].end != b.iters[i].end) break;
    }
    REQUIRE(a.recs.size() == b.recs.size());
    for (const auto& [id, ra] : a.recs) {
      const RequestRecord& rb = b.recs.at(id);
      CHECK(ra.finish == rb.finish);
      CHECK(ra.first_token == rb.first_token);
      CHECK(ra.preemptions == rb.preemptions);
    }
    // Prefilled requests that were never preempted computed nothing: the prefill tokens are at
    // most the others' prompts plus what preemptions recomputed.
    if (a.res.preemptions_recompute == 0) {
      std::int64_t unprefilled = 0;
      for (const Request& r : rs)
        if (!r.prefilled) unprefilled += r.prompt_tokens;
      CHECK(a.res.prefill_tokens_computed <= unprefilled);
    }
    preempting += a.res.preemptions_recompute + a.res.preemptions_swap > 0 ? 1 : 0;
  }
  CHECK(preempting >= 4);
}

TEST_CASE("serving disagg: KV bytes per token and one transfer's time, closed form") {
  ServingDeployment d = llama8b_h100();
  // Llama-3-8B: 32 layers x (K and V) x 8 KV heads x 128 head dim x 2 bytes (BF16) = 131072.
  CHECK(kv_bytes_per_token(d) == rel_approx(32.0 * 2 * 8 * 128 * 2, 1e-12));
  d.kv_dtype = KvCacheDtype::fp8;
  CHECK(kv_bytes_per_token(d) == rel_approx(32.0 * 2 * 8 * 128, 1e-12));
  // 4096 tokens of BF16 KV (512 MiB) over 50 GB/s plus 10 us: 0.0107374 + 0.00001 s.
  CHECK(kv_transfer_s(4096 * 131072.0, 50e9, 10e-6) == rel_approx(4096 * 131072.0 / 50e9 + 10e-6, 1e-12));
}

TEST_CASE("serving disagg: the default KV link is NVLink within a node, the NIC across nodes") {
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-h100", 2, builtin_gpus(), s));
  // 1 prefill TP2 + 1 decode TP2: 4 GPUs, one node; two GPUs send at once.
  const KvLink in = default_kv_link(s, 2, 1, 2, 1);
  CHECK(in.same_node);
  CHECK(in.bytes_per_s == rel_approx(2 * s.intra_gbyte_per_s * 1e9, 1e-12));
  CHECK(in.decode_bytes_per_s == rel_approx(2 * s.intra_gbyte_per_s * 1e9, 1e-12));
  CHECK(in.latency_s == rel_approx(s.intra_latency_us * 1e-6, 1e-12));
  // 1 prefill TP8 + 1 decode TP4: 12 GPUs, two nodes; four send at once over their NICs.
  const KvLink out = default_kv_link(s, 8, 1, 4, 1);
  CHECK_FALSE(out.same_node);
  CHECK(out.bytes_per_s == rel_approx(4 * s.nic_gbyte_per_s * 1e9, 1e-12));
  // The decode replica takes its four GPUs' NICs.
  CHECK(out.decode_bytes_per_s == rel_approx(4 * s.nic_gbyte_per_s * 1e9, 1e-12));
}

TEST_CASE("serving disagg: an infinitely fast link: TTFT is the prefill pool's single-request prefill") {
  const ServingDeployment d = llama8b_h100();
  const ServingCostModel cost(d);
  DisaggregationSpec spec{.prefill = d, .decode = d, .link_bytes_per_s = 1e300, .link_latency_s = 0};
  const DisaggregatedRun run = run_disaggregated(spec, scheduler(), scheduler(), fixed_traffic(1, 2000, 4, false));
  const double overhead_s = d.overhead.request_overhead_us * 1e-6;
  REQUIRE(run.merged.completed_requests == 1);
  CHECK(run.merged.ttft_s.mean == rel_approx(overhead_s + prefill_alone_s(cost, 2000), kTol));
  CHECK(run.prefill_s.mean == rel_approx(prefill_alone_s(cost, 2000), kTol));
  CHECK(run.transfer_s.mean == abs_approx(0, 1e-12));  // seconds
  // The rest: three decode steps of context 2001, 2002, 2003 on the decode replica, no prefill.
  const double decode = decode_alone_s(cost, 2001) + decode_alone_s(cost, 2002) + decode_alone_s(cost, 2003);
  CHECK(run.merged.tpot_s.mean == rel_approx(decode / 3, kTol));
  CHECK(run.merged.e2e_s.mean == rel_approx(overhead_s + prefill_alone_s(cost, 2000) + decode, kTol));
  CHECK(run.decode_pool.prefill_tokens_computed == 0);
  CHECK(run.prefill_pool.prefill_tokens_computed == 2000);
  CHECK(run.prefill_gpus == 1);
  CHECK(run.decode_gpus == 1);
}

TEST_CASE("serving disagg: concurrent transfers share the prefill and decode replicas' links, max-min") {
  // Two 2000-token prompts at time 0 prefill in one iteration; their KV (2000 x 131072 bytes
  // each) leave together over one prefill replica's 1 GB/s link: each gets half, both land after
  // 2 b/bw + L (first in first out would land them at b/bw + L and 2 b/bw + L).
  const ServingDeployment d = llama8b_h100();
  const double bw = 1e9, lat = 50e-6, b = 2000 * 131072.0;
  DisaggregationSpec spec{.prefill = d, .decode = d, .link_bytes_per_s = bw, .link_latency_s = lat};
  const DisaggregatedRun run = run_disaggregated(spec, scheduler(), scheduler(), fixed_traffic(2, 2000, 3, true));
  REQUIRE(run.merged.completed_requests == 2);
  CHECK(run.kv_transfers == 2);
  CHECK(run.kv_peak_concurrent_transfers == 2);
  CHECK(run.kv_transfer_bytes == rel_approx(2 * b, 1e-12));
  CHECK(run.kv_transfer_busy_s == rel_approx(2 * b / bw, 1e-12));
  CHECK(run.transfer_s.mean == rel_approx(2 * b / bw + lat, 1e-9));
  CHECK(run.transfer_s.p99 == rel_approx(2 * b / bw + lat, 0.005));  // QuantileHistogram's 0.5%
  // Two prefill replicas, each request on its own link, one decode replica without a limit of its
  // own: both land after b/bw + L.
  spec.prefill_replicas = 2;
  const DisaggregatedRun two = run_disaggregated(spec, scheduler(), scheduler(), fixed_traffic(2, 2000, 3, true));
  CHECK(two.transfer_s.mean == rel_approx(b / bw + lat, 1e-9));
  CHECK(two.prefill_gpus == 2);
  // The same, landing on one decode replica whose own link is 1 GB/s: they share it, 2 b/bw + L.
  spec.decode_link_bytes_per_s = bw;
  const DisaggregatedRun into_one = run_disaggregated(spec, scheduler(), scheduler(), fixed_traffic(2, 2000, 3, true));
  CHECK(into_one.transfer_s.mean == rel_approx(2 * b / bw + lat, 1e-9));
  // Two decode replicas: request 0 goes to the first, request 1 to the second, each link its own.
  spec.decode_replicas = 2;
  const DisaggregatedRun spread = run_disaggregated(spec, scheduler(), scheduler(), fixed_traffic(2, 2000, 3, true));
  CHECK(spread.transfer_s.mean == rel_approx(b / bw + lat, 1e-9));
  CHECK(spread.decode_pool.completed_requests == 2);
  CHECK(spread.decode_gpus == 2);
}

TEST_CASE("serving disagg: a request of one output token finishes at the prefill, nothing moved") {
  const ServingDeployment d = llama8b_h100();
  const ServingCostModel cost(d);
  DisaggregationSpec spec{.prefill = d, .decode = d, .link_bytes_per_s = 1e9, .link_latency_s = 1e-3};
  const DisaggregatedRun run = run_disaggregated(spec, scheduler(), scheduler(), fixed_traffic(1, 500, 1, false));
  REQUIRE(run.merged.completed_requests == 1);
  CHECK(run.kv_transfers == 0);
  CHECK(run.kv_transfer_bytes == 0);
  CHECK(run.decode_pool.arrived_requests == 0);
  const double ttft = d.overhead.request_overhead_us * 1e-6 + prefill_alone_s(cost, 500);
  CHECK(run.merged.ttft_s.mean == rel_approx(ttft, kTol));
  CHECK(run.merged.e2e_s.mean == rel_approx(ttft, kTol));
  CHECK(run.merged.output_tokens == 1);
}
