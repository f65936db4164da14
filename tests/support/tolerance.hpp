// Tolerances that mean what they say.
//
// doctest's Approx(x).epsilon(e) passes when |a - b| < e * (1 + max(|a|, |b|)): the "1 +"
// turns a stated 2% into an absolute 0.02 for anything below 1 (seconds, fractions, GiB of a
// small model). Tests compare through these helpers instead; scripts/check-tests.sh rejects a
// bare Approx anywhere else under tests/.
#pragma once

#include <cfloat>
#include <cmath>
#include <ostream>

#include <doctest/doctest.h>

namespace ctwin::test {

// Passes when |actual - expected| <= tolerance * max(|actual|, |expected|): a relative error.
// An expected value of exactly zero passes only for an exact zero; use abs_approx there.
// (doctest compares with a strict <, so scale 0 would fail even 0 == 0: a scale of the least
// normal double lets an exact zero through and nothing else.)
inline doctest::Approx rel_approx(double expected, double tolerance) {
  return doctest::Approx(expected).epsilon(tolerance).scale(expected == 0 ? DBL_MIN : 0);
}

// Passes when |actual - expected| <= tolerance, in the value's own unit (say so at the call).
struct AbsApprox {
  double expected;
  double tolerance;
};
inline AbsApprox abs_approx(double expected, double tolerance) { return {expected, tolerance}; }
inline bool operator==(double actual, const AbsApprox& a) { return std::fabs(actual - a.expected) <= a.tolerance; }
inline bool operator==(const AbsApprox& a, double actual) { return actual == a; }
inline bool operator!=(double actual, const AbsApprox& a) { return !(actual == a); }
inline bool operator!=(const AbsApprox& a, double actual) { return !(actual == a); }
inline std::ostream& operator<<(std::ostream& os, const AbsApprox& a) {
  return os << a.expected << " +/- " << a.tolerance;
}

// Relative difference |a - b| / max(|a|, |b|), for messages and one-sided bounds.
inline double rel_diff(double a, double b) {
  const double m = std::fmax(std::fabs(a), std::fabs(b));
  return m == 0 ? 0 : std::fabs(a - b) / m;
}

}  // namespace ctwin::test
