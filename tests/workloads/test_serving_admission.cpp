// Admission control at the router, worked by hand: a token bucket's refill and burst, per-tenant
// rate limits, queue-length, estimated-wait and observed-TTFT shedding with each class's
// threshold fraction (lower-priority classes shed first), and every rejection counted by reason
// and class.
#include <doctest/doctest.h>

#include "tolerance.hpp"
#include "workloads/serving_admission.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

Request of_class(int cls) {
  Request r;
  r.cls = cls;
  r.prompt_tokens = 10;
  r.output_tokens = 10;
  return r;
}

}  // namespace

TEST_CASE("token bucket: starts full at the burst, refills at the rate, never above the burst") {
  TokenBucket b(2, 3);  // 2 tokens/s, at most 3
  CHECK(b.take(seconds(0)));
  CHECK(b.take(seconds(0)));
  CHECK(b.take(seconds(0)));
  CHECK(!b.take(seconds(0)));
  // 0.5 s later: 2 x 0.5 = 1 token.
  CHECK(b.tokens(seconds(0.5)) == rel_approx(1, 1e-12));
  CHECK(b.take(seconds(0.5)));
  CHECK(!b.take(seconds(0.5)));
  // 0.25 s more: half a token, not enough.
  CHECK(b.tokens(seconds(0.75)) == rel_approx(0.5, 1e-12));
  CHECK(!b.take(seconds(0.75)));
  // 10 s later: 20 tokens' worth, capped at 3.
  CHECK(b.tokens(seconds(10.75)) == rel_approx(3, 1e-12));
  for (int i = 0; i < 3; ++i) CHECK(b.take(seconds(10.75)));
  CHECK(!b.take(seconds(10.75)));
}

TEST_CASE("admission: a tenant over its rate limit is rejected and counted; other tenants are not limited") {
  AdmissionSpec s;
  s.classes = {{.rate_limit = RateLimit{.rate_per_s = 1, .burst = 2}}, {}};
  Admission a(s);
  const FleetView idle;
  CHECK(a.admit(of_class(0), seconds(0), idle) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(0), idle) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(0), idle) == AdmissionResult::rate_limit);
  for (int i = 0; i < 5; ++i) CHECK(a.admit(of_class(1), seconds(0), idle) == AdmissionResult::accepted);
  // One second refills one token.
  CHECK(a.admit(of_class(0), seconds(1), idle) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(1), idle) == AdmissionResult::rate_limit);
  const AdmissionCounters& c = a.counters();
  CHECK(c.count(AdmissionResult::accepted, 0) == 3);
  CHECK(c.count(AdmissionResult::accepted, 1) == 5);
  CHECK(c.count(AdmissionResult::rate_limit, 0) == 2);
  CHECK(c.count(AdmissionResult::rate_limit, 1) == 0);
  CHECK(c.rejected() == 2);
}

TEST_CASE("admission: queue-length shedding rejects the lower-priority class first (its threshold fraction)") {
  AdmissionSpec s;
  s.max_queued = 100;
  s.classes = {{.rate_limit = std::nullopt, .shed_fraction = 1}, {.rate_limit = std::nullopt, .shed_fraction = 0.5}};
  Admission a(s);
  // 49 waiting: both enter. 50: class 1's limit is 50 -> rejected; class 0 enters until 100.
  CHECK(a.admit(of_class(0), seconds(0), {.queued = 49}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(1), seconds(0), {.queued = 49}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(1), seconds(1), {.queued = 50}) == AdmissionResult::queue_length);
  CHECK(a.admit(of_class(0), seconds(1), {.queued = 50}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(2), {.queued = 99}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(2), {.queued = 100}) == AdmissionResult::queue_length);
  // A class the spec does not list has the full threshold.
  CHECK(a.admit(of_class(2), seconds(2), {.queued = 99}) == AdmissionResult::accepted);
  const AdmissionCounters& c = a.counters();
  CHECK(c.count(AdmissionResult::queue_length) == 2);
  CHECK(c.count(AdmissionResult::queue_length, 1) == 1);
  CHECK(c.count(AdmissionResult::queue_length, 0) == 1);
  CHECK(c.count(AdmissionResult::accepted) == 5);
}

TEST_CASE("admission: estimated-wait shedding above max_wait_s x the class's fraction") {
  AdmissionSpec s;
  s.max_wait_s = 2;
  s.classes = {{.rate_limit = std::nullopt, .shed_fraction = 1}, {.rate_limit = std::nullopt, .shed_fraction = 0.5}};
  Admission a(s);
  CHECK(a.admit(of_class(1), seconds(0), {.estimated_wait_s = 1.0}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(1), seconds(0), {.estimated_wait_s = 1.5}) == AdmissionResult::estimated_wait);
  CHECK(a.admit(of_class(0), seconds(0), {.estimated_wait_s = 1.5}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(0), {.estimated_wait_s = 2.0}) == AdmissionResult::accepted);
  CHECK(a.admit(of_class(0), seconds(0), {.estimated_wait_s = 2.01}) == AdmissionResult::estimated_wait);
}

TEST_CASE("admission: the observed TTFT p90 (nearest rank over the window) sheds above its bound") {
  AdmissionSpec s;
  s.max_ttft_p90_s = 1.4;
  s.ttft_window_s = 60;
  s.classes = {{.rate_limit = std::nullopt, .shed_fraction = 1}, {.rate_limit = std::nullopt, .shed_fraction = 0.5}};
  Admission a(s);
  CHECK(!a.ttft_p90(seconds(0)));
  // TTFTs 0.15, 0.30, ..., 1.50 s completed at t = 1..10 s (given out of order).
  for (int i : {3, 1, 4, 10, 5, 9, 2, 6, 8, 7}) a.observe_ttft(seconds(i), 0.15 * i);
  // 10 samples: the ceil(9)-th smallest, 1.35 s.
  CHECK(*a.ttft_p90(seconds(10)) == rel_approx(1.35, 1e-12));
  CHECK(a.admit(of_class(0), seconds(10), {}) == AdmissionResult::accepted);  // 1.35 <= 1.4
  CHECK(a.admit(of_class(1), seconds(10), {}) == AdmissionResult::ttft_p90);  // 1.35 > 0.7
  // At t = 61 the window (1, 61] drops t = 1: 9 samples 0.30 .. 1.50, ceil(8.1) = 9th: 1.50.
  CHECK(*a.ttft_p90(seconds(61)) == rel_approx(1.5, 1e-12));
  CHECK(a.admit(of_class(0), seconds(61), {}) == AdmissionResult::ttft_p90);
  // At t = 66 (t = 1..6 gone) 4 samples 1.05 .. 1.50: ceil(3.6) = 4th, 1.50; at t = 70 none.
  CHECK(*a.ttft_p90(seconds(66)) == rel_approx(1.5, 1e-12));
  CHECK(!a.ttft_p90(seconds(70)));
  CHECK(a.admit(of_class(1), seconds(70), {}) == AdmissionResult::accepted);
  CHECK(a.counters().count(AdmissionResult::ttft_p90) == 2);
}

TEST_CASE("admission: the rate limit is checked first, so a shed request still takes its tenant's token") {
  AdmissionSpec s;
  s.max_queued = 10;
  s.classes = {{.rate_limit = RateLimit{.rate_per_s = 1, .burst = 1}}};
  Admission a(s);
  CHECK(a.admit(of_class(0), seconds(0), {.queued = 10}) == AdmissionResult::queue_length);
  CHECK(a.admit(of_class(0), seconds(0), {.queued = 0}) == AdmissionResult::rate_limit);
  CHECK(a.admit(of_class(0), seconds(1), {.queued = 0}) == AdmissionResult::accepted);
  CHECK(a.counters().rejected() == 2);
}
