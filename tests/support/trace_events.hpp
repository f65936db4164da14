// Hand-built trace events for the viewer tests.
#pragma once

#include <cstdint>

#include "sim/trace.hpp"

namespace ctwin::test {

// An event on `lane` from `start` for `dur` picoseconds, its name and kind interned strings.
inline TraceEvent ev(std::uint32_t lane, std::int64_t start, std::int64_t dur, std::uint32_t name, std::uint32_t kind) {
  TraceEvent e;
  e.lane = lane;
  e.start_ps = start;
  e.dur_ps = dur;
  e.name = name;
  e.kind = kind;
  return e;
}

}  // namespace ctwin::test
