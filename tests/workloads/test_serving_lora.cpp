// Multi-LoRA serving: adapter sizes and FLOPs by hand (Llama-3-8B), the adapter cache's LRU
// order, max_loras in the scheduler on hand-worked timelines, loads charged once per miss,
// base-model requests untouched, the LoRA kernels' FLOPs and bytes in the cost model's op list,
// and the traffic's adapter draws.
#include <doctest/doctest.h>

#include <map>

#include "fake_kv_cache.hpp"
#include "serving_fakes.hpp"
#include "serving_llama8b.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "tolerance.hpp"
#include "workloads/serving_cost.hpp"
#include "workloads/serving_lora.hpp"
#include "workloads/serving_scheduler_params.hpp"
#include "workloads/serving_sim.hpp"
#include "workloads/serving_traffic.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

// Llama-3-8B per layer: q 4096->4096, k and v 4096->1024, o 4096->4096, gate and up
// 4096->14336, down 14336->4096.
constexpr double kDin = 4096 + 4096 + 4096 + 4096 + 4096 + 4096 + 14336;    // 38912
constexpr double kDout = 4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096;  // 43008

struct Run {
  ServingResult res;
  std::map<std::int64_t, RequestRecord> recs;
  std::vector<IterationRecord> iters;
};

Request lreq(double arrival_s, std::int32_t adapter, std::int32_t prompt = 16, std::int32_t output = 1) {
  Request r = req(arrival_s, prompt, output);
  r.lora = adapter;
  return r;
}

SchedulerConfig lora_config(int max_loras, int max_cpu_loras) {
  SchedulerConfig c;
  c.enable_lora = true;
  c.max_loras = max_loras;
  c.max_cpu_loras = max_cpu_loras;
  c.lora_load_bytes_per_s = 2e9;  // 1 GB adapter: 0.5 s from storage
  return c;
}

ReplicaOptions lora_options() {
  ReplicaOptions o;
  o.lora_adapter_bytes = 1e9;
  o.host_link_bytes_per_s = 1e10;  // 0.1 s over the host link
  return o;
}

Run run(std::vector<Request> rs, const SchedulerConfig& c, ReplicaOptions o, bool reference = false) {
  VectorSource src(std::move(rs));
  FakeKvCache kv(1000, c.block_size);
  LinearCost cost;
  Run out;
  o.hooks.on_request = [&](const RequestRecord& r) { out.recs[r.request.id] = r; };
  o.hooks.on_iteration = [&](const IterationRecord& r) { out.iters.push_back(r); };
  out.res = reference ? simulate_replica_reference(src, kv, cost, c, o) : simulate_replica(src, kv, cost, c, o);
  CHECK(kv.used_blocks() == 0);
  return out;
}

}  // namespace

TEST_CASE("serving lora: a Llama-3-8B rank-16 adapter over q,k,v,o,gate,up,down has 41.9M parameters") {
  const ModelSpec m = llama8b_h100().model;
  const LoraLayerWidths w = lora_layer_widths(m);
  CHECK(w.d_in == rel_approx(kDin, 1e-12));
  CHECK(w.d_out == rel_approx(kDout, 1e-12));
  CHECK(w.projections == 7);
  // 16 x 81920 x 32 layers = 41,943,040 (PEFT's count for r = 16 on all linear layers).
  CHECK(lora_adapter_params(m, 16) == rel_approx(41943040, 1e-12));
  CHECK(lora_adapter_bytes(m, 16, 2) == rel_approx(83886080, 1e-12));
  // 2 FLOPs per parameter per token.
  CHECK(lora_flops(m, 16, 100) == rel_approx(2.0 * 100 * 41943040, 1e-12));
}

TEST_CASE("serving lora: the adapter cache evicts the least recently used unpinned adapter") {
  LoraAdapterCache c(2, 3);  // 2 GPU slots, 3 in host memory
  CHECK(c.acquire(0) == LoraSource::storage);
  c.unpin(0);
  CHECK(c.acquire(1) == LoraSource::storage);
  c.unpin(1);
  CHECK(c.acquire(0) == LoraSource::gpu);  // 0 is now more recent than 1
  c.unpin(0);
  CHECK(c.acquire(2) == LoraSource::storage);  // the slot of 1, the least recently used
  CHECK_FALSE(c.on_gpu(1));
  CHECK(c.on_host(1));
  CHECK(c.on_gpu(0));
  c.unpin(2);
  CHECK(c.acquire(1) == LoraSource::host);  // back from host memory, into the slot of 0
  CHECK_FALSE(c.on_gpu(0));
  // Host memory full (0, 1, 2): a fourth adapter drops the least recently used, 0.
  CHECK(c.acquire(3) == LoraSource::storage);  // slot of 2 (1 is pinned)
  CHECK_FALSE(c.on_host(0));
  CHECK(c.on_gpu(1));
  CHECK_FALSE(c.on_gpu(2));
  CHECK(c.stats().lookups == 6);
  CHECK(c.stats().gpu_hits == 1);
  CHECK(c.stats().host_loads == 1);
  CHECK(c.stats().storage_loads == 4);
  CHECK(c.stats().gpu_evictions == 3);
  CHECK(c.stats().host_evictions == 1);
}

TEST_CASE("serving lora: pinned adapters are never evicted, however old") {
  LoraAdapterCache c(2, 2);
  CHECK(c.acquire(0) == LoraSource::storage);  // pinned from here on (oldest)
  CHECK(c.acquire(1) == LoraSource::storage);
  c.unpin(1);
  CHECK(c.acquire(2) == LoraSource::storage);  // evicts 1 although 0 is older
  CHECK(c.on_gpu(0));
  CHECK_FALSE(c.on_gpu(1));
  CHECK_FALSE(c.on_host(1));
  CHECK(c.pinned_adapters() == 2);
  CHECK_FALSE(c.acquire(3).has_value());  // both slots pinned
  CHECK(c.stats().lookups == 3);
}

TEST_CASE("serving lora: max_loras 2 with 3 adapters holds the third back, FCFS otherwise kept") {
  // Four one-token requests at t = 0 on adapters 0, 1, 2, 0. The first iteration takes 0 and 1,
  // skips adapter 2 (the set {0, 1} is full) and takes the fourth (adapter 0, in the set); the
  // third runs alone in the second iteration. Loads: 0 and 1 from storage in the first (2 x
  // 0.6 s), 2 from storage in the second (0.6 s), each blocking its iteration.
  const Run r = run({lreq(0, 0), lreq(0, 1), lreq(0, 2), lreq(0, 0)}, lora_config(2, 2), lora_options());
  REQUIRE(r.iters.size() == 2);
  CHECK(r.iters[0].shape.prefill_seqs == 3);
  CHECK(r.iters[0].shape.lora_tokens == 48);
  CHECK(r.iters[0].shape.lora_adapters == 2);
  CHECK(r.iters[1].shape.prefill_seqs == 1);
  CHECK(r.iters[1].shape.lora_adapters == 1);
  const LinearCost m;
  const double it0 = m.prefill(48, 48) + 2 * 0.6, it1 = m.prefill(16, 16) + 0.6;
  CHECK(r.recs.at(0).finish.seconds() == rel_approx(it0, 1e-9));
  CHECK(r.recs.at(3).finish.seconds() == rel_approx(it0, 1e-9));
  CHECK(r.recs.at(2).first_scheduled.seconds() == rel_approx(it0, 1e-9));
  CHECK(r.recs.at(2).finish.seconds() == rel_approx(it0 + it1, 1e-9));
  CHECK(r.res.lora.storage_loads == 3);
  CHECK(r.res.lora.gpu_hits == 1);  // the fourth request: adapter 0 already loaded
  CHECK(r.res.lora.gpu_evictions == 1);
  CHECK(r.res.gpu_time.lora_load_s == rel_approx(1.8, 1e-12));
}

TEST_CASE("serving lora: a load costs bytes / bandwidth once per miss, host hits skip storage") {
  // max_loras 1, host cache 2: adapter 0, then 1 (evicts 0 from the GPU), then 0 again (from
  // host memory), then 0 again (on the GPU). Requests far apart, so each runs alone.
  const Run r = run({lreq(0, 0), lreq(10, 1), lreq(20, 0), lreq(30, 0)}, lora_config(1, 2), lora_options());
  CHECK(r.res.lora.lookups == 4);
  CHECK(r.res.lora.storage_loads == 2);
  CHECK(r.res.lora.host_loads == 1);
  CHECK(r.res.lora.gpu_hits == 1);
  const double storage = 1e9 / 2e9 + 1e9 / 1e10, host = 1e9 / 1e10;
  CHECK(r.res.lora.load_s == rel_approx(2 * storage + host, 1e-12));
  CHECK(r.res.gpu_time.lora_load_s == rel_approx(2 * storage + host, 1e-12));
  CHECK(r.res.lora.load_bytes == rel_approx(3e9, 1e-12));
  const LinearCost m;
  const double it = m.prefill(16, 16);
  const double spans[] = {storage, storage, host, 0};
  for (std::int64_t i = 0; i < 4; ++i) {
    const RequestRecord& q = r.recs.at(i);
    CHECK((q.finish - q.first_scheduled).seconds() == rel_approx(it + spans[i], 1e-9));
  }
}

TEST_CASE("serving lora: base-model requests run as without LoRA") {
  std::vector<Request> rs;
  for (int i = 0; i < 30; ++i) rs.push_back(req(0.01 * i, 50 + 37 * (i % 7), 3 + (i % 11)));
  SchedulerConfig off;
  const Run a = run(rs, off, ReplicaOptions{});
  const Run b = run(rs, lora_config(2, 4), lora_options());
  CHECK(a.res.makespan_s == b.res.makespan_s);
  CHECK(a.res.iterations == b.res.iterations);
  for (const auto& [id, rec] : a.recs) CHECK(b.recs.at(id).finish == rec.finish);
  CHECK(b.res.lora.lookups == 0);
  CHECK(b.res.gpu_time.lora_load_s == 0);
}

TEST_CASE("serving lora: the fast and the reference loops agree with adapters") {
  std::vector<Request> rs;
  for (int i = 0; i < 60; ++i) rs.push_back(lreq(0.005 * i, i % 3 == 0 ? -1 : i % 5, 40 + 29 * (i % 9), 2 + (i % 13)));
  const SchedulerConfig c = lora_config(2, 3);
  const Run f = run(rs, c, lora_options());
  const Run ref = run(rs, c, lora_options(), true);
  CHECK(f.res.completed_requests == 60);
  CHECK(f.res.makespan_s == ref.res.makespan_s);
  CHECK(f.res.lora.lookups == ref.res.lora.lookups);
  CHECK(f.res.lora.storage_loads == ref.res.lora.storage_loads);
  for (const auto& [id, rec] : ref.recs) CHECK(f.recs.at(id).finish == rec.finish);
  for (const IterationRecord& it : f.iters) CHECK(it.shape.lora_adapters <= 2);
}

TEST_CASE("serving lora: the cost model prices shrink and expand per layer from FLOPs and bytes") {
  const ServingCostModel cost(llama8b_h100());
  BatchShape b;
  add_decode_sequence(b, 1000, 0);
  for (int i = 1; i < 64; ++i) add_decode_sequence(b, 1000, 0);
  const IterationTime plain = cost.iteration(b);
  CHECK(plain.lora_s == 0);
  b.lora_tokens = 48;
  b.lora_adapters = 4;
  b.lora_rank = 16;
  const IterationTime with = cost.iteration(b);
  const double T = 48, r = 16, A = 4, P = 7;
  int shrinks = 0, expands = 0;
  double sum_s = 0;
  for (const IterationOp& op : cost.iteration_ops(b)) {
    if (op.part != IterationPart::lora) continue;
    const bool shrink = std::string(op.name) == "lora_shrink";
    (shrink ? shrinks : expands) += 1;
    const double w = shrink ? kDin : kDout;
    CHECK(op.cost.flops == rel_approx(2 * T * r * w, 1e-12));
    const double act = shrink ? T * kDin + T * r * P : T * r * P + 2 * T * kDout;
    CHECK(op.cost.bytes == rel_approx(2 * (A * r * w + act), 1e-12));
    sum_s += cost.op_seconds(op);
  }
  CHECK(shrinks == 32);
  CHECK(expands == 32);
  CHECK(with.lora_s == rel_approx(sum_s, 1e-9));
  CHECK(with.total_s - plain.total_s == rel_approx(with.lora_s, 1e-9));
  CHECK(with.decode_s == plain.decode_s);
}

TEST_CASE("serving lora: traffic draws adapters by Zipf popularity, the base model by base_fraction") {
  LoraTrafficSpec s;
  s.adapters = 3;
  s.popularity = LoraPopularity::zipf;
  s.zipf_s = 1;
  s.base_fraction = 0.25;
  // Weights 1, 1/2, 1/3: cumulative 6/11, 9/11, 1.
  const LoraPopularityTable t(s);
  CHECK(t.pick(0.2, 0.1) == -1);
  CHECK(t.pick(0.3, 6.0 / 11 - 1e-9) == 0);
  CHECK(t.pick(0.3, 6.0 / 11 + 1e-9) == 1);
  CHECK(t.pick(0.3, 9.0 / 11 + 1e-9) == 2);
  TrafficSpec spec;
  spec.arrival.process = ArrivalProcess::offline;
  spec.requests = 40000;
  spec.lora = s;
  const auto src = make_traffic(spec);
  std::map<std::int32_t, double> n;
  while (src->next_arrival()) ++n[src->pop().lora];
  CHECK(n[-1] / 40000 == abs_approx(0.25, 0.01));
  CHECK(n[0] / 40000 == abs_approx(0.75 * 6 / 11, 0.01));
  CHECK(n[1] / 40000 == abs_approx(0.75 * 3 / 11, 0.01));
  CHECK(n[2] / 40000 == abs_approx(0.75 * 2 / 11, 0.01));
  TrafficSpec none = spec;
  none.lora = {};
  none.requests = 100;
  const auto base = make_traffic(none);
  while (base->next_arrival()) CHECK(base->pop().lora == -1);
}

TEST_CASE("serving lora: /serving LoRA keys, max_cpu_loras defaults to max_loras and may not be below it") {
  const auto read = [](const std::string& text) {
    const Json j = parse_json(text, "s.json");
    return read_scheduler_config(JsonObject(j, "/serving", "s.json"));
  };
  const SchedulerConfig c = read(R"({"max_loras": 8, "lora_load_gbyte_per_s": 4})");
  CHECK(c.max_loras == 8);
  CHECK(c.max_cpu_loras == 8);
  CHECK(c.max_lora_rank == 16);
  CHECK(c.lora_load_bytes_per_s == rel_approx(4e9, 1e-12));
  CHECK_THROWS_AS(read(R"({"max_loras": 8, "max_cpu_loras": 4})"), InputError);
}

TEST_CASE("serving lora: decode steps of adapter requests are LoRA tokens") {
  // One request on adapter 0 and one on the base model, 3 tokens each: the prefill iteration
  // has 16 adapter tokens, each decode step one.
  const Run r = run({lreq(0, 0, 16, 3), lreq(0, -1, 16, 3)}, lora_config(1, 1), lora_options());
  REQUIRE(r.iters.size() == 3);
  CHECK(r.iters[0].shape.lora_tokens == 16);
  CHECK(r.iters[1].shape.decode_seqs == 2);
  CHECK(r.iters[1].shape.lora_tokens == 1);
  CHECK(r.iters[1].shape.lora_adapters == 1);
  CHECK(r.iters[1].shape.lora_rank == 16);
}
