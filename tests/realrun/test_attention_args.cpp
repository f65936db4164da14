// The CUDA attention launchers' argument checks (realrun/attention_args.hpp), host code: each
// case below is one rule of the mma.sync prefill kernel, worked by hand.
#include <doctest/doctest.h>

#include <cstdint>

#include "realrun/attention_args.hpp"

using namespace ctwin::realrun;

TEST_CASE("the mma.sync prefill launch takes whole K/V groups, 64 or 128 rows, 16-byte aligned Q, K, V") {
  const void* p = reinterpret_cast<const void*>(std::uintptr_t{256});
  const void* odd = reinterpret_cast<const void*>(std::uintptr_t{264});  // 8-byte aligned only
  // Llama-3-8B's shape: 32 query heads over 8 K/V heads, 64-row blocks.
  CHECK(prefill_mma_args_ok(p, p, p, p, 1, 64, 64, 32, 8, 64));
  CHECK(prefill_mma_args_ok(p, p, p, p, 2, 64, 128, 8, 8, 128));          // chunked: queries fewer than keys
  CHECK_FALSE(prefill_mma_args_ok(p, p, p, p, 1, 64, 64, 8, 3, 64));      // 3 does not divide 8
  CHECK_FALSE(prefill_mma_args_ok(p, p, p, p, 1, 64, 64, 8, 0, 64));      // no K/V head
  CHECK_FALSE(prefill_mma_args_ok(p, p, p, p, 1, 64, 64, 8, 2, 96));      // 96-row blocks
  CHECK_FALSE(prefill_mma_args_ok(p, p, p, p, 1, 65, 64, 8, 2, 64));      // more queries than keys
  CHECK_FALSE(prefill_mma_args_ok(p, p, p, p, 1, 64, 64, 65536, 8, 64));  // past a grid dimension
  CHECK_FALSE(prefill_mma_args_ok(odd, p, p, p, 1, 64, 64, 8, 2, 64));
  CHECK_FALSE(prefill_mma_args_ok(p, odd, p, p, 1, 64, 64, 8, 2, 64));
  CHECK_FALSE(prefill_mma_args_ok(p, p, odd, p, 1, 64, 64, 8, 2, 64));
  // The output only needs 4 bytes (bf16 pairs).
  CHECK(prefill_mma_args_ok(p, p, p, reinterpret_cast<const void*>(std::uintptr_t{260}), 1, 64, 64, 8, 2, 64));
  CHECK_FALSE(prefill_mma_args_ok(p, p, p, reinterpret_cast<const void*>(std::uintptr_t{258}), 1, 64, 64, 8, 2, 64));
}
