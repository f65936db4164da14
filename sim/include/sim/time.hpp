// Simulated time: a signed 64-bit count of picoseconds (about 106 days of range).
// Integer time keeps runs deterministic across compilers and optimisation levels.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace ctwin {

// Simulated time beyond the clock's range: a rate, size or count in the input is out of
// proportion. Time arithmetic throws it instead of wrapping (signed overflow is undefined).
struct TimeOverflow : std::overflow_error {
  TimeOverflow()
      : std::overflow_error(
            "simulated time beyond the clock's range (2^63 ps, about 106 days): a bandwidth, TFLOP/s, size or "
            "count in the input is out of proportion") {}
};

namespace detail {
[[noreturn]] inline void time_overflow() { throw TimeOverflow(); }
constexpr std::int64_t add_ps(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) time_overflow();
  return r;
}
constexpr std::int64_t sub_ps(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) time_overflow();
  return r;
}
constexpr std::int64_t mul_ps(std::int64_t a, std::int64_t k) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, k, &r)) time_overflow();
  return r;
}
}  // namespace detail

struct Time {
  std::int64_t ps = 0;

  constexpr auto operator<=>(const Time&) const = default;

  static constexpr Time max() { return Time{std::numeric_limits<std::int64_t>::max()}; }
  constexpr double seconds() const { return static_cast<double>(ps) * 1e-12; }
  constexpr double micros() const { return static_cast<double>(ps) * 1e-6; }

  constexpr Time& operator+=(Time o) {
    ps = detail::add_ps(ps, o.ps);
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ps = detail::sub_ps(ps, o.ps);
    return *this;
  }
};

// Checked: a result outside the clock's range throws TimeOverflow, never wraps.
constexpr Time operator+(Time a, Time b) { return Time{detail::add_ps(a.ps, b.ps)}; }
constexpr Time operator-(Time a, Time b) { return Time{detail::sub_ps(a.ps, b.ps)}; }
constexpr Time operator*(Time a, std::int64_t k) { return Time{detail::mul_ps(a.ps, k)}; }
constexpr Time operator*(std::int64_t k, Time a) { return Time{detail::mul_ps(a.ps, k)}; }

constexpr Time picoseconds(std::int64_t ps) { return Time{ps}; }
constexpr Time nanoseconds(std::int64_t ns) { return Time{detail::mul_ps(ns, 1000)}; }
constexpr Time microseconds(std::int64_t us) { return Time{detail::mul_ps(us, 1000000)}; }

// Rounds to the nearest picosecond; the one place floating-point time enters the engine. NaN,
// infinities and magnitudes beyond the clock's range throw TimeOverflow (llround would be UB).
// Out of line (sim/src/time.cpp): every file includes this header.
Time seconds(double s);

}  // namespace ctwin
