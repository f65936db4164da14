#include "sim/engine.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace ctwin {

Engine::Engine() { generation_.reserve(1024); }

void Engine::push_entry(const Entry& e) {
  ++entries_;
  const std::uint64_t diff = e.time ^ last_;
  if (diff == 0) {
    current_.push_back(e);
    return;
  }
  const int level = (63 - std::countl_zero(diff)) >> 3;
  const int digit = static_cast<int>((e.time >> (8 * level)) & 0xff);
  Bucket& b = bucket(level, digit);
  if (b.tail == nullptr || b.tail->count == kBlockEntries) {
    Block* nb = new_block();
    if (b.tail) {
      b.tail->next = nb;
    } else {
      b.head = nb;
      mark(level, digit);
    }
    b.tail = nb;
  }
  b.tail->entries[b.tail->count++] = e;
}

Engine::Block* Engine::new_block() {
  if (free_blocks_) {
    Block* b = free_blocks_;
    free_blocks_ = b->next;
    b->next = nullptr;
    b->count = 0;
    return b;
  }
  blocks_.push_back(std::make_unique<Block>());
  return blocks_.back().get();
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
    slot = static_cast<std::uint32_t>(generation_.size());
    generation_.push_back(0);
    live_slot_.push_back(0);
  }
  live_slot_[slot] = 1;
  push_entry(Entry{static_cast<std::uint64_t>(at.ps), next_seq_++, slot, generation_[slot], cb});
  ++live_;
  return EventId{slot, generation_[slot]};
}

bool Engine::cancel(EventId id) {
  if (!id.valid() || id.slot >= generation_.size()) return false;
  if (generation_[id.slot] != id.generation || !live_slot_[id.slot]) return false;
  ++generation_[id.slot];  // the queued entry no longer matches and is skipped
  live_slot_[id.slot] = 0;
  free_slots_.push_back(id.slot);
  ++cancelled_queued_;
  --live_;
  if (cancelled_queued_ > live_ + 4096) compact();
  return true;
}

void Engine::compact() {
  std::vector<Entry> keep;
  keep.reserve(live_);
  for (int level = 0; level < kLevels; ++level) {
    for (int digit = 0; digit < kDigits; ++digit) {
      Bucket& b = bucket(level, digit);
      for (Block* k = b.head; k;) {
        for (std::uint32_t i = 0; i < k->count; ++i) {
          const Entry& e = k->entries[i];
          if (generation_[e.slot] == e.generation) keep.push_back(e);
        }
        Block* next = k->next;
        k->next = free_blocks_;
        free_blocks_ = k;
        k = next;
      }
      b = Bucket{};
    }
    occupied_[level] = {};
  }
  // Entries at the current time keep their order; the ones already consumed are dropped.
  std::size_t out = 0;
  for (std::size_t i = current_head_; i < current_.size(); ++i) {
    if (generation_[current_[i].slot] == current_[i].generation) current_[out++] = current_[i];
  }
  current_.resize(out);
  current_head_ = 0;
  entries_ = out;
  // Same reference key, so every entry returns to the bucket it came from.
  for (const Entry& e : keep) push_entry(e);
  cancelled_queued_ = 0;
}

bool Engine::refill(std::uint64_t limit) {
  if (current_head_ < current_.size()) return last_ <= limit;
  current_.clear();
  current_head_ = 0;
  // The lowest non-empty level holds the smallest times; within it, the smallest digit.
  for (int level = 0; level < kLevels; ++level) {
    for (int w = 0; w < 4; ++w) {
      const std::uint64_t bits = occupied_[level][w];
      if (bits == 0) continue;
      const int digit = w * 64 + std::countr_zero(bits);
      Bucket b = bucket(level, digit);
      std::uint64_t m = b.head->entries[0].time;
      for (Block* k = b.head; k; k = k->next) {
        for (std::uint32_t i = 0; i < k->count; ++i) m = std::min(m, k->entries[i].time);
      }
      if (m > limit) return false;
      last_ = m;
      occupied_[level][w] &= ~(1ull << (digit & 63));
      bucket(level, digit) = Bucket{};
      // Every entry moves to a lower level (or to current_) relative to the new reference.
      for (Block* k = b.head; k;) {
        for (std::uint32_t i = 0; i < k->count; ++i) {
          --entries_;
          push_entry(k->entries[i]);
        }
        Block* next = k->next;
        k->next = free_blocks_;
        free_blocks_ = k;
        k = next;
      }
      // Entries equal to the minimum may have arrived out of sequence order via redistribution.
      if (current_.size() > 1) {
        std::sort(current_.begin(), current_.end(), [](const Entry& x, const Entry& y) { return x.seq < y.seq; });
      }
      return true;
    }
  }
  return false;
}

bool Engine::pop_next(std::uint64_t limit, Entry& out) {
  while (refill(limit)) {
    out = current_[current_head_++];
    --entries_;
    if (cancelled_queued_ == 0 || generation_[out.slot] == out.generation) return true;
    --cancelled_queued_;
  }
  return false;
}

std::uint64_t Engine::run_until(Time until) {
  const std::uint64_t n = run_slice(static_cast<std::uint64_t>(until.ps), UINT64_MAX);
  if (until != Time::max() && now_ < until) now_ = until;
  return n;
}

std::uint64_t Engine::run_events(std::uint64_t max_events) { return run_slice(UINT64_MAX, max_events); }

std::uint64_t Engine::run_slice(std::uint64_t limit, std::uint64_t max_events) {
  std::uint64_t n = 0;
  Entry e;
  while (n < max_events && pop_next(limit, e)) {
    ++generation_[e.slot];
    live_slot_[e.slot] = 0;
    free_slots_.push_back(e.slot);
    --live_;
    now_ = Time{static_cast<std::int64_t>(e.time)};
    ++n;
    ++dispatched_;
    e.fn();
  }
  return n;
}

std::uint64_t Engine::run() { return run_until(Time::max()); }

}  // namespace ctwin
