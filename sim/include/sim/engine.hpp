// The discrete-event engine: schedule callbacks at picosecond times, run them in
// (time, insertion sequence) order. Ties never depend on addresses or hash order.
//
// The pending set is a radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990) with base-256
// digits: time in a discrete-event run never goes backwards, so a monotone priority queue
// suffices. An event sits in bucket (level, digit) where level is the highest byte in which
// its time differs from the last time popped. insert is O(1); each event moves down at most
// 8 levels (in practice 2-3), with sequential memory access instead of a binary heap's
// cache-missing sift-downs; finding the next bucket scans a 256-bit occupancy mask.
// Cancellation is lazy: a cancelled event's slot is marked and skipped when popped.
// Callbacks travel inside the queue entries (no side table to miss in cache on every
// dispatch), so they must be trivially copyable: capture pointers and ids, not containers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include <cstring>
#include <type_traits>

#include "sim/id.hpp"
#include "sim/time.hpp"

namespace ctwin {

// Slot index plus generation, so a stale id can never cancel a newer event.
struct EventId {
  std::uint32_t slot = UINT32_MAX;
  std::uint32_t generation = 0;
  bool valid() const { return slot != UINT32_MAX; }
};

// A callable with a small, trivially copyable capture, stored inline and moved as bytes.
class EventFn {
 public:
  static constexpr std::size_t kCapacity = 24;
  EventFn() = default;
  template <class F, class D = std::decay_t<F>, class = std::enable_if_t<!std::is_same_v<D, EventFn>>>
  EventFn(F&& f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly
    static_assert(sizeof(D) <= kCapacity, "event capture too large: capture a pointer or an index instead");
    static_assert(std::is_trivially_copyable_v<D> && std::is_trivially_destructible_v<D>,
                  "event captures must be trivially copyable (pointers, ids, numbers)");
    static_assert(alignof(D) <= alignof(std::uint64_t));
    std::memcpy(static_cast<void*>(buf_), static_cast<const void*>(&f), sizeof(D));
    call_ = [](void* p) { (*static_cast<D*>(p))(); };
  }
  explicit operator bool() const { return call_ != nullptr; }
  void operator()() { call_(buf_); }

 private:
  void (*call_)(void*) = nullptr;
  alignas(std::uint64_t) unsigned char buf_[kCapacity];
};

class Engine {
 public:
  using Callback = EventFn;

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
  // Runs at most max_events events (for progress reports between slices); returns how many ran.
  std::uint64_t run_events(std::uint64_t max_events);

  std::size_t pending() const { return live_; }
  std::uint64_t dispatched() const { return dispatched_; }

 private:
  struct Entry {
    std::uint64_t time;  // picoseconds, as unsigned for the radix comparison
    std::uint64_t seq;
    std::uint32_t slot;
    std::uint32_t generation;
    EventFn fn;
  };

  static constexpr int kLevels = 8;
  static constexpr int kDigits = 256;
  void push_entry(const Entry& e);
  // Makes bucket 0 hold the minimum if the minimum time is <= limit; false if empty or later.
  bool refill(std::uint64_t limit);
  bool pop_next(std::uint64_t limit, Entry& out);
  // Drops cancelled entries from the queue. Run when they outnumber the live ones, so memory
  // stays proportional to pending events however often events are rescheduled (a flow network
  // reschedules every affected completion at each rate change); amortised O(1) per cancel.
  void compact();
  std::uint64_t run_slice(std::uint64_t limit, std::uint64_t max_events);

  // Buckets are chains of fixed-size blocks from a shared free list: filling never copies,
  // and emptied blocks are reused, so a long run stops allocating after its warm-up.
  static constexpr int kBlockEntries = 63;
  struct Block {
    Entry entries[kBlockEntries];
    Block* next = nullptr;
    std::uint32_t count = 0;
  };
  struct Bucket {
    Block* head = nullptr;
    Block* tail = nullptr;
  };
  Block* new_block();
  Bucket& bucket(int level, int digit) { return buckets_[level * kDigits + digit]; }
  void mark(int level, int digit) { occupied_[level][digit >> 6] |= 1ull << (digit & 63); }

  std::vector<Bucket> buckets_ = std::vector<Bucket>(kLevels * kDigits);
  std::array<std::array<std::uint64_t, 4>, kLevels> occupied_{};  // non-empty buckets per level
  std::vector<std::unique_ptr<Block>> blocks_;                    // owns every block
  Block* free_blocks_ = nullptr;
  std::vector<Entry> current_;  // entries whose time equals last_, consumed FIFO in sequence order
  std::size_t current_head_ = 0;
  std::uint64_t last_ = 0;   // the radix heap's reference key: the last minimum extracted
  std::size_t entries_ = 0;  // entries in buckets (live or cancelled)

  // A slot names a pending event for cancellation; its generation changes when the event is
  // dispatched or cancelled. Only consulted on pop while cancelled entries are still queued.
  std::vector<std::uint32_t> generation_;
  std::vector<std::uint8_t> live_slot_;
  std::vector<std::uint32_t> free_slots_;
  std::size_t cancelled_queued_ = 0;

  Time now_{};
  std::uint64_t next_seq_ = 0;
  std::size_t live_ = 0;
  std::uint64_t dispatched_ = 0;
};

}  // namespace ctwin
