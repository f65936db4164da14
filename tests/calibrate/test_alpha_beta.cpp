#include <doctest/doctest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "calibrate/alpha_beta.hpp"

#include "tolerance.hpp"

using namespace ctwin::calibrate;
using ctwin::test::rel_approx;

TEST_CASE("the alpha-beta fit recovers latency and bandwidth from exact samples") {
  // t = 5 us + bytes / 200 GB/s, at nccl-tests sizes from 8 B to 1 GiB.
  std::vector<double> bytes, secs;
  for (double b = 8; b <= 1 << 30; b *= 4) {
    bytes.push_back(b);
    secs.push_back(5e-6 + b / 200e9);
  }
  const auto f = fit_alpha_beta(bytes, secs);
  REQUIRE(f);
  CHECK(f->alpha_s == rel_approx(5e-6, 1e-6));
  CHECK(f->bandwidth_gbps == rel_approx(200, 1e-6));
  CHECK(f->rms_rel_error < 1e-9);
}

TEST_CASE("the alpha-beta fit declines samples that cannot separate latency from bandwidth") {
  // One size twice: the two columns of the scaled system are proportional.
  std::vector<double> bytes{1024, 1024}, secs{1e-5, 1.1e-5};
  CHECK_FALSE(fit_alpha_beta(bytes, secs));
  // Two sizes one ulp apart (what a fuzzer found): distinct, yet numerically rank one.
  const double big = 1e300;
  bytes = {big, std::nextafter(big, 2 * big)};
  secs = {1e-3, 1e-3};
  CHECK_FALSE(fit_alpha_beta(bytes, secs));
  // A zero time (measured files allow min_s = 0) has no relative error to weigh.
  bytes = {1024, 4096};
  secs = {0, 1e-5};
  CHECK_FALSE(fit_alpha_beta(bytes, secs));
  // Only spans of different lengths are a caller's error.
  secs = {1e-5};
  CHECK_THROWS_AS(fit_alpha_beta(bytes, secs), std::invalid_argument);
  // Two sizes far enough apart are fitted, from exactly two samples.
  secs = {1e-5 + 1024 / 1e11, 1e-5 + 4096 / 1e11};
  const auto f = fit_alpha_beta(bytes, secs);
  REQUIRE(f);
  CHECK(f->bandwidth_gbps == rel_approx(100, 1e-9));
}
