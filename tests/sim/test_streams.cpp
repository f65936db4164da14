#include <doctest/doctest.h>

#include "sim/streams.hpp"

using namespace ctwin;

TEST_CASE("tasks on one stream run back to back in submission order") {
  TaskGraph g;
  auto s = g.add_stream();
  auto a = g.add_task(s, Time{10});
  auto b = g.add_task(s, Time{20});
  auto c = g.add_task(s, Time{5});
  Engine e;
  StreamExecutor x(e, g);
  x.start();
  e.run();
  CHECK(x.timing(a).end == Time{10});
  CHECK(x.timing(b).start == Time{10});
  CHECK(x.timing(b).end == Time{30});
  CHECK(x.timing(c).end == Time{35});
}

TEST_CASE("tasks on different streams overlap; a cross-stream dependency waits") {
  TaskGraph g;
  auto s0 = g.add_stream(), s1 = g.add_stream();
  auto a = g.add_task(s0, Time{100});
  auto b = g.add_task(s1, Time{30});
  TaskId deps[] = {a};
  auto c = g.add_task(s1, Time{10}, deps);  // waits for a although s1 is free at 30
  Engine e;
  StreamExecutor x(e, g);
  x.start();
  e.run();
  CHECK(x.timing(b).start == Time{0});
  CHECK(x.timing(c).ready == Time{100});
  CHECK(x.timing(c).end == Time{110});
  CHECK(x.makespan() == Time{110});
}

TEST_CASE("interleaved rendezvous keep their own members, in the order they were added") {
  // Two collectives on two devices, members added interleaved (r0, r1, r1, r0): device 0 joins
  // r0 at 10 and r1 at 10 + 40; device 1 joins r1 at 30 and r0 after it. Each call takes 5 from
  // its start. r1 starts at 50 (device 0's arrival) and ends at 55; r0 then starts when device 1
  // reaches it at 55 and ends at 60, so device 0's r0 member waits 10 -> 55 on its own stream
  // (r1 is on device 0's second stream).
  TaskGraph g;
  auto d0 = g.add_stream(), d0b = g.add_stream(), d1 = g.add_stream();
  auto r0 = g.add_rendezvous(), r1 = g.add_rendezvous();
  auto w0 = g.add_task(d0, Time{10});
  TaskId after_w0[] = {w0};
  auto a0 = g.add_member(d0, r0, after_w0);
  auto w0b = g.add_task(d0b, Time{50});
  TaskId after_w0b[] = {w0b};
  auto a1 = g.add_member(d0b, r1, after_w0b);
  auto w1 = g.add_task(d1, Time{30});
  TaskId after_w1[] = {w1};
  auto b1 = g.add_member(d1, r1, after_w1);
  auto b0 = g.add_member(d1, r0);
  Engine e;
  StreamExecutor x(e, g);
  REQUIRE(x.members(r0).size() == 2);
  CHECK(x.members(r0)[0] == a0.value);
  CHECK(x.members(r0)[1] == b0.value);
  REQUIRE(x.members(r1).size() == 2);
  CHECK(x.members(r1)[0] == a1.value);
  CHECK(x.members(r1)[1] == b1.value);
  x.on_rendezvous([&](RendezvousId id, Time) { e.schedule_in(Time{5}, [&x, id] { x.finish_rendezvous(id); }); });
  x.start();
  e.run();
  CHECK(x.timing(a1).start == Time{50});
  CHECK(x.timing(b1).end == Time{55});
  CHECK(x.timing(a0).ready == Time{10});
  CHECK(x.timing(a0).start == Time{55});
  CHECK(x.timing(b0).end == Time{60});
  CHECK(x.makespan() == Time{60});
  CHECK(x.all_done());
}

TEST_CASE("a rendezvous starts when its last member arrives, so a slow rank delays the group") {
  // Two devices: device 0 computes 50 then joins; device 1 computes 80 then joins. The
  // collective takes 20 from its start, so both members end at 80 + 20.
  TaskGraph g;
  auto d0 = g.add_stream(), d1 = g.add_stream();
  auto w0 = g.add_task(d0, Time{50});
  auto w1 = g.add_task(d1, Time{80});
  auto r = g.add_rendezvous();
  TaskId dep0[] = {w0};
  TaskId dep1[] = {w1};
  auto m0 = g.add_member(d0, r, dep0);
  auto m1 = g.add_member(d1, r, dep1);
  auto after = g.add_task(d0, Time{5});
  Engine e;
  StreamExecutor x(e, g);
  int calls = 0;
  x.on_rendezvous([&](RendezvousId id, Time now) {
    ++calls;
    CHECK(now == Time{80});
    e.schedule_in(Time{20}, [&x, id] { x.finish_rendezvous(id); });
  });
  x.start();
  e.run();
  CHECK(calls == 1);
  CHECK(x.timing(m0).ready == Time{50});
  CHECK(x.timing(m0).start == Time{80});
  CHECK(x.timing(m0).end == Time{100});
  CHECK(x.timing(m1).end == Time{100});
  CHECK(x.timing(after).start == Time{100});
  CHECK(x.all_done());
}

TEST_CASE("a duration hook decides a task's time when it starts") {
  TaskGraph g;
  auto s = g.add_stream();
  auto a = g.add_task(s, Time{10});
  auto b = g.add_task(s, Time{10});
  Engine e;
  StreamExecutor x(e, g);
  x.on_duration([](TaskId t, Time now) { return t.value == 1 ? Time{now.ps * 3} : Time{10}; });
  x.start();
  e.run();
  CHECK(x.timing(a).end == Time{10});
  CHECK(x.timing(b).end == Time{40});
}

TEST_CASE("a task without a stream starts as soon as its dependencies finish, beside busy streams") {
  TaskGraph g;
  auto s = g.add_stream();
  auto a = g.add_task(s, Time{10});
  auto b = g.add_task(s, Time{100});
  TaskId dep[] = {a};
  auto free1 = g.add_task(StreamId::none(), Time{30}, dep);
  auto free2 = g.add_task(StreamId::none(), Time{30}, dep);  // overlaps free1: no stream order
  Engine e;
  StreamExecutor x(e, g);
  x.start();
  e.run();
  CHECK(x.timing(free1).start == Time{10});
  CHECK(x.timing(free2).start == Time{10});
  CHECK(x.timing(free2).end == Time{40});
  CHECK(x.timing(b).end == Time{110});
}
