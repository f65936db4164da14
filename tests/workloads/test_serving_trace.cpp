// The serving trace (--trace on a serving scenario): a hand-worked two-request timeline gives
// exactly the expected spans and counters, request lanes number the maximum concurrency, and the
// trace survives both file formats and is deterministic.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "fake_kv_cache.hpp"
#include "serving_fakes.hpp"
#include "sim/trace.hpp"
#include "tolerance.hpp"
#include "workloads/serving_sim.hpp"
#include "workloads/serving_trace.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

Trace traced(std::vector<Request> rs, int tp, int pp, SchedulerConfig c = {}, std::int64_t blocks = 1000) {
  VectorSource src(std::move(rs));
  FakeKvCache kv(blocks, c.block_size, 0);
  LinearCost cost;
  ServingTraceCollector col(tp, pp);
  ReplicaOptions o;
  o.hooks = col.hooks();
  const ServingResult res = simulate_replica(src, kv, cost, c, o);
  return col.build(res, blocks);
}

// (lane thread, kind, start, duration) of every event named `name`, in start order.
using Span = std::tuple<std::string, std::string, std::int64_t, std::int64_t>;
std::vector<Span> spans_named(const Trace& t, const std::string& name) {
  std::vector<Span> out;
  for (const auto& e : t.events) {
    if (t.str(e.name) == name) out.emplace_back(t.str(t.lanes[e.lane].thread), t.str(e.kind), e.start_ps, e.dur_ps);
  }
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return std::get<2>(a) < std::get<2>(b); });
  return out;
}

const TraceCounterTrack& counter(const Trace& t, const std::string& name) {
  for (const auto& c : t.counters) {
    if (t.str(c.name) == name) return c;
  }
  FAIL("no counter " << name);
  return t.counters.front();
}

using Samples = std::vector<std::pair<std::int64_t, double>>;

}  // namespace

TEST_CASE("serving trace: two requests, hand-worked: iteration events per GPU, request spans, counters") {
  // As in test_serving_sim's decode-first case: r0 (100 prompt, 3 out) at 0; r1 (50, 2) at
  // 0.5 ms, during r0's prefill. Iteration 1 prefills r0; 2 decodes r0 beside r1's prefill;
  // 3 decodes both, which finish.
  const LinearCost m;
  const std::int64_t t1 = seconds(m.prefill(100, 100)).ps;
  const std::int64_t t2 = t1 + seconds(m.a_s + m.b_s * 51 + m.c_s * (101 + 50)).ps;
  const std::int64_t t3 = t2 + seconds(m.a_s + m.b_s * 2 + m.c_s * (102 + 51)).ps;
  const std::int64_t a1 = seconds(0.0005).ps;
  const Trace t = traced({req(0, 100, 3), req(0.0005, 50, 2)}, /*tp=*/2, /*pp=*/1);

  // 2 GPU lanes and 2 request slots (r1 arrives while r0 is in the replica).
  REQUIRE(t.lanes.size() == 4);
  CHECK(t.events.size() == 3 * 2 + 5);  // r0 has no queued span: it is scheduled on arrival
  const std::vector<Span> it1 = {{"gpu 0", "prefill", 0, t1}, {"gpu 1", "prefill", 0, t1}};
  auto close = [](const std::vector<Span>& got, const std::vector<Span>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(std::get<0>(got[i]) == std::get<0>(want[i]));
      CHECK(std::get<1>(got[i]) == std::get<1>(want[i]));
      // Each iteration's end is rounded to a picosecond once: allow one per iteration.
      CHECK(std::get<2>(got[i]) == abs_approx(static_cast<double>(std::get<2>(want[i])), 3));
      CHECK(std::get<3>(got[i]) == abs_approx(static_cast<double>(std::get<3>(want[i])), 3));
    }
  };
  auto sorted_by_lane = [](std::vector<Span> v) {
    std::stable_sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return std::get<0>(a) < std::get<0>(b); });
    return v;
  };
  close(sorted_by_lane(spans_named(t, "prefill 100 tok + decode 0 seq")), it1);
  close(sorted_by_lane(spans_named(t, "prefill 50 tok + decode 1 seq")),
        {{"gpu 0", "mixed", t1, t2 - t1}, {"gpu 1", "mixed", t1, t2 - t1}});
  close(sorted_by_lane(spans_named(t, "prefill 0 tok + decode 2 seq")),
        {{"gpu 0", "decode", t2, t3 - t2}, {"gpu 1", "decode", t2, t3 - t2}});
  close(spans_named(t, "req 0"), {{"slot 0", "prefill", 0, t1}, {"slot 0", "decode", t1, t3 - t1}});
  close(spans_named(t, "req 1"),
        {{"slot 1", "queued", a1, t1 - a1}, {"slot 1", "prefill", t1, t2 - t1}, {"slot 1", "decode", t2, t3 - t2}});

  // Counters at each iteration's start, only where they change. KV blocks of 16 tokens: r0's
  // 100 prompt tokens take 7; in iteration 2 r1's 50 take 4 more, r0 still fits in 7.
  auto near = [](const Samples& got, const Samples& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(got[i].first == abs_approx(static_cast<double>(want[i].first), 3));
      CHECK(got[i].second == abs_approx(want[i].second, 1e-12));
    }
  };
  near(counter(t, "running").samples, {{0, 1}, {t1, 2}});
  near(counter(t, "kv_blocks_used").samples, {{0, 7}, {t1, 11}});
  near(counter(t, "kv_utilization").samples, {{0, 7.0 / 1000}, {t1, 11.0 / 1000}});
  near(counter(t, "batch_tokens").samples, {{0, 100}, {t1, 51}, {t2, 2}, {t3, 0}});
  near(counter(t, "queue_length").samples, {{0, 0}});
  // The summary carries the run's headline figures.
  double makespan = 0;
  for (const auto& [k, v] : t.summary) {
    if (k == "makespan_s") makespan = v;
  }
  CHECK(makespan == rel_approx(static_cast<double>(t3) * 1e-12, 1e-9));
}

TEST_CASE("serving trace: an idle gap drops the batch to zero; pipeline stages name the GPU lanes") {
  const LinearCost m;
  const std::int64_t t1 = seconds(m.prefill(10, 10)).ps;
  const std::int64_t t2 = t1 + seconds(m.a_s + m.b_s + m.c_s * 11).ps;
  const std::int64_t a1 = seconds(1.0).ps;
  const Trace t = traced({req(0, 10, 2), req(1.0, 10, 1)}, /*tp=*/1, /*pp=*/2);
  REQUIRE(t.lanes.size() >= 2);
  CHECK(t.str(t.lanes[0].thread) == "stage 0 / gpu 0");
  CHECK(t.str(t.lanes[1].thread) == "stage 1 / gpu 1");
  // r1 arrives after r0 left: the same slot.
  CHECK(t.lanes.size() == 3);
  const auto& b = counter(t, "batch_tokens").samples;
  // r0: prefill 10 tokens, decode 1; idle until r1 at 1 s, prefill 10 (its only token); idle.
  REQUIRE(b.size() == 5);
  CHECK(b[0] == std::pair<std::int64_t, double>{0, 10});
  CHECK(b[1].first == abs_approx(static_cast<double>(t1), 2));
  CHECK(b[1].second == 1);
  CHECK(b[2].first == abs_approx(static_cast<double>(t2), 3));
  CHECK(b[2].second == 0);
  CHECK(b[3].first == a1);
  CHECK(b[3].second == 10);
  CHECK(b[4].first == abs_approx(static_cast<double>(a1 + seconds(m.prefill(10, 10)).ps), 3));
  CHECK(b[4].second == 0);
}

TEST_CASE("serving trace: slots by interval partitioning: as many as intervals ever overlap") {
  // Hand-worked: [0,10) [2,5) [5,8) [6,12) [10,11): at most 3 overlap (at 6..8: 0, 2, 3);
  // [5,8) reuses [2,5)'s slot 1; [10,11) takes slot 0 back, the lowest free.
  const std::vector<std::pair<std::int64_t, std::int64_t>> iv = {{0, 10}, {2, 5}, {5, 8}, {6, 12}, {10, 11}};
  CHECK(assign_slots(iv) == std::vector<std::uint32_t>{0, 1, 1, 2, 0});
  CHECK(assign_slots({}).empty());

  // A run: 40 requests, bursts of 8 at once every 5 s; lanes = the largest number of requests
  // in the replica at one time, counted by brute force over the request spans.
  std::vector<Request> rs;
  for (int i = 0; i < 40; ++i) rs.push_back(req(5.0 * (i / 8) + 1e-3 * (i % 8), 200 + 10 * i, 3 + i % 5));
  const Trace t = traced(rs, 1, 1);
  std::vector<std::pair<std::int64_t, std::int64_t>> life(40, {INT64_MAX, INT64_MIN});
  std::uint32_t max_slot = 0;
  for (const auto& e : t.events) {
    const std::string& n = t.str(e.name);
    if (n.rfind("req ", 0) != 0) continue;
    auto& l = life[static_cast<std::size_t>(std::stoi(n.substr(4)))];
    l.first = std::min(l.first, e.start_ps);
    l.second = std::max(l.second, e.start_ps + e.dur_ps);
    max_slot = std::max(max_slot, t.lanes[e.lane].tid);
  }
  std::size_t most = 0;
  for (const auto& [b, e] : life) {
    std::size_t n = 0;
    for (const auto& [b2, e2] : life) n += b2 <= b && b < e2 ? 1 : 0;
    most = std::max(most, n);
  }
  CHECK(most == 8);
  CHECK(t.lanes.size() == 1 + most);
  CHECK(max_slot + 1 == most);
  // No two spans overlap on a slot lane.
  for (std::size_t i = 1; i < t.events.size(); ++i) {
    if (t.events[i].lane == t.events[i - 1].lane && t.events[i].lane != 0)
      CHECK(t.events[i].start_ps >= t.events[i - 1].start_ps + t.events[i - 1].dur_ps);
  }
}

TEST_CASE("serving trace: round-trips through .ctt and Chrome JSON, and the same run gives the same bytes") {
  std::vector<Request> rs;
  for (int i = 0; i < 30; ++i) rs.push_back(req(0.01 * i, 300 + 37 * i, 2 + i % 7));
  SchedulerConfig c;
  c.max_num_batched_tokens = 512;  // chunked prefills: mixed batches
  const Trace t = traced(rs, 2, 2, c, 400);
  std::ostringstream a, b;
  write_trace_binary(t, a);
  write_trace_binary(traced(rs, 2, 2, c, 400), b);
  CHECK(a.str() == b.str());

  auto same = [&](const Trace& r) {
    REQUIRE(r.events.size() == t.events.size());
    for (std::size_t i = 0; i < t.events.size(); ++i) {
      const auto& x = t.events[i];
      const auto& y = r.events[i];
      CAPTURE(i);
      CHECK(x.start_ps == y.start_ps);
      CHECK(x.dur_ps == y.dur_ps);
      CHECK(t.str(x.name) == r.str(y.name));
      CHECK(t.str(x.kind) == r.str(y.kind));
      CHECK(t.str(t.lanes[x.lane].thread) == r.str(r.lanes[y.lane].thread));
      CHECK(t.str(t.lanes[x.lane].group) == r.str(r.lanes[y.lane].group));
    }
    REQUIRE(r.counters.size() == t.counters.size());
    for (std::size_t i = 0; i < t.counters.size(); ++i) {
      CHECK(t.str(t.counters[i].name) == r.str(r.counters[i].name));
      CHECK(t.str(t.counters[i].process) == r.str(r.counters[i].process));
      CHECK(t.counters[i].samples == r.counters[i].samples);
    }
    CHECK(r.summary == t.summary);
  };
  std::istringstream bin(a.str());
  same(read_trace_binary(bin, "mem.ctt"));
  std::ostringstream js;
  write_chrome_trace(t, js);
  std::istringstream jin(js.str());
  Trace fromjson = read_chrome_trace(jin, "mem.json");
  canonicalize(fromjson);
  same(fromjson);
}
