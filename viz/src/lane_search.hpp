// Binary and galloping search over a lane's events, which are sorted by start.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "sim/trace.hpp"

namespace ctwin::viz {

// First index in [a, b) whose start is >= t.
inline std::size_t first_starting_at(const std::vector<TraceEvent>& ev, std::size_t a, std::size_t b, double t) {
  auto it =
      std::partition_point(ev.begin() + static_cast<std::ptrdiff_t>(a), ev.begin() + static_cast<std::ptrdiff_t>(b),
                           [t](const TraceEvent& e) { return static_cast<double>(e.start_ps) < t; });
  return static_cast<std::size_t>(it - ev.begin());
}

// Same, for t not smaller than at the previous call with this cursor: gallops forward from
// the cursor, so a left-to-right sweep touches memory near the previous answer.
inline std::size_t first_starting_at_from(const std::vector<TraceEvent>& ev, std::size_t& cursor, std::size_t b,
                                          double t) {
  std::size_t lo = cursor, step = 1;
  if (lo >= b || static_cast<double>(ev[lo].start_ps) >= t) return lo;
  while (lo + step < b && static_cast<double>(ev[lo + step].start_ps) < t) {
    lo += step;
    step *= 2;
  }
  cursor = first_starting_at(ev, lo + 1, std::min(lo + step, b), t);
  return cursor;
}

}  // namespace ctwin::viz
