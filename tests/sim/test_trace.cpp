#include <doctest/doctest.h>

#include <sstream>

#include "sim/error.hpp"
#include "sim/trace.hpp"

using namespace ctwin;

namespace {
Trace sample() {
  Trace t;
  auto l0 = t.add_lane("gpu 0", "compute", "node 0", 0, 0);
  auto l1 = t.add_lane("gpu 1", "compute", "node 0", 1, 0);
  t.events.push_back(TraceEvent{1500000, 2000001, 1e12, 4096, l0, t.intern("mb0 qkv"), t.intern("gemm"), kNoIndex});
  t.events.push_back(TraceEvent{0, 7, 0, 1 << 20, l1, t.intern("grad \"all_reduce\""), t.intern("all_reduce"), 3});
  t.counters.push_back(TraceCounterTrack{t.intern("gpu 0"), t.intern("memory_bytes"), 0, {{0, 1e9}, {5000000, 2e9}}});
  t.arrows.push_back(TraceArrow{l0, l1, 100, 900000, t.intern("send_activations")});
  t.summary = {{"step_time_s", 1.25}, {"mfu", 0.5}};
  return t;
}
}  // namespace

TEST_CASE("the binary trace reads back exactly what was written") {
  Trace t = sample();
  std::stringstream ss;
  write_trace_binary(t, ss);
  Trace r = read_trace_binary(ss, "mem");
  CHECK(r.strings == t.strings);
  REQUIRE(r.events.size() == 2);
  CHECK(r.events[0].start_ps == 1500000);
  CHECK(r.events[0].dur_ps == 2000001);
  CHECK(r.str(r.events[1].name) == "grad \"all_reduce\"");
  CHECK(r.events[1].group == 3);
  CHECK(r.counters[0].samples[1].second == 2e9);
  CHECK(r.arrows[0].to_ps == 900000);
  CHECK(r.summary == t.summary);
}

TEST_CASE("Chrome JSON keeps picosecond times exactly and reads back") {
  Trace t = sample();
  std::stringstream ss;
  write_chrome_trace(t, ss);
  const std::string text = ss.str();
  // 1,500,000 ps = 1.5 us; 2,000,001 ps = 2.000001 us; 7 ps = 0.000007 us.
  CHECK(text.find("\"ts\":1.500000,\"dur\":2.000001") != std::string::npos);
  CHECK(text.find("\"dur\":0.000007") != std::string::npos);
  Trace r = read_chrome_trace(ss, "mem");
  REQUIRE(r.events.size() == 2);
  CHECK(r.events[0].start_ps == 1500000);
  CHECK(r.events[0].dur_ps == 2000001);
  CHECK(r.events[1].dur_ps == 7);
  CHECK(r.str(r.lanes[r.events[1].lane].process) == "gpu 1");
  CHECK(r.str(r.lanes[0].group) == "node 0");
  REQUIRE(r.arrows.size() == 1);
  CHECK(r.arrows[0].from_ps == 100);
  CHECK(r.summary == t.summary);
}

TEST_CASE("a truncated or foreign binary trace is an input error, not a crash") {
  Trace t = sample();
  std::stringstream ss;
  write_trace_binary(t, ss);
  std::string bytes = ss.str();
  std::stringstream cut(bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(read_trace_binary(cut, "cut.ctt"), InputError);
  std::stringstream foreign("hello world, not a trace at all");
  CHECK_THROWS_AS(read_trace_binary(foreign, "x.ctt"), InputError);
}
