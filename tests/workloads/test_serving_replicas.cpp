// N replicas behind a round-robin split: the split by hand, the merged result against the sum of
// the replicas and against one histogram fed every request, and each replica of a fleet against
// one replica fed its subset of the stream.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "serving_fakes.hpp"
#include "serving_llama8b.hpp"
#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "workloads/model_json.hpp"
#include "workloads/profile.hpp"
#include "workloads/serving_replicas.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

using ctwin::test::llama8b_h100;
using ctwin::test::scheduler;

// Poisson at rate_per_s for duration_s; outputs from 1 token (TPOT skips those) to 300.
TrafficSpec traffic(double rate_per_s, double duration_s) {
  TrafficSpec t;
  t.seed = 7;
  t.arrival.rate_per_s = rate_per_s;
  t.duration_s = duration_s;
  t.input.dist = LengthDist::uniform;
  t.input.min = 10;
  t.input.max = 3000;
  t.output.dist = LengthDist::uniform;
  t.output.min = 1;
  t.output.max = 300;
  return t;
}

std::vector<Request> drain(TrafficSource& s) {
  std::vector<Request> rs;
  while (s.next_arrival()) rs.push_back(s.pop());
  return rs;
}

}  // namespace

TEST_CASE("round-robin share: of 7 requests, replica k of 3 gets requests k, k + 3, k + 6") {
  std::vector<Request> rs;
  for (int i = 0; i < 7; ++i) rs.push_back(req(0.5 * i, 100 + i, 10));
  const std::vector<std::vector<std::int64_t>> expect{{0, 3, 6}, {1, 4}, {2, 5}};
  for (int k = 0; k < 3; ++k) {
    CAPTURE(k);
    RoundRobinShare share(std::make_unique<VectorSource>(rs), k, 3);
    const auto got = drain(share);
    REQUIRE(got.size() == expect[static_cast<std::size_t>(k)].size());
    for (std::size_t j = 0; j < got.size(); ++j) {
      const auto id = expect[static_cast<std::size_t>(k)][j];
      CHECK(got[j].id == id);
      CHECK(got[j].prompt_tokens == 100 + id);
      CHECK(got[j].arrival == seconds(0.5 * static_cast<double>(id)));
    }
    CHECK(share.exhausted());
  }
  CHECK_THROWS_AS(RoundRobinShare(std::make_unique<VectorSource>(rs), 3, 3), std::invalid_argument);
}

TEST_CASE("round-robin shares of a generated stream: constant 10/s, replica 1 of 4 at 0.1, 0.5, 0.9 s") {
  TrafficSpec t = traffic(10, -1);
  t.arrival.process = ArrivalProcess::constant;
  t.requests = 12;
  auto shares = make_round_robin_shares(t, 4);
  REQUIRE(shares.size() == 4);
  const auto got = drain(*shares[1]);
  REQUIRE(got.size() == 3);
  for (int j = 0; j < 3; ++j) {
    CHECK(got[static_cast<std::size_t>(j)].id == 1 + 4 * j);
    CHECK(got[static_cast<std::size_t>(j)].arrival.seconds() == rel_approx(0.1 + 0.4 * j, 1e-12));
  }
  TrafficSpec closed = t;
  closed.arrival.process = ArrivalProcess::closed_loop;
  CHECK_THROWS_AS(make_round_robin_shares(closed, 2), std::invalid_argument);
}

TEST_CASE("replicas merged: counts are the sums, percentiles those of one histogram fed every request") {
  const ServingDeployment d = llama8b_h100();
  const TrafficSpec t = traffic(40, 30);
  const int n = 3;
  const ServingReplicasRun run = run_serving_replicas(d, scheduler(), t, n);
  REQUIRE(run.capacity.refusal.empty());
  REQUIRE(run.replicas.size() == 3);
  // The stream itself: every request and its tokens.
  const auto stream = drain(*make_traffic(t));
  std::int64_t in = 0, out = 0;
  for (const Request& r : stream) {
    in += r.prompt_tokens;
    out += r.output_tokens;
  }
  const ServingResult& m = run.merged;
  CHECK(m.completed_requests == static_cast<std::int64_t>(stream.size()));
  CHECK(m.input_tokens == in);
  CHECK(m.output_tokens == out);
  std::int64_t iterations = 0;
  double makespan = 0;
  for (const ServingResult& r : run.replicas) {
    iterations += r.iterations;
    makespan = std::max(makespan, r.makespan_s);
  }
  CHECK(m.iterations == iterations);
  CHECK(m.makespan_s == makespan);
  CHECK(m.requests_per_s == rel_approx(static_cast<double>(stream.size()) / makespan, 1e-12));
  // Reference: each share run again by hand, every finished request into one histogram set.
  ServingLatencyHistograms one;
  auto shares = make_round_robin_shares(t, n);
  std::int64_t met = 0;
  for (int k = 0; k < n; ++k) {
    ServingHooks hooks;
    hooks.on_request = [&](const RequestRecord& r) {
      one.ttft_s.add((r.first_token - r.request.arrival).seconds());
      one.e2e_s.add((r.finish - r.request.arrival).seconds());
      if (r.request.output_tokens > 1)
        one.tpot_s.add((r.finish - r.first_token).seconds() / static_cast<double>(r.request.output_tokens - 1));
      met += r.met_slo ? 1 : 0;
    };
    const auto r = run_serving_replica(d, scheduler(), *shares[static_cast<std::size_t>(k)], t.seed, hooks).result;
    CHECK(r.iterations == run.replicas[static_cast<std::size_t>(k)].iterations);
  }
  REQUIRE(one.tpot_s.count() < m.completed_requests);  // some requests generate one token
  for (const auto& [got, want] :
       {std::pair{m.ttft_s, latency_summary(one.ttft_s)}, std::pair{m.tpot_s, latency_summary(one.tpot_s)},
        std::pair{m.e2e_s, latency_summary(one.e2e_s)}}) {
    CHECK(got.count == want.count);
    CHECK(got.p50 == want.p50);
    CHECK(got.p90 == want.p90);
    CHECK(got.p99 == want.p99);
    CHECK(got.mean == rel_approx(want.mean, 1e-12));
  }
  CHECK(m.goodput_requests_per_s == rel_approx(static_cast<double>(met) / makespan, 1e-12));
}

TEST_CASE("16 replicas at 16x the rate: each is one replica at 1x fed its round-robin subset") {
  const ServingDeployment d = llama8b_h100();
  const TrafficSpec t = traffic(16 * 8, 20);
  const ServingReplicasRun run = run_serving_replicas(d, scheduler(), t, 16);
  REQUIRE(run.replicas.size() == 16);
  const auto stream = drain(*make_traffic(t));
  for (int k : {0, 5, 15}) {
    CAPTURE(k);
    std::vector<Request> subset;
    for (std::size_t i = static_cast<std::size_t>(k); i < stream.size(); i += 16) subset.push_back(stream[i]);
    VectorSource src(subset);
    const ServingResult one = run_serving_replica(d, scheduler(), src, t.seed).result;
    const ServingResult& got = run.replicas[static_cast<std::size_t>(k)];
    CHECK(got.completed_requests == static_cast<std::int64_t>(subset.size()));
    CHECK(got.iterations == one.iterations);
    CHECK(got.input_tokens == one.input_tokens);
    CHECK(got.makespan_s == one.makespan_s);
    CHECK(got.ttft_s.p99 == one.ttft_s.p99);
    CHECK(got.e2e_s.p50 == one.e2e_s.p50);
    CHECK(got.tpot_s.mean == rel_approx(one.tpot_s.mean, 1e-12));
  }
}

// The replicas run on worker threads: one thread and three give the same fleet, to the bit.
TEST_CASE("replicas: the result does not depend on the thread count") {
  const ServingDeployment d = llama8b_h100();
  const TrafficSpec t = traffic(5 * 8, 15);
  const ServingReplicasRun one = run_serving_replicas(d, scheduler(), t, 5, ServingLoop::fast, 1);
  const ServingReplicasRun three = run_serving_replicas(d, scheduler(), t, 5, ServingLoop::fast, 3);
  REQUIRE(one.replicas.size() == 5);
  REQUIRE(three.replicas.size() == 5);
  for (std::size_t k = 0; k < 5; ++k) {
    CAPTURE(k);
    CHECK(one.replicas[k].iterations == three.replicas[k].iterations);
    CHECK(one.replicas[k].makespan_s == three.replicas[k].makespan_s);
    CHECK(one.replicas[k].ttft_s.p99 == three.replicas[k].ttft_s.p99);
  }
  const ServingResult &a = one.merged, &b = three.merged;
  CHECK(a.completed_requests == b.completed_requests);
  CHECK(a.ttft_s.p50 == b.ttft_s.p50);
  CHECK(a.tpot_s.p90 == b.tpot_s.p90);
  CHECK(a.e2e_s.p99 == b.e2e_s.p99);
  CHECK(a.e2e_s.mean == b.e2e_s.mean);
  CHECK(a.goodput_requests_per_s == b.goodput_requests_per_s);
  CHECK(a.kv_mean_utilization == b.kv_mean_utilization);
  CHECK_THROWS_AS(run_serving_replicas(d, scheduler(), t, 2, ServingLoop::fast, -1), std::invalid_argument);
}
