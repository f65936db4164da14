// Latency percentiles under random arrivals against queueing theory: one sequence at a time, one
// output token each, so every request is one iteration of a fixed length D and the replica is an
// M/D/1 queue. TTFT = W + D, with W's distribution in closed form (Erlang 1909; Crommelin 1932):
//   P(W <= t) = (1 - rho) sum_{k=0}^{floor(t/D)} (lambda (k D - t))^k / k! e^{-lambda (k D - t)},
// and its mean by Pollaczek-Khinchine, rho D / (2 (1 - rho)). Checks the loop's queueing, the
// traffic's Poisson arrivals and the streamed percentiles together.
#include <doctest/doctest.h>

#include <cmath>

#include "fake_kv_cache.hpp"
#include "serving_fakes.hpp"
#include "tolerance.hpp"
#include "workloads/serving_sim.hpp"
#include "workloads/serving_traffic.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

double md1_wait_cdf(double t, double lambda, double d) {
  const double rho = lambda * d;
  double sum = 0;
  for (int k = 0; k <= static_cast<int>(std::floor(t / d)); ++k) {
    const double x = lambda * (k * d - t);  // <= 0
    sum += std::pow(x, k) / std::tgamma(k + 1.0) * std::exp(-x);
  }
  return (1 - rho) * sum;
}

// The q-quantile of W: 0 when the atom at 0 (1 - rho) covers it, else by bisection.
double md1_wait_quantile(double q, double lambda, double d) {
  if (q <= 1 - lambda * d) return 0;
  double lo = 0, hi = d;
  while (md1_wait_cdf(hi, lambda, d) < q) hi *= 2;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (md1_wait_cdf(mid, lambda, d) < q ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace

TEST_CASE(
    "serving percentiles: one sequence at a time under Poisson arrivals is M/D/1, TTFT percentiles as its closed "
    "form") {
  // The closed form itself, at a hand-worked point: below D nobody waits for more than one
  // service, P(W <= t) = (1 - rho) e^{lambda t}.
  CHECK(md1_wait_cdf(0.5, 0.6, 1.0) == rel_approx(0.4 * std::exp(0.3), 1e-12));
  const LinearCost cost;
  const double d = cost.prefill(100, 100);  // one iteration: a 100-token prompt, its one token
  for (const double rho : {0.3, 0.6}) {
    CAPTURE(rho);
    const double lambda = rho / d;
    TrafficSpec t;
    t.seed = 11;
    t.arrival.process = ArrivalProcess::poisson;
    t.arrival.rate_per_s = lambda;
    t.requests = 400000;
    t.input.dist = t.output.dist = LengthDist::fixed;
    t.input.value = t.input.min = t.input.max = 100;
    t.output.value = t.output.min = t.output.max = 1;
    const auto src = make_traffic(t);
    FakeKvCache kv(1000, 16);
    SchedulerConfig c;
    c.max_num_seqs = 1;
    c.max_num_batched_tokens = 8192;
    const ServingResult r = simulate_replica(*src, kv, cost, c, ReplicaOptions{});
    REQUIRE(r.completed_requests == 400000);
    // Sampling error (successive waits are correlated): a Lindley-recursion simulation of the
    // same queue over four seeds stays within 1.1% of the closed forms at these loads, mean and
    // quantiles alike; the histogram adds at most 0.5%.
    CHECK(r.ttft_s.mean == rel_approx(d + rho * d / (2 * (1 - rho)), 0.02));
    CHECK(r.queueing_s.mean == rel_approx(rho * d / (2 * (1 - rho)), 0.03));
    CHECK(r.ttft_s.p50 == rel_approx(d + md1_wait_quantile(0.5, lambda, d), 0.02));
    CHECK(r.ttft_s.p90 == rel_approx(d + md1_wait_quantile(0.9, lambda, d), 0.02));
    CHECK(r.ttft_s.p99 == rel_approx(d + md1_wait_quantile(0.99, lambda, d), 0.02));
  }
}
