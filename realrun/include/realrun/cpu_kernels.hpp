// The CPU backend's kernels: each OpCost the simulator prices, run for real on one core at its
// FLOPs and bytes. GEMMs through Eigen (FP32), attention as scores, softmax and a weighted sum
// over the op's geometry, and the memory-bound kinds as streaming passes over the op's bytes.
#pragma once

#include <cstddef>
#include <vector>

#include "workloads/compute_model.hpp"

namespace ctwin::realrun {

// A stream's buffers, grown to the largest op it has run and reused.
struct CpuWorkspace {
  std::vector<float> a, b, c, d;
};

// What a kernel runs for an OpCost, decided before it runs (tests check the shapes).
struct CpuKernelPlan {
  // GEMM: `count` GEMMs of (m x k) @ (k x n): the op's FLOPs over 2mnk, rounded (a backward
  // op carries dgrad and wgrad: 2); grouped_gemm runs groups x that of m / groups rows.
  std::size_t m = 0, n = 0, k = 0, count = 0;
  // Attention: `width` = FLOPs / (4 x attended pairs) (QK^T and PV, 2 FLOPs per multiply-add);
  // causal over sequences of `seq` tokens when queries and keys are the same tokens, else each
  // query scores `window` keys.
  std::size_t queries = 0, keys = 0, width = 0, seq = 0, window = 0;
  bool causal = false;
  // Streaming: y = a*x + y over `elements` floats (12 bytes each), `passes` multiply-adds per element.
  std::size_t elements = 0, passes = 0;
};

CpuKernelPlan plan_cpu_kernel(const OpCost& op);

// Runs `op` on this thread with `ws`'s buffers. Throws std::invalid_argument for an op whose
// buffers would exceed `max_bytes`.
void run_cpu_kernel(const OpCost& op, CpuWorkspace& ws, double max_bytes = 8e9);

}  // namespace ctwin::realrun
