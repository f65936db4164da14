// The CUDA backend's own kernels (realrun/cuda/kernels.cu): attention for prefill/training and
// for decode over a paged KV cache, and the memory-streaming kernels (RMSNorm, AdamW, a vector
// op). Plain types only, so host code in C++20 calls what nvcc compiles in C++17. Only with
// CUDA (CTWIN_HAVE_CUDA). Tensors are BF16 unless said; every launcher returns the launch's error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ctwin::realrun::cuda {

enum class FillKind { fp32, bf16, fp8_e4m3 };
// Deterministic values in [-1, 1] (FP8: magnitudes below 2), so no kernel times zeros or NaNs.
cudaError_t fill_random(void* p, std::size_t bytes, FillKind kind, std::uint32_t seed, cudaStream_t s);

// Causal attention, queries [seqs][q_len][heads][head_dim], keys and values
// [seqs][kv_len][kv_heads][head_dim] (query head h reads K/V head h / (heads / kv_heads)); query
// i of a sequence sits at position kv_len - q_len + i and sees keys 0..its position.
// FlashAttention-2's forward on mma.sync (BF16 in, FP32 accumulate; sm_80 and later): 16 query
// rows a warp, block_rows (64 or 128) a block, 64-key K/V tiles double-buffered in shared memory
// by cp.async, S, P and the running O in registers. head_dim: 64 or 128. Pointers 16-byte
// aligned (o: 4). Not yet run on a GPU: opt-in (CTWIN_REALRUN_ATTENTION=mma) until its test passes.
cudaError_t attention_prefill(const void* q, const void* k, const void* v, void* o, int seqs, int q_len, int kv_len,
                              int heads, int kv_heads, int head_dim, cudaStream_t s, int block_rows = 64);
// The previous tensor-core kernel (FlashAttention-2's loop on WMMA, 32-key tiles, the running O
// in shared memory), keys and values as wide as the queries ([seqs][kv_len][heads][head_dim]):
// the backend's default prefill kernel, measured on the H200.
cudaError_t attention_prefill_wmma(const void* q, const void* k, const void* v, void* o, int seqs, int q_len,
                                   int kv_len, int heads, int head_dim, cudaStream_t s);
// The same function as the WMMA one with one warp a (query, head) and scalar arithmetic: the
// first kernel, kept as an on-GPU reference (CTWIN_REALRUN_ATTENTION=simple).
cudaError_t attention_prefill_simple(const void* q, const void* k, const void* v, void* o, int seqs, int q_len,
                                     int kv_len, int heads, int head_dim, cudaStream_t s);

// One query a sequence ([seqs][heads][head_dim]) over its context_lens[s] keys, read through
// block_table (seqs x max_blocks physical block numbers) from pools
// [block][block_size][kv_heads][head_dim]; query head h reads K/V head h / (heads / kv_heads).
// Flash-decoding: a block a (sequence, K/V head, split of keys_per_split keys) scores the keys
// for every query head of the group at once, so each K/V element is read once; with splits > 1
// each split leaves its output, max and sum in `workspace` (decode_workspace_bytes in
// realrun/cuda_plan.hpp) and a second kernel combines them (log-sum-exp rescale). splits and
// keys_per_split: plan_decode_split's (keys_per_split at most 512, splits x keys_per_split
// covering the longest context). A sequence of no keys gets zeros. head_dim: 64 or 128.
cudaError_t attention_decode_paged(const void* q, const void* k_pool, const void* v_pool, void* o,
                                   const std::int32_t* block_table, const std::int32_t* context_lens, int seqs,
                                   int max_blocks, int block_size, int heads, int kv_heads, int head_dim, int splits,
                                   int keys_per_split, void* workspace, cudaStream_t s);
// The same function with one warp a (sequence, query head) and a serial loop over the keys: the
// first decode kernel, kept as an on-GPU reference and for the before/after timing.
cudaError_t attention_decode_paged_simple(const void* q, const void* k_pool, const void* v_pool, void* o,
                                          const std::int32_t* block_table, const std::int32_t* context_lens, int seqs,
                                          int max_blocks, int block_size, int heads, int kv_heads, int head_dim,
                                          cudaStream_t s);

// y = x / sqrt(mean(x^2) + eps) * w over rows of `cols`.
cudaError_t rmsnorm(const void* x, const void* w, void* y, std::int64_t rows, int cols, float eps, cudaStream_t s);

// One AdamW step (Loshchilov and Hutter) over n FP32 parameters.
cudaError_t adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int step, cudaStream_t s);

// y = a x + y over n BF16 elements.
cudaError_t axpy_bf16(float a, const void* x, void* y, std::int64_t n, cudaStream_t s);

}  // namespace ctwin::realrun::cuda
