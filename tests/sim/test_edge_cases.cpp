// Cases the mutation run (scripts/mutate.sh) found unguarded in the engine and the flow solver.
#include <doctest/doctest.h>

#include "sim/engine.hpp"
#include "sim/flow.hpp"
#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

TEST_CASE("run_until moves the clock to its horizon even when the last event is earlier") {
  Engine e;
  int ran = 0;
  e.schedule_at(Time{10}, [&] { ++ran; });
  CHECK(e.run_until(Time{50}) == 1);
  CHECK(ran == 1);
  CHECK(e.now() == Time{50});
  // With nothing queued at all.
  Engine idle;
  idle.run_until(Time{70});
  CHECK(idle.now() == Time{70});
  // An event scheduled from there is relative to the horizon.
  e.schedule_in(Time{5}, [&] { ++ran; });
  e.run();
  CHECK(e.now() == Time{55});
}

TEST_CASE("a flow's progress is kept across several reshares") {
  // 1 GB/s link. A (3 GB) starts at t=0 and runs alone at 1 GB/s; B (1 GB) attaches after a
  // 1 s latency, so both run at 0.5 GB/s from t=1 (A has 2 GB left); B ends at t=3 with A at
  // 1 GB left, which A then moves alone: A ends at t=4. Each reshare must count A's bytes from
  // the previous one, not from when A started.
  Engine e;
  FlowNetwork net(e);
  auto l = net.add_link(1e9);
  Time a{}, b{};
  net.start({l}, 3e9, [&] { a = e.now(); });
  net.start(
      {l}, 1e9, [&] { b = e.now(); }, seconds(1.0));
  e.run();
  CHECK(b.seconds() == rel_approx(3.0, 1e-9));
  CHECK(a.seconds() == rel_approx(4.0, 1e-9));
}
