// A request's per-block prefix identity (Request::prefix_blocks, a trace's chain hashes) as the
// KV caches and the router see it: which cache page lies in which hash block, and the owner code
// that keeps hash-keyed pages apart from prefix groups' (2*group+1) and requests' own (2*id).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "sim/random.hpp"
#include "workloads/serving_types.hpp"

namespace ctwin::detail {

// The owner code of a page keyed by hash id `h`: negative, below -1 (ids are below 2^53).
inline std::int64_t hash_owner(std::uint64_t h) { return -2 - static_cast<std::int64_t>(h); }

// Where page p (block_size tokens) of r lies in r's hash blocks: block is its hash block, offset
// its page index inside that block. Only a page wholly inside the prompt and wholly inside a
// hash block the request names is keyed by the hash.
struct HashedPage {
  std::int64_t block = -1;  // -1: not keyed by a hash (the page is the request's own)
  std::int64_t offset = 0;
  std::int64_t block_end = 0;  // the first page past this hash block's pages inside the prompt
  bool hashed() const { return block >= 0; }
};

inline HashedPage hashed_page(const Request& r, std::int64_t p, int block_size) {
  HashedPage out;
  if (r.prefix_block_count <= 0) return out;
  const std::int64_t bs = block_size, pbt = r.prefix_block_tokens;
  const std::int64_t first = p * bs, last = (p + 1) * bs - 1;  // the page's token range
  if (last >= r.prompt_tokens) return out;
  const std::int64_t h = first / pbt;
  if (h >= r.prefix_block_count || last / pbt != h) return out;
  out.block = h;
  out.offset = p - h * pbt / bs;
  out.block_end = std::min<std::int64_t>((h + 1) * pbt, r.prompt_tokens) / bs;
  return out;
}

// Page p's identity, for both KV caches: owner 2*prefix_group+1 inside the request's shared
// prefix, hash_owner(id) inside one of its hash blocks (index: the page's offset in that block,
// the chain hash standing for the position and all before), else 2*request id (index: p).
struct PageKey {
  std::int64_t owner = 0;
  std::int64_t index = 0;
  bool operator==(const PageKey&) const = default;
};

// PageKey as a FlatMap key (the GPU cache's block index, the host tier's page index).
struct PageKeyTraits {
  static constexpr PageKey empty() { return {std::numeric_limits<std::int64_t>::min(), 0}; }
  static std::uint64_t hash(const PageKey& k) {
    return mix64(static_cast<std::uint64_t>(k.owner) * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(k.index));
  }
};

inline PageKey page_key(const Request& r, std::int64_t p, int block_size) {
  if (r.prefix_block_count > 0) {
    const HashedPage h = hashed_page(r, p, block_size);
    if (h.hashed()) return {hash_owner(r.prefix_blocks[h.block]), h.offset};
  } else if (r.prefix_group >= 0 && (p + 1) * block_size <= r.shared_prefix_tokens) {
    return {2 * r.prefix_group + 1, p};
  }
  return {2 * r.id, p};
}

}  // namespace ctwin::detail
