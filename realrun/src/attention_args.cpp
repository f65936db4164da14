#include "realrun/attention_args.hpp"

#include <cstdint>

namespace ctwin::realrun {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

bool prefill_mma_args_ok(const void* q, const void* k, const void* v, const void* o, int seqs, int q_len, int kv_len,
                         int heads, int kv_heads, int block_rows) {
  if (seqs < 1 || q_len < 1 || kv_len < q_len || heads < 1 || heads > 65535 || seqs > 65535 || kv_heads < 1)
    return false;
  if (heads % kv_heads != 0 || (block_rows != 64 && block_rows != 128)) return false;
  return aligned16(q) && aligned16(k) && aligned16(v) && reinterpret_cast<std::uintptr_t>(o) % 4 == 0;
}

}  // namespace ctwin::realrun
