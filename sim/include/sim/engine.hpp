// The discrete-event engine: schedule callbacks at picosecond times, run them in
// (time, insertion sequence) order. Ties never depend on addresses or hash order.
//
// The pending set is a radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990): time in a
// discrete-event run never goes backwards, so a monotone priority queue suffices.
// insert is O(1); pop is amortised O(log C) where C is the span of pending times, with
// sequential memory access instead of a binary heap's cache-missing sift-downs.
// Cancellation is lazy: a cancelled event's slot is marked and skipped when popped.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/id.hpp"
#include "sim/inplace_function.hpp"
#include "sim/time.hpp"

namespace ctwin {

// Slot index plus generation, so a stale id can never cancel a newer event.
struct EventId {
  std::uint32_t slot = UINT32_MAX;
  std::uint32_t generation = 0;
  bool valid() const { return slot != UINT32_MAX; }
};

class Engine {
 public:
  using Callback = InplaceFunction<void(), 48>;

  Engine();

  Time now() const { return now_; }

  // Schedules cb at absolute time `at` (>= now()). Throws std::logic_error for the past.
  EventId schedule_at(Time at, Callback cb);
  EventId schedule_in(Time delay, Callback cb) { return schedule_at(now_ + delay, std::move(cb)); }

  // Returns true if the event was pending and is now cancelled.
  bool cancel(EventId id);

  // Runs until no event is pending. Returns the number of events dispatched.
  std::uint64_t run();
  // Runs events with time <= until, then sets now() to `until` (if it is later).
  std::uint64_t run_until(Time until);

  std::size_t pending() const { return live_; }
  std::uint64_t dispatched() const { return dispatched_; }

 private:
  struct Entry {
    std::uint64_t time;  // picoseconds, as unsigned for the radix comparison
    std::uint64_t seq;
    std::uint32_t slot;
    std::uint32_t generation;
  };
  struct Slot {
    Callback cb;
    std::uint32_t generation = 0;
  };

  static int bucket_of(std::uint64_t key, std::uint64_t last);
  void push_entry(const Entry& e);
  // Makes bucket 0 hold the minimum if the minimum time is <= limit; false if empty or later.
  bool refill(std::uint64_t limit);
  bool pop_next(std::uint64_t limit, Entry& out);

  std::array<std::vector<Entry>, 65> buckets_;
  std::size_t bucket0_head_ = 0;  // bucket 0 is consumed FIFO, preserving sequence order
  std::uint64_t last_ = 0;        // the radix heap's reference key: the last minimum extracted
  std::size_t entries_ = 0;       // entries in buckets (live or cancelled)

  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;

  Time now_{};
  std::uint64_t next_seq_ = 0;
  std::size_t live_ = 0;
  std::uint64_t dispatched_ = 0;
};

}  // namespace ctwin
