// QuantileHistogram::merge: merging is exact (bucket counts add), so a merged histogram answers
// every quantile exactly as one histogram fed all the samples.
#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "sim/quantile_histogram.hpp"
#include "sim/random.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// Samples spread over five decades, shifted per part so that the parts' bucket ranges overlap
// only partly (the merge must extend its range below and above), with some zeros.
std::vector<double> part(std::uint64_t seed, double scale, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const double u = uniform01(mix64(seed * 1000003 + static_cast<std::uint64_t>(i)));
    v.push_back(i % 17 == 0 ? 0.0 : scale * std::pow(10.0, 5 * u));
  }
  return v;
}

}  // namespace

TEST_CASE("quantile histogram merge: parts merged equal one histogram fed every sample") {
  const auto a = part(1, 1e-3, 4000), b = part(2, 1.0, 3000), c = part(3, 1e-6, 500);
  QuantileHistogram all, ha, hb, hc;
  for (const auto* v : {&a, &b, &c})
    for (double x : *v) all.add(x);
  for (double x : a) ha.add(x);
  for (double x : b) hb.add(x);
  for (double x : c) hc.add(x);
  QuantileHistogram merged;  // empty, then a middle range, a higher one, a lower one
  merged.merge(ha);
  merged.merge(hb);
  merged.merge(hc);
  merged.merge(QuantileHistogram{});  // an empty one changes nothing
  CHECK(merged.count() == 7500);
  CHECK(merged.min() == 0.0);
  CHECK(merged.max() == all.max());
  CHECK(merged.mean() == rel_approx(all.mean(), 1e-12));
  for (double q : {0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0}) {
    CAPTURE(q);
    CHECK(merged.quantile(q) == all.quantile(q));
  }
  // The zeros (every 17th sample of each part) rank first: 236 + 177 + 30 of them.
  CHECK(merged.quantile(442.0 / 7500) == 0.0);
  CHECK(merged.quantile(444.0 / 7500) > 0.0);
}

TEST_CASE("quantile histogram merge: histograms of different accuracy do not merge") {
  QuantileHistogram a(0.005), b(0.01);
  b.add(1);
  CHECK_THROWS_AS(a.merge(b), std::invalid_argument);
}
