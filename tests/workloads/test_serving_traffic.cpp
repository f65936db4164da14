// The traffic generators (workloads/serving_traffic.hpp) against closed forms and hand-worked
// cases. Statistical checks allow 5 standard errors computed from the sample size.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>
#include <vector>

#include "tolerance.hpp"
#include "workloads/serving_traffic.hpp"

using namespace ctwin;
using ctwin::test::abs_approx;
using ctwin::test::rel_approx;

namespace {

std::vector<Request> drain(TrafficSource& src, std::size_t limit = 10000000) {
  std::vector<Request> out;
  while (src.next_arrival() && out.size() < limit) out.push_back(src.pop());
  return out;
}

LengthSpec fixed_len(std::int32_t v) {
  LengthSpec l;
  l.dist = LengthDist::fixed;
  l.value = l.min = l.max = v;
  return l;
}

TrafficSpec base(ArrivalProcess p, std::int64_t requests) {
  TrafficSpec s;
  s.seed = 7;
  s.arrival.process = p;
  s.requests = requests;
  s.input = fixed_len(100);
  s.output = fixed_len(10);
  return s;
}

struct Moments {
  double mean = 0;
  double var = 0;
};
Moments gap_moments(const std::vector<Request>& rs) {
  std::vector<double> g;
  for (std::size_t i = 1; i < rs.size(); ++i) g.push_back((rs[i].arrival - rs[i - 1].arrival).seconds());
  Moments m;
  for (double x : g) m.mean += x;
  m.mean /= static_cast<double>(g.size());
  for (double x : g) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(g.size() - 1);
  return m;
}

std::size_t count_in(const std::vector<Request>& rs, double a_s, double b_s) {
  std::size_t n = 0;
  for (const auto& r : rs) n += r.arrival >= seconds(a_s) && r.arrival < seconds(b_s);
  return n;
}

}  // namespace

TEST_CASE("poisson gaps have mean 1/rate and variance 1/rate^2, and a duration holds rate x duration arrivals") {
  TrafficSpec s = base(ArrivalProcess::poisson, 100000);
  s.arrival.rate_per_s = 10;
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  REQUIRE(rs.size() == 100000);
  CHECK(src->exhausted());
  const double n = static_cast<double>(rs.size() - 1);
  const Moments m = gap_moments(rs);
  // Exponential gaps: sd of the mean 1/(rate sqrt n); of the variance sqrt(8/n)/rate^2 (mu4 = 9/rate^4).
  CHECK(m.mean == abs_approx(0.1, 5 * 0.1 / std::sqrt(n)));
  CHECK(m.var == abs_approx(0.01, 5 * std::sqrt(8 / n) * 0.01));
  for (std::size_t i = 0; i < rs.size(); ++i) CHECK_EQ(rs[i].id, static_cast<std::int64_t>(i));

  s.requests = -1;
  s.duration_s = 1000;
  auto timed = make_traffic(s);
  const auto rt = drain(*timed);
  CHECK(static_cast<double>(rt.size()) == abs_approx(10000, 5 * std::sqrt(10000.0)));
  CHECK(rt.back().arrival < seconds(1000));
  CHECK(timed->exhausted());
}

TEST_CASE("gamma gaps have mean 1/rate and coefficient of variation cv (bursty and smooth)") {
  for (const double cv : {2.0, 0.5}) {
    CAPTURE(cv);
    TrafficSpec s = base(ArrivalProcess::gamma, 200001);
    s.arrival.rate_per_s = 4;
    s.arrival.cv = cv;
    auto src = make_traffic(s);
    const auto rs = drain(*src);
    const double n = static_cast<double>(rs.size() - 1);
    const Moments m = gap_moments(rs);
    const double mean = 0.25;
    const double var = cv * cv * mean * mean;
    const double k = 1 / (cv * cv);  // shape; excess kurtosis 6/k, so sd(s^2) = var sqrt((2 + 6/k)/n)
    CHECK(m.mean == abs_approx(mean, 5 * std::sqrt(var / n)));
    CHECK(m.var == abs_approx(var, 5 * var * std::sqrt((2 + 6 / k) / n)));
  }
}

TEST_CASE("constant arrivals are exactly i / rate apart") {
  TrafficSpec s = base(ArrivalProcess::constant, 1000);
  s.arrival.rate_per_s = 3;
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  REQUIRE(rs.size() == 1000);
  for (std::size_t i = 0; i < rs.size(); ++i) CHECK(rs[i].arrival == seconds(static_cast<double>(i) / 3));
}

TEST_CASE("rate steps: arrivals in each window match the integral of the rate, none after a final 0") {
  TrafficSpec s = base(ArrivalProcess::steps, -1);
  s.arrival.steps = {{0, 5}, {100, 50}, {200, 0}};
  s.duration_s = 300;
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  CHECK(static_cast<double>(count_in(rs, 0, 100)) == abs_approx(500, 5 * std::sqrt(500.0)));
  CHECK(static_cast<double>(count_in(rs, 100, 200)) == abs_approx(5000, 5 * std::sqrt(5000.0)));
  CHECK(count_in(rs, 200, 300) == 0);
  CHECK(src->exhausted());
  // Without a duration the final rate 0 ends the traffic too.
  s.duration_s = -1;
  auto open = make_traffic(s);
  CHECK(drain(*open).size() == rs.size());
  CHECK(open->exhausted());
}

TEST_CASE("burst: base rate outside the window, burst rate inside") {
  TrafficSpec s = base(ArrivalProcess::burst, -1);
  s.arrival.rate_per_s = 10;
  s.arrival.burst_start_s = 50;
  s.arrival.burst_duration_s = 10;
  s.arrival.burst_rate_per_s = 200;
  s.duration_s = 100;
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  CHECK(static_cast<double>(count_in(rs, 0, 50)) == abs_approx(500, 5 * std::sqrt(500.0)));
  CHECK(static_cast<double>(count_in(rs, 50, 60)) == abs_approx(2000, 5 * std::sqrt(2000.0)));
  CHECK(static_cast<double>(count_in(rs, 60, 100)) == abs_approx(400, 5 * std::sqrt(400.0)));
}

TEST_CASE("diurnal: arrivals per quarter period match the integral of min + (max-min)(1-cos)/2") {
  TrafficSpec s = base(ArrivalProcess::diurnal, -1);
  s.arrival.period_s = 100;
  s.arrival.min_rate_per_s = 2;
  s.arrival.max_rate_per_s = 40;
  s.duration_s = 2000;  // 20 periods
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  // Lambda(t) = 2 t + 19 (t - (50/pi) sin(pi t / 50)), integrated by hand per quarter period.
  auto lambda = [](double t) { return 2 * t + 19 * (t - 50 / std::numbers::pi * std::sin(std::numbers::pi * t / 50)); };
  for (int q = 0; q < 4; ++q) {
    std::size_t n = 0;
    for (int p = 0; p < 20; ++p) n += count_in(rs, 100.0 * p + 25 * q, 100.0 * p + 25 * (q + 1));
    const double expect = 20 * (lambda(25.0 * (q + 1)) - lambda(25.0 * q));
    CAPTURE(q);
    CHECK(static_cast<double>(n) == abs_approx(expect, 5 * std::sqrt(expect)));
  }
  // The quarters around the peak hold far more than those around the trough.
  CHECK(count_in(rs, 25, 75) > 3 * (count_in(rs, 0, 25) + count_in(rs, 75, 100)));
}

TEST_CASE("offline: every request at t = 0, then exhausted") {
  auto src = make_traffic(base(ArrivalProcess::offline, 64));
  const auto rs = drain(*src);
  REQUIRE(rs.size() == 64);
  for (const auto& r : rs) CHECK(r.arrival == Time{});
  CHECK(src->exhausted());
}

TEST_CASE("closed loop: each user sends its next request think time after its last completes (hand-worked)") {
  TrafficSpec s = base(ArrivalProcess::closed_loop, 5);
  s.arrival.users = 2;
  s.arrival.think_time_s = 1;
  auto src = make_traffic(s);
  REQUIRE(src->next_arrival() == Time{});
  const Request a = src->pop();  // user 0 at 0
  const Request b = src->pop();  // user 1 at 0
  CHECK(a.client == 0);
  CHECK(b.client == 1);
  CHECK(b.arrival == Time{});
  CHECK_FALSE(src->next_arrival());  // both waiting
  CHECK_FALSE(src->exhausted());
  src->completed(a, seconds(2));  // user 0 again at 3 s
  src->completed(b, seconds(1));  // user 1 again at 2 s
  REQUIRE(src->next_arrival() == seconds(2));
  const Request c = src->pop();
  CHECK(c.id == 2);
  CHECK(c.client == 1);
  const Request d = src->pop();
  CHECK(d.arrival == seconds(3));
  CHECK(d.client == 0);
  src->completed(d, seconds(3.5));
  const Request e = src->pop();  // user 0 at 4.5 s; the fifth and last
  CHECK(e.arrival == seconds(4.5));
  CHECK(e.id == 4);
  CHECK(src->exhausted());
  CHECK_FALSE(src->next_arrival());

  // A duration: a user whose next request would come at or after it stops.
  TrafficSpec t = base(ArrivalProcess::closed_loop, -1);
  t.arrival.users = 1;
  t.arrival.think_time_s = 1;
  t.duration_s = 2.5;
  auto one = make_traffic(t);
  Request r = one->pop();
  one->completed(r, seconds(0.5));  // next at 1.5
  r = one->pop();
  CHECK(r.arrival == seconds(1.5));
  CHECK_FALSE(one->exhausted());
  one->completed(r, seconds(2));  // next at 3 >= 2.5
  CHECK_FALSE(one->next_arrival());
  CHECK(one->exhausted());
}

TEST_CASE("trace replay: rows' arrivals, lengths (0 generated counts 1), time scale") {
  TrafficSpec s = base(ArrivalProcess::trace, -1);
  s.arrival.trace = std::make_shared<const std::vector<TraceRow>>(
      std::vector<TraceRow>{{Time{0}, 374, 44}, {Time{319410100000}, 10, 0}, {Time{2000000000000}, 5, 3}});
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  REQUIRE(rs.size() == 3);
  CHECK(rs[1].arrival == Time{319410100000});
  CHECK(rs[0].prompt_tokens == 374);
  CHECK(rs[0].output_tokens == 44);
  CHECK(rs[1].output_tokens == 1);
  CHECK(src->exhausted());
  s.arrival.time_scale = 0.5;
  s.requests = 2;
  auto fast = make_traffic(s);
  const auto rf = drain(*fast);
  REQUIRE(rf.size() == 2);
  CHECK(rf[1].arrival == seconds(0.31941010 / 2));
  s.requests = -1;
  s.duration_s = 1;  // the third row (at 1 s scaled) is cut
  auto cut = make_traffic(s);
  CHECK(drain(*cut).size() == 2);
}

TEST_CASE("lengths: fixed exact, uniform mean, lognormal median and mean, empirical frequencies") {
  const double n = 100000;
  auto stats = [&](const LengthSpec& l, std::vector<double>* all = nullptr) {
    double sum = 0;
    std::int32_t lo = kMaxTrafficTokens, hi = 0;
    for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(n); ++i) {
      const std::int32_t v = draw_length(l, 11, i, 2);
      sum += v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      if (all) all->push_back(v);
    }
    return std::tuple{sum / n, lo, hi};
  };
  CHECK(stats(fixed_len(512)) == std::tuple{512.0, 512, 512});

  LengthSpec u;
  u.dist = LengthDist::uniform;
  u.min = 100;
  u.max = 200;
  const auto [umean, ulo, uhi] = stats(u);
  const double usd = std::sqrt((101.0 * 101.0 - 1) / 12);  // discrete uniform on 101 values
  CHECK(umean == abs_approx(150, 5 * usd / std::sqrt(n)));
  CHECK(ulo == 100);
  CHECK(uhi == 200);

  LengthSpec g;
  g.dist = LengthDist::lognormal;
  g.sigma = 0.5;
  g.mu = std::log(500.0);
  std::vector<double> all;
  const auto [gmean, glo, ghi] = stats(g, &all);
  std::nth_element(all.begin(), all.begin() + all.size() / 2, all.end());
  // Sample median: sd 1/(2 f(m) sqrt n), f(m) = 1/(m sigma sqrt(2 pi)); mean exp(mu + sigma^2/2).
  const double med_sd = 500 * 0.5 * std::sqrt(2 * std::numbers::pi) / (2 * std::sqrt(n));
  CHECK(all[all.size() / 2] == abs_approx(500, 5 * med_sd + 1));
  const double mean = 500 * std::exp(0.125);
  CHECK(gmean == abs_approx(mean, 5 * mean * std::sqrt(std::exp(0.25) - 1) / std::sqrt(n)));
  g.min = 400;
  g.max = 600;
  const auto [cmean, clo, chi] = stats(g);
  CHECK(clo == 400);
  CHECK(chi == 600);
  (void)cmean;

  LengthSpec e;
  e.dist = LengthDist::empirical;
  e.samples = std::make_shared<const std::vector<std::int32_t>>(std::vector<std::int32_t>{10, 20, 70});
  const auto [emean, elo, ehi] = stats(e);
  // Each value a third of the time: mean 100/3, sd of one draw sqrt(E[x^2] - mean^2).
  const double esd = std::sqrt((100.0 + 400 + 4900) / 3 - (100.0 / 3) * (100.0 / 3));
  CHECK(emean == abs_approx(100.0 / 3, 5 * esd / std::sqrt(n)));
  CHECK(elo == 10);
  CHECK(ehi == 70);
}

TEST_CASE("shared system prompts: share ratio, groups drawn evenly, prompt = system prompt + input") {
  TrafficSpec s = base(ArrivalProcess::offline, 40000);
  s.prefix = {.shared_tokens = 100, .share_ratio = 0.3, .groups = 4};
  s.input = fixed_len(50);
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  std::vector<double> per_group(4);
  double shared = 0;
  for (const auto& r : rs) {
    if (r.prefix_group >= 0) {
      REQUIRE(r.prefix_group < 4);
      ++per_group[static_cast<std::size_t>(r.prefix_group)];
      ++shared;
      CHECK_EQ(r.shared_prefix_tokens, 100);
      CHECK_EQ(r.prompt_tokens, 150);
    } else {
      CHECK_EQ(r.shared_prefix_tokens, 0);
      CHECK_EQ(r.prompt_tokens, 50);
    }
  }
  const double n = 40000;
  CHECK(shared / n == abs_approx(0.3, 5 * std::sqrt(0.3 * 0.7 / n)));
  for (double g : per_group) CHECK(g / shared == abs_approx(0.25, 5 * std::sqrt(0.25 * 0.75 / shared)));
}

TEST_CASE("sessions: a turn's prompt is the session's earlier context plus its input, shared as its own group") {
  TrafficSpec s = base(ArrivalProcess::offline, 10);
  s.input = fixed_len(10);
  s.output = fixed_len(5);
  s.sessions = {.turns = 3, .active = 2};
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  REQUIRE(rs.size() == 10);
  // Hand-worked: slot = id % 2; sessions 0 and 1, then 2 and 3 from id 6.
  const std::int32_t prompt[] = {10, 10, 25, 25, 40, 40, 10, 10, 25, 25};
  const std::int32_t shared[] = {0, 0, 15, 15, 30, 30, 0, 0, 15, 15};
  const std::int64_t group[] = {-1, -1, 0, 1, 0, 1, -1, -1, 2, 3};
  for (std::size_t i = 0; i < rs.size(); ++i) {
    CAPTURE(i);
    CHECK(rs[i].prompt_tokens == prompt[i]);
    CHECK(rs[i].shared_prefix_tokens == shared[i]);
    CHECK(rs[i].prefix_group == group[i]);
  }

  // With a system prompt on every session: turn 0 shares it (group 0), later turns the session's
  // context under groups + session id.
  s.prefix = {.shared_tokens = 100, .share_ratio = 1, .groups = 1};
  auto sp = make_traffic(s);
  const auto rp = drain(*sp);
  CHECK(rp[0].prompt_tokens == 110);
  CHECK(rp[0].shared_prefix_tokens == 100);
  CHECK(rp[0].prefix_group == 0);
  CHECK(rp[2].prompt_tokens == 125);
  CHECK(rp[2].shared_prefix_tokens == 115);
  CHECK(rp[2].prefix_group == 1);
  CHECK(rp[3].prefix_group == 2);
}

TEST_CASE("classes are assigned by share and returned as given") {
  TrafficSpec s = base(ArrivalProcess::offline, 40000);
  s.classes = {RequestClass{.name = "batch", .share = 1}, RequestClass{.name = "chat", .ttft_slo_s = 0.5, .share = 3}};
  auto src = make_traffic(s);
  const auto rs = drain(*src);
  double chat = 0;
  for (const auto& r : rs) chat += r.cls == 1;
  const double n = 40000;
  CHECK(chat / n == abs_approx(0.75, 5 * std::sqrt(0.75 * 0.25 / n)));
  REQUIRE(src->classes().size() == 2);
  CHECK(src->classes()[1].ttft_slo_s == 0.5);
}

TEST_CASE("the same seed gives the same requests; another seed other ones") {
  TrafficSpec s = base(ArrivalProcess::poisson, 200);
  s.arrival.rate_per_s = 5;
  s.input.dist = LengthDist::lognormal;
  s.input.mu = std::log(300.0);
  s.input.sigma = 1;
  s.input.min = 1;
  s.input.max = kMaxTrafficTokens;
  auto a = drain(*make_traffic(s));
  auto b = drain(*make_traffic(s));
  s.seed = 8;
  auto c = drain(*make_traffic(s));
  int same_arrival = 0, same_len = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].arrival == b[i].arrival);
    CHECK(a[i].prompt_tokens == b[i].prompt_tokens);
    same_arrival += a[i].arrival == c[i].arrival;
    same_len += a[i].prompt_tokens == c[i].prompt_tokens;
  }
  CHECK(same_arrival == 0);
  CHECK(same_len < 20);
}

TEST_CASE("a next arrival past the duration ends the traffic even when it lies beyond the clock") {
  // At 1e-6/s the first gap is about 1e6 s (up to 4e7 s, past the 9.2e6 s clock) and 10 s hold
  // almost surely none: the traffic ends instead of overflowing the clock.
  TrafficSpec s = base(ArrivalProcess::poisson, -1);
  s.arrival.rate_per_s = 1e-6;
  s.duration_s = 10;
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    s.seed = seed;
    auto src = make_traffic(s);
    CHECK_FALSE(src->next_arrival());
    CHECK(src->exhausted());
  }
  TrafficSpec d = base(ArrivalProcess::diurnal, -1);
  d.arrival.period_s = 1e6;
  d.arrival.min_rate_per_s = 0;
  d.arrival.max_rate_per_s = 1e-6;
  d.duration_s = 10;
  auto dsrc = make_traffic(d);
  CHECK(dsrc->exhausted());
  // Without a duration such a gap is an input out of proportion (TimeOverflow, exit 2).
  s.duration_s = -1;
  s.requests = 100;
  CHECK_THROWS_AS(drain(*make_traffic(s)), TimeOverflow);
}

// skip(n) drops exactly the requests n pops would return: afterwards the stream goes on with the
// same requests (ids, arrivals, lengths, groups, classes) for every arrival process, with
// sessions (which skip by popping) and with a trace, and it stops at the stream's end.
TEST_CASE("skip(n) leaves the stream where n pops leave it, for every arrival process") {
  std::vector<TrafficSpec> specs;
  for (const ArrivalProcess p : {ArrivalProcess::poisson, ArrivalProcess::gamma, ArrivalProcess::constant,
                                 ArrivalProcess::offline, ArrivalProcess::steps, ArrivalProcess::diurnal}) {
    TrafficSpec s = base(p, 200);
    s.arrival.rate_per_s = 5;
    s.arrival.cv = 2;
    s.arrival.steps = {{0, 5}, {10, 20}};
    s.arrival.min_rate_per_s = 1;
    s.arrival.max_rate_per_s = 9;
    s.arrival.period_s = 30;
    s.input.dist = LengthDist::lognormal;
    s.input.mu = 5;
    s.input.sigma = 1;
    s.input.min = 1;
    s.input.max = 4000;
    s.prefix = {.shared_tokens = 64, .share_ratio = 0.5, .groups = 3};
    s.classes = {RequestClass{.name = "a", .share = 0.3}, RequestClass{.name = "b", .share = 0.7}};
    specs.push_back(s);
  }
  TrafficSpec sessions = specs.front();
  sessions.sessions = {.turns = 3, .active = 4};
  specs.push_back(sessions);
  TrafficSpec trace = base(ArrivalProcess::trace, -1);
  std::vector<TraceRow> rows;
  for (int i = 0; i < 50; ++i) rows.push_back({seconds(0.25 * i), 10 + i, 1 + i % 7});
  trace.arrival.trace = std::make_shared<const std::vector<TraceRow>>(rows);
  specs.push_back(trace);
  for (std::size_t k = 0; k < specs.size(); ++k) {
    CAPTURE(k);
    const auto all = drain(*make_traffic(specs[k]));
    REQUIRE(all.size() >= 50);
    auto src = make_traffic(specs[k]);
    std::size_t at = 0;
    for (const std::int64_t n : {0, 1, 7, 3, 15}) {
      CHECK(src->skip(n) == n);
      at += static_cast<std::size_t>(n);
      REQUIRE(src->next_arrival());
      const Request r = src->pop();
      const Request& want = all[at++];
      CHECK(r.id == want.id);
      CHECK(r.arrival == want.arrival);
      CHECK(r.prompt_tokens == want.prompt_tokens);
      CHECK(r.output_tokens == want.output_tokens);
      CHECK(r.prefix_group == want.prefix_group);
      CHECK(r.shared_prefix_tokens == want.shared_prefix_tokens);
      CHECK(r.cls == want.cls);
    }
    const auto left = static_cast<std::int64_t>(all.size() - at);
    CHECK(src->skip(left + 5) == left);  // only what is left
    CHECK_FALSE(src->next_arrival());
  }
}
