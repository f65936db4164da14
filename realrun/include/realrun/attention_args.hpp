// The argument checks of the CUDA attention launchers (realrun/cuda/kernels.cu), in host code:
// they are tested, and mutated, without building the CUDA backend.
#pragma once

namespace ctwin::realrun {

// True when p is 16-byte aligned (cp.async and the kernels' wide loads move 16 bytes).
bool aligned16(const void* p);

// The mma.sync prefill kernel's launch: 1 to 65,535 sequences and heads, queries no longer than
// the keys, K/V heads dividing the query heads (a group is never cut), 64 or 128 rows a block,
// Q, K and V 16-byte aligned and the output 4-byte aligned.
bool prefill_mma_args_ok(const void* q, const void* k, const void* v, const void* o, int seqs, int q_len, int kv_len,
                         int heads, int kv_heads, int block_rows);

}  // namespace ctwin::realrun
