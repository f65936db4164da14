// The CUDA backend's kernels (declared in realrun/cuda_kernels.hpp). They are there to be timed
// at the shapes the simulator prices, and to be right: tests/realrun/test_cuda_device.cpp checks
// each against a host reference where a GPU is present.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "realrun/attention_args.hpp"
#include "realrun/cuda_kernels.hpp"

namespace ctwin::realrun::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kWarps = 8;      // queries (prefill) or heads (decode) a block
constexpr int kKeyTile = 32;   // keys a shared-memory tile holds (prefill)
constexpr int kThreads = 256;  // streaming kernels

int blocks_for(std::int64_t n, int threads) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 16 ? 65535 * 16 : b));
}

__device__ float hash_unit(std::uint32_t seed, std::uint64_t i) {
  // splitmix-style mixing of (seed, index) to a float in [-1, 1).
  std::uint64_t z = (static_cast<std::uint64_t>(seed) << 32) ^ (i + 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) / static_cast<float>(1u << 23) - 1.0f;
}

__global__ void fill_kernel(void* p, std::uint64_t n, int kind, std::uint32_t seed) {
  for (std::uint64_t i = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x) {
    const float x = hash_unit(seed, i);
    if (kind == 0) {
      static_cast<float*>(p)[i] = x;
    } else if (kind == 1) {
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x);
    } else {
      static_cast<__nv_fp8_e4m3*>(p)[i] = __nv_fp8_e4m3(x * 1.5f);
    }
  }
}

__device__ float warp_sum(float x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Online softmax state of one (query, head): running max, running sum, and the lane's E output
// dimensions (lane l holds dimensions l*E .. l*E+E-1).
template <int E>
struct Softmax {
  float m = -INFINITY, l = 0, acc[E] = {};
  __device__ void add(float score, const float* v) {
    const float m_new = fmaxf(m, score);
    const float corr = __expf(m - m_new);
    const float p = __expf(score - m_new);
    l = l * corr + p;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[e] = acc[e] * corr + p * v[e];
    m = m_new;
  }
};

template <int D>
__global__ void prefill_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, __nv_bfloat16* o,
                               int q_len, int kv_len, int heads) {
  constexpr int E = D / kWarp;
  __shared__ __nv_bfloat16 ks[kKeyTile * D];
  __shared__ __nv_bfloat16 vs[kKeyTile * D];
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int h = static_cast<int>(blockIdx.y), s = static_cast<int>(blockIdx.z);
  const int first = static_cast<int>(blockIdx.x) * kWarps;
  const int qi = first + warp;
  const bool active = qi < q_len;
  const int offset = kv_len - q_len;  // the queries are the last q_len positions
  const int pos = offset + qi;
  const int last_q = min(first + kWarps, q_len) - 1;
  const int keys = offset + last_q + 1;  // the block's furthest query sees this many keys
  const float scale = rsqrtf(static_cast<float>(D));
  float qv[E];
  if (active) {
    const std::size_t base = ((static_cast<std::size_t>(s) * q_len + qi) * heads + h) * D + lane * E;
#pragma unroll
    for (int e = 0; e < E; ++e) qv[e] = __bfloat162float(q[base + e]) * scale;
  }
  Softmax<E> sm;
  for (int t0 = 0; t0 < keys; t0 += kKeyTile) {
    for (int i = static_cast<int>(threadIdx.x); i < kKeyTile * D; i += static_cast<int>(blockDim.x)) {
      const int j = t0 + i / D;
      const std::size_t src = ((static_cast<std::size_t>(s) * kv_len + j) * heads + h) * D + i % D;
      ks[i] = j < keys ? k[src] : __float2bfloat16(0.0f);
      vs[i] = j < keys ? v[src] : __float2bfloat16(0.0f);
    }
    __syncthreads();
    if (active) {
      const int end = min(kKeyTile, pos + 1 - t0);  // causal: keys up to this query's position
      for (int j = 0; j < end; ++j) {
        float dot = 0, vv[E];
#pragma unroll
        for (int e = 0; e < E; ++e) {
          dot += qv[e] * __bfloat162float(ks[j * D + lane * E + e]);
          vv[e] = __bfloat162float(vs[j * D + lane * E + e]);
        }
        sm.add(warp_sum(dot), vv);
      }
    }
    __syncthreads();
  }
  if (active) {
    const std::size_t base = ((static_cast<std::size_t>(s) * q_len + qi) * heads + h) * D + lane * E;
#pragma unroll
    for (int e = 0; e < E; ++e) o[base + e] = __float2bfloat16(sm.acc[e] / sm.l);
  }
}

// Tensor-core prefill attention (FlashAttention-2's loop on WMMA): a block of kTcWarps warps
// takes kTcRows query rows a warp and walks the causal key range in tiles of kTcKeys, with the
// online softmax kept per row. S = Q K^T and O += P V run on the tensor cores (BF16 in, FP32
// accumulate); the running output lives in shared memory because a WMMA accumulator's element
// layout is opaque, so rows cannot be rescaled in registers. Not FlashAttention's speed (no
// asynchronous copies, no register-resident O), but the same arithmetic on the same units,
// unlike the one-warp-a-query kernel above.
constexpr int kTcWarps = 4;
constexpr int kTcRows = 16;  // query rows a warp (one WMMA tile high)
constexpr int kTcKeys = 32;  // keys a tile

template <int D>
constexpr std::size_t tc_smem_bytes() {
  return sizeof(__nv_bfloat16) * (kTcWarps * kTcRows * D + 2 * kTcKeys * D + kTcWarps * kTcRows * kTcKeys) +
         sizeof(float) * (kTcWarps * kTcRows * kTcKeys + kTcWarps * kTcRows * D + kTcWarps * kTcRows);
}

template <int D>
__global__ void prefill_tc_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                  __nv_bfloat16* o, int q_len, int kv_len, int heads) {
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(32) unsigned char smem[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem);                       // [warps*16][D]
  auto* ks = qs + kTcWarps * kTcRows * D;                                  // [keys][D]
  auto* vs = ks + kTcKeys * D;                                             // [keys][D]
  auto* ps = vs + kTcKeys * D;                                             // [warps][16][keys]
  auto* ss = reinterpret_cast<float*>(ps + kTcWarps * kTcRows * kTcKeys);  // [warps][16][keys]
  auto* os = ss + kTcWarps * kTcRows * kTcKeys;                            // [warps][16][D]
  auto* corr = os + kTcWarps * kTcRows * D;                                // [warps][16]
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarp, lane = tid % kWarp;
  const int h = static_cast<int>(blockIdx.y), s = static_cast<int>(blockIdx.z);
  const int first = static_cast<int>(blockIdx.x) * kTcWarps * kTcRows;
  const int offset = kv_len - q_len;  // the queries are the last q_len positions
  const int last_q = min(first + kTcWarps * kTcRows, q_len) - 1;
  const int keys = offset + last_q + 1;
  const float scale = rsqrtf(static_cast<float>(D));

  // Q tile (zeros past q_len) and the running output.
  for (int i = tid; i < kTcWarps * kTcRows * D; i += blockDim.x) {
    const int r = first + i / D;
    qs[i] = r < q_len ? q[((static_cast<std::size_t>(s) * q_len + r) * heads + h) * D + i % D] : __float2bfloat16(0.0f);
  }
  float* ow = os + warp * kTcRows * D;
  for (int i = lane; i < kTcRows * D; i += kWarp) ow[i] = 0.0f;
  float row_m = -INFINITY, row_l = 0.0f;  // lanes 0..15: their row's softmax state
  const int my_row = first + warp * kTcRows + lane;
  const int my_pos = offset + my_row;
  const bool my_valid = lane < kTcRows && my_row < q_len;
  float* sw = ss + warp * kTcRows * kTcKeys;
  __nv_bfloat16* pw = ps + warp * kTcRows * kTcKeys;
  float* cw = corr + warp * kTcRows;
  const __nv_bfloat16* qw = qs + warp * kTcRows * D;
  const int warp_last_pos = offset + min(first + warp * kTcRows + kTcRows, q_len) - 1;

  for (int t0 = 0; t0 < keys; t0 += kTcKeys) {
    __syncthreads();  // the previous tile's K and V are no longer read
    for (int i = tid; i < kTcKeys * D; i += blockDim.x) {
      const int j = t0 + i / D;
      const std::size_t src = ((static_cast<std::size_t>(s) * kv_len + j) * heads + h) * D + i % D;
      ks[i] = j < keys ? k[src] : __float2bfloat16(0.0f);
      vs[i] = j < keys ? v[src] : __float2bfloat16(0.0f);
    }
    __syncthreads();
    if (t0 > warp_last_pos) continue;  // every row of this warp is past causally (no block sync below)
    // S = Q K^T: 16 x kTcKeys, K^T read column-major from K's rows.
    for (int j = 0; j < kTcKeys / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, qw + kk * 16, D);
        wmma::load_matrix_sync(b, ks + j * 16 * D + kk * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(sw + j * 16, acc, kTcKeys, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax, one lane a row.
    if (lane < kTcRows) {
      float c = 1.0f;
      if (my_valid) {
        float m_new = row_m;
        for (int j = 0; j < kTcKeys; ++j) {
          if (t0 + j <= my_pos) m_new = fmaxf(m_new, sw[lane * kTcKeys + j] * scale);
        }
        c = __expf(row_m - m_new);  // row_m = -inf only before the first tile, where key 0 is seen
        float sum = 0.0f;
        for (int j = 0; j < kTcKeys; ++j) {
          const float pj = t0 + j <= my_pos ? __expf(sw[lane * kTcKeys + j] * scale - m_new) : 0.0f;
          pw[lane * kTcKeys + j] = __float2bfloat16(pj);
          sum += pj;
        }
        row_l = row_l * c + sum;
        row_m = m_new;
      } else {
        for (int j = 0; j < kTcKeys; ++j) pw[lane * kTcKeys + j] = __float2bfloat16(0.0f);
      }
      cw[lane] = c;
    }
    __syncwarp();
    for (int i = lane; i < kTcRows * D; i += kWarp) ow[i] *= cw[i / D];
    __syncwarp();
    // O += P V: 16 x D, V row-major [keys][D].
    for (int n = 0; n < D / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, ow + n * 16, D, wmma::mem_row_major);
      for (int kk = 0; kk < kTcKeys / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, pw + kk * 16, kTcKeys);
        wmma::load_matrix_sync(b, vs + kk * 16 * D + n * 16, D);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(ow + n * 16, acc, D, wmma::mem_row_major);
    }
    __syncwarp();
  }
  __syncwarp();
  if (lane < kTcRows) cw[lane] = my_valid && row_l > 0 ? 1.0f / row_l : 0.0f;
  __syncwarp();
  for (int i = lane; i < kTcRows * D; i += kWarp) {
    const int r = first + warp * kTcRows + i / D;
    if (r < q_len)
      o[((static_cast<std::size_t>(s) * q_len + r) * heads + h) * D + i % D] = __float2bfloat16(ow[i] * cw[i / D]);
  }
}

// FlashAttention-2's forward on mma.sync (Dao, "FlashAttention-2", 2023; sm_80 and later). A
// block of W warps takes 16 W query rows of one (sequence, query head), 16 a warp, and walks the
// causal key range in tiles of kMmaKeys keys: K and V tiles are staged in shared memory by
// cp.async, double-buffered (tile t + 1 loads while tile t is used), in rows of 16-byte chunks
// XOR-swizzled by the row so that ldmatrix reads them without bank conflicts. S = Q K^T and
// O += P V run as mma.sync.m16n8k16 (BF16 in, FP32 accumulate) with Q, S, P and O in registers:
// the accumulator layout is the PTX ISA's (lane = 4 g + t holds rows g and g + 8, columns 2t and
// 2t + 1 of each 8-column tile), so a row's max and sum are reduced over the 4 lanes of a quad
// and the online-softmax rescale multiplies the lane's own O fragments. The S fragments become
// the A fragments of P V directly (FlashAttention's register reuse). GQA: the block reads the
// K/V head of its query head. Tiles above the diagonal are skipped (per warp), only the tiles
// the diagonal crosses are masked, and blocks start from the longest rows (the last queries).
constexpr int kMmaKeys = 64;  // keys a K/V tile

template <int D, int W>
constexpr std::size_t mma_smem_bytes() {
  return sizeof(__nv_bfloat16) * (static_cast<std::size_t>(W) * 16 * D + 4 * kMmaKeys * D);  // Q, 2 x (K, V)
}

// Element offset of (row, col) in a [rows][D] BF16 tile whose 16-byte chunks are swizzled.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ row) & (D / 8 - 1)) << 3) + (col & 7);
}

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; fewer than 16 source bytes (here 0) fill the rest with zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// c += a b: a 16 x 16 (row), b 16 x 8 (col), c 16 x 8 FP32. Registers only, so not volatile.
__device__ __forceinline__ void mma_bf16(float* c, const std::uint32_t* a, std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x by the SFU (ex2.approx; 2^-inf = 0), as FlashAttention's exp2f under fast math.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two FP32 to a BF16 pair, lo in the low half (the lower column of a fragment).
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  std::uint32_t u;
  memcpy(&u, &v, 4);
  return u;
}

template <int D, int W>
__global__ void __launch_bounds__(W* kWarp)
    prefill_mma_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                       const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o, int q_len, int kv_len,
                       int heads, int kv_heads) {
  constexpr int kRows = 16 * W;           // query rows a block
  constexpr int kChunks = D / 8;          // 16-byte chunks a row
  constexpr int kThreadsMma = W * kWarp;  // threads a block
  constexpr int kN = kMmaKeys / 8;        // 8-key tiles of S
  constexpr int kDn = D / 8;              // 8-dim tiles of O
  extern __shared__ __align__(128) unsigned char smem_raw[];
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem_raw);  // [kRows][D]
  auto* kvs = qs + kRows * D;                             // [2][K, V][kMmaKeys][D]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
  const int g = lane >> 2, t = lane & 3;  // the fragment's row group and column pair
  const int h = static_cast<int>(blockIdx.y), s = static_cast<int>(blockIdx.z);
  const int kvh = h / (heads / kv_heads);
  // The last query blocks see the most keys: start them first.
  const int first = (static_cast<int>(gridDim.x) - 1 - static_cast<int>(blockIdx.x)) * kRows;
  const int offset = kv_len - q_len;                          // the queries are the last q_len positions
  const int block_keys = offset + min(first + kRows, q_len);  // keys the block's last row sees
  const int tiles = (block_keys + kMmaKeys - 1) / kMmaKeys;
  const int warp_first_pos = offset + first + warp * 16;
  const int warp_last_pos = warp_first_pos + 15;  // rows past q_len compute but are not written
  const std::size_t q_stride = static_cast<std::size_t>(heads) * D;
  const std::size_t kv_stride = static_cast<std::size_t>(kv_heads) * D;
  const __nv_bfloat16* qg = q + (static_cast<std::size_t>(s) * q_len * heads + h) * D;
  const __nv_bfloat16* kg = k + (static_cast<std::size_t>(s) * kv_len * kv_heads + kvh) * D;
  const __nv_bfloat16* vg = v + (static_cast<std::size_t>(s) * kv_len * kv_heads + kvh) * D;

  // Q tile (zeros past q_len), then K/V tile 0: one cp.async group.
  for (int i = tid; i < kRows * kChunks; i += kThreadsMma) {
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const bool ok = first + r < q_len;
    cp_async16(qs + swz<D>(r, c), ok ? qg + static_cast<std::size_t>(first + r) * q_stride + c : qg, ok ? 16 : 0);
  }
  const auto load_kv = [&](int tile, int buf) {
    __nv_bfloat16* ks = kvs + buf * 2 * kMmaKeys * D;
    __nv_bfloat16* vs = ks + kMmaKeys * D;
    for (int i = tid; i < kMmaKeys * kChunks; i += kThreadsMma) {
      const int r = i / kChunks, c = (i % kChunks) * 8;
      const int key = tile * kMmaKeys + r;
      const bool ok = key < kv_len;
      const std::size_t off = ok ? static_cast<std::size_t>(key) * kv_stride + c : 0;
      cp_async16(ks + swz<D>(r, c), kg + off, ok ? 16 : 0);
      cp_async16(vs + swz<D>(r, c), vg + off, ok ? 16 : 0);
    }
  };
  load_kv(0, 0);
  cp_async_commit();

  std::uint32_t qf[D / 16][4];  // the warp's Q rows as A fragments, one per 16 dimensions
  float acc[kDn][4];            // O: rows g and g + 8, dims 8 n + 2 t, + 1
#pragma unroll
  for (int n = 0; n < kDn; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY};  // running max of rows g, g + 8 (raw scores)
  float row_l[2] = {0.0f, 0.0f};            // this lane's part of their running sums
  const float scale_log2 = 1.4426950408889634f * rsqrtf(static_cast<float>(D));

  for (int tile = 0; tile < tiles; ++tile) {
    if (tile + 1 < tiles) load_kv(tile + 1, (tile + 1) & 1);
    cp_async_commit();  // possibly empty: keeps "all but the newest group" meaning tile `tile`
    cp_async_wait<1>();
    __syncthreads();
    if (tile == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk)
        ldmatrix_x4(qf[kk], qs + swz<D>(warp * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8));
    }
    const int t0 = tile * kMmaKeys;
    if (t0 <= warp_last_pos) {
      const __nv_bfloat16* ks = kvs + (tile & 1) * 2 * kMmaKeys * D;
      const __nv_bfloat16* vs = ks + kMmaKeys * D;
      // S = Q K^T. ldmatrix of K's rows (not transposed) gives B fragments: matrices 0, 1 are
      // keys 0-7 of a 16-key pair at dims kk, kk + 8; 2, 3 keys 8-15.
      float sc[kN][4];
#pragma unroll
      for (int n = 0; n < kN; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kN / 2; ++np) {
          std::uint32_t b[4];
          ldmatrix_x4(b, ks + swz<D>(np * 16 + (lane & 7) + (lane >> 4) * 8, kk * 16 + ((lane >> 3) & 1) * 8));
          mma_bf16(sc[2 * np], qf[kk], b[0], b[1]);
          mma_bf16(sc[2 * np + 1], qf[kk], b[2], b[3]);
        }
      }
      // Causal mask where the diagonal crosses this warp's rows.
      if (t0 + kMmaKeys - 1 > warp_first_pos) {
#pragma unroll
        for (int n = 0; n < kN; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = t0 + n * 8 + 2 * t + (e & 1);
            const int pos = warp_first_pos + g + (e >> 1) * 8;
            if (key > pos) sc[n][e] = -INFINITY;
          }
        }
      }
      // Online softmax on the fragments: rows g (e = 0, 1) and g + 8 (e = 2, 3).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = row_m[r];
#pragma unroll
        for (int n = 0; n < kN; ++n) mx = fmaxf(mx, fmaxf(sc[n][2 * r], sc[n][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // Key 0 is in every row's first tile, so mx is finite; the guard keeps a row that saw
        // nothing at zeros rather than NaN.
        const float ms = mx == -INFINITY ? 0.0f : mx * scale_log2;
        const float corr = fast_exp2(row_m[r] * scale_log2 - ms);  // 0 before the first tile
        row_m[r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int n = 0; n < kN; ++n) {
          sc[n][2 * r] = fast_exp2(fmaf(sc[n][2 * r], scale_log2, -ms));
          sc[n][2 * r + 1] = fast_exp2(fmaf(sc[n][2 * r + 1], scale_log2, -ms));
          sum += sc[n][2 * r] + sc[n][2 * r + 1];
        }
        row_l[r] = row_l[r] * corr + sum;
#pragma unroll
        for (int n = 0; n < kDn; ++n) {
          acc[n][2 * r] *= corr;
          acc[n][2 * r + 1] *= corr;
        }
      }
      // O += P V. P's A fragment for keys 16 kk .. + 15 is S's tiles 2 kk and 2 kk + 1; V's B
      // fragments come from ldmatrix.trans of V's rows: matrices 0, 1 are keys 0-7, 8-15 at
      // dims 16 dp .. + 7; 2, 3 the same keys at dims + 8 .. + 15.
#pragma unroll
      for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
        const std::uint32_t pa[4] = {pack_bf16(sc[2 * kk][0], sc[2 * kk][1]), pack_bf16(sc[2 * kk][2], sc[2 * kk][3]),
                                     pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                                     pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, vs + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, dp * 16 + (lane >> 4) * 8));
          mma_bf16(acc[2 * dp], pa, b[0], b[1]);
          mma_bf16(acc[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled by the next iteration's load
  }
  cp_async_wait<0>();
  // The sums over the quad, then O / l, two BF16 a lane a row.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_l[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = first + warp * 16 + g + r * 8;
    if (row < q_len) {
      __nv_bfloat16* out = o + (static_cast<std::size_t>(s) * q_len * heads + h) * D + row * q_stride;
#pragma unroll
      for (int n = 0; n < kDn; ++n) {
        const std::uint32_t u = pack_bf16(acc[n][2 * r] * inv, acc[n][2 * r + 1] * inv);
        *reinterpret_cast<std::uint32_t*>(out + n * 8 + 2 * t) = u;
      }
    }
  }
}

// The first decode kernel: a warp a (sequence, query head), lane l holding dimensions
// l*E .. l*E+E-1, a serial loop over the keys with a warp reduction each. Every query head reads
// its K/V head's rows again (heads / kv_heads times) and one warp a head leaves the GPU
// latency-bound; kept as an on-GPU reference for the split kernel below.
template <int D>
__global__ void decode_simple_kernel(const __nv_bfloat16* q, const __nv_bfloat16* kp, const __nv_bfloat16* vp,
                                     __nv_bfloat16* o, const std::int32_t* table, const std::int32_t* lens,
                                     int max_blocks, int block_size, int heads, int kv_heads) {
  constexpr int E = D / kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int h = static_cast<int>(blockIdx.x) * kWarps + warp, s = static_cast<int>(blockIdx.y);
  if (h >= heads) return;
  const int kvh = h / (heads / kv_heads);
  const float scale = rsqrtf(static_cast<float>(D));
  const std::size_t qbase = (static_cast<std::size_t>(s) * heads + h) * D + lane * E;
  float qv[E];
#pragma unroll
  for (int e = 0; e < E; ++e) qv[e] = __bfloat162float(q[qbase + e]) * scale;
  Softmax<E> sm;
  const int ctx = lens[s];
  for (int j = 0; j < ctx; ++j) {
    const int block = table[static_cast<std::size_t>(s) * max_blocks + j / block_size];
    const std::size_t base =
        ((static_cast<std::size_t>(block) * block_size + j % block_size) * kv_heads + kvh) * D + lane * E;
    float dot = 0, vv[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      dot += qv[e] * __bfloat162float(kp[base + e]);
      vv[e] = __bfloat162float(vp[base + e]);
    }
    sm.add(warp_sum(dot), vv);
  }
#pragma unroll
  for (int e = 0; e < E; ++e) o[qbase + e] = __float2bfloat16(ctx > 0 ? sm.acc[e] / sm.l : 0.0f);
}

// Flash-decoding over the paged cache (FlashDecoding; vLLM's paged_attention v2). A block of
// kDecodeWarps warps takes one (sequence, K/V head, split of the keys) and G query heads of that
// K/V head's group, so each K/V row is read from HBM once for all of them. A key's row is read by
// L = D / 8 lanes, 16 bytes each (one vector load a lane), so a warp takes 32 / L keys at once
// and each lane issues kDecodeUnroll loads before it uses any; the dot products are reduced
// across the row's lanes by shuffles. Scores stay in shared memory (keys_per_split x G), the
// split's softmax is exact (max, then exp2 and sum), and P V is accumulated the same way. One
// split writes the BF16 output; several write FP32 partials (output over sum, max, sum) for
// decode_reduce_kernel. Scores are in log2 units (q is scaled by log2(e) / sqrt(D)) so exp2f
// serves as the exponential.
constexpr int kDecodeWarps = 4;
constexpr int kDecodeUnroll = 4;

// Eight BF16 (a 16-byte load) to FP32: a BF16 is the top half of an FP32.
__device__ __forceinline__ void bf16x8_to_float(const uint4& u, float* f) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ float warp_max(float x) {
  for (int o = kWarp / 2; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

template <int D, int G>
constexpr std::size_t decode_smem_bytes(int keys_per_split) {
  return sizeof(float) * (static_cast<std::size_t>(G) * keys_per_split + 2 * G + kDecodeWarps * G * D);
}

template <int D, int G>
__global__ void __launch_bounds__(kDecodeWarps* kWarp)
    decode_split_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ kp,
                        const __nv_bfloat16* __restrict__ vp, __nv_bfloat16* __restrict__ o, float* __restrict__ part,
                        const std::int32_t* __restrict__ table, const std::int32_t* __restrict__ lens, int max_blocks,
                        int block_size, int block_shift, int heads, int kv_heads, int splits, int keys_per_split) {
  constexpr int L = D / 8;        // lanes a key row
  constexpr int KPW = kWarp / L;  // keys a warp reads at once
  constexpr int U = kDecodeUnroll;
  constexpr int STEP = kDecodeWarps * KPW * U;  // keys the block covers an iteration
  extern __shared__ __align__(16) unsigned char decode_smem[];
  auto* scores = reinterpret_cast<float*>(decode_smem);  // [G][keys_per_split]
  float* stats = scores + G * keys_per_split;            // [G] maxima, then [G] sums
  float* red = stats + 2 * G;                            // [warps][G][D]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / kWarp, lane = tid % kWarp;
  const int slot = lane / L, part_of_row = lane % L;
  const int split = static_cast<int>(blockIdx.x), s = static_cast<int>(blockIdx.z);
  const int group = heads / kv_heads, subgroups = group / G;
  const int kvh = static_cast<int>(blockIdx.y) / subgroups;
  const int h0 = kvh * group + static_cast<int>(blockIdx.y) % subgroups * G;  // G consecutive query heads
  const std::size_t obase = (static_cast<std::size_t>(s) * heads + h0) * D;
  const int ctx = lens[s];
  const int k0 = split * keys_per_split;
  const int n = min(ctx - k0, keys_per_split);  // keys of this split
  if (n <= 0) {
    // Past the sequence's end: the reduce skips this split; alone, the output is zero.
    if (splits == 1) {
      for (int i = tid; i < G * D; i += static_cast<int>(blockDim.x)) o[obase + i] = __float2bfloat16(0.0f);
    }
    return;
  }
  const float qscale = rsqrtf(static_cast<float>(D)) * 1.4426950408889634f;
  float qv[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    bf16x8_to_float(*reinterpret_cast<const uint4*>(q + obase + g * D + part_of_row * 8), qv[g]);
#pragma unroll
    for (int e = 0; e < 8; ++e) qv[g][e] *= qscale;
  }
  const std::int32_t* row = table + static_cast<std::size_t>(s) * max_blocks;
  const auto offset = [&](int j) {  // element offset of this lane's 8 values of the split's key j
    const int key = k0 + j;
    // Blocks of a power of two (vLLM's 16) by shift and mask: an integer division a load would
    // cost a noticeable share of the issue slots of a kernel that only streams.
    const int b = block_shift >= 0 ? key >> block_shift : key / block_size;
    const int in_block = block_shift >= 0 ? key & (block_size - 1) : key % block_size;
    const auto block = static_cast<std::size_t>(row[b]);
    return ((block * block_size + in_block) * kv_heads + kvh) * D + part_of_row * 8;
  };

  // Scores: q . k for the G heads.
  for (int base = warp * KPW * U; base < n; base += STEP) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + u * KPW + slot;
      r[u] = j < n ? *reinterpret_cast<const uint4*>(kp + offset(j)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8], dot[G];
      bf16x8_to_float(r[u], kf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        dot[g] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot[g] = fmaf(qv[g][e], kf[e], dot[g]);
      }
#pragma unroll
      for (int off = L / 2; off > 0; off /= 2) {
#pragma unroll
        for (int g = 0; g < G; ++g) dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], off);
      }
      const int j = base + u * KPW + slot;
      if (part_of_row == 0 && j < n) {
#pragma unroll
        for (int g = 0; g < G; ++g) scores[g * keys_per_split + j] = dot[g];
      }
    }
  }
  __syncthreads();

  // The split's softmax, a warp a head: max, then p = 2^(score - max) in place, and their sum.
  for (int g = warp; g < G; g += kDecodeWarps) {
    float* sg = scores + g * keys_per_split;
    float m = -INFINITY;
    for (int j = lane; j < n; j += kWarp) m = fmaxf(m, sg[j]);
    m = warp_max(m);
    float l = 0.0f;
    for (int j = lane; j < n; j += kWarp) {
      const float p = exp2f(sg[j] - m);
      sg[j] = p;
      l += p;
    }
    l = warp_sum(l);
    if (lane == 0) {
      stats[g] = m;
      stats[G + g] = l;
    }
  }
  __syncthreads();

  // P V: each lane accumulates its 8 dimensions over its keys, for the G heads.
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.0f;
  }
  for (int base = warp * KPW * U; base < n; base += STEP) {
    uint4 r[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + u * KPW + slot;
      r[u] = j < n ? *reinterpret_cast<const uint4*>(vp + offset(j)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + u * KPW + slot;
      if (j < n) {
        float vf[8];
        bf16x8_to_float(r[u], vf);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float p = scores[g * keys_per_split + j];
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(p, vf[e], acc[g][e]);
        }
      }
    }
  }
  // A warp's key slots hold the same dimensions; then the warps, through shared memory.
#pragma unroll
  for (int off = L; off < kWarp; off *= 2) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], off);
    }
  }
  if (slot == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
#pragma unroll
      for (int e = 0; e < 8; ++e) red[(warp * G + g) * D + part_of_row * 8 + e] = acc[g][e];
    }
  }
  __syncthreads();
  for (int i = tid; i < G * D; i += static_cast<int>(blockDim.x)) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) sum += red[w * G * D + i];
    const float out = sum / stats[G + i / D];
    if (splits == 1) {
      o[obase + i] = __float2bfloat16(out);
    } else {
      const int g = i / D;
      part[((static_cast<std::size_t>(s) * heads + h0 + g) * splits + split) * D + i % D] = out;
    }
  }
  if (splits > 1 && tid < G) {
    float* ml = part + static_cast<std::size_t>(gridDim.z) * heads * splits * D;
    const std::size_t i = (static_cast<std::size_t>(s) * heads + h0 + tid) * splits + split;
    ml[2 * i] = stats[tid];
    ml[2 * i + 1] = stats[G + tid];
  }
}

// Combines a (sequence, head)'s splits: with M the largest split max, split i weighs
// l_i 2^(m_i - M), and the output is the weighted mean of the splits' outputs. Splits past the
// sequence's end were never written and are not read. A thread a dimension.
template <int D>
__global__ void decode_reduce_kernel(const float* __restrict__ part, __nv_bfloat16* __restrict__ o,
                                     const std::int32_t* __restrict__ lens, int heads, int splits, int keys_per_split) {
  const int h = static_cast<int>(blockIdx.x), s = static_cast<int>(blockIdx.y), d = static_cast<int>(threadIdx.x);
  const int ctx = max(0, lens[s]);
  const int used = min(splits, (ctx + keys_per_split - 1) / keys_per_split);
  const std::size_t base = (static_cast<std::size_t>(s) * heads + h) * splits;
  const float* ml = part + static_cast<std::size_t>(gridDim.y) * heads * splits * D;
  float m = -INFINITY;
  for (int i = 0; i < used; ++i) m = fmaxf(m, ml[2 * (base + i)]);
  float wsum = 0.0f, acc = 0.0f;
  for (int i = 0; i < used; ++i) {
    const float w = ml[2 * (base + i) + 1] * exp2f(ml[2 * (base + i)] - m);
    wsum += w;
    acc = fmaf(w, part[(base + i) * D + d], acc);
  }
  o[(static_cast<std::size_t>(s) * heads + h) * D + d] = __float2bfloat16(used > 0 ? acc / wsum : 0.0f);
}

__global__ void rmsnorm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* w, __nv_bfloat16* y, std::int64_t rows,
                               int cols, float eps) {
  __shared__ float partial[kThreads / kWarp];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const __nv_bfloat16* xr = x + r * cols;
    float ss = 0;
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) {
      const float xv = __bfloat162float(xr[c]);
      ss += xv * xv;
    }
    ss = warp_sum(ss);
    if (threadIdx.x % kWarp == 0) partial[threadIdx.x / kWarp] = ss;
    __syncthreads();
    float total = 0;
    for (int i = 0; i < static_cast<int>(blockDim.x) / kWarp; ++i) total += partial[i];
    const float inv = rsqrtf(total / static_cast<float>(cols) + eps);
    for (int c = static_cast<int>(threadIdx.x); c < cols; c += static_cast<int>(blockDim.x)) {
      y[r * cols + c] = __float2bfloat16(__bfloat162float(xr[c]) * inv * __bfloat162float(w[c]));
    }
    __syncthreads();  // partial[] is reused by the next row
  }
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float b1, float b2,
                             float eps, float wd, float c1, float c2) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1 - b1) * gi;
    const float vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p[i]);
  }
}

__global__ void axpy_kernel(float a, const __nv_bfloat16* x, __nv_bfloat16* y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    y[i] = __float2bfloat16(a * __bfloat162float(x[i]) + __bfloat162float(y[i]));
  }
}

}  // namespace

cudaError_t fill_random(void* p, std::size_t bytes, FillKind kind, std::uint32_t seed, cudaStream_t s) {
  const std::size_t size = kind == FillKind::fp32 ? 4 : kind == FillKind::bf16 ? 2 : 1;
  const std::uint64_t n = bytes / size;
  if (n == 0) return cudaSuccess;
  fill_kernel<<<blocks_for(static_cast<std::int64_t>(n), kThreads), kThreads, 0, s>>>(p, n, static_cast<int>(kind),
                                                                                      seed);
  return cudaGetLastError();
}

cudaError_t attention_prefill_simple(const void* q, const void* k, const void* v, void* o, int seqs, int q_len,
                                     int kv_len, int heads, int head_dim, cudaStream_t s) {
  if (seqs < 1 || q_len < 1 || kv_len < q_len || heads < 1 || heads > 65535 || seqs > 65535)
    return cudaErrorInvalidValue;
  const dim3 grid((q_len + kWarps - 1) / kWarps, heads, seqs);
  const auto* qb = static_cast<const __nv_bfloat16*>(q);
  const auto* kb = static_cast<const __nv_bfloat16*>(k);
  const auto* vb = static_cast<const __nv_bfloat16*>(v);
  auto* ob = static_cast<__nv_bfloat16*>(o);
  if (head_dim == 128) {
    prefill_kernel<128><<<grid, kWarps * kWarp, 0, s>>>(qb, kb, vb, ob, q_len, kv_len, heads);
  } else if (head_dim == 64) {
    prefill_kernel<64><<<grid, kWarps * kWarp, 0, s>>>(qb, kb, vb, ob, q_len, kv_len, heads);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

namespace {
template <int D>
cudaError_t launch_prefill_tc(const void* q, const void* k, const void* v, void* o, int seqs, int q_len, int kv_len,
                              int heads, cudaStream_t s) {
  constexpr std::size_t smem = tc_smem_bytes<D>();
  // Past 48 KiB a kernel's dynamic shared memory must be allowed explicitly (once is enough,
  // but the call is cheap and per device).
  const cudaError_t e =
      cudaFuncSetAttribute(prefill_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid((q_len + kTcWarps * kTcRows - 1) / (kTcWarps * kTcRows), heads, seqs);
  prefill_tc_kernel<D><<<grid, kTcWarps * kWarp, smem, s>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v),
      static_cast<__nv_bfloat16*>(o), q_len, kv_len, heads);
  return cudaGetLastError();
}
}  // namespace

cudaError_t attention_prefill_wmma(const void* q, const void* k, const void* v, void* o, int seqs, int q_len,
                                   int kv_len, int heads, int head_dim, cudaStream_t s) {
  if (seqs < 1 || q_len < 1 || kv_len < q_len || heads < 1 || heads > 65535 || seqs > 65535)
    return cudaErrorInvalidValue;
  if (head_dim == 128) return launch_prefill_tc<128>(q, k, v, o, seqs, q_len, kv_len, heads, s);
  if (head_dim == 64) return launch_prefill_tc<64>(q, k, v, o, seqs, q_len, kv_len, heads, s);
  return cudaErrorInvalidValue;
}

namespace {
template <int D, int W>
cudaError_t launch_prefill_mma(const void* q, const void* k, const void* v, void* o, int seqs, int q_len, int kv_len,
                               int heads, int kv_heads, cudaStream_t s) {
  constexpr std::size_t smem = mma_smem_bytes<D, W>();
  const cudaError_t e = cudaFuncSetAttribute(prefill_mma_kernel<D, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid((q_len + 16 * W - 1) / (16 * W), heads, seqs);
  prefill_mma_kernel<D, W><<<grid, W * kWarp, smem, s>>>(
      static_cast<const __nv_bfloat16*>(q), static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v),
      static_cast<__nv_bfloat16*>(o), q_len, kv_len, heads, kv_heads);
  return cudaGetLastError();
}

}  // namespace

cudaError_t attention_prefill(const void* q, const void* k, const void* v, void* o, int seqs, int q_len, int kv_len,
                              int heads, int kv_heads, int head_dim, cudaStream_t s, int block_rows) {
  if (!prefill_mma_args_ok(q, k, v, o, seqs, q_len, kv_len, heads, kv_heads, block_rows)) return cudaErrorInvalidValue;
  if (head_dim == 128)
    return block_rows == 64 ? launch_prefill_mma<128, 4>(q, k, v, o, seqs, q_len, kv_len, heads, kv_heads, s)
                            : launch_prefill_mma<128, 8>(q, k, v, o, seqs, q_len, kv_len, heads, kv_heads, s);
  if (head_dim == 64)
    return block_rows == 64 ? launch_prefill_mma<64, 4>(q, k, v, o, seqs, q_len, kv_len, heads, kv_heads, s)
                            : launch_prefill_mma<64, 8>(q, k, v, o, seqs, q_len, kv_len, heads, kv_heads, s);
  return cudaErrorInvalidValue;
}

namespace {
// log2 of a power of two, else -1.
int block_shift(int block_size) {
  if ((block_size & (block_size - 1)) != 0) return -1;
  int shift = 0;
  while ((1 << shift) < block_size) ++shift;
  return shift;
}

template <int D, int G>
cudaError_t launch_decode_split(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                __nv_bfloat16* o, float* part, const std::int32_t* table, const std::int32_t* lens,
                                int seqs, int max_blocks, int block_size, int heads, int kv_heads, int splits,
                                int keys_per_split, cudaStream_t s) {
  const dim3 grid(splits, heads / G, seqs);  // (K/V head, subgroup of G query heads) along y
  decode_split_kernel<D, G><<<grid, kDecodeWarps * kWarp, decode_smem_bytes<D, G>(keys_per_split), s>>>(
      q, k, v, o, part, table, lens, max_blocks, block_size, block_shift(block_size), heads, kv_heads, splits,
      keys_per_split);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || splits == 1) return e;
  decode_reduce_kernel<D><<<dim3(heads, seqs), D, 0, s>>>(part, o, lens, heads, splits, keys_per_split);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_decode_group(int g, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                __nv_bfloat16* o, float* part, const std::int32_t* table, const std::int32_t* lens,
                                int seqs, int max_blocks, int block_size, int heads, int kv_heads, int splits,
                                int keys_per_split, cudaStream_t s) {
  switch (g) {
    case 8:
      return launch_decode_split<D, 8>(q, k, v, o, part, table, lens, seqs, max_blocks, block_size, heads, kv_heads,
                                       splits, keys_per_split, s);
    case 4:
      return launch_decode_split<D, 4>(q, k, v, o, part, table, lens, seqs, max_blocks, block_size, heads, kv_heads,
                                       splits, keys_per_split, s);
    case 2:
      return launch_decode_split<D, 2>(q, k, v, o, part, table, lens, seqs, max_blocks, block_size, heads, kv_heads,
                                       splits, keys_per_split, s);
    default:
      return launch_decode_split<D, 1>(q, k, v, o, part, table, lens, seqs, max_blocks, block_size, heads, kv_heads,
                                       splits, keys_per_split, s);
  }
}

}  // namespace

cudaError_t attention_decode_paged(const void* q, const void* k_pool, const void* v_pool, void* o,
                                   const std::int32_t* block_table, const std::int32_t* context_lens, int seqs,
                                   int max_blocks, int block_size, int heads, int kv_heads, int head_dim, int splits,
                                   int keys_per_split, void* workspace, cudaStream_t s) {
  if (seqs < 1 || seqs > 65535 || heads < 1 || heads > 65535 || kv_heads < 1 || heads % kv_heads != 0 ||
      block_size < 1 || max_blocks < 1 || splits < 1 || splits > 65535 || keys_per_split < 1 || keys_per_split > 512 ||
      static_cast<std::int64_t>(splits) * keys_per_split <= std::int64_t{max_blocks - 1} * block_size ||
      (splits > 1 && workspace == nullptr) || !aligned16(q) || !aligned16(k_pool) || !aligned16(v_pool))
    return cudaErrorInvalidValue;
  // The widest group of query heads a block takes: 8, 4, 2 or 1 dividing heads / kv_heads
  // (otherwise a K/V row is read once for each such subgroup).
  const int group = heads / kv_heads;
  const int g = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
  const auto* qb = static_cast<const __nv_bfloat16*>(q);
  const auto* kb = static_cast<const __nv_bfloat16*>(k_pool);
  const auto* vb = static_cast<const __nv_bfloat16*>(v_pool);
  auto* ob = static_cast<__nv_bfloat16*>(o);
  auto* part = static_cast<float*>(workspace);
  if (head_dim == 128)
    return launch_decode_group<128>(g, qb, kb, vb, ob, part, block_table, context_lens, seqs, max_blocks, block_size,
                                    heads, kv_heads, splits, keys_per_split, s);
  if (head_dim == 64)
    return launch_decode_group<64>(g, qb, kb, vb, ob, part, block_table, context_lens, seqs, max_blocks, block_size,
                                   heads, kv_heads, splits, keys_per_split, s);
  return cudaErrorInvalidValue;
}

cudaError_t attention_decode_paged_simple(const void* q, const void* k_pool, const void* v_pool, void* o,
                                          const std::int32_t* block_table, const std::int32_t* context_lens, int seqs,
                                          int max_blocks, int block_size, int heads, int kv_heads, int head_dim,
                                          cudaStream_t s) {
  if (seqs < 1 || heads < 1 || kv_heads < 1 || heads % kv_heads != 0 || block_size < 1 || max_blocks < 1 ||
      seqs > 65535)
    return cudaErrorInvalidValue;
  const dim3 grid((heads + kWarps - 1) / kWarps, seqs);
  const auto* qb = static_cast<const __nv_bfloat16*>(q);
  const auto* kb = static_cast<const __nv_bfloat16*>(k_pool);
  const auto* vb = static_cast<const __nv_bfloat16*>(v_pool);
  auto* ob = static_cast<__nv_bfloat16*>(o);
  if (head_dim == 128) {
    decode_simple_kernel<128><<<grid, kWarps * kWarp, 0, s>>>(qb, kb, vb, ob, block_table, context_lens, max_blocks,
                                                              block_size, heads, kv_heads);
  } else if (head_dim == 64) {
    decode_simple_kernel<64><<<grid, kWarps * kWarp, 0, s>>>(qb, kb, vb, ob, block_table, context_lens, max_blocks,
                                                             block_size, heads, kv_heads);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t rmsnorm(const void* x, const void* w, void* y, std::int64_t rows, int cols, float eps, cudaStream_t s) {
  if (rows < 1 || cols < 1) return cudaErrorInvalidValue;
  const int grid = static_cast<int>(rows < 65535 * 16 ? rows : 65535 * 16);
  rmsnorm_kernel<<<grid, kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(w),
                                           static_cast<__nv_bfloat16*>(y), rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t adamw(float* p, const float* g, float* m, float* v, std::int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int step, cudaStream_t s) {
  if (n < 1 || step < 1) return cudaErrorInvalidValue;
  const float c1 = 1 - std::pow(beta1, static_cast<float>(step));
  const float c2 = 1 - std::pow(beta2, static_cast<float>(step));
  adamw_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, c1, c2);
  return cudaGetLastError();
}

cudaError_t axpy_bf16(float a, const void* x, void* y, std::int64_t n, cudaStream_t s) {
  if (n < 1) return cudaErrorInvalidValue;
  axpy_kernel<<<blocks_for(n, kThreads), kThreads, 0, s>>>(a, static_cast<const __nv_bfloat16*>(x),
                                                           static_cast<__nv_bfloat16*>(y), n);
  return cudaGetLastError();
}

}  // namespace ctwin::realrun::cuda
