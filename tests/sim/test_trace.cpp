#include <doctest/doctest.h>

#include <climits>
#include <cstring>
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

namespace {
// The bytes of a binary trace with its event count field replaced.
std::string with_event_count(std::uint64_t n) {
  Trace t = sample();
  std::stringstream ss;
  write_trace_binary(t, ss);
  std::string bytes = ss.str();
  // magic, version, string count and strings, lane count and lanes: the event count follows.
  std::size_t at = 8 + 4 + 8;
  for (const auto& s : t.strings) at += 4 + s.size();
  at += 8 + t.lanes.size() * 20;
  std::memcpy(bytes.data() + at, &n, sizeof n);
  return bytes;
}

std::string input_error(const std::string& text, bool binary) {
  std::istringstream in(text);
  try {
    if (binary) {
      read_trace_binary(in, "t");
    } else {
      read_chrome_trace(in, "t.json");
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("a binary trace's counts are checked against the bytes that remain before allocating") {
  // 2^32 - 1 events of 48 bytes would be 192 GiB; the file holds a few hundred bytes.
  const std::string msg = input_error(with_event_count(UINT32_MAX), true);
  CHECK(msg.find("declares 4294967295 events but only") != std::string::npos);
  CHECK(input_error(with_event_count(20), true).find("declares 20 events") != std::string::npos);
  CHECK(input_error(with_event_count(2), true).empty());
  CHECK(input_error(with_event_count(1ull << 40), true).find("implausible number of events") != std::string::npos);
  // A stream that cannot tell its size (the viewer's) still reads in bounded chunks.
  struct NoSeek : std::stringbuf {
    using std::stringbuf::stringbuf;
    pos_type seekoff(off_type, std::ios::seekdir, std::ios::openmode) override { return pos_type(off_type(-1)); }
  } buf(with_event_count(UINT32_MAX));
  std::istream in(&buf);
  CHECK_THROWS_WITH_AS(read_trace_binary(in, "t"), doctest::Contains("truncated"), InputError);
}

TEST_CASE("binary trace times out of the clock's range are input errors") {
  auto with = [](auto edit) {
    Trace t = sample();
    edit(t);
    std::stringstream ss;
    write_trace_binary(t, ss);
    return input_error(ss.str(), true);
  };
  CHECK(with([](Trace&) {}).empty());
  CHECK(with([](Trace& t) { t.events[0].start_ps = INT64_MAX - 5; }).find("/events/") != std::string::npos);
  CHECK(with([](Trace& t) { t.events[0].dur_ps = -1; }).find("negative") != std::string::npos);
  CHECK(with([](Trace& t) {
          t.events[0].dur_ps = INT64_MAX / 2 + 1;
          t.events[1].dur_ps = INT64_MAX / 2 + 1;
        }).find("/events/1") != std::string::npos);
  CHECK(with([](Trace& t) { t.arrows[0].to_ps = -3; }).find("negative time") != std::string::npos);
  CHECK(with([](Trace& t) { t.counters[0].samples[0].first = INT64_MIN; }).find("/counters") != std::string::npos);
}

TEST_CASE("Chrome trace numbers are range-checked and shapes checked, each error naming the field") {
  auto ev = [](const std::string& fields) {
    return input_error("{\"traceEvents\":[{\"ph\":\"X\"," + fields + "}]}", false);
  };
  CHECK(ev("\"pid\":1,\"tid\":2,\"ts\":1.5,\"dur\":2").empty());
  CHECK(ev("\"pid\":1e20,\"tid\":2,\"ts\":1").find("/traceEvents/0/pid: found 1e+20") != std::string::npos);
  CHECK(ev("\"pid\":-1,\"tid\":2,\"ts\":1").find("/traceEvents/0/pid") != std::string::npos);
  CHECK(ev("\"pid\":4294967296,\"tid\":2,\"ts\":1").find("/traceEvents/0/pid") != std::string::npos);
  CHECK(ev("\"pid\":1.5,\"tid\":2,\"ts\":1").find("/traceEvents/0/pid") != std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":\"a\",\"ts\":1").find("/traceEvents/0/tid") != std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":2,\"ts\":1e300").find("/traceEvents/0/ts") != std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":2,\"ts\":-1").find("/traceEvents/0/ts") != std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":2").find("/traceEvents/0/ts: missing") != std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":2,\"ts\":9e12,\"dur\":9e12").find("/traceEvents/0/dur") != std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":2,\"ts\":1,\"args\":{\"group\":1e20}").find("/traceEvents/0/args/group") !=
        std::string::npos);
  CHECK(ev("\"pid\":1,\"tid\":2,\"ts\":1,\"name\":7").find("/traceEvents/0/name") != std::string::npos);
  CHECK(input_error("{\"traceEvents\":[{\"ts\":-1e30825}]}", false).find("malformed JSON") != std::string::npos);
  CHECK(input_error("{\"traceEvents\":[3]}", false).find("/traceEvents/0") != std::string::npos);
  CHECK(input_error("{\"traceEvents\":[{\"ph\":\"s\",\"id\":-2,\"pid\":0,\"tid\":0,\"ts\":0}]}", false)
            .find("/traceEvents/0/id") != std::string::npos);
  auto lanes = [](const std::string& l) { return input_error("{\"traceEvents\":[],\"ctwin\":" + l + "}", false); };
  CHECK(lanes("{\"lanes\":[[0,1,\"g\"]]}").empty());
  CHECK(lanes("{\"lanes\":5}").find("/ctwin/lanes") != std::string::npos);
  CHECK(lanes("{\"lanes\":[[0,1]]}").find("/ctwin/lanes/0") != std::string::npos);
  CHECK(lanes("{\"lanes\":[[1e20,1,\"g\"]]}").find("/ctwin/lanes/0/0") != std::string::npos);
  CHECK(lanes("[1]").find("/ctwin") != std::string::npos);
  CHECK(lanes("{\"summary\":{\"a\":1}}").find("/ctwin/summary") != std::string::npos);
  CHECK(lanes("{\"summary\":[[1,2]]}").find("/ctwin/summary/0") != std::string::npos);
}
