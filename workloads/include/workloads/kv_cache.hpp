// The paged KV cache of one serving replica (the KvCache seam of serving_types.hpp), with three
// prefix-caching modes:
//   none      every allocation is fresh; nothing is ever found again.
//   hash_lru  vLLM's automatic prefix caching: each full block is keyed by its token identity
//             (which, with its position, stands for the hash of the block and all before it),
//             shared by reference count, and once unreferenced kept in an LRU queue until a new
//             allocation needs it.
//   radix     SGLang's RadixAttention: a radix tree over page identities (a page is block_size
//             tokens; SGLang's page_size), unreferenced leaves evicted least recently used first.
// Token identity (Request): block i of r is (prefix_group, i) when it lies wholly inside r's
// shared prefix, else (r.id, i). A request's own full blocks stay cached after release, so a
// request preempted by recompute finds its own computed tokens again (as vLLM v1 does).
#pragma once

#include <cstdint>
#include <memory>

#include "workloads/serving_types.hpp"

namespace ctwin {

// A cache that can also answer for a request resuming after recompute preemption: its context
// (prompt plus tokens generated so far) is longer than its prompt.
class PrefixKvCache : public KvCache {
 public:
  // Tokens at the start of r's first `context_tokens` tokens found cached, whole blocks only,
  // never all of them (the last is recomputed). cached_prefix_tokens(r) is this with
  // context_tokens = r.prompt_tokens. The first allocate(r, tokens) after r holds nothing takes
  // cached_prefix_tokens(r, max(r.prompt_tokens, tokens)).
  virtual std::int64_t cached_prefix_tokens(const Request& r, std::int64_t context_tokens) const = 0;
  std::int64_t cached_prefix_tokens(const Request& r) const final { return cached_prefix_tokens(r, r.prompt_tokens); }
};

// KV offloading: a host-memory tier of prefix-cache pages behind the GPU cache (kv_host_tier.cpp).
// A lookup that stops on the GPUs goes on in the tier; the pages found there are loaded into
// fresh GPU blocks (the caller times the transfer, KvCache::take_loads) and count as hits. Every
// full prompt page a request allocates is written through to the tier (the prefill's KV, as
// LMCache and Mooncake store it; generated tokens are not), the least recently used page evicted
// when it is full. One tier may serve several caches (a pooled tier): each page remembers the
// replica that stored it, so a load can tell a local read from a remote one.
class KvHostTier;
struct KvHostTierStats {
  std::int64_t capacity_pages = 0;
  std::int64_t used_pages = 0;
  std::int64_t peak_pages = 0;
  std::int64_t stored_pages = 0;   // pages written that it did not hold
  std::int64_t evicted_pages = 0;  // least recently used first
};
// Throws std::invalid_argument on capacity_pages < 0.
std::shared_ptr<KvHostTier> make_kv_host_tier(std::int64_t capacity_pages);
KvHostTierStats host_tier_stats(const KvHostTier& tier);
// Several tiers' statistics summed (a fleet's replica tiers): capacities, pages and counts add.
void add_host_tier_stats(KvHostTierStats& sum, const KvHostTierStats& x);

// A cache's host tier (none: tier null) and the replica it speaks for in a pooled tier.
struct KvOffload {
  std::shared_ptr<KvHostTier> tier;
  std::int32_t replica = 0;
};

// Sliding-window layers under vLLM's hybrid KV cache manager (v1 kv_cache_coordinator.py,
// single_type_kv_cache_manager.py SlidingWindowManager). A pool block holds block_size tokens of
// the full-attention layers, and a request's pages of them are named and prefix-cached as
// before. The windowed layers share the same pool: each request also holds, for them, the pages
// from the one holding its first token still inside the window to its last. Before an allocation
// vLLM frees the pages wholly before computed - tokens + 1 (remove_skipped_blocks), computed
// being the tokens computed before this step: the previous allocation's, or the prefix hit's on
// a first one. A windowed page costs blocks_per_page pool blocks (the windowed layers' KV bytes
// over the full layers'), the request's count rounded up. Those blocks are never findable: a
// prefix hit is decided by the full layers' pages (the windowed layers' last window of a hit
// assumed still cached).
struct KvWindow {
  std::int64_t tokens = 0;     // the window, tokens a query attends to, itself included; 0: none
  double blocks_per_page = 0;  // pool blocks one windowed page takes
  bool enabled() const { return tokens > 0 && blocks_per_page > 0; }
};
// Pool blocks a request's windowed layers hold after allocating for `tokens` tokens, `computed`
// computed before: ceil(blocks_per_page x (ceil(tokens / bs) - floor(max(0, computed - w + 1) / bs))),
// 0 when the window is off or tokens is 0.
std::int64_t window_blocks(const KvWindow& w, int block_size, std::int64_t computed, std::int64_t tokens);

// num_blocks GPU blocks of block_size tokens and num_host_blocks host blocks for swapping, with
// an optional host tier of KV (needs a prefix-caching mode) and windowed layers. Throws
// std::invalid_argument on num_blocks < 0, block_size < 1, num_host_blocks < 0, a host tier with
// mode none, or a window with tokens < 0 or blocks_per_page < 0.
std::unique_ptr<PrefixKvCache> make_kv_cache(std::int64_t num_blocks, int block_size, std::int64_t num_host_blocks,
                                             PrefixCaching mode, KvOffload offload = {}, KvWindow window = {});

namespace detail {
// The radix mode's cache (radix_cache.cpp); make_kv_cache checks the sizes before calling it.
std::unique_ptr<PrefixKvCache> make_radix_kv_cache(std::int64_t num_blocks, int block_size,
                                                   std::int64_t num_host_blocks, KvOffload offload, KvWindow window);
// The none mode's (kv_cache_counting.cpp): blocks counted, not named.
std::unique_ptr<PrefixKvCache> make_counting_kv_cache(std::int64_t num_blocks, int block_size,
                                                      std::int64_t num_host_blocks, KvWindow window);
}  // namespace detail

}  // namespace ctwin
