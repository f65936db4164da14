#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sim/time.hpp"

using namespace ctwin;

TEST_CASE("time arithmetic is exact in range and throws instead of wrapping at the clock's ends") {
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  CHECK((picoseconds(big - 1) + picoseconds(1)).ps == big);
  CHECK_THROWS_AS(picoseconds(big) + picoseconds(1), TimeOverflow);
  CHECK_THROWS_AS(picoseconds(-big) - picoseconds(2), TimeOverflow);
  Time t = picoseconds(big);
  CHECK_THROWS_AS(t += picoseconds(1), TimeOverflow);
  CHECK_THROWS_AS(t -= picoseconds(-1), TimeOverflow);
  CHECK((picoseconds(3) * 4).ps == 12);
  CHECK_THROWS_AS(picoseconds(big / 2 + 1) * 2, TimeOverflow);
  CHECK_THROWS_AS(3 * picoseconds(big / 2), TimeOverflow);
  // 2^63 ps is 106.75 days: 9,223,372 s is in range, 9,223,373 s is not.
  CHECK(microseconds(9223372036854).ps == 9223372036854000000);
  CHECK_THROWS_AS(microseconds(9223372036855), TimeOverflow);
  CHECK_THROWS_AS(nanoseconds(big / 999), TimeOverflow);
}

TEST_CASE("seconds() rounds to the picosecond and rejects NaN, infinities and out-of-range magnitudes") {
  CHECK(seconds(1.5e-12).ps == 2);  // nearest, half away from zero
  CHECK(seconds(-2.5e-12).ps == -3);
  CHECK(seconds(9.2e6).ps == 9200000000000000000);
  CHECK_THROWS_AS(seconds(9.3e6), TimeOverflow);
  CHECK_THROWS_AS(seconds(-9.3e6), TimeOverflow);
  CHECK_THROWS_AS(seconds(1e300), TimeOverflow);
  CHECK_THROWS_AS(seconds(std::nan("")), TimeOverflow);
  CHECK_THROWS_AS(seconds(std::numeric_limits<double>::infinity()), TimeOverflow);
}
