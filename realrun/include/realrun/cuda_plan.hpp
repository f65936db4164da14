// The CUDA backend's host-side decisions as pure functions: how an OpCost becomes a cuBLASLt
// problem (layouts, leading dimensions, dtype pairs, FP8 scales and accumulation), an attention
// kernel's geometry, a memory-streaming kernel's size, a paged-KV block table, how a
// CollectiveRequest becomes an NCCL call (nccl-tests' counts), which rank a process is under
// mpirun/srun, and which catalog GPU a device name is. None of it needs CUDA: it builds and is
// tested everywhere; realrun/cuda/ only turns these plans into API calls.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/collective.hpp"
#include "workloads/compute_model.hpp"

namespace ctwin::realrun {

// ---- GPUs ------------------------------------------------------------------------------------

// The builtin catalog name (topology/catalog/gpus.json) of a device as CUDA or NVML names it,
// with its memory to tell the A100 40 GB and 80 GB apart; "" for a GPU the catalog lacks.
// "NVIDIA H100 80GB HBM3" -> "H100-SXM", "NVIDIA H100 PCIe" -> "H100-PCIe", "NVIDIA H200" ->
// "H200", "NVIDIA A100-SXM4-40GB" -> "A100-SXM-40GB", "NVIDIA B200" -> "B200", "NVIDIA L40S".
std::string catalog_gpu_name(std::string_view device_name, double memory_bytes);

// Compute capability as major * 10 + minor (H100: 90). FP8 (E4M3) tensor cores: Ada and later.
inline bool gpu_has_fp8(int sm) { return sm >= 89; }

// ---- GEMMs (cuBLASLt) --------------------------------------------------------------------------

enum class ElemType { fp32, fp16, bf16, fp8_e4m3 };
std::size_t elem_bytes(ElemType t);
const char* to_string(ElemType t);

// One cuBLASLt matmul in its column-major terms. The row-major product Y[M x N] = X[M x K] W^T,
// W stored [N x K] as a linear layer keeps it, is the column-major Y^T = W X^T: cuBLAS's A is W
// (op T, K x N stored, lda = K), its B is X (op N, K x M stored, ldb = K), D is Y^T (ldd = N).
// This "TN" form is the one cuBLASLt's FP8 kernels accept, so every dtype uses it.
struct GemmPlan {
  ElemType a_type = ElemType::bf16, b_type = ElemType::bf16;
  ElemType d_type = ElemType::bf16;  // C and D
  bool tf32 = false;                 // fp32 GEMMs: CUBLAS_COMPUTE_32F_FAST_TF32, else CUBLAS_COMPUTE_32F
  bool trans_a = true, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;  // cuBLAS's: m = N (the output width), n = M (tokens), k = K
  std::int64_t lda = 0, ldb = 0, ldd = 0;
  std::int64_t groups = 1;  // grouped_gemm: `groups` independent problems of this size
  // Runs of the whole plan one op stands for: an OpCost whose FLOPs are a multiple of its
  // shape's (a backward op: dgrad and wgrad at the forward's shape) runs that many, as the
  // CPU backend does (cpu_kernels.cpp) and as the roofline prices it.
  std::int64_t repeats = 1;
  bool scales = false;        // FP8: A and B scale pointers (FP32 scalars) are required
  bool fast_accum = false;    // FP8: CUBLASLT_MATMUL_DESC_FAST_ACCUM (else split accumulation)
  bool fp8_fallback = false;  // FP8 asked on a GPU without it: ran in BF16
  // Bytes of one group's A, B and D, and the FLOPs the whole plan performs (2 m n k groups
  // repeats).
  std::size_t a_bytes = 0, b_bytes = 0, d_bytes = 0;
  double flops = 0;
};

// A group's slice of a grouped GEMM's buffer starts on a 256-byte boundary: cuBLASLt's
// heuristic assumes that alignment of every pointer unless told otherwise.
inline std::size_t gemm_group_stride(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The plan for a gemm or grouped_gemm OpCost (m rows split evenly over its groups) in the op's
// dtype, else `step_dtype`, on a GPU of compute capability `sm`. FP8 dimensions are rounded up
// to multiples of 16 (cuBLASLt's FP8 alignment); every dimension is at least 1.
GemmPlan plan_gemm(const OpCost& op, Dtype step_dtype, int sm);

// ---- attention -------------------------------------------------------------------------------

// The kernel that reproduces an attention OpCost: `seqs` sequences, each `q_len` new queries at
// the end of `kv_len` keys (causal), `heads` heads of `head_dim`. Recovered from the totals
// (query_tokens = seqs q, kv_tokens = seqs kv, attended_pairs = seqs (q (kv - q) + q (q + 1) / 2)),
// so training (q = kv = seq), chunked prefill and decode (q = 1) are one family; heads are
// chosen so the kernel's FLOPs (4 pairs heads head_dim) match the op's.
struct AttentionPlan {
  bool decode = false;  // q_len == 1: the paged-KV decode kernel
  std::int64_t seqs = 1, q_len = 1, kv_len = 1, heads = 1, head_dim = 128;
  // K/V heads (grouped-query attention; decode reads a pool this wide): from the op's bytes, which
  // count BF16 Q and O of `heads` and K and V of the model's K/V heads (attention_forward); the
  // smallest divisor of `heads` at or above that, so the pool never holds less than the op reads;
  // `heads` where the bytes say nothing.
  std::int64_t kv_heads = 1;
  double pairs = 0;  // (query, key) pairs the kernel scores, all sequences, one head
  double flops = 0;  // 4 pairs heads head_dim
};
AttentionPlan plan_attention(const OpCost& op, int head_dim = 128);

// ---- paged KV cache ----------------------------------------------------------------------------

// vLLM's layout: each sequence's keys live in fixed-size blocks scattered over a pool; row s of
// `table` lists sequence s's physical blocks in order (max_blocks columns, -1 past its end).
struct BlockTable {
  int block_size = 16;
  int seqs = 0, max_blocks = 0, total_blocks = 0;
  std::vector<std::int32_t> context_lens;
  std::vector<std::int32_t> table;  // seqs x max_blocks, row-major
};
// Physical blocks are a deterministic shuffle of 0..total-1 (a cache after some churn, not one
// contiguous run), the same for the same inputs.
BlockTable build_block_table(const std::vector<std::int32_t>& context_lens, int block_size);

// The decode kernel's split-K (FlashDecoding, vLLM's paged_attention v2): each sequence's keys in
// `splits` runs of `keys_per_split` (a multiple of 16, at most kDecodeMaxSplitKeys: the kernel
// holds a split's scores in shared memory), so that (sequence, K/V head, split) work items
// number about kDecodeWorkItems (about 16 blocks of four warps for each of an H100's or H200's
// 132 SMs, so the last wave is a small part) even at batch 1, with no split under
// kDecodeMinSplitKeys keys (the partials, 2 KB a split for a group of 4 query heads, would cost
// more than 6% of the 32 KB of K and V it reads).
// One split: the kernel writes the output itself, with no partials and no reduce.
inline constexpr int kDecodeMaxSplitKeys = 512;
inline constexpr int kDecodeMinSplitKeys = 64;
inline constexpr std::int64_t kDecodeWorkItems = 2048;
struct DecodeSplit {
  int splits = 1, keys_per_split = 16;
};
DecodeSplit plan_decode_split(std::int64_t seqs, std::int64_t kv_heads, std::int64_t max_context);
// Bytes of the partials of a split decode: per (sequence, query head, split) D FP32 outputs and
// the split's max and sum; 0 for one split.
std::size_t decode_workspace_bytes(std::int64_t seqs, std::int64_t heads, int splits, std::int64_t head_dim);

// ---- memory-streaming kernels -------------------------------------------------------------------

enum class StreamKernel { rmsnorm, adamw, axpy };
// RMSNorm reads and writes BF16 rows (4 bytes an element); AdamW reads FP32 params, grads and
// both moments and writes params and moments (28 bytes a parameter); the vector op y = a x + y
// (elementwise, embedding, loss) reads two BF16 vectors and writes one (6 bytes an element).
struct StreamPlan {
  StreamKernel kernel = StreamKernel::axpy;
  std::int64_t elements = 0;
  std::int64_t rows = 0, cols = 0;  // rmsnorm: rows x cols = elements (cols the hidden width)
  double bytes = 0;                 // what the kernel moves: elements x bytes per element
};
StreamPlan plan_stream(const OpCost& op);

// The three device buffers (bytes) an op touches; a device allocates each once at the largest.
// Attention: Q, then K and V (decode: pools of whole `kv_block_size` blocks, `kv_heads` wide),
// then O (decode: then, from the next 256-byte boundary, the split-K partials).
std::array<std::size_t, 3> buffers_for(const OpCost& op, Dtype step_dtype, int sm, int head_dim = 128,
                                       int kv_block_size = 16);

// ---- collectives (NCCL) --------------------------------------------------------------------------

// One NCCL call at nccl-tests' size convention: `bytes` is the per-rank buffer of all_reduce,
// broadcast, reduce and send/recv, the gathered output of all_gather, and the full input of
// reduce_scatter and all_to_all. `count` is the count argument NCCL takes (all_gather: what each
// rank contributes; reduce_scatter: what each receives; all_to_all: what each pair exchanges).
struct NcclPlan {
  CollectiveOp op = CollectiveOp::all_reduce;
  std::size_t elem_bytes = 4;  // ncclFloat, as nccl-tests' default
  std::size_t count = 0;
  std::size_t send_elems = 0, recv_elems = 0;  // buffer sizes
  double bytes = 0;                            // the nccl-tests size actually run (after rounding)
};
NcclPlan plan_nccl(CollectiveOp op, double bytes, int nranks, std::size_t elem_bytes = 4);

// ---- launch environment ---------------------------------------------------------------------------

// Rank, size and node-local rank from the launcher's environment: Open MPI (OMPI_COMM_WORLD_*),
// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), PMI/MPICH (PMI_RANK, PMI_SIZE). Without
// any, one process (rank 0 of 1).
struct LaunchEnv {
  bool launched = false;  // a launcher started this process (MPI is to be initialised)
  int rank = 0, size = 1, local_rank = 0;
};
LaunchEnv launch_env(const std::function<const char*(const char*)>& getenv_fn);

}  // namespace ctwin::realrun
