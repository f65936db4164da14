// The fleet loop and the routers' scans against brute-force references written here: a fleet
// loop that finds the next replica to step by scanning every replica (the loop keeps a heap),
// and routers that scan every replica for their pick (the router keeps running minima and
// skips building lists). Every router; equal bit for bit.
#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serving_fakes.hpp"
#include "sim/random.hpp"
#include "tolerance.hpp"
#include "workloads/kv_cache.hpp"
#include "workloads/serving_fleet_sim.hpp"
#include "workloads/serving_replicas.hpp"
#include "workloads/serving_router.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

constexpr std::int64_t kBlocks = 160;  // 16-token blocks per replica: 2,560 tokens, so some preempt

// `n` requests, Poisson at `rate_per_s` (keyed draws), prompts 10..409, outputs 1..120; every
// third shares one of 4 system prompts of 64 tokens (prefix_aware's matches).
std::vector<Request> requests(int n, double rate_per_s) {
  std::vector<Request> rs;
  double t_s = 0;
  for (int i = 0; i < n; ++i) {
    const auto u = [&](std::uint64_t k) { return uniform01(mix64(static_cast<std::uint64_t>(i) * 8 + k)); };
    t_s += -std::log(u(0)) / rate_per_s;
    Request r = req(t_s, 10 + static_cast<std::int32_t>(u(1) * 400), 1 + static_cast<std::int32_t>(u(2) * 120));
    if (i % 3 == 0) {
      r.prefix_group = static_cast<std::int64_t>(u(3) * 4);
      r.shared_prefix_tokens = std::min(64, r.prompt_tokens);
    }
    rs.push_back(r);
  }
  return rs;
}

FleetSpec fleet(int replicas, RouterPolicy policy) {
  FleetSpec f;
  FleetPool p;
  p.name = "linear";
  p.replicas = replicas;
  p.cost = std::make_shared<LinearCost>();
  p.gpu_blocks = kBlocks;
  p.scheduler.enable_chunked_prefill = true;
  p.scheduler.max_num_batched_tokens = 512;
  f.pools.push_back(p);
  f.router.policy = policy;
  f.router.seed = 7;
  return f;
}

// power_of_two's draw as the router documents it: a function of (seed, request id, purpose).
double p2_draw(std::uint64_t seed, std::int64_t id, std::uint64_t purpose) {
  return uniform01(mix64(mix64(seed) ^ static_cast<std::uint64_t>(id)) ^ purpose);
}

// A brute-force pick over every replica: the lowest count (ties: the lower id) among accepting
// ones; power_of_two's two draws among the accepting ones listed in id order.
int brute_pick(RouterPolicy policy, const Request& r, const std::vector<std::int64_t>& out,
               const std::vector<bool>& accepting, const std::vector<double>& kv_use, std::uint64_t seed,
               std::size_t& rr_next) {
  const std::size_t n = out.size();
  std::vector<int> open;
  for (std::size_t k = 0; k < n; ++k)
    if (accepting[k]) open.push_back(static_cast<int>(k));
  if (open.empty()) return -1;
  const auto least = [&] {
    int best = open[0];
    for (const int k : open)
      if (out[static_cast<std::size_t>(k)] < out[static_cast<std::size_t>(best)]) best = k;
    return best;
  };
  switch (policy) {
    case RouterPolicy::round_robin:
      for (std::size_t j = 0;; ++j) {
        const std::size_t k = (rr_next + j) % n;
        if (accepting[k]) {
          rr_next = k + 1;
          return static_cast<int>(k);
        }
      }
    case RouterPolicy::least_outstanding:
    case RouterPolicy::session_affinity:  // no sessions in the traffic: least outstanding
      return least();
    case RouterPolicy::least_kv: {
      int best = open[0];
      for (const int k : open) {
        const auto u = static_cast<std::size_t>(k), b = static_cast<std::size_t>(best);
        if (kv_use[u] < kv_use[b] || (kv_use[u] == kv_use[b] && out[u] < out[b])) best = k;
      }
      return best;
    }
    case RouterPolicy::power_of_two: {
      if (open.size() < 2) return open[0];
      const std::size_t m = open.size();
      const auto i = std::min(m - 1, static_cast<std::size_t>(p2_draw(seed, r.id, 0) * static_cast<double>(m)));
      auto j = std::min(m - 2, static_cast<std::size_t>(p2_draw(seed, r.id, 1) * static_cast<double>(m - 1)));
      if (j >= i) ++j;
      const int a = open[i], b = open[j];
      return out[static_cast<std::size_t>(b)] < out[static_cast<std::size_t>(a)] ? b : a;
    }
    case RouterPolicy::prefix_aware:
      break;
  }
  return -2;  // prefix_aware: the caller asks the library's router
}

struct BruteReplica;

struct BruteInbox final : TrafficSource {
  BruteInbox(std::vector<std::pair<Time, int>>& done, int id) : done_(done), id_(id) {}
  std::optional<Time> next_arrival() const override {
    if (q.empty()) return std::nullopt;
    return q.front().arrival;
  }
  Request pop() override {
    const Request r = q.front();
    q.pop_front();
    return r;
  }
  void completed(const Request&, Time t) override { done_.emplace_back(t, id_); }
  bool exhausted() const override { return q.empty(); }
  const std::vector<RequestClass>& classes() const override { return cls_; }
  std::deque<Request> q;

 private:
  std::vector<std::pair<Time, int>>& done_;
  int id_;
  std::vector<RequestClass> cls_{RequestClass{}};
};

struct BruteReplica {
  BruteReplica(std::vector<std::pair<Time, int>>& done, int id, const IterationCostModel& cost,
               const SchedulerConfig& c)
      : inbox(done, id), kv(make_kv_cache(kBlocks, c.block_size, 0, c.prefix_caching)) {
    o.seed = 0;  // FleetTraffic{}'s
    o.hooks.on_request = [this](const RequestRecord& r) { hist.record(r); };
    rep.emplace(inbox, *kv, cost, c, o);  // keeps a reference to o
  }
  BruteInbox inbox;
  std::unique_ptr<PrefixKvCache> kv;
  ReplicaOptions o;
  ServingLatencyHistograms hist;
  std::optional<SteppableReplica> rep;
  bool has_work() const { return rep->busy() || !inbox.q.empty(); }
};

struct BruteRun {
  ServingResult merged;
  std::vector<std::int64_t> routed;
};

// The fleet by brute force: before each arrival, step the replica with work whose clock is
// earliest (ties: the lower id) while it starts before the arrival; answered requests free the
// router's count from their finish time on.
BruteRun brute_fleet(const FleetSpec& f, std::vector<Request> rs) {
  const FleetPool& p = f.pools[0];
  std::vector<std::pair<Time, int>> done;
  std::deque<BruteReplica> reps;
  for (int k = 0; k < p.replicas; ++k) reps.emplace_back(done, k, *p.cost, p.scheduler);
  const auto n = static_cast<std::size_t>(p.replicas);
  std::vector<std::int64_t> out(n, 0), routed(n, 0);
  std::vector<bool> accepting(n, true);
  std::vector<double> kv_use(n, 0);
  std::vector<RouterReplicaView> views(n);
  for (auto& v : views) v.accepting = true;
  Router lib(f.router, -1, 1);  // prefix_aware only
  for (std::size_t k = 0; k < n; ++k) lib.add_replica();
  std::size_t rr = 0;
  for (std::size_t i = 0; i < rs.size(); ++i) rs[i].id = static_cast<std::int64_t>(i);
  std::size_t next = 0;
  while (true) {
    const Time ev = next < rs.size() ? rs[next].arrival : Time{std::numeric_limits<std::int64_t>::max()};
    int best = -1;
    for (std::size_t k = 0; k < n; ++k)
      if (reps[k].has_work() && (best < 0 || reps[k].rep->now() < reps[static_cast<std::size_t>(best)].rep->now()))
        best = static_cast<int>(k);
    if (best >= 0 && reps[static_cast<std::size_t>(best)].rep->now() < ev) {
      reps[static_cast<std::size_t>(best)].rep->step();
      continue;
    }
    if (next >= rs.size()) break;
    const Request r = rs[next++];
    std::vector<std::pair<Time, int>> later;
    for (const auto& [t, k] : done) {
      if (t > ev) {
        later.emplace_back(t, k);
        continue;
      }
      if (out[static_cast<std::size_t>(k)] > 0) --out[static_cast<std::size_t>(k)];
      lib.completed(k);
    }
    done = later;
    for (std::size_t k = 0; k < n; ++k) {
      const ReplicaLoad l = reps[k].rep->load();
      kv_use[k] = l.kv_blocks > 0 ? static_cast<double>(l.kv_used_blocks) / static_cast<double>(l.kv_blocks) : 0;
      views[k].reported = l;
    }
    int k = brute_pick(f.router.policy, r, out, accepting, kv_use, f.router.seed, rr);
    if (k == -2) {
      k = lib.route(r, views);
    } else {
      REQUIRE(k >= 0);
    }
    ++out[static_cast<std::size_t>(k)];
    ++routed[static_cast<std::size_t>(k)];
    reps[static_cast<std::size_t>(k)].inbox.q.push_back(r);
  }
  std::vector<ServingResult> results;
  ServingLatencyHistograms all;
  for (BruteReplica& b : reps) {
    results.push_back(b.rep->finish());
    all.merge(b.hist);
  }
  return {merge_serving_results(results, all), routed};
}

}  // namespace

TEST_CASE("fleet loop and routers equal a brute-force fleet bit for bit, every router") {
  const std::vector<Request> rs = requests(700, 600);
  for (const auto& e : router_policy_names.entries) {
    const RouterPolicy policy = e.value;
    const std::string name(e.name);
    CAPTURE(name);
    const FleetSpec f = fleet(5, policy);
    VectorSource src(rs);
    const FleetRun got = run_fleet(f, src, FleetTraffic{});
    const BruteRun want = brute_fleet(f, rs);
    REQUIRE(want.merged.completed_requests > 600);
    CHECK(got.router.routed == want.routed);
    CHECK(got.merged.iterations == want.merged.iterations);
    CHECK(got.merged.completed_requests == want.merged.completed_requests);
    CHECK(got.merged.preemptions_recompute == want.merged.preemptions_recompute);
    // Exact: the same iterations in the same order give the same sums.
    CHECK(got.merged.makespan_s == want.merged.makespan_s);
    CHECK(got.merged.ttft_s.p99 == want.merged.ttft_s.p99);
    CHECK(got.merged.ttft_s.mean == want.merged.ttft_s.mean);
    CHECK(got.merged.tpot_s.p50 == want.merged.tpot_s.p50);
    CHECK(got.merged.e2e_s.mean == want.merged.e2e_s.mean);
  }
}

TEST_CASE("least_outstanding and power_of_two pick as a scan over every replica, some not accepting") {
  // Random counts (routes and answers) and accepting masks on 9 replicas, 3,000 picks.
  for (const RouterPolicy policy : {RouterPolicy::least_outstanding, RouterPolicy::power_of_two}) {
    const std::string name = router_policy_names.name(policy);
    CAPTURE(name);
    Router r(RouterSpec{.policy = policy, .seed = 3}, -1, 1);
    constexpr std::size_t n = 9;
    for (std::size_t k = 0; k < n; ++k) r.add_replica();
    std::vector<std::int64_t> out(n, 0);
    std::vector<RouterReplicaView> views(n);
    std::vector<bool> accepting(n);
    std::size_t rr = 0;
    for (std::int64_t i = 0; i < 3000; ++i) {
      const auto u = [&](std::uint64_t k) { return uniform01(mix64(static_cast<std::uint64_t>(i) * 16 + k)); };
      // A mask: mostly all accepting, else each closed with probability 1/2 (sometimes none).
      const bool all = u(0) < 0.4;
      for (std::size_t k = 0; k < n; ++k) accepting[k] = views[k].accepting = all || u(1 + k) < 0.5;
      // An answer from one replica (when it has any outstanding), 60% of the time.
      const auto k = std::min(n - 1, static_cast<std::size_t>(u(12) * n));
      if (out[k] > 0 && u(11) < 0.6) {
        r.completed(static_cast<int>(k));
        --out[k];
      }
      Request q = req(0, 10, 10);
      q.id = i;
      const int want = brute_pick(policy, q, out, accepting, {}, 3, rr);
      const int got = r.route(q, views);
      CAPTURE(i);
      REQUIRE(got == want);
      if (got >= 0) ++out[static_cast<std::size_t>(got)];
    }
  }
}
