// The host tier of KV offloading (kv_cache.hpp): pages keyed as the GPU caches key them
// (prefix_blocks.hpp), in one LRU queue, each remembering the replica that stored it. And
// HostTierLink: what a KV cache does with a tier (look on past a GPU miss, load, write through).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "flat_map.hpp"
#include "prefix_blocks.hpp"
#include "workloads/kv_cache.hpp"

namespace ctwin {

class KvHostTier {
 public:
  explicit KvHostTier(std::int64_t capacity_pages) : capacity_(capacity_pages) { stats_.capacity_pages = capacity_; }

  // The replica that stored k, or -1 when the tier does not hold it. Changes nothing.
  std::int32_t home(detail::PageKey k) const {
    const std::int32_t* e = map_.find(k);
    return e ? entries_[static_cast<std::size_t>(*e)].home : -1;
  }
  // k becomes the most recently used, stored by `replica` when new (a page held keeps its
  // first home); when full, the least recently used page makes room. Nothing at capacity 0.
  void store(detail::PageKey k, std::int32_t replica);
  // As store, but k goes just before `older_than` in the queue (less recently used than it),
  // or becomes the most recently used when the tier does not hold older_than.
  void store_before(detail::PageKey k, std::int32_t replica, detail::PageKey older_than);

  KvHostTierStats stats() const {
    KvHostTierStats s = stats_;
    s.used_pages = static_cast<std::int64_t>(map_.size());
    return s;
  }

 private:
  static constexpr std::int32_t nil = -1;
  struct Entry {
    detail::PageKey key;
    std::int32_t home = 0;
    std::int32_t prev = nil, next = nil;  // toward the least / the most recently used
  };
  // k's entry, taken out of the queue: its own when held, else a new one (evicting when full).
  std::int32_t entry_for(detail::PageKey k, std::int32_t replica);
  void unlink(std::int32_t e);
  void push_back(std::int32_t e);
  void insert_before(std::int32_t e, std::int32_t at);

  std::int64_t capacity_;
  detail::FlatMap<detail::PageKey, std::int32_t, detail::PageKeyTraits> map_;  // page -> entry
  std::vector<Entry> entries_;                                                 // grows to the pages held at most
  std::int32_t head_ = nil, tail_ = nil;                                       // least, most recently used
  KvHostTierStats stats_;
};

namespace detail {

// One KV cache's side of a tier.
class HostTierLink {
 public:
  explicit HostTierLink(KvOffload o) : tier_(std::move(o.tier)), replica_(o.replica) {}
  bool on() const { return tier_ != nullptr; }

  // How many of r's pages from page `from` on, consecutively and before page `limit`, the tier
  // holds (0 without a tier).
  std::int64_t extend(const Request& r, std::int64_t from, std::int64_t limit, int block_size) const {
    if (!tier_) return 0;
    std::int64_t p = from;
    while (p < limit && tier_->home(page_key(r, p, block_size)) >= 0) ++p;
    return p - from;
  }

  // After an allocation for r that took its full pages from full_before to full_after. The
  // first one for r loads its pages [gpu_hit, gpu_hit + host_hit) from the tier (counted in st
  // and in the pending loads) and writes its full prompt pages through, the last first, so that
  // the prefix is the most recently used (a tail is worth nothing without it). A later chunk's
  // new prompt pages go just behind the earlier ones; decode steps add none and write nothing.
  void after_allocate(const Request& r, bool first, std::int64_t gpu_hit, std::int64_t host_hit,
                      std::int64_t full_before, std::int64_t full_after, int block_size, KvCacheStats& st) {
    if (!tier_) return;
    if (first) {
      for (std::int64_t p = gpu_hit; p < gpu_hit + host_hit; ++p) {
        const bool remote = tier_->home(page_key(r, p, block_size)) != replica_;
        (remote ? pending_.remote_blocks : pending_.local_blocks) += 1;
        if (remote) st.offload_remote_hit_tokens += block_size;
      }
      st.offload_hit_tokens += host_hit * block_size;
    }
    const std::int64_t prompt_pages = r.prompt_tokens / block_size;
    const std::int64_t upto = std::min(full_after, prompt_pages);
    const std::int64_t had = first ? 0 : std::min(full_before, prompt_pages);
    if (upto <= had) return;
    if (had == 0) {
      for (std::int64_t p = upto - 1; p >= 0; --p) tier_->store(page_key(r, p, block_size), replica_);
      return;
    }
    // A later chunk: its pages go behind the ones written before, each older than the last.
    PageKey older = page_key(r, had - 1, block_size);
    for (std::int64_t p = had; p < upto; ++p) {
      const PageKey k = page_key(r, p, block_size);
      tier_->store_before(k, replica_, older);
      older = k;
    }
  }

  KvLoads take_loads() {
    const KvLoads l = pending_;
    pending_ = {};
    return l;
  }

 private:
  std::shared_ptr<KvHostTier> tier_;
  std::int32_t replica_ = 0;
  KvLoads pending_;
};

}  // namespace detail
}  // namespace ctwin
