// The block pool of the hash_lru mode of the paged KV cache (kv_cache.hpp).
#include "workloads/kv_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "flat_map.hpp"
#include "kv_host_tier.hpp"
#include "prefix_blocks.hpp"

namespace ctwin {

namespace {

// A block's token identity is its page key (prefix_blocks.hpp: a prefix group's, a trace hash
// block's or the request's own page). Block key -> block of the findable full blocks; sized for
// every block at construction, so it never allocates afterwards.
using BlockKey = detail::PageKey;
using BlockIndex = detail::FlatMap<BlockKey, std::int32_t, detail::PageKeyTraits>;

constexpr std::int32_t nil = -1;

struct Block {
  std::int32_t refs = 0;
  bool hashed = false;  // key is in the cache's map
  BlockKey key;
  std::int32_t prev = nil, next = nil;  // the LRU queue of unreferenced hashed blocks
};

struct Sequence {
  std::int64_t tokens = 0;           // tokens allocated for
  std::vector<std::int32_t> blocks;  // GPU blocks, in order
  std::vector<std::int32_t> window;  // the windowed layers' blocks (KvWindow), never findable
  std::int64_t host_blocks = 0;      // > 0: swapped out
  std::int64_t host_window = 0;      // of those, the window's
};

class BlockKvCache final : public PrefixKvCache {
 public:
  BlockKvCache(std::int64_t num_blocks, int block_size, std::int64_t num_host_blocks, KvOffload offload,
               KvWindow window)
      : block_size_(block_size),
        num_host_blocks_(num_host_blocks),
        window_(window),
        blocks_(static_cast<std::size_t>(num_blocks)),
        host_(std::move(offload)) {
    map_.reserve(blocks_.size());
    free_.reserve(blocks_.size());
    for (std::int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<std::int32_t>(b));
    scratch_.reserve(256);
  }

  std::int64_t cached_prefix_tokens(const Request& r, std::int64_t context_tokens) const override {
    if (context_tokens <= 1) return 0;
    const std::int64_t limit = (context_tokens - 1) / block_size_;
    const std::int64_t n = gpu_hits(r, limit);
    return (n + host_.extend(r, n, limit, block_size_)) * block_size_;
  }

  bool allocate(const Request& r, std::int64_t tokens) override {
    Sequence* it = seqs_.find(r.id);
    if (it && it->host_blocks > 0) throw std::logic_error("kv cache: allocate on a swapped-out request");
    const std::int64_t have_tokens = it ? it->tokens : 0;
    if (tokens <= have_tokens) return true;
    const std::int64_t have = it ? static_cast<std::int64_t>(it->blocks.size()) : 0;
    // A first call takes the cached prefix: its blocks leave the LRU queue, so they cannot also
    // be counted as room for the new ones.
    scratch_.clear();
    std::int64_t hit_blocks = 0, host_hits = 0, hit_unreferenced = 0;
    const bool first = !it || have == 0;
    if (first) {
      const std::int64_t context = std::max<std::int64_t>(r.prompt_tokens, tokens);
      const std::int64_t limit = context > 1 ? (context - 1) / block_size_ : 0;
      hit_blocks = gpu_hits(r, limit);
      host_hits = host_.extend(r, hit_blocks, limit, block_size_);
      for (std::int64_t i = 0; i < hit_blocks; ++i) {
        const std::int32_t b = *map_.find(detail::page_key(r, i, block_size_));
        scratch_.push_back(b);
        if (blocks_[static_cast<std::size_t>(b)].refs == 0) ++hit_unreferenced;
      }
    }
    // Pages loaded from the host tier take fresh GPU blocks.
    const std::int64_t reach = std::max(tokens, (hit_blocks + host_hits) * block_size_);
    const std::int64_t fresh = std::max<std::int64_t>(0, ceil_blocks(reach) - have - hit_blocks);
    // The windowed layers' blocks after this step: from the window's first page on, as computed
    // before it (the previous allocation, or the prefix found); those before free up first.
    const std::int64_t computed = first ? (hit_blocks + host_hits) * block_size_ : have_tokens;
    const std::int64_t window = window_blocks(window_, block_size_, computed, reach);
    const std::int64_t held = it ? static_cast<std::int64_t>(it->window.size()) : 0;
    if (fresh + window - held > static_cast<std::int64_t>(free_.size()) + cached_ - hit_unreferenced) return false;

    if (first) {
      stats_.prefix_queries += 1;
      stats_.prefix_query_tokens += std::max<std::int64_t>(r.prompt_tokens, tokens);
      stats_.prefix_hit_tokens += (hit_blocks + host_hits) * block_size_;
    }
    Sequence& s = it ? *it : new_sequence(r.id);
    // The window's blocks before it go back first: the check above counted them as room.
    for (; static_cast<std::int64_t>(s.window.size()) > window; s.window.pop_back()) free_window_block(s.window.back());
    for (const std::int32_t b : scratch_) {
      Block& blk = blocks_[static_cast<std::size_t>(b)];
      if (blk.refs == 0) {
        lru_remove(b);
        --cached_;
        ++used_;
      }
      ++blk.refs;
      s.blocks.push_back(b);
    }
    for (std::int64_t i = 0; i < fresh; ++i) s.blocks.push_back(take_block());
    while (static_cast<std::int64_t>(s.window.size()) < window) s.window.push_back(take_block());
    // Full blocks become findable as soon as they are allocated (vLLM caches full blocks when
    // they are scheduled); a key already held by another block keeps that one.
    const std::int64_t full_before = std::max(have_tokens / block_size_, hit_blocks);
    const std::int64_t full_after = reach / block_size_;
    for (std::int64_t i = full_before; i < full_after; ++i) {
      const std::int32_t b = s.blocks[static_cast<std::size_t>(i)];
      const BlockKey key = detail::page_key(r, i, block_size_);
      if (map_.insert(key, b)) {
        blocks_[static_cast<std::size_t>(b)].hashed = true;
        blocks_[static_cast<std::size_t>(b)].key = key;
      }
    }
    s.tokens = reach;
    host_.after_allocate(r, first, hit_blocks, host_hits, have_tokens / block_size_, full_after, block_size_, stats_);
    return true;
  }

  void release(const Request& r) override {
    Sequence* it = seqs_.find(r.id);
    if (!it) return;
    drop_blocks(*it);
    spare_.push_back(std::move(it->blocks));
    seqs_.erase(r.id);
  }

  std::optional<std::int64_t> swap_out(const Request& r) override {
    Sequence* it = seqs_.find(r.id);
    if (!it || it->host_blocks > 0) return std::int64_t{0};
    Sequence& s = *it;
    const auto w = static_cast<std::int64_t>(s.window.size());
    const auto n = static_cast<std::int64_t>(s.blocks.size()) + w;
    if (used_host_ + n > num_host_blocks_) return std::nullopt;
    drop_blocks(s);
    s.host_blocks = n;
    s.host_window = w;
    used_host_ += n;
    return n;
  }

  std::optional<std::int64_t> swap_in(const Request& r) override {
    Sequence* it = seqs_.find(r.id);
    if (!it || it->host_blocks == 0) return std::int64_t{0};
    Sequence& s = *it;
    const std::int64_t n = s.host_blocks;
    if (n > static_cast<std::int64_t>(free_.size()) + cached_) return std::nullopt;
    for (std::int64_t i = 0; i < n - s.host_window; ++i) s.blocks.push_back(take_block());
    for (std::int64_t i = 0; i < s.host_window; ++i) s.window.push_back(take_block());
    s.host_window = 0;
    for (std::int64_t i = 0; i < s.tokens / block_size_; ++i) {
      const std::int32_t b = s.blocks[static_cast<std::size_t>(i)];
      const BlockKey key = detail::page_key(r, i, block_size_);
      if (map_.insert(key, b)) {
        blocks_[static_cast<std::size_t>(b)].hashed = true;
        blocks_[static_cast<std::size_t>(b)].key = key;
      }
    }
    s.host_blocks = 0;
    used_host_ -= n;
    return n;
  }

  int block_size() const override { return block_size_; }
  std::int64_t num_blocks() const override { return static_cast<std::int64_t>(blocks_.size()); }
  std::int64_t used_blocks() const override { return used_; }
  std::int64_t cached_blocks() const override { return cached_; }
  std::int64_t num_host_blocks() const override { return num_host_blocks_; }
  std::int64_t used_host_blocks() const override { return used_host_; }
  std::int64_t blocks_of(const Request& r) const override {
    const Sequence* it = seqs_.find(r.id);
    return it ? static_cast<std::int64_t>(it->blocks.size() + it->window.size()) : 0;
  }
  const KvCacheStats& stats() const override { return stats_; }
  KvLoads take_loads() override { return host_.take_loads(); }

 private:
  // Leading blocks of r found on the GPUs, at most limit.
  std::int64_t gpu_hits(const Request& r, std::int64_t limit) const {
    std::int64_t n = 0;
    while (n < limit && map_.find(detail::page_key(r, n, block_size_))) ++n;
    return n;
  }
  std::int64_t ceil_blocks(std::int64_t tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  Sequence& new_sequence(std::int64_t id) {
    Sequence& s = seqs_[id];
    if (!spare_.empty()) {
      s.blocks = std::move(spare_.back());
      spare_.pop_back();
      s.blocks.clear();
    }
    s.window.clear();
    s.host_window = 0;
    return s;
  }

  // A windowed layer's block back to the free list: it never held anything findable.
  void free_window_block(std::int32_t b) {
    blocks_[static_cast<std::size_t>(b)].refs = 0;
    --used_;
    free_.push_back(b);
  }

  // A never-used or uncached free block first; else evict the least recently freed cached one.
  std::int32_t take_block() {
    std::int32_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = lru_head_;
      lru_remove(b);
      --cached_;
      Block& blk = blocks_[static_cast<std::size_t>(b)];
      map_.erase(blk.key);
      blk.hashed = false;
      ++stats_.evicted_blocks;
    }
    blocks_[static_cast<std::size_t>(b)].refs = 1;
    ++used_;
    return b;
  }

  // Unreferences s's blocks, last first, so a sequence's tail is evicted before its prefix; its
  // window's blocks are freed.
  void drop_blocks(Sequence& s) {
    for (const std::int32_t b : s.window) free_window_block(b);
    s.window.clear();
    for (auto b = s.blocks.rbegin(); b != s.blocks.rend(); ++b) {
      Block& blk = blocks_[static_cast<std::size_t>(*b)];
      if (--blk.refs > 0) continue;
      --used_;
      if (blk.hashed) {
        lru_push_back(*b);
        ++cached_;
      } else {
        free_.push_back(*b);
      }
    }
    s.blocks.clear();
  }

  void lru_push_back(std::int32_t b) {
    Block& blk = blocks_[static_cast<std::size_t>(b)];
    blk.prev = lru_tail_;
    blk.next = nil;
    if (lru_tail_ != nil)
      blocks_[static_cast<std::size_t>(lru_tail_)].next = b;
    else
      lru_head_ = b;
    lru_tail_ = b;
  }
  void lru_remove(std::int32_t b) {
    Block& blk = blocks_[static_cast<std::size_t>(b)];
    if (blk.prev != nil)
      blocks_[static_cast<std::size_t>(blk.prev)].next = blk.next;
    else
      lru_head_ = blk.next;
    if (blk.next != nil)
      blocks_[static_cast<std::size_t>(blk.next)].prev = blk.prev;
    else
      lru_tail_ = blk.prev;
    blk.prev = blk.next = nil;
  }

  int block_size_;
  std::int64_t num_host_blocks_;
  KvWindow window_;
  std::vector<Block> blocks_;
  std::vector<std::int32_t> free_;  // unreferenced blocks holding nothing findable
  std::int32_t lru_head_ = nil, lru_tail_ = nil;
  BlockIndex map_;  // findable full blocks
  detail::FlatIdMap<Sequence> seqs_;
  std::vector<std::vector<std::int32_t>> spare_;  // block lists of released sequences, reused
  std::vector<std::int32_t> scratch_;
  std::int64_t used_ = 0, cached_ = 0, used_host_ = 0;
  KvCacheStats stats_;
  detail::HostTierLink host_;
};

}  // namespace

std::int64_t window_blocks(const KvWindow& w, int block_size, std::int64_t computed, std::int64_t tokens) {
  if (!w.enabled() || tokens <= 0) return 0;
  const std::int64_t bs = block_size;
  const std::int64_t skipped = std::max<std::int64_t>(0, computed - w.tokens + 1) / bs;  // pages wholly before
  const std::int64_t pages = std::max<std::int64_t>(0, (tokens + bs - 1) / bs - skipped);
  // Rounded up, without the round-off of an integral share (1 x pages stays pages).
  return static_cast<std::int64_t>(std::ceil(w.blocks_per_page * static_cast<double>(pages) - 1e-9));
}

std::unique_ptr<PrefixKvCache> make_kv_cache(std::int64_t num_blocks, int block_size, std::int64_t num_host_blocks,
                                             PrefixCaching mode, KvOffload offload, KvWindow window) {
  if (num_blocks < 0 || num_blocks > INT32_MAX || block_size < 1 || num_host_blocks < 0)
    throw std::invalid_argument("kv cache: needs 0 <= num_blocks < 2^31, block_size >= 1, num_host_blocks >= 0");
  if (offload.tier && mode == PrefixCaching::none)
    throw std::invalid_argument("kv cache: a host tier of KV needs prefix caching");
  if (window.tokens < 0 || window.blocks_per_page < 0)
    throw std::invalid_argument("kv cache: a window needs tokens >= 0 and blocks_per_page >= 0");
  if (mode == PrefixCaching::radix)
    return detail::make_radix_kv_cache(num_blocks, block_size, num_host_blocks, std::move(offload), window);
  if (mode == PrefixCaching::none)
    return detail::make_counting_kv_cache(num_blocks, block_size, num_host_blocks, window);
  return std::make_unique<BlockKvCache>(num_blocks, block_size, num_host_blocks, std::move(offload), window);
}

}  // namespace ctwin
