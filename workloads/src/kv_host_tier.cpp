// The host tier of KV offloading: an LRU queue of pages (kv_host_tier.hpp).
#include "kv_host_tier.hpp"

#include <stdexcept>

namespace ctwin {

std::int32_t KvHostTier::entry_for(detail::PageKey k, std::int32_t replica) {
  if (const std::int32_t* e = map_.find(k)) {
    unlink(*e);
    return *e;
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
  ++stats_.stored_pages;
  stats_.peak_pages = std::max(stats_.peak_pages, static_cast<std::int64_t>(map_.size()));
  return e;
}

void KvHostTier::store(detail::PageKey k, std::int32_t replica) {
  if (capacity_ <= 0) return;
  push_back(entry_for(k, replica));
}

void KvHostTier::store_before(detail::PageKey k, std::int32_t replica, detail::PageKey older_than) {
  if (capacity_ <= 0) return;
  if (k == older_than) return store(k, replica);
  const std::int32_t e = entry_for(k, replica);  // may evict older_than's entry
  const std::int32_t* at = map_.find(older_than);
  if (at) {
    insert_before(e, *at);
  } else {
    push_back(e);
  }
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

void KvHostTier::insert_before(std::int32_t e, std::int32_t at) {
  Entry& x = entries_[static_cast<std::size_t>(e)];
  Entry& y = entries_[static_cast<std::size_t>(at)];
  x.next = at;
  x.prev = y.prev;
  (y.prev != nil ? entries_[static_cast<std::size_t>(y.prev)].next : head_) = e;
  y.prev = e;
}

std::shared_ptr<KvHostTier> make_kv_host_tier(std::int64_t capacity_pages) {
  if (capacity_pages < 0 || capacity_pages > INT32_MAX)
    throw std::invalid_argument("kv host tier: needs 0 <= capacity_pages < 2^31");
  return std::make_shared<KvHostTier>(capacity_pages);
}

KvHostTierStats host_tier_stats(const KvHostTier& tier) { return tier.stats(); }

void add_host_tier_stats(KvHostTierStats& sum, const KvHostTierStats& x) {
  sum.capacity_pages += x.capacity_pages;
  sum.used_pages += x.used_pages;
  sum.peak_pages += x.peak_pages;
  sum.stored_pages += x.stored_pages;
  sum.evicted_pages += x.evicted_pages;
}

}  // namespace ctwin
