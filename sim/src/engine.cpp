#include "sim/engine.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace ctwin {

Engine::Engine() {
  slots_.reserve(1024);
}

int Engine::bucket_of(std::uint64_t key, std::uint64_t last) {
  // Index of the highest bit where key and last differ, plus one; 0 when equal.
  std::uint64_t diff = key ^ last;
  return diff == 0 ? 0 : 64 - std::countl_zero(diff);
}

void Engine::push_entry(const Entry& e) {
  buckets_[bucket_of(e.time, last_)].push_back(e);
  ++entries_;
}

EventId Engine::schedule_at(Time at, Callback cb) {
  if (at < now_) {
    throw std::logic_error("Engine::schedule_at: time " + std::to_string(at.ps) + " ps is before now (" +
                           std::to_string(now_.ps) + " ps)");
  }
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.cb = std::move(cb);
  push_entry(Entry{static_cast<std::uint64_t>(at.ps), next_seq_++, slot, s.generation});
  ++live_;
  return EventId{slot, s.generation};
}

bool Engine::cancel(EventId id) {
  if (!id.valid() || id.slot >= slots_.size()) return false;
  Slot& s = slots_[id.slot];
  if (s.generation != id.generation || !s.cb) return false;
  s.cb.reset();
  ++s.generation;  // the entry left in the heap no longer matches and is skipped
  free_slots_.push_back(id.slot);
  --live_;
  return true;
}

bool Engine::refill(std::uint64_t limit) {
  auto& b0 = buckets_[0];
  if (bucket0_head_ < b0.size()) return last_ <= limit;
  b0.clear();
  bucket0_head_ = 0;
  std::size_t i = 1;
  while (i < buckets_.size() && buckets_[i].empty()) ++i;
  if (i == buckets_.size()) return false;
  auto& b = buckets_[i];
  std::uint64_t m = b.front().time;
  for (const Entry& e : b) m = std::min(m, e.time);
  if (m > limit) return false;
  last_ = m;
  // Every entry of bucket i lands in a lower bucket relative to the new reference key.
  for (const Entry& e : b) buckets_[bucket_of(e.time, last_)].push_back(e);
  b.clear();
  // Entries equal to the minimum may have arrived out of sequence order via redistribution.
  if (b0.size() > 1) {
    std::sort(b0.begin(), b0.end(), [](const Entry& x, const Entry& y) { return x.seq < y.seq; });
  }
  return true;
}

bool Engine::pop_next(std::uint64_t limit, Entry& out) {
  while (refill(limit)) {
    out = buckets_[0][bucket0_head_++];
    --entries_;
    if (slots_[out.slot].generation == out.generation) return true;
  }
  return false;
}

std::uint64_t Engine::run_until(Time until) {
  std::uint64_t n = 0;
  Entry e;
  const auto limit = static_cast<std::uint64_t>(until.ps);
  while (pop_next(limit, e)) {
    Slot& s = slots_[e.slot];
    Callback cb = std::move(s.cb);
    ++s.generation;
    free_slots_.push_back(e.slot);
    --live_;
    now_ = Time{static_cast<std::int64_t>(e.time)};
    ++n;
    ++dispatched_;
    cb();
  }
  if (until != Time::max() && now_ < until) now_ = until;
  return n;
}

std::uint64_t Engine::run() {
  return run_until(Time::max());
}

}  // namespace ctwin
