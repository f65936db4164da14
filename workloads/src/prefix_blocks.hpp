// A request's per-block prefix identity (Request::prefix_blocks, a trace's chain hashes) as the
// KV caches and the router see it: which cache page lies in which hash block, and the owner code
// that keeps hash-keyed pages apart from prefix groups' (2*group+1) and requests' own (2*id).
#pragma once

#include <algorithm>
#include <cstdint>

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

}  // namespace ctwin::detail
