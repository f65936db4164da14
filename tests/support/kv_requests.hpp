// Requests as the KV cache tests build them (only the prompt and its shared prefix matter to a
// cache), and the free blocks a cache leaves.
#pragma once

#include <cstdint>

#include "workloads/serving_types.hpp"

namespace ctwin::test {

inline Request kv_request(std::int64_t id, std::int32_t prompt, std::int32_t shared = 0, std::int64_t group = -1) {
  Request r;
  r.id = id;
  r.prompt_tokens = prompt;
  r.output_tokens = 8;
  r.shared_prefix_tokens = shared;
  r.prefix_group = group;
  return r;
}

inline std::int64_t free_blocks(const KvCache& c) { return c.num_blocks() - c.used_blocks() - c.cached_blocks(); }

}  // namespace ctwin::test
