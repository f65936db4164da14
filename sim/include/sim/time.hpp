// Simulated time: a signed 64-bit count of picoseconds (about 106 days of range).
// Integer time keeps runs deterministic across compilers and optimisation levels.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>

namespace ctwin {

struct Time {
  std::int64_t ps = 0;

  constexpr auto operator<=>(const Time&) const = default;

  static constexpr Time max() { return Time{std::numeric_limits<std::int64_t>::max()}; }
  constexpr double seconds() const { return static_cast<double>(ps) * 1e-12; }
  constexpr double micros() const { return static_cast<double>(ps) * 1e-6; }

  constexpr Time& operator+=(Time o) {
    ps += o.ps;
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ps -= o.ps;
    return *this;
  }
};

constexpr Time operator+(Time a, Time b) { return Time{a.ps + b.ps}; }
constexpr Time operator-(Time a, Time b) { return Time{a.ps - b.ps}; }
constexpr Time operator*(Time a, std::int64_t k) { return Time{a.ps * k}; }
constexpr Time operator*(std::int64_t k, Time a) { return Time{a.ps * k}; }

constexpr Time picoseconds(std::int64_t ps) { return Time{ps}; }
constexpr Time nanoseconds(std::int64_t ns) { return Time{ns * 1000}; }
constexpr Time microseconds(std::int64_t us) { return Time{us * 1000000}; }

// Rounds to the nearest picosecond; the one place floating-point time enters the engine.
inline Time seconds(double s) { return Time{std::llround(s * 1e12)}; }

}  // namespace ctwin
