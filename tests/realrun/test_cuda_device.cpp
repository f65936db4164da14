// The CUDA backend on a GPU: its kernels against host references computed here from the same
// inputs, the Device's events and GEMMs, and a communicator whose member never arrives. Built
// with CUDA only; without a GPU every case says "skipped: no GPU" and passes.
#ifdef CTWIN_HAVE_CUDA

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "realrun/cuda_device.hpp"
#include "realrun/cuda_kernels.hpp"
#include "realrun/cuda_plan.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::realrun;
using ctwin::test::abs_approx;

namespace {

bool no_gpu() {
  if (cuda_device_count() > 0) return false;
  MESSAGE("skipped: no GPU");
  return true;
}

// BF16 is the top half of an FP32 (round to nearest even).
std::uint16_t to_bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// Deterministic inputs, already rounded to BF16 so host and device read the same numbers.
std::vector<std::uint16_t> bf16_values(std::size_t n, int seed) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = to_bf16(std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed)));
  return v;
}

template <class T>
T* upload(const std::vector<T>& host) {
  void* p = nullptr;
  REQUIRE(cudaMalloc(&p, host.size() * sizeof(T)) == cudaSuccess);
  REQUIRE(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> download(const T* dev, std::size_t n) {
  std::vector<T> host(n);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  REQUIRE(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

// Causal softmax(q k^T / sqrt(d)) v for one (sequence, query position, head), in double.
std::vector<double> reference_attention(const std::vector<std::uint16_t>& q, std::size_t q_off,
                                        const std::vector<std::uint16_t>& k, const std::vector<std::uint16_t>& v,
                                        const std::vector<std::size_t>& key_offsets, int d) {
  std::vector<double> scores;
  double mx = -1e300;
  for (std::size_t off : key_offsets) {
    double s = 0;
    for (int e = 0; e < d; ++e) s += from_bf16(q[q_off + e]) * from_bf16(k[off + e]);
    scores.push_back(s / std::sqrt(static_cast<double>(d)));
    mx = std::max(mx, scores.back());
  }
  std::vector<double> out(static_cast<std::size_t>(d), 0.0);
  double sum = 0;
  for (std::size_t j = 0; j < key_offsets.size(); ++j) {
    const double p = std::exp(scores[j] - mx);
    sum += p;
    for (int e = 0; e < d; ++e) out[static_cast<std::size_t>(e)] += p * from_bf16(v[key_offsets[j] + e]);
  }
  for (double& x : out) x /= sum;
  return out;
}

// Median of `repeats` CUDA-event timings of launch() on the default stream, after `warmups`
// untimed launches; before(i) runs ahead of repeat i, outside the timing (an L2 flush).
template <class Launch, class Before>
double median_event_ms(const Launch& launch, int warmups, int repeats, const Before& before) {
  cudaEvent_t a = nullptr, b = nullptr;
  REQUIRE(cudaEventCreate(&a) == cudaSuccess);
  REQUIRE(cudaEventCreate(&b) == cudaSuccess);
  for (int i = 0; i < warmups; ++i) REQUIRE(launch() == cudaSuccess);
  std::vector<float> ms;
  for (int i = 0; i < repeats; ++i) {
    before(i);
    REQUIRE(cudaEventRecord(a, nullptr) == cudaSuccess);
    REQUIRE(launch() == cudaSuccess);
    REQUIRE(cudaEventRecord(b, nullptr) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(b) == cudaSuccess);
    float x = 0;
    REQUIRE(cudaEventElapsedTime(&x, a, b) == cudaSuccess);
    ms.push_back(x);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return static_cast<double>(ms[ms.size() / 2]);
}

}  // namespace

TEST_CASE("GPU: the prefill attention kernels equal causal softmax attention computed on the host") {
  if (no_gpu()) return;
  enum class Kernel { mma, wmma, simple };
  struct Case {
    const char* kernel_name;
    Kernel kernel;
    int seqs, q_len, kv_len, heads, kv_heads, d, block_rows;
  };
  // q_len not a multiple of any tile; q_len < kv_len is a chunk of prefill after a context; the
  // larger cases span several query blocks and key tiles (the mma kernel's 64-key tiles: up to
  // 16, through both shared-memory buffers). The mma kernel at GQA groups of 4 (and 1 and 3);
  // the earlier kernels read K/V as wide as the queries.
  const Case cases[] = {
      {"mma", Kernel::mma, 2, 37, 50, 8, 2, 64, 64},        {"mma", Kernel::mma, 1, 150, 200, 8, 2, 128, 64},
      {"mma", Kernel::mma, 1, 150, 200, 8, 2, 128, 128},    {"mma", Kernel::mma, 2, 130, 130, 4, 1, 64, 128},
      {"mma", Kernel::mma, 1, 300, 300, 4, 1, 128, 64},     {"mma", Kernel::mma, 1, 200, 1000, 4, 1, 128, 128},
      {"mma", Kernel::mma, 1, 77, 1000, 3, 3, 64, 64},      {"mma", Kernel::mma, 2, 1, 77, 6, 2, 128, 64},
      {"mma", Kernel::mma, 1, 1, 1, 4, 1, 128, 64},         {"mma", Kernel::mma, 1, 1, 1, 4, 4, 64, 128},
      {"wmma", Kernel::wmma, 2, 37, 50, 3, 3, 64, 0},       {"wmma", Kernel::wmma, 1, 150, 200, 2, 2, 128, 0},
      {"wmma", Kernel::wmma, 2, 130, 130, 2, 2, 64, 0},     {"simple", Kernel::simple, 2, 37, 50, 3, 3, 64, 0},
      {"simple", Kernel::simple, 1, 150, 200, 2, 2, 128, 0}};
  for (const Case& c : cases) {
    const int seqs = c.seqs, q_len = c.q_len, kv_len = c.kv_len, heads = c.heads, kvh = c.kv_heads, d = c.d;
    const std::string kernel = c.kernel_name;
    CAPTURE(kernel);
    CAPTURE(q_len);
    CAPTURE(kv_len);
    CAPTURE(kvh);
    CAPTURE(d);
    CAPTURE(c.block_rows);
    const auto q = bf16_values(static_cast<std::size_t>(seqs * q_len * heads * d), 1);
    const auto k = bf16_values(static_cast<std::size_t>(seqs * kv_len * kvh * d), 2);
    const auto v = bf16_values(static_cast<std::size_t>(seqs * kv_len * kvh * d), 3);
    auto* dq = upload(q);
    auto* dk = upload(k);
    auto* dv = upload(v);
    // Poisoned output (0xffff is a BF16 NaN): an element the kernel never writes fails.
    auto* dout = upload(std::vector<std::uint16_t>(q.size(), 0xffffu));
    cudaError_t e = cudaSuccess;
    if (c.kernel == Kernel::mma) {
      e = cuda::attention_prefill(dq, dk, dv, dout, seqs, q_len, kv_len, heads, kvh, d, nullptr, c.block_rows);
    } else {
      const auto f = c.kernel == Kernel::wmma ? cuda::attention_prefill_wmma : cuda::attention_prefill_simple;
      e = f(dq, dk, dv, dout, seqs, q_len, kv_len, heads, d, nullptr);
    }
    REQUIRE(e == cudaSuccess);
    const auto out = download(dout, q.size());
    double worst = 0;
    for (int s = 0; s < seqs; ++s) {
      for (int i = 0; i < q_len; ++i) {
        for (int h = 0; h < heads; ++h) {
          const int kh = h / (heads / kvh);  // the K/V head of query head h
          std::vector<std::size_t> keys;     // positions 0 .. kv_len - q_len + i
          for (int j = 0; j <= kv_len - q_len + i; ++j)
            keys.push_back(((static_cast<std::size_t>(s) * kv_len + j) * kvh + kh) * d);
          const std::size_t qo = ((static_cast<std::size_t>(s) * q_len + i) * heads + h) * d;
          const auto ref = reference_attention(q, qo, k, v, keys, d);
          for (int e2 = 0; e2 < d; ++e2) {
            const double got = from_bf16(out[qo + e2]);
            worst = std::max(worst, std::isfinite(got) ? std::fabs(ref[static_cast<std::size_t>(e2)] - got) : 1e9);
          }
        }
      }
    }
    // BF16 output (8 bits of mantissa on values below 1) and, in the tensor-core kernels, BF16
    // probabilities into the P V product as FlashAttention rounds them.
    CHECK(worst == abs_approx(0, 1.0 / 128));
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
  }
}

TEST_CASE("prefill attention refuses K/V heads that do not divide the heads, other widths and block sizes") {
  // Checked before any launch, so this runs without a GPU too.
  void* p = reinterpret_cast<void*>(std::uintptr_t{256});
  CHECK(cuda::attention_prefill(p, p, p, p, 1, 64, 64, 8, 3, 128, nullptr) == cudaErrorInvalidValue);
  CHECK(cuda::attention_prefill(p, p, p, p, 1, 64, 64, 8, 0, 128, nullptr) == cudaErrorInvalidValue);
  CHECK(cuda::attention_prefill(p, p, p, p, 1, 64, 64, 8, 2, 96, nullptr) == cudaErrorInvalidValue);
  CHECK(cuda::attention_prefill(p, p, p, p, 1, 64, 64, 8, 2, 128, nullptr, 96) == cudaErrorInvalidValue);
  CHECK(cuda::attention_prefill(p, p, p, p, 1, 65, 64, 8, 2, 128, nullptr) == cudaErrorInvalidValue);  // Q > L
  void* odd = reinterpret_cast<void*>(std::uintptr_t{264});  // 8-byte aligned: cp.async moves 16
  CHECK(cuda::attention_prefill(p, odd, p, p, 1, 64, 64, 8, 2, 128, nullptr) == cudaErrorInvalidValue);
}

// Before and after at the serving twin's prefill shapes (Llama-3-8B: 32 query heads, 8 K/V heads
// of 128) and the training twin's (h200-fit: 2 x 32 heads x 4096 of 64; h200-heldout: 1 x 24
// heads x 8192 of 128, 8 K/V heads as scripts/gpu-torch-reference.py times SDPA): median CUDA-event
// time of a launch, warm (compute-bound; SDPA was timed so). The WMMA kernel reads K/V as wide as
// the queries. Run with --no-skip: -tc='GPU bench*' --no-skip.
TEST_CASE("GPU bench: prefill attention, the mma.sync kernel against the WMMA one" * doctest::skip()) {
  if (no_gpu()) return;
  struct Shape {
    int seqs, heads, kv_heads, len, d;
  };
  const Shape shapes[] = {
      {1, 32, 8, 1024, 128}, {1, 32, 8, 2048, 128}, {1, 32, 8, 4096, 128}, {2, 32, 8, 4096, 64}, {1, 24, 8, 8192, 128}};
  std::size_t most = 0;
  for (const Shape& sh : shapes)
    most = std::max(most, static_cast<std::size_t>(sh.seqs) * sh.len * sh.heads * sh.d * 2);
  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
  for (void** p : {&dq, &dk, &dv, &dout}) {
    REQUIRE(cudaMalloc(p, most) == cudaSuccess);
    REQUIRE(cuda::fill_random(*p, most, cuda::FillKind::bf16, 7, nullptr) == cudaSuccess);
  }
  const auto median_ms = [](const auto& launch, int repeats) {
    return median_event_ms(launch, 2, repeats, [](int) {});
  };
  std::printf(
      "prefill bench: batch x heads/kv x len, d | WMMA ms | mma 64 rows ms | mma 128 rows ms | TFLOP/s WMMA, mma 64, "
      "mma 128\n");
  for (const Shape& sh : shapes) {
    const auto mma = [&](int rows) {
      return [&, rows] {
        return cuda::attention_prefill(dq, dk, dv, dout, sh.seqs, sh.len, sh.len, sh.heads, sh.kv_heads, sh.d, nullptr,
                                       rows);
      };
    };
    const auto wmma = [&] {
      return cuda::attention_prefill_wmma(dq, dk, dv, dout, sh.seqs, sh.len, sh.len, sh.heads, sh.d, nullptr);
    };
    const double old_ms = median_ms(wmma, 3);
    const double ms64 = median_ms(mma(64), 11), ms128 = median_ms(mma(128), 11);
    // Causal: half of the L x L scores, 4 FLOPs a (score, dimension) (Q K^T and P V).
    const double flops = 4.0 * sh.seqs * sh.heads * (static_cast<double>(sh.len) * sh.len / 2) * sh.d;
    // No kernel exceeds the H200's 989 TFLOP/s of dense BF16.
    CHECK(std::min(ms64, ms128) > flops / 989e12 * 1e3);
    std::printf("prefill bench: %d x %d/%d x %5d, %3d | %8.3f | %7.4f | %7.4f | %5.1f %5.1f %5.1f\n", sh.seqs, sh.heads,
                sh.kv_heads, sh.len, sh.d, old_ms, ms64, ms128, flops / old_ms / 1e9, flops / ms64 / 1e9,
                flops / ms128 / 1e9);
  }
  for (void* p : {dq, dk, dv, dout}) cudaFree(p);
}

TEST_CASE("GPU: paged decode attention (split-K, GQA) equals softmax attention through the block table on the host") {
  if (no_gpu()) return;
  struct Case {
    int heads, kv_heads, d;
    std::vector<std::int32_t> lens;
  };
  // Groups of 4, 4 (batch 1), 1, 6 (three blocks of 2 query heads a K/V head) and 8; contexts of
  // one key, one block, and neither a multiple of a block (16) nor of a split; Llama-3-8B's
  // group at batch 1.
  const std::vector<Case> cases = {{8, 2, 128, {1, 16, 45, 300}}, {4, 1, 64, {1000}},     {2, 2, 128, {1, 16, 45}},
                                   {12, 2, 64, {77, 513}},        {16, 2, 128, {130, 7}}, {32, 8, 128, {2047}}};
  const int bs = 16;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    const int heads = c.heads, kv_heads = c.kv_heads, d = c.d;
    CAPTURE(ci);
    const BlockTable t = build_block_table(c.lens, bs);
    const int max_ctx = *std::max_element(c.lens.begin(), c.lens.end());
    const auto seqs = static_cast<std::size_t>(t.seqs);
    const auto q = bf16_values(seqs * static_cast<std::size_t>(heads * d), static_cast<int>(4 + ci));
    const std::size_t pool = static_cast<std::size_t>(t.total_blocks) * bs * static_cast<std::size_t>(kv_heads * d);
    const auto k = bf16_values(pool, static_cast<int>(5 + ci));
    const auto v = bf16_values(pool, static_cast<int>(6 + ci));
    auto* dq = upload(q);
    auto* dk = upload(k);
    auto* dv = upload(v);
    auto* dt = upload(t.table);
    auto* dl = upload(t.context_lens);
    // References: query head h reads K/V head h / (heads / kv_heads).
    std::vector<std::vector<double>> ref(seqs * static_cast<std::size_t>(heads));
    for (std::size_t s = 0; s < seqs; ++s) {
      for (int h = 0; h < heads; ++h) {
        std::vector<std::size_t> keys;
        for (int j = 0; j < c.lens[s]; ++j) {
          const auto block = static_cast<std::size_t>(
              t.table[s * static_cast<std::size_t>(t.max_blocks) + static_cast<std::size_t>(j / bs)]);
          keys.push_back(((block * bs + static_cast<std::size_t>(j % bs)) * static_cast<std::size_t>(kv_heads) +
                          static_cast<std::size_t>(h / (heads / kv_heads))) *
                         static_cast<std::size_t>(d));
        }
        ref[s * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)] = reference_attention(
            q, (s * static_cast<std::size_t>(heads) + static_cast<std::size_t>(h)) * d, k, v, keys, d);
      }
    }
    // The plan's split; one split (the output written directly); 16-key splits (many partials);
    // the first kernel.
    struct Variant {
      const char* name;
      int splits, keys_per_split;
    };
    const DecodeSplit planned = plan_decode_split(t.seqs, kv_heads, max_ctx);
    std::vector<Variant> variants = {{"planned", planned.splits, planned.keys_per_split},
                                     {"16-key splits", (max_ctx + 15) / 16, 16},
                                     {"simple", 0, 0}};
    if (max_ctx <= 512) variants.push_back({"one split", 1, (max_ctx + 15) / 16 * 16});
    for (const Variant& var : variants) {
      const std::string variant = var.name;
      CAPTURE(variant);
      // Poisoned output (0xffff is a BF16 NaN) and partials (0xff bytes: FP32 NaNs): an element
      // never written, or a partial read that no split wrote, fails.
      auto* dout = upload(std::vector<std::uint16_t>(q.size(), 0xffffu));
      const std::size_t ws = decode_workspace_bytes(t.seqs, heads, var.splits, d);
      void* dws = nullptr;
      if (ws > 0) {
        REQUIRE(cudaMalloc(&dws, ws) == cudaSuccess);
        REQUIRE(cudaMemset(dws, 0xff, ws) == cudaSuccess);
      }
      if (var.splits == 0) {
        REQUIRE(cuda::attention_decode_paged_simple(dq, dk, dv, dout, dt, dl, t.seqs, t.max_blocks, bs, heads, kv_heads,
                                                    d, nullptr) == cudaSuccess);
      } else {
        REQUIRE(cuda::attention_decode_paged(dq, dk, dv, dout, dt, dl, t.seqs, t.max_blocks, bs, heads, kv_heads, d,
                                             var.splits, var.keys_per_split, dws, nullptr) == cudaSuccess);
      }
      const auto out = download(dout, q.size());
      double worst = 0;
      for (std::size_t i = 0; i < ref.size(); ++i) {
        for (int e = 0; e < d; ++e) {
          const double got = from_bf16(out[i * static_cast<std::size_t>(d) + static_cast<std::size_t>(e)]);
          worst = std::max(worst, std::isfinite(got) ? std::fabs(ref[i][static_cast<std::size_t>(e)] - got) : 1e9);
        }
      }
      CHECK(worst == abs_approx(0, 1.0 / 128));
      cudaFree(dout);
      cudaFree(dws);
    }
    for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dt),
                    static_cast<void*>(dl)}) {
      cudaFree(p);
    }
  }
}

TEST_CASE("paged decode attention refuses a split that does not cover the context or lacks its workspace") {
  // Checked before any launch, so this runs without a GPU too.
  void* p = reinterpret_cast<void*>(std::uintptr_t{256});
  const auto* table = static_cast<const std::int32_t*>(p);
  // 4 blocks of 16 hold up to 64 keys: 3 splits of 16 cover at most 48.
  CHECK(cuda::attention_decode_paged(p, p, p, p, table, table, 1, 4, 16, 8, 2, 128, 3, 16, p, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(cuda::attention_decode_paged(p, p, p, p, table, table, 1, 4, 16, 8, 2, 128, 2, 32, nullptr, nullptr) ==
        cudaErrorInvalidValue);
  CHECK(cuda::attention_decode_paged(p, p, p, p, table, table, 1, 4, 16, 8, 3, 128, 1, 64, nullptr, nullptr) ==
        cudaErrorInvalidValue);  // 8 heads in groups of 3
  CHECK(cuda::attention_decode_paged(p, p, p, p, table, table, 1, 4, 16, 8, 2, 96, 1, 64, nullptr, nullptr) ==
        cudaErrorInvalidValue);  // head_dim 96
}

// Before and after, at Llama-3-8B's decode shapes (32 query heads, 8 K/V heads of 128, BF16,
// blocks of 16): median of CUDA-event times a launch, with L2 flushed before each (a layer's KV is
// not in L2 when its decode runs) and warm (the same buffers again, as PyTorch's reference
// timings in scripts/gpu-torch-reference.py). Run with --no-skip: -tc='GPU bench*' --no-skip.
TEST_CASE("GPU bench: paged decode attention at Llama-3-8B's shapes, the split-K kernel against the first" *
          doctest::skip()) {
  if (no_gpu()) return;
  const int heads = 32, kv_heads = 8, d = 128, bs = 16;
  const int max_seqs = 64, max_ctx = 8192;
  const std::size_t row = static_cast<std::size_t>(kv_heads * d) * 2;
  const std::size_t pool = static_cast<std::size_t>(max_seqs) * max_ctx * row;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr, *dws = nullptr, *flush = nullptr;
  const std::size_t flush_bytes = 256u << 20;
  // Besides the planned split, every split of 64 to 512 keys (the most partials: 128 splits).
  const std::size_t ws_max = decode_workspace_bytes(max_seqs, heads, max_ctx / 64, d);
  REQUIRE(cudaMalloc(&dq, static_cast<std::size_t>(max_seqs * heads * d) * 2) == cudaSuccess);
  REQUIRE(cudaMalloc(&dout, static_cast<std::size_t>(max_seqs * heads * d) * 2) == cudaSuccess);
  REQUIRE(cudaMalloc(&dk, pool) == cudaSuccess);
  REQUIRE(cudaMalloc(&dv, pool) == cudaSuccess);
  REQUIRE(cudaMalloc(&dws, ws_max) == cudaSuccess);
  REQUIRE(cudaMalloc(&flush, flush_bytes) == cudaSuccess);
  REQUIRE(cuda::fill_random(dq, static_cast<std::size_t>(max_seqs * heads * d) * 2, cuda::FillKind::bf16, 1, nullptr) ==
          cudaSuccess);
  REQUIRE(cuda::fill_random(dk, pool, cuda::FillKind::bf16, 2, nullptr) == cudaSuccess);
  REQUIRE(cuda::fill_random(dv, pool, cuda::FillKind::bf16, 3, nullptr) == cudaSuccess);
  std::printf(
      "decode bench: batch x context | KV MB | first kernel ms | split-K ms cold, warm | GB/s cold, warm | splits x "
      "keys | cold ms at 64, 128, 256, 512 keys a split\n");
  for (int seqs : {1, 8, 32, 64}) {
    for (int ctx : {1024, 2048, 4096, 8192}) {
      const BlockTable t = build_block_table(std::vector<std::int32_t>(static_cast<std::size_t>(seqs), ctx), bs);
      auto* dt = upload(t.table);
      auto* dl = upload(t.context_lens);
      const DecodeSplit sp = plan_decode_split(seqs, kv_heads, ctx);
      DecodeSplit run = sp;
      const auto split_k = [&] {
        return cuda::attention_decode_paged(dq, dk, dv, dout, dt, dl, seqs, t.max_blocks, bs, heads, kv_heads, d,
                                            run.splits, run.keys_per_split, dws, nullptr);
      };
      const auto simple = [&] {
        return cuda::attention_decode_paged_simple(dq, dk, dv, dout, dt, dl, seqs, t.max_blocks, bs, heads, kv_heads, d,
                                                   nullptr);
      };
      const auto median_ms = [&](const auto& launch, int repeats, bool cold) {
        return median_event_ms(launch, 3, repeats, [&](int i) {
          if (cold) REQUIRE(cudaMemsetAsync(flush, i & 0xff, flush_bytes, nullptr) == cudaSuccess);
        });
      };
      const double first = median_ms(simple, 5, true);
      const double cold = median_ms(split_k, 21, true), warm = median_ms(split_k, 21, false);
      const double kv_bytes = 2.0 * seqs * ctx * static_cast<double>(row);
      // No kernel reads the cache faster than 10 TB/s from HBM (the H200's is 4.8).
      CHECK(cold > kv_bytes / 10e12 * 1e3);
      double swept[4] = {};
      for (int i = 0; i < 4; ++i) {
        run.keys_per_split = 64 << i;
        run.splits = (ctx + run.keys_per_split - 1) / run.keys_per_split;
        swept[i] = median_ms(split_k, 11, true);
      }
      std::printf(
          "decode bench: %2d x %4d | %6.1f | %8.3f | %7.4f %7.4f | %5.0f %5.0f | %3d x %3d | %7.4f %7.4f %7.4f %7.4f\n",
          seqs, ctx, kv_bytes / 1e6, first, cold, warm, kv_bytes / cold / 1e6, kv_bytes / warm / 1e6, sp.splits,
          sp.keys_per_split, swept[0], swept[1], swept[2], swept[3]);
      cudaFree(dt);
      cudaFree(dl);
    }
  }
  for (void* p : {dq, dk, dv, dout, dws, flush}) cudaFree(p);
}

TEST_CASE("GPU: RMSNorm and AdamW match their formulas") {
  if (no_gpu()) return;
  const int rows = 3, cols = 1000;
  const auto x = bf16_values(static_cast<std::size_t>(rows * cols), 7);
  const auto w = bf16_values(static_cast<std::size_t>(cols), 8);
  auto* dx = upload(x);
  auto* dw = upload(w);
  auto* dy = upload(std::vector<std::uint16_t>(x.size()));
  REQUIRE(cuda::rmsnorm(dx, dw, dy, rows, cols, 1e-5f, nullptr) == cudaSuccess);
  const auto y = download(dy, x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int c = 0; c < cols; ++c) ss += std::pow(from_bf16(x[static_cast<std::size_t>(r * cols + c)]), 2);
    const double inv = 1 / std::sqrt(ss / cols + 1e-5);
    const std::size_t i = static_cast<std::size_t>(r * cols + 17);
    CHECK(from_bf16(y[i]) == abs_approx(from_bf16(x[i]) * inv * from_bf16(w[17]), 1.0 / 64));
  }
  // One AdamW step from zero moments: m = (1 - b1) g, v = (1 - b2) g^2, bias-corrected to g and
  // g^2, so p' = p - lr (g / (|g| + eps) + wd p) = p - lr (sign(g) + wd p).
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, -0.25f}, zero = {0.0f, 0.0f};
  float* dp = upload(p);
  float* dg = upload(g);
  float* dm = upload(zero);
  float* dvv = upload(zero);
  REQUIRE(cuda::adamw(dp, dg, dm, dvv, 2, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, nullptr) == cudaSuccess);
  const auto p1 = download(dp, 2);
  CHECK(p1[0] == abs_approx(1.0 - 0.01 * (1 + 0.1 * 1.0), 1e-6));
  CHECK(p1[1] == abs_approx(-2.0 - 0.01 * (-1 + 0.1 * -2.0), 1e-6));
  for (void* q : {static_cast<void*>(dx), static_cast<void*>(dw), static_cast<void*>(dy), static_cast<void*>(dp),
                  static_cast<void*>(dg), static_cast<void*>(dm), static_cast<void*>(dvv)}) {
    cudaFree(q);
  }
}

TEST_CASE("GPU: a device times BF16 and FP8 GEMMs with events, in order on its stream") {
  if (no_gpu()) return;
  BackendOptions opt;
  opt.ranks = 1;
  const auto devices = make_cuda_devices(opt);
  Device& d = *devices.front();
  CHECK(d.streams() >= 5);
  OpCost op{OpKind::gemm, 2.0 * 4096 * 4096 * 4096, 0};
  op.m = op.n = op.k = 4096;
  op.dtype = Dtype::bf16;
  d.launch(0, op);  // allocation and algorithm choice, untimed
  const EventHandle a = d.record(0);
  for (int i = 0; i < 10; ++i) d.launch(0, op);
  const EventHandle b = d.record(0);
  const double t = d.elapsed_s(a, b) / 10;
  // Ten 137-GFLOP GEMMs: at least the time at 5 PFLOP/s (above any GPU's dense BF16 peak), at
  // most a second each.
  CHECK(t > op.flops / 5e15);
  CHECK(t < 1.0);
  MESSAGE("BF16 4096^3 GEMM: " << t * 1e3 << " ms, " << op.flops / t / 1e12 << " TFLOP/s on " << d.name());
  const DiscoveredNode node = discover_node();
  if (gpu_has_fp8(node.gpus.front().sm)) {
    op.dtype = Dtype::fp8;
    d.launch(0, op);
    const EventHandle c = d.record(0);
    d.launch(0, op);
    const EventHandle e = d.record(0);
    MESSAGE("FP8 4096^3 GEMM: " << d.elapsed_s(c, e) * 1e3 << " ms");
  }
  d.synchronize();
}

TEST_CASE("GPU: a communicator whose other member never arrives fails after the timeout, naming rank and group") {
  if (no_gpu()) return;
  BackendOptions opt;
  opt.ranks = 1;
  opt.timeout_s = 2;
  const auto devices = make_cuda_devices(opt);
  CommSpec spec;
  spec.id = 7;
  spec.ranks = {0, 1};  // rank 1 does not exist in this process
  spec.label = "tp";
  std::string message;
  try {
    devices.front()->create_comm(spec, 2);
  } catch (const std::exception& e) {
    message = e.what();
  }
  CHECK(message.find("rank 0") != std::string::npos);
  CHECK(message.find("'tp'") != std::string::npos);
  CHECK(message.find("never joined") != std::string::npos);
}

#endif  // CTWIN_HAVE_CUDA
