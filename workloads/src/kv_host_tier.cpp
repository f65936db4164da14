// The host tier of KV offloading: an LRU queue of pages (kv_host_tier.hpp).
#include "kv_host_tier.hpp"

#include <stdexcept>

namespace ctwin {

void KvHostTier::store(detail::PageKey k, std::int32_t replica) {
  if (capacity_ <= 0) return;
  if (const std::int32_t* e = map_.find(k)) {
    unlink(*e);
    push_back(*e);
    return;
  }
  std::int32_t e;
  if (static_cast<std::int64_t>(map_.size()) >= capacity_) {  // full: the least recently used goes
    e = head_;
    unlink(e);
    map_.erase(entries_[static_cast<std::size_t>(e)].key);
    ++stats_.evicted_pages;
  } else {
    e = static_cast<std::int32_t>(entries_.size());
    entries_.emplace_back();
  }
  entries_[static_cast<std::size_t>(e)].key = k;
  entries_[static_cast<std::size_t>(e)].home = replica;
  map_.insert(k, e);
  push_back(e);
  ++stats_.stored_pages;
  stats_.peak_pages = std::max(stats_.peak_pages, static_cast<std::int64_t>(map_.size()));
}

void KvHostTier::unlink(std::int32_t e) {
  Entry& x = entries_[static_cast<std::size_t>(e)];
  (x.prev != nil ? entries_[static_cast<std::size_t>(x.prev)].next : head_) = x.next;
  (x.next != nil ? entries_[static_cast<std::size_t>(x.next)].prev : tail_) = x.prev;
  x.prev = x.next = nil;
}

void KvHostTier::push_back(std::int32_t e) {
  Entry& x = entries_[static_cast<std::size_t>(e)];
  x.prev = tail_;
  x.next = nil;
  (tail_ != nil ? entries_[static_cast<std::size_t>(tail_)].next : head_) = e;
  tail_ = e;
}

std::shared_ptr<KvHostTier> make_kv_host_tier(std::int64_t capacity_pages) {
  if (capacity_pages < 0 || capacity_pages > INT32_MAX)
    throw std::invalid_argument("kv host tier: needs 0 <= capacity_pages < 2^31");
  return std::make_shared<KvHostTier>(capacity_pages);
}

KvHostTierStats host_tier_stats(const KvHostTier& tier) { return tier.stats(); }

}  // namespace ctwin
