#include "sim/time.hpp"

#include <cmath>

namespace ctwin {

Time seconds(double s) {
  const double ps = s * 1e12;
  // 2^63 is exactly representable; anything at or beyond it does not fit an int64.
  if (!(std::fabs(ps) < 9223372036854775808.0)) detail::time_overflow();
  return Time{std::llround(ps)};
}

}  // namespace ctwin
