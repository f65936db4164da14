// The fast replica loop (running sums and a heap of block and finish events) against the
// reference that advances every request every iteration: identical results on randomized
// workloads over every scheduling mode, and the same run twice gives the same result.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "fake_kv_cache.hpp"
#include "serving_fakes.hpp"
#include "sim/random.hpp"
#include "tolerance.hpp"
#include "workloads/serving_sim.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

std::vector<Request> random_requests(std::uint64_t seed, int n, double rate_per_s, int classes) {
  std::vector<Request> rs;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    const auto key = [&](std::uint64_t purpose) {
      return mix64(seed * 1000003 + static_cast<std::uint64_t>(i) * 7 + purpose);
    };
    t += rate_per_s > 0 ? -std::log(uniform01(key(1))) / rate_per_s : 0;
    Request r =
        req(t, 1 + static_cast<std::int32_t>(uniform01(key(2)) * 700),
            1 + static_cast<std::int32_t>(uniform01(key(3)) * 120), static_cast<std::int32_t>(key(4) % classes));
    rs.push_back(r);
  }
  return rs;
}

struct Outcome {
  ServingResult res;
  std::vector<RequestRecord> recs;
  std::vector<IterationRecord> iters;
};

Outcome simulate(bool fast, const std::vector<Request>& rs, const SchedulerConfig& c, std::int64_t blocks,
                 std::int64_t host_blocks, std::int64_t window = 0) {
  const std::vector<RequestClass> cls{{.name = "a", .ttft_slo_s = 0.05, .tpot_slo_s = 0.002, .priority = 1},
                                      {.name = "b", .e2e_slo_s = 0.5, .priority = 0}};
  VectorSource src(rs, cls);
  FakeKvCache kv(blocks, c.block_size, host_blocks);
  LinearCost cost;
  ReplicaOptions o;
  o.kv_block_bytes = 2e6;
  o.host_link_bytes_per_s = 25e9;
  o.attention_window = window;
  Outcome out;
  o.hooks.on_request = [&](const RequestRecord& r) { out.recs.push_back(r); };
  o.hooks.on_iteration = [&](const IterationRecord& r) { out.iters.push_back(r); };
  out.res = fast ? simulate_replica(src, kv, cost, c, o) : simulate_replica_reference(src, kv, cost, c, o);
  CHECK(kv.used_blocks() == 0);
  CHECK(kv.used_host_blocks() == 0);
  return out;
}

void check_same(const Outcome& a, const Outcome& b) {
  const ServingResult &x = a.res, &y = b.res;
  CHECK(x.completed_requests == y.completed_requests);
  CHECK(x.rejected_requests == y.rejected_requests);
  CHECK(x.iterations == y.iterations);
  CHECK(x.output_tokens == y.output_tokens);
  CHECK(x.prefill_tokens_computed == y.prefill_tokens_computed);
  CHECK(x.preemptions_recompute == y.preemptions_recompute);
  CHECK(x.preemptions_swap == y.preemptions_swap);
  CHECK(x.swapped_blocks == y.swapped_blocks);
  CHECK(x.makespan_s == y.makespan_s);
  CHECK(x.ttft_s.p99 == y.ttft_s.p99);
  CHECK(x.tpot_s.mean == y.tpot_s.mean);
  CHECK(x.e2e_s.p50 == y.e2e_s.p50);
  CHECK(x.kv_mean_utilization == y.kv_mean_utilization);
  CHECK(x.slo_attainment == y.slo_attainment);
  REQUIRE(a.iters.size() == b.iters.size());
  for (std::size_t i = 0; i < a.iters.size(); ++i) {
    const BatchShape &p = a.iters[i].shape, &q = b.iters[i].shape;
    CHECK(a.iters[i].end == b.iters[i].end);
    CHECK(p.prefill_tokens == q.prefill_tokens);
    CHECK(p.prefill_attended_pairs == q.prefill_attended_pairs);
    CHECK(p.decode_seqs == q.decode_seqs);
    CHECK(p.decode_kv_tokens == q.decode_kv_tokens);
    CHECK(p.decode_attended_pairs == q.decode_attended_pairs);
    CHECK(p.window == q.window);
    CHECK(p.prefill_window_pairs == q.prefill_window_pairs);
    CHECK(p.prefill_window_kv_tokens == q.prefill_window_kv_tokens);
    CHECK(p.decode_window_pairs == q.decode_window_pairs);
    CHECK(p.decode_window_kv_tokens == q.decode_window_kv_tokens);
    CHECK(a.iters[i].kv_used_blocks == b.iters[i].kv_used_blocks);
    if (a.iters[i].end != b.iters[i].end) break;  // one message, not thousands
  }
  REQUIRE(a.recs.size() == b.recs.size());
  for (std::size_t i = 0; i < a.recs.size(); ++i) {
    CHECK(a.recs[i].request.id == b.recs[i].request.id);
    CHECK(a.recs[i].finish == b.recs[i].finish);
    CHECK(a.recs[i].first_token == b.recs[i].first_token);
    CHECK(a.recs[i].preemptions == b.recs[i].preemptions);
  }
}

}  // namespace

TEST_CASE("serving sim: the fast loop equals the reference loop on randomized workloads") {
  int preempting = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    SchedulerConfig c;
    c.max_num_seqs = 4 + static_cast<int>(seed % 5) * 8;
    c.max_num_batched_tokens = std::max<std::int64_t>(c.max_num_seqs, 256 + static_cast<std::int64_t>(seed % 4) * 512);
    c.block_size = seed % 3 == 0 ? 1 : 16;
    c.enable_chunked_prefill = seed % 4 != 1;
    c.preemption = seed % 2 ? PreemptionMode::swap : PreemptionMode::recompute;
    c.policy = seed % 3 == 1 ? SchedulingPolicy::priority : SchedulingPolicy::fcfs;
    c.batching = seed % 7 == 3 ? BatchingMode::static_batching : BatchingMode::continuous;
    c.max_model_len = seed % 5 == 0 ? 600 : 0;
    // Small caches force preemptions; host blocks sometimes too few to swap.
    const std::int64_t blocks = (seed % 2 ? 60 : 200) * (c.block_size == 1 ? 16 : 1);
    const std::int64_t host = seed % 4 == 3 ? 3 : 400 * (c.block_size == 1 ? 16 : 1);
    const auto rs = random_requests(seed, 300, seed % 5 == 4 ? 0 : 40.0 + 20.0 * static_cast<double>(seed % 3), 2);
    // Every third seed with a sliding window the contexts cross (prompts up to 700 tokens).
    const std::int64_t window = seed % 3 == 2 ? 200 : 0;
    CAPTURE(seed);
    const Outcome fast = simulate(true, rs, c, blocks, host, window);
    const Outcome ref = simulate(false, rs, c, blocks, host, window);
    if (window > 0) {
      double windowed = 0;
      for (const IterationRecord& it : fast.iters) windowed += it.shape.decode_window_pairs;
      CHECK(windowed > 0);  // the windowed sums were formed, not left empty
    }
    check_same(fast, ref);
    CHECK(fast.res.completed_requests + fast.res.rejected_requests == 300);
    preempting += fast.res.preemptions_recompute + fast.res.preemptions_swap > 0 ? 1 : 0;
  }
  CHECK(preempting >= 6);  // the comparison covers preemption, not only the easy path
}

TEST_CASE("serving sim: deterministic: the same input twice, the same result") {
  SchedulerConfig c;
  c.num_speculative_tokens = 2;
  c.acceptance_per_position = {0.8, 0.5};
  c.max_num_batched_tokens = 2048;
  const auto rs = random_requests(7, 200, 50, 2);
  const Outcome a = simulate(true, rs, c, 300, 300);
  const Outcome b = simulate(true, rs, c, 300, 300);
  check_same(a, b);
  // Without hooks (the default path), the same numbers.
  {
    VectorSource src(rs, {RequestClass{}, RequestClass{}});
    FakeKvCache kv(300, c.block_size, 300);
    ReplicaOptions o;
    o.kv_block_bytes = 2e6;
    o.host_link_bytes_per_s = 25e9;
    const ServingResult bare = simulate_replica(src, kv, LinearCost{}, c, o);
    CHECK(bare.makespan_s == a.res.makespan_s);
    CHECK(bare.e2e_s.p99 == a.res.e2e_s.p99);
    CHECK(bare.output_tokens == a.res.output_tokens);
  }
  // The expected accepted tokens per step are 0.8 + 0.8 x 0.5 = 1.2: about 2.2 tokens a step.
  std::int64_t decode_tokens_emitted = a.res.output_tokens - a.res.completed_requests;  // less prefill's
  std::int64_t seq_steps = 0;
  for (const auto& it : a.iters) seq_steps += it.shape.decode_seqs;
  const double per_step = static_cast<double>(decode_tokens_emitted) / static_cast<double>(seq_steps);
  CHECK(per_step == rel_approx(2.2, 0.08));  // capped final steps pull it a little below
}
