#include "realrun/cpu_kernels.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <Eigen/Dense>

namespace ctwin::realrun {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMatrix = Eigen::Map<RowMatrix>;

std::size_t at_least_one(double v) { return static_cast<std::size_t>(std::max(1.0, std::round(v))); }

// Grows `v` to `n` floats (filled with a small constant: no denormals, no NaN in softmax).
float* grow(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.assign(n, 0.01f);
  return v.data();
}

constexpr std::size_t kTile = 64;  // attention query rows per block (flash attention's tiling)

void check_size(double floats, double max_bytes, const OpCost& op) {
  if (floats * sizeof(float) > max_bytes) {
    throw std::invalid_argument(std::string("realrun cpu: a ") + to_string(op.kind) + " of " +
                                std::to_string(floats * sizeof(float) / 1e9) + " GB of buffers exceeds " +
                                std::to_string(max_bytes / 1e9) + " GB; use a smaller scenario on the CPU backend");
  }
}

// Scores a tile of queries against keys [k0, k0 + keys), softmax per row (masking key j > q0 + i
// when causal, positions relative to the sequence start), and writes the weighted sum of values.
void attention_tile(const MapMatrix& q, const MapMatrix& k, const MapMatrix& v, MapMatrix& o, std::size_t q0,
                    std::size_t rows, std::size_t k0, std::size_t keys, bool causal, std::size_t seq_q0,
                    RowMatrix& scores) {
  const auto r = static_cast<Eigen::Index>(rows), kk = static_cast<Eigen::Index>(keys);
  const float scale = 1.0f / std::sqrt(static_cast<float>(q.cols()));
  scores.resize(r, kk);
  scores.noalias() =
      (q.middleRows(static_cast<Eigen::Index>(q0), r) * k.middleRows(static_cast<Eigen::Index>(k0), kk).transpose()) *
      scale;
  for (Eigen::Index i = 0; i < r; ++i) {
    const Eigen::Index visible = causal ? std::min<Eigen::Index>(kk, static_cast<Eigen::Index>(seq_q0) + i + 1) : kk;
    auto row = scores.row(i);
    const float mx = row.head(visible).maxCoeff();
    float sum = 0;
    for (Eigen::Index j = 0; j < visible; ++j) sum += row(j) = std::exp(row(j) - mx);
    row.head(visible) /= sum;
    if (visible < kk) row.tail(kk - visible).setZero();
  }
  o.middleRows(static_cast<Eigen::Index>(q0), r).noalias() = scores * v.middleRows(static_cast<Eigen::Index>(k0), kk);
}

}  // namespace

CpuKernelPlan plan_cpu_kernel(const OpCost& op) {
  CpuKernelPlan p;
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::grouped_gemm: {
      const double groups = op.kind == OpKind::grouped_gemm ? std::max(1.0, op.groups) : 1.0;
      if (op.m <= 0 || op.n <= 0 || op.k <= 0) {
        throw std::invalid_argument(std::string("realrun cpu: a ") + to_string(op.kind) + " without its m, n, k");
      }
      p.m = at_least_one(op.m / groups);
      p.n = at_least_one(op.n);
      p.k = at_least_one(op.k);
      p.count = at_least_one(op.flops / (2 * op.m * op.n * op.k)) * static_cast<std::size_t>(groups);
      return p;
    }
    case OpKind::attention: {
      if (op.query_tokens <= 0 || op.attended_pairs <= 0) {
        throw std::invalid_argument("realrun cpu: an attention op without its geometry (query tokens, pairs)");
      }
      p.queries = at_least_one(op.query_tokens);
      p.keys = at_least_one(std::max(op.kv_tokens, op.query_tokens));
      p.width = at_least_one(op.flops / (4 * op.attended_pairs));
      const double per_query = op.attended_pairs / op.query_tokens;
      // Self-attention over the same tokens (training, prefill without a cache) is causal: a
      // sequence of s tokens scores s(s+1)/2 ~ s^2/2 pairs, s/2 per query.
      p.causal = op.kv_tokens <= op.query_tokens;
      if (p.causal) {
        p.seq = std::min(p.queries, at_least_one(2 * per_query));
      } else {
        p.window = std::min(p.keys, at_least_one(per_query));
      }
      return p;
    }
    default: {
      p.elements = at_least_one(op.bytes / 12);
      p.passes = at_least_one(op.flops / (2 * static_cast<double>(p.elements)));
      return p;
    }
  }
}

void run_cpu_kernel(const OpCost& op, CpuWorkspace& ws, double max_bytes) {
  const CpuKernelPlan p = plan_cpu_kernel(op);
  switch (op.kind) {
    case OpKind::gemm:
    case OpKind::grouped_gemm: {
      check_size(static_cast<double>(p.m) * p.k + static_cast<double>(p.k) * p.n + static_cast<double>(p.m) * p.n,
                 max_bytes, op);
      const auto m = static_cast<Eigen::Index>(p.m), n = static_cast<Eigen::Index>(p.n),
                 k = static_cast<Eigen::Index>(p.k);
      MapMatrix a(grow(ws.a, p.m * p.k), m, k);
      MapMatrix b(grow(ws.b, p.k * p.n), k, n);
      MapMatrix c(grow(ws.c, p.m * p.n), m, n);
      for (std::size_t i = 0; i < p.count; ++i) c.noalias() = a * b;
      return;
    }
    case OpKind::attention: {
      check_size(static_cast<double>(p.width) * (2.0 * p.queries + 2.0 * p.keys), max_bytes, op);
      const auto w = static_cast<Eigen::Index>(p.width);
      MapMatrix q(grow(ws.a, p.queries * p.width), static_cast<Eigen::Index>(p.queries), w);
      MapMatrix k(grow(ws.b, p.keys * p.width), static_cast<Eigen::Index>(p.keys), w);
      MapMatrix v(grow(ws.c, p.keys * p.width), static_cast<Eigen::Index>(p.keys), w);
      MapMatrix o(grow(ws.d, p.queries * p.width), static_cast<Eigen::Index>(p.queries), w);
      RowMatrix scores;
      if (p.causal) {
        // Sequence by sequence; a tile of queries scores the keys of its sequence up to its last row.
        for (std::size_t s0 = 0; s0 < p.queries; s0 += p.seq) {
          const std::size_t len = std::min(p.seq, p.queries - s0);
          for (std::size_t t0 = 0; t0 < len; t0 += kTile) {
            const std::size_t rows = std::min(kTile, len - t0);
            attention_tile(q, k, v, o, s0 + t0, rows, s0, t0 + rows, true, t0, scores);
          }
        }
      } else {
        // Each tile of queries scores a window of keys, the windows walking through the cache.
        const std::size_t span = p.keys - p.window + 1;
        for (std::size_t t0 = 0, i = 0; t0 < p.queries; t0 += kTile, ++i) {
          const std::size_t rows = std::min(kTile, p.queries - t0);
          attention_tile(q, k, v, o, t0, rows, (i * p.window) % span, p.window, false, 0, scores);
        }
      }
      return;
    }
    default: {
      check_size(2.0 * static_cast<double>(p.elements), max_bytes, op);
      float* x = grow(ws.a, p.elements);
      float* y = grow(ws.b, p.elements);
      const float a = 0.5f;
      for (std::size_t i = 0; i < p.elements; ++i) {
        float acc = y[i];
        for (std::size_t r = 0; r < p.passes; ++r) acc = a * acc + x[i];
        y[i] = acc;
      }
      return;
    }
  }
}

}  // namespace ctwin::realrun
