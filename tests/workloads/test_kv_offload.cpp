// KV offloading (kv_cache.hpp's host tier) against hand-worked cases: a prefix the GPUs evicted
// found again in the tier and loaded, the tier's LRU order (a prefix outlives its tail, a chunked
// prompt's later pages go behind its earlier ones), a pooled tier telling local from remote
// loads, the load's time in the replica's iteration, the sizes, and the scheduler keys.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kv_requests.hpp"
#include "serving_fakes.hpp"
#include "serving_llama8b.hpp"
#include "sim/error.hpp"
#include "sim/json_reader.hpp"
#include "tolerance.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_memory.hpp"
#include "workloads/serving_scheduler_params.hpp"
#include "workloads/serving_sim.hpp"
#include "workloads/serving_trace.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

Request req(std::int64_t id, std::int32_t prompt, std::int32_t shared = 0, std::int64_t group = -1) {
  return test::kv_request(id, prompt, shared, group);
}

constexpr PrefixCaching kModes[] = {PrefixCaching::hash_lru, PrefixCaching::radix};

// The timing cases' replica: hash_lru prefix caching; a block moves 1 MB over a 1 GB/s link (1 ms).
SchedulerConfig timing_scheduler(std::int64_t max_model_len) {
  SchedulerConfig sc;
  sc.prefix_caching = PrefixCaching::hash_lru;
  sc.max_model_len = max_model_len;
  return sc;
}
ReplicaOptions one_ms_a_block() {
  ReplicaOptions o;
  o.kv_block_bytes = 1e6;
  o.host_link_bytes_per_s = 1e9;
  return o;
}
// At t, `prompt` tokens whose first `shared` are prefix group `group`'s, 4 to generate.
Request shared_req(double t, std::int32_t prompt, std::int32_t shared, std::int64_t group) {
  Request r = test::req(t, prompt, 4);
  r.shared_prefix_tokens = shared;
  r.prefix_group = group;
  return r;
}

}  // namespace

TEST_CASE("kv offloading: a prefix the GPUs evicted is found in the host tier, loaded and counted a hit") {
  for (const PrefixCaching mode : kModes) {
    CAPTURE(static_cast<int>(mode));
    // 4 GPU blocks of 16 tokens, a tier of 10 pages. a: 50 tokens, 48 shared (group 1): 3 full
    // prompt pages written through. x: 64 tokens of its own takes all 4 blocks, evicting a's.
    const auto tier = make_kv_host_tier(10);
    auto c = make_kv_cache(4, 16, 0, mode, {tier, 0});
    auto plain = make_kv_cache(4, 16, 0, mode);
    for (auto* k : {c.get(), plain.get()}) {
      REQUIRE(k->allocate(req(0, 50, 48, 1), 50));
      k->release(req(0, 50, 48, 1));
      REQUIRE(k->allocate(req(1, 64), 64));
      k->release(req(1, 64));
    }
    const Request b = req(2, 50, 48, 1);
    CHECK(plain->cached_prefix_tokens(b) == 0);  // the GPUs alone lost it
    CHECK(c->cached_prefix_tokens(b) == 48);     // pages 0-2 from the tier (the 4th would be the last token's)
    CHECK(c->take_loads().local_blocks == 0);    // a lookup loads nothing
    REQUIRE(c->allocate(b, 50));
    const KvLoads l = c->take_loads();
    CHECK(l.local_blocks == 3);
    CHECK(l.remote_blocks == 0);
    CHECK(c->take_loads().local_blocks == 0);  // taken once
    CHECK(c->stats().prefix_hit_tokens == 48);
    CHECK(c->stats().offload_hit_tokens == 48);
    CHECK(c->stats().offload_remote_hit_tokens == 0);
    CHECK(c->blocks_of(b) == 4);  // the loaded pages took fresh GPU blocks, plus the last partial one
    // The loaded pages are on the GPUs now: a third request of the group hits there, loading nothing.
    c->release(b);
    REQUIRE(c->allocate(req(3, 50, 48, 1), 50));
    CHECK(c->take_loads().local_blocks == 0);
    CHECK(c->stats().offload_hit_tokens == 48);
    // a's 3 pages and x's 4 were written; b's were held already (touched, not written).
    const KvHostTierStats s = host_tier_stats(*tier);
    CHECK(s.capacity_pages == 10);
    CHECK(s.stored_pages == 7);
    CHECK(s.used_pages == 7);
    CHECK(s.peak_pages == 7);
    CHECK(s.evicted_pages == 0);
  }
}

TEST_CASE("kv offloading: the tier evicts least recently used pages, a prefix after its tail") {
  for (const PrefixCaching mode : kModes) {
    CAPTURE(static_cast<int>(mode));
    // A tier of 4 pages shared by cache A (replica 0, which writes) and cache B (replica 1, whose
    // GPUs hold nothing, so it sees only the tier).
    const auto tier = make_kv_host_tier(4);
    auto a = make_kv_cache(100, 16, 0, mode, {tier, 0});
    auto b = make_kv_cache(100, 16, 0, mode, {tier, 1});
    REQUIRE(a->allocate(req(0, 33, 32, 1), 33));  // group 1's pages 0, 1: queue g1p1, g1p0
    REQUIRE(a->allocate(req(1, 33, 32, 2), 33));  // g1p1, g1p0, g2p1, g2p0 (full)
    REQUIRE(a->allocate(req(2, 17, 16, 3), 17));  // g3p0 evicts g1p1: group 1 keeps its prefix page
    CHECK(host_tier_stats(*tier).evicted_pages == 1);
    CHECK(b->cached_prefix_tokens(req(10, 33, 32, 1)) == 16);
    CHECK(b->cached_prefix_tokens(req(11, 33, 32, 2)) == 32);
    REQUIRE(b->allocate(req(11, 33, 32, 2), 33));
    const KvLoads l = b->take_loads();
    CHECK(l.remote_blocks == 2);  // replica 0 wrote them
    CHECK(l.local_blocks == 0);
    CHECK(b->stats().offload_remote_hit_tokens == 32);

    // A chunked prompt: its first chunk writes page 0, the second pages 1 and 2 behind it, so the
    // queue reads g5p2, g5p1, g5p0 and one more page evicts the tail, not the prefix.
    const auto t3 = make_kv_host_tier(3);
    auto w = make_kv_cache(100, 16, 0, mode, {t3, 0});
    auto r = make_kv_cache(100, 16, 0, mode, {t3, 1});
    REQUIRE(w->allocate(req(20, 49, 48, 5), 16));
    REQUIRE(w->allocate(req(20, 49, 48, 5), 48));
    CHECK(host_tier_stats(*t3).stored_pages == 3);
    CHECK(r->cached_prefix_tokens(req(22, 49, 48, 5)) == 48);
    REQUIRE(w->allocate(req(21, 17, 16, 6), 17));
    CHECK(r->cached_prefix_tokens(req(22, 49, 48, 5)) == 32);
    // Decode steps past the prompt write nothing.
    REQUIRE(w->allocate(req(21, 17, 16, 6), 80));
    CHECK(host_tier_stats(*t3).stored_pages == 4);
  }
}

TEST_CASE("kv offloading: a tier of 0 pages holds nothing; a tier without prefix caching is refused") {
  const auto empty = make_kv_host_tier(0);
  auto c = make_kv_cache(4, 16, 0, PrefixCaching::hash_lru, {empty, 0});
  REQUIRE(c->allocate(req(0, 50, 48, 1), 50));
  CHECK(host_tier_stats(*empty).stored_pages == 0);
  CHECK_THROWS_AS(make_kv_cache(4, 16, 0, PrefixCaching::none, {make_kv_host_tier(4), 0}), std::invalid_argument);
  CHECK_THROWS_AS(make_kv_host_tier(-1), std::invalid_argument);
}

TEST_CASE("kv offloading: a request waits for its loads, bytes over the link's rate") {
  // LinearCost replica, 300 GPU blocks of 16 tokens. A (4000 tokens, 3840 shared) at 0 s; F
  // (4800 of its own, one output token: all 300 blocks) at 1 s evicts every cached block of A;
  // B (as A) at 2 s finds 240 blocks: on the GPUs without F, in the tier with F. Each block moves 1 MB at 1 GB/s (1
  // ms), so B's first token comes 240 ms later than a GPU hit's, and nothing else changes.
  const SchedulerConfig sc = timing_scheduler(8192);
  const ReplicaOptions o = one_ms_a_block();
  const test::LinearCost cost;
  auto shared = [](double t) { return shared_req(t, 4000, 3840, 7); };
  struct Out {
    ServingResult res;
    std::map<std::int64_t, RequestRecord> recs;
  };
  auto run = [&](bool filler, bool tier) {
    std::vector<Request> rs{shared(0)};
    if (filler) rs.push_back(test::req(1, 4800, 1));
    rs.push_back(shared(2));
    test::VectorSource src(rs);
    auto kv = make_kv_cache(300, 16, 0, sc.prefix_caching, {tier ? make_kv_host_tier(1000) : nullptr, 0});
    Out out;
    ReplicaOptions oo = o;
    oo.hooks.on_request = [&](const RequestRecord& r) { out.recs[r.request.id] = r; };
    out.res = simulate_replica(src, *kv, cost, sc, oo);
    return out;
  };
  const Out gpu_hit = run(false, false), from_tier = run(true, true), lost = run(true, false);
  const auto ttft = [](const Out& o, std::int64_t id) {
    const RequestRecord& r = o.recs.at(id);
    return (r.first_token - r.request.arrival).seconds();
  };
  CHECK(from_tier.res.kv_stats.offload_hit_tokens == 3840);
  CHECK(from_tier.res.kv_load_link_s == rel_approx(0.240, 1e-12));
  CHECK(from_tier.res.gpu_time.kv_load_s == rel_approx(0.240, 1e-9));  // nothing else to run meanwhile
  CHECK(ttft(from_tier, 2) - ttft(gpu_hit, 1) == rel_approx(0.240, 1e-9));
  // Without the tier B recomputes the prefix: 3840 more prefill tokens.
  CHECK(lost.res.kv_stats.prefix_hit_tokens == 0);
  CHECK(from_tier.res.prefill_tokens_computed == lost.res.prefill_tokens_computed - 3840);
  CHECK(from_tier.res.prefill_tokens_computed == 4000 + 4800 + 160);
}

TEST_CASE("kv offloading: the tier's pages are kv_offloading_size over a block on all the replica's GPUs") {
  // Llama-3-8B on one H100: a block is 16 x 32 layers x 2 x 8 heads x 128 x 2 bytes = 2 MiB,
  // so 100 GiB hold 51,200 pages; at TP 2 a GPU holds half the heads, the replica still 2 MiB a page.
  ServingDeployment d = test::llama8b_h100();
  SchedulerConfig s = test::scheduler();
  s.kv_offloading_size_gib = 100;
  CHECK(kv_capacity(d, s).num_offload_blocks == 51200);
  d.tp = 2;
  CHECK(kv_capacity(d, s).num_offload_blocks == 51200);
  s.kv_offloading_size_gib = 0;
  CHECK(kv_capacity(d, s).num_offload_blocks == 0);
}

TEST_CASE("kv offloading params: vLLM's kv_offloading_size in GiB, the scope, and the errors") {
  const auto read = [](const std::string& text) {
    const Json j = parse_json(text, "s.json");
    return read_scheduler_config(JsonObject(j, "/serving", "s.json"));
  };
  const SchedulerConfig d = read("{}");
  CHECK(d.kv_offloading_size_gib == 0);
  CHECK(d.kv_offloading_scope == KvOffloadScope::replica);
  const SchedulerConfig c =
      read(R"({"enable_prefix_caching": true, "kv_offloading_size": 512, "kv_offloading_scope": "pool"})");
  CHECK(c.kv_offloading_size_gib == rel_approx(512, 1e-12));
  CHECK(c.kv_offloading_scope == KvOffloadScope::pool);
  CHECK_THROWS_AS(read(R"({"enable_prefix_caching": true, "kv_offloading_scope": "node"})"), InputError);
  CHECK_THROWS_AS(read(R"({"kv_offloading_size": -1})"), InputError);
  try {
    read(R"({"kv_offloading_size": 64})");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("/serving/kv_offloading_size") != std::string::npos);
    CHECK(std::string(e.what()).find("enable_prefix_caching") != std::string::npos);
  }
}

TEST_CASE("kv offloading: a request's load overlaps the others' iterations; loads queue on the link") {
  // 250 GPU blocks. A (group 7) at 0 s and A2 (group 8) at 0.5 s: 1616 tokens, 1600 shared; F
  // (4000 of its own, one output token: all 250 blocks) at 1 s evicts both prefixes; D (100
  // tokens, 400 to generate) decodes from 1.95 s; B (group 7) and B2 (group 8) at 2 s find 100
  // pages each in the tier. The loads take 100 ms each, one after the other on the link: B's
  // prefill starts after 2.1 s, B2's after 2.2 s, and D's iterations go on meanwhile.
  const SchedulerConfig sc = timing_scheduler(4096);
  const ReplicaOptions o = one_ms_a_block();
  const test::LinearCost cost;
  auto shared = [](double t, std::int64_t group) { return shared_req(t, 1616, 1600, group); };
  test::VectorSource src(
      {shared(0, 7), shared(0.5, 8), test::req(1, 4000, 1), test::req(1.95, 100, 400), shared(2, 7), shared(2, 8)});
  auto kv = make_kv_cache(250, 16, 0, sc.prefix_caching, {make_kv_host_tier(1000), 0});
  std::map<std::int64_t, RequestRecord> recs;
  int during_loads = 0;
  ReplicaOptions oo = o;
  oo.hooks.on_request = [&](const RequestRecord& r) { recs[r.request.id] = r; };
  oo.hooks.on_iteration = [&](const IterationRecord& it) {
    if (it.start.seconds() > 2.0 && it.end.seconds() < 2.2 && it.shape.decode_seqs == 1 && it.shape.prefill_tokens == 0)
      ++during_loads;
  };
  const ServingResult res = simulate_replica(src, *kv, cost, sc, oo);
  CHECK(res.kv_stats.offload_hit_tokens == 2 * 1600);
  CHECK(res.kv_load_link_s == rel_approx(0.200, 1e-12));
  CHECK(res.gpu_time.kv_load_s == 0);  // D ran meanwhile
  // D's decode steps take a_s + b_s + c_s x 100-300 KV tokens, about 1.02 ms: some 190 fit.
  CHECK(during_loads > 150);
  const auto ttft = [&](std::int64_t id) {
    const RequestRecord& r = recs.at(id);
    return (r.first_token - r.request.arrival).seconds();
  };
  // Both admitted at the first iteration boundary after 2 s, their loads queued there.
  CHECK(recs.at(4).first_scheduled.seconds() < 2.002);
  CHECK(recs.at(5).first_scheduled == recs.at(4).first_scheduled);
  // Each: the wait to admission, its load, at most one decode step of D, and its own 16-token
  // prefill chunk (a_s + b_s x 17 + c_s x KV: about 1.2 ms).
  CHECK(ttft(4) > 0.100);
  CHECK(ttft(4) < 0.100 + 0.005);
  CHECK(ttft(5) > 0.200);
  CHECK(ttft(5) < 0.200 + 0.005);
  CHECK(res.preemptions_recompute == 0);
}

TEST_CASE("kv offloading: without chunked prefill a loading request holds back no one, then runs whole") {
  // As the first timing case with chunked prefill off (budget 4800, the longest prompt): B (at
  // 2 s) loads 240 pages for 240 ms; C (500 tokens of its own, also at 2 s, behind B) runs its
  // prompt at once in a prefill-only iteration, and B's remaining 160 tokens run in one
  // iteration once its KV is in.
  SchedulerConfig sc = timing_scheduler(8192);
  sc.enable_chunked_prefill = false;
  sc.max_num_batched_tokens = 4800;
  const ReplicaOptions o = one_ms_a_block();
  const test::LinearCost cost;
  test::VectorSource src(
      {shared_req(0, 4000, 3840, 7), test::req(1, 4800, 1), shared_req(2, 4000, 3840, 7), test::req(2, 500, 1)});
  auto kv = make_kv_cache(300, 16, 0, sc.prefix_caching, {make_kv_host_tier(1000), 0});
  std::vector<std::pair<double, std::int64_t>> prefills;  // from 2 s on: start, prefill tokens
  ReplicaOptions oo = o;
  oo.hooks.on_iteration = [&](const IterationRecord& it) {
    if (it.start.seconds() >= 2.0 && it.shape.prefill_tokens > 0)
      prefills.emplace_back(it.start.seconds(), it.shape.prefill_tokens);
  };
  const ServingResult res = simulate_replica(src, *kv, cost, sc, oo);
  CHECK(res.rejected_requests == 0);
  CHECK(res.kv_stats.offload_hit_tokens == 3840);
  REQUIRE(prefills.size() == 2);
  CHECK(prefills[0].second == 500);
  CHECK(prefills[0].first < 2.24);
  CHECK(prefills[1].second == 160);
  CHECK(prefills[1].first >= 2.24 - 1e-9);  // at the picosecond its KV is in
}

TEST_CASE("kv offloading: the serving trace shows a request's wait for its KV between queueing and prefill") {
  // The first timing case with the tier: B (req 2) is admitted at 2 s, its 240 blocks are in at
  // 2.24 s, its prefill runs from there.
  const SchedulerConfig sc = timing_scheduler(8192);
  const test::LinearCost cost;
  test::VectorSource src({shared_req(0, 4000, 3840, 7), test::req(1, 4800, 1), shared_req(2, 4000, 3840, 7)});
  auto kv = make_kv_cache(300, 16, 0, sc.prefix_caching, {make_kv_host_tier(1000), 0});
  ServingTraceCollector col(1, 1);
  ReplicaOptions o = one_ms_a_block();
  o.hooks = col.hooks();
  const ServingResult res = simulate_replica(src, *kv, cost, sc, o);
  const Trace t = col.build(res, 300);
  std::vector<std::pair<std::string, std::pair<std::int64_t, std::int64_t>>> b;  // kind, (start, dur)
  for (const auto& e : t.events)
    if (t.str(e.name) == "req 2") b.push_back({t.str(e.kind), {e.start_ps, e.dur_ps}});
  std::sort(b.begin(), b.end(), [](const auto& x, const auto& y) { return x.second.first < y.second.first; });
  REQUIRE(b.size() == 3);  // admitted on arrival: no queued span
  CHECK(b[0].first == "kv_load");
  CHECK(b[0].second.first == seconds(2.0).ps);
  CHECK(b[0].second.second == seconds(0.240).ps);
  CHECK(b[1].first == "prefill");
  CHECK(b[1].second.first == seconds(2.24).ps);
  CHECK(b[2].first == "decode");
  // Requests that loaded nothing have no such span.
  for (const auto& e : t.events)
    if (t.str(e.kind) == "kv_load") CHECK(t.str(e.name) == "req 2");
}
