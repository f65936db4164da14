// Streamed percentiles against exact sorted ranks: every estimate within the stated relative
// error, with memory bounded by the range of values, not their count.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/quantile_histogram.hpp"
#include "sim/random.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::test;

namespace {

double exact_quantile(std::vector<double> v, double q) {  // rank ceil(q n), 1-based
  std::sort(v.begin(), v.end());
  const auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))));
  return v[rank - 1];
}

}  // namespace

TEST_CASE("quantile histogram: percentiles of a heavy-tailed sample within 0.5% of the exact ranks") {
  QuantileHistogram h(0.005);
  std::vector<double> xs;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    // Lognormal (mu -3, sigma 1.5), by Box-Muller from two counter-keyed uniforms: seconds.
    const double u1 = uniform01(mix64(i * 2 + 1)), u2 = uniform01(mix64(i * 2 + 2));
    const double x = std::exp(-3 + 1.5 * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    xs.push_back(x);
    h.add(x);
  }
  CHECK(h.count() == 100000);
  double sum = 0;
  for (double x : xs) sum += x;
  CHECK(h.mean() == rel_approx(sum / 1e5, 1e-12));
  for (double q : {0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    CAPTURE(q);
    CHECK(h.quantile(q) == rel_approx(exact_quantile(xs, q), 0.005));
  }
  CHECK(h.quantile(0) == h.min());
  CHECK(h.quantile(1) == h.max());
}

TEST_CASE("quantile histogram: a tighter bound holds too, and zeros rank below everything") {
  QuantileHistogram h(0.001);
  std::vector<double> xs;
  for (int i = 0; i < 1000; ++i) xs.push_back(i % 10 == 0 ? 0.0 : 1e-3 * (1 + i));
  for (double x : xs) h.add(x);
  CHECK(h.quantile(0.05) == abs_approx(0, 0));  // 100 zeros: ranks 1..100 (seconds)
  for (double q : {0.2, 0.5, 0.77, 0.95}) {
    CAPTURE(q);
    CHECK(h.quantile(q) == rel_approx(exact_quantile(xs, q), 0.001));
  }
  CHECK(QuantileHistogram().quantile(0.5) == abs_approx(0, 0));
  CHECK_THROWS_AS(QuantileHistogram(0.0), std::invalid_argument);
}

TEST_CASE("quantile histogram: the bound is tight: a 2% sketch is off by more than 0.5% somewhere") {
  // Guards against a histogram that ignores its parameter (and would pass the tests above).
  QuantileHistogram h(0.02);
  std::vector<double> xs;
  for (int i = 1; i <= 2000; ++i) xs.push_back(1.0 + 0.001 * i);
  for (double x : xs) h.add(x);
  double worst = 0;
  for (int k = 1; k < 100; ++k) worst = std::max(worst, rel_diff(h.quantile(k / 100.0), exact_quantile(xs, k / 100.0)));
  CHECK(worst > 0.005);
  CHECK(worst <= 0.02);
}
