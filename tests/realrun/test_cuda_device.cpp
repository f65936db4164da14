// The CUDA backend on a GPU: its kernels against host references computed here from the same
// inputs, the Device's events and GEMMs, and a communicator whose member never arrives. Built
// with CUDA only; without a GPU every case says "skipped: no GPU" and passes.
#ifdef CTWIN_HAVE_CUDA

#include <doctest/doctest.h>

#include <cmath>
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

}  // namespace

TEST_CASE("GPU: both prefill attention kernels equal causal softmax attention computed on the host") {
  if (no_gpu()) return;
  using Kernel = cudaError_t (*)(const void*, const void*, const void*, void*, int, int, int, int, int, cudaStream_t);
  struct Case {
    const char* kernel_name;
    Kernel kernel;
    int seqs, q_len, kv_len, heads, d;
  };
  // q_len not a multiple of any tile; the larger cases span several query blocks and key tiles.
  const Case cases[] = {{"tensor-core", cuda::attention_prefill, 2, 37, 50, 3, 64},
                        {"tensor-core", cuda::attention_prefill, 1, 150, 200, 2, 128},
                        {"tensor-core", cuda::attention_prefill, 2, 130, 130, 2, 64},
                        {"simple", cuda::attention_prefill_simple, 2, 37, 50, 3, 64},
                        {"simple", cuda::attention_prefill_simple, 1, 150, 200, 2, 128}};
  for (const Case& c : cases) {
    const int seqs = c.seqs, q_len = c.q_len, kv_len = c.kv_len, heads = c.heads, d = c.d;
    const std::string kernel = c.kernel_name;
    CAPTURE(kernel);
    CAPTURE(q_len);
    CAPTURE(d);
    const auto q = bf16_values(static_cast<std::size_t>(seqs * q_len * heads * d), 1);
    const auto k = bf16_values(static_cast<std::size_t>(seqs * kv_len * heads * d), 2);
    const auto v = bf16_values(static_cast<std::size_t>(seqs * kv_len * heads * d), 3);
    auto* dq = upload(q);
    auto* dk = upload(k);
    auto* dv = upload(v);
    // Poisoned output (0xffff is a BF16 NaN): an element the kernel never writes fails.
    auto* dout = upload(std::vector<std::uint16_t>(q.size(), 0xffffu));
    REQUIRE(c.kernel(dq, dk, dv, dout, seqs, q_len, kv_len, heads, d, nullptr) == cudaSuccess);
    const auto out = download(dout, q.size());
    double worst = 0;
    for (int s = 0; s < seqs; ++s) {
      for (int i = 0; i < q_len; ++i) {
        for (int h = 0; h < heads; ++h) {
          std::vector<std::size_t> keys;  // positions 0 .. kv_len - q_len + i
          for (int j = 0; j <= kv_len - q_len + i; ++j)
            keys.push_back(((static_cast<std::size_t>(s) * kv_len + j) * heads + h) * d);
          const std::size_t qo = ((static_cast<std::size_t>(s) * q_len + i) * heads + h) * d;
          const auto ref = reference_attention(q, qo, k, v, keys, d);
          for (int e = 0; e < d; ++e) {
            const double got = from_bf16(out[qo + e]);
            worst = std::max(worst, std::isfinite(got) ? std::fabs(ref[static_cast<std::size_t>(e)] - got) : 1e9);
          }
        }
      }
    }
    // BF16 output (8 bits of mantissa on values below 1) and, in the tensor-core kernel, BF16
    // probabilities into the P V product as FlashAttention rounds them.
    CHECK(worst == abs_approx(0, 1.0 / 128));
    cudaFree(dq);
    cudaFree(dk);
    cudaFree(dv);
    cudaFree(dout);
  }
}

TEST_CASE("GPU: paged decode attention reads each sequence's keys through the block table") {
  if (no_gpu()) return;
  const int heads = 2, d = 128, bs = 16;
  const std::vector<std::int32_t> lens = {1, 16, 45};
  const BlockTable t = build_block_table(lens, bs);
  const auto q = bf16_values(lens.size() * heads * d, 4);
  const std::size_t pool = static_cast<std::size_t>(t.total_blocks) * bs * heads * d;
  const auto k = bf16_values(pool, 5);
  const auto v = bf16_values(pool, 6);
  auto* dq = upload(q);
  auto* dk = upload(k);
  auto* dv = upload(v);
  auto* dt = upload(t.table);
  auto* dl = upload(t.context_lens);
  auto* dout = upload(std::vector<std::uint16_t>(q.size()));
  REQUIRE(cuda::attention_decode_paged(dq, dk, dv, dout, dt, dl, t.seqs, t.max_blocks, bs, heads, d, nullptr) ==
          cudaSuccess);
  const auto out = download(dout, q.size());
  double worst = 0;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    for (int h = 0; h < heads; ++h) {
      std::vector<std::size_t> keys;
      for (int j = 0; j < lens[s]; ++j) {
        const auto block = static_cast<std::size_t>(
            t.table[s * static_cast<std::size_t>(t.max_blocks) + static_cast<std::size_t>(j / bs)]);
        keys.push_back(((block * bs + static_cast<std::size_t>(j % bs)) * heads + h) * d);
      }
      const std::size_t qo = (s * heads + static_cast<std::size_t>(h)) * d;
      const auto ref = reference_attention(q, qo, k, v, keys, d);
      for (int e = 0; e < d; ++e)
        worst = std::max(worst, std::fabs(ref[static_cast<std::size_t>(e)] - from_bf16(out[qo + e])));
    }
  }
  CHECK(worst == abs_approx(0, 1.0 / 128));
  for (void* p : {static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv), static_cast<void*>(dt),
                  static_cast<void*>(dl), static_cast<void*>(dout)}) {
    cudaFree(p);
  }
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
