#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/engine.hpp"

using namespace ctwin;

TEST_CASE("events run in time order regardless of scheduling order") {
  Engine e;
  std::vector<int> order;
  for (int t : {50, 10, 40, 20, 30}) e.schedule_at(Time{t}, [&order, t] { order.push_back(t); });
  CHECK(e.run() == 5);
  CHECK(order == std::vector<int>{10, 20, 30, 40, 50});
  CHECK(e.now() == Time{50});
}

TEST_CASE("events at the same time run in insertion order") {
  Engine e;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i) e.schedule_at(Time{7}, [&order, i] { order.push_back(i); });
  e.run();
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[i] == i);
}

TEST_CASE("ties stay in insertion order when they reach the front by redistribution") {
  // Events at equal times scheduled at different moments land in different radix buckets
  // first; they must still come out in the order they were scheduled.
  Engine e;
  std::vector<int> order;
  e.schedule_at(Time{1000}, [&] { order.push_back(0); });
  e.schedule_at(Time{1}, [&] {
    e.schedule_at(Time{1000}, [&] { order.push_back(1); });
    e.schedule_at(Time{999}, [&] { e.schedule_at(Time{1000}, [&] { order.push_back(2); }); });
  });
  e.run();
  CHECK(order == std::vector<int>{0, 1, 2});
}

TEST_CASE("an event scheduled from a callback at the current time runs after those already due") {
  Engine e;
  std::vector<std::string> order;
  e.schedule_at(Time{5}, [&] {
    order.push_back("a");
    e.schedule_in(Time{0}, [&] { order.push_back("c"); });
  });
  e.schedule_at(Time{5}, [&] { order.push_back("b"); });
  e.run();
  CHECK(order == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("a cancelled event never runs and a stale id cannot cancel a newer event") {
  Engine e;
  int ran = 0;
  EventId a = e.schedule_at(Time{10}, [&] { ran += 1; });
  CHECK(e.cancel(a));
  CHECK_FALSE(e.cancel(a));
  // The slot is reused by the next event; the old id must not reach it.
  EventId b = e.schedule_at(Time{20}, [&] { ran += 10; });
  CHECK(b.slot == a.slot);
  CHECK_FALSE(e.cancel(a));
  CHECK(e.pending() == 1);
  e.run();
  CHECK(ran == 10);
}

TEST_CASE("run_until stops at the limit and advances now to it") {
  Engine e;
  std::vector<int> order;
  for (int t : {1, 5, 10, 15}) e.schedule_at(Time{t}, [&order, t] { order.push_back(t); });
  CHECK(e.run_until(Time{10}) == 3);
  CHECK(order == std::vector<int>{1, 5, 10});
  CHECK(e.now() == Time{10});
  // Scheduling between now and the next pending event keeps the order right.
  e.schedule_at(Time{12}, [&] { order.push_back(12); });
  e.run();
  CHECK(order == std::vector<int>{1, 5, 10, 12, 15});
}

TEST_CASE("scheduling in the past is refused") {
  Engine e;
  e.schedule_at(Time{10}, [] {});
  e.run();
  CHECK_THROWS_AS(e.schedule_at(Time{9}, [] {}), std::logic_error);
}

// Against an independent reference: a sort of (time, sequence) pairs.
TEST_CASE("a random hold workload dispatches in the same order as a stable sort") {
  Engine e;
  std::mt19937_64 rng(7);
  std::vector<std::pair<std::int64_t, int>> expected, got;
  int next_id = 0;
  std::uniform_int_distribution<std::int64_t> inc(0, 5000);
  // Pre-schedule, then each event schedules one more until 20,000 have been created.
  std::function<void(int)> fire = [&](int id) {
    got.emplace_back(e.now().ps, id);
    if (next_id < 20000) {
      const auto t = e.now().ps + inc(rng) / 100 * 100;  // coarse times: many ties
      const int nid = next_id++;
      expected.emplace_back(t, nid);
      e.schedule_at(Time{t}, [&fire, nid] { fire(nid); });
    }
  };
  for (int i = 0; i < 1000; ++i) {
    const auto t = inc(rng) / 100 * 100;
    const int nid = next_id++;
    expected.emplace_back(t, nid);
    e.schedule_at(Time{t}, [&fire, nid] { fire(nid); });
  }
  e.run();
  std::stable_sort(expected.begin(), expected.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second;
  });
  CHECK(got == expected);
}

TEST_CASE("run_events runs at most the given number of events, in order") {
  Engine e;
  std::vector<int> order;
  for (int t = 0; t < 10; ++t) e.schedule_at(Time{t}, [&order, t] { order.push_back(t); });
  CHECK(e.run_events(4) == 4);
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  CHECK(e.run_events(100) == 6);
  CHECK(order.size() == 10);
  CHECK(e.run_events(1) == 0);
}

TEST_CASE("rescheduling many times (queue compaction) keeps the order of a stable sort of the last schedule") {
  Engine e;
  constexpr int kEvents = 1000;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> when(1, 1'000'000);
  std::vector<EventId> ids(kEvents);
  std::vector<std::pair<std::int64_t, int>> last(kEvents);  // (time, order scheduled) per event
  std::vector<int> ran;
  int order = 0;
  // Each round cancels every event and schedules it again: 20,000 cancellations against 1,000
  // live events, so the queue compacts several times.
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < kEvents; ++i) {
      if (round > 0) CHECK(e.cancel(ids[static_cast<std::size_t>(i)]));
      const std::int64_t t = when(rng) / 100 * 100;  // coarse, so ties occur
      ids[static_cast<std::size_t>(i)] = e.schedule_at(Time{t}, [&ran, i] { ran.push_back(i); });
      last[static_cast<std::size_t>(i)] = {t, order++};
    }
    CHECK(e.pending() == kEvents);
  }
  std::vector<int> expected(kEvents);
  for (int i = 0; i < kEvents; ++i) expected[static_cast<std::size_t>(i)] = i;
  std::sort(expected.begin(), expected.end(),
            [&](int a, int b) { return last[static_cast<std::size_t>(a)] < last[static_cast<std::size_t>(b)]; });
  CHECK(e.run() == kEvents);
  CHECK(ran == expected);
}
