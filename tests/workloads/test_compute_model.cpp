#include <doctest/doctest.h>

#include "workloads/compute_model.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

TEST_CASE("a large GEMM runs at peak times efficiency times the shape factors, plus launch") {
  ComputeModel cm;
  cm.peak_flops = 1000e12;
  cm.hbm_bytes_per_s = 3e12;
  cm.gemm_efficiency = 0.8;
  cm.launch_s = 2e-6;
  cm.gemm_knee = 64;
  const double m = 8192, n = 8192, k = 8192;
  OpCost op{OpKind::gemm, 2 * m * n * k, 2 * (m * k + k * n + m * n), m, n, k};
  const double f = 8192.0 / (8192 + 64);
  CHECK(op_seconds(cm, op) == rel_approx(2 * m * n * k / (1000e12 * 0.8 * f * f * f) + 2e-6, 1e-9));
}

TEST_CASE("a skinny GEMM is memory bound and costs bytes over achievable bandwidth") {
  ComputeModel cm;
  cm.peak_flops = 1000e12;
  cm.hbm_bytes_per_s = 3e12;
  cm.hbm_efficiency = 0.85;
  cm.launch_s = 0;
  // Decode-like: 1 token through an 8192 x 8192 weight: 134 MB of weights, 134 MFLOP.
  const double m = 1, n = 8192, k = 8192;
  OpCost op{OpKind::gemm, 2 * m * n * k, 2 * (m * k + k * n + m * n), m, n, k};
  CHECK(op_seconds(cm, op) == rel_approx(2 * (m * k + k * n + m * n) / (3e12 * 0.85), 1e-9));
}

TEST_CASE("an elementwise kernel costs its bytes at the achievable HBM bandwidth") {
  ComputeModel cm;
  cm.peak_flops = 1000e12;
  cm.hbm_bytes_per_s = 2e12;
  cm.hbm_efficiency = 0.5;
  cm.launch_s = 1e-6;
  OpCost op{OpKind::elementwise, 0, 1e9};
  CHECK(op_seconds(cm, op) == rel_approx(1e9 / 1e12 + 1e-6, 1e-9));
}

TEST_CASE("a grouped GEMM runs each group's share of rows at the grouped efficiency") {
  ComputeModel cm;
  cm.peak_flops = 1000e12;
  cm.hbm_bytes_per_s = 3e12;
  cm.gemm_efficiency = 0.8;
  cm.grouped_gemm_efficiency = 0.5;
  cm.launch_s = 0;
  cm.gemm_knee = 64;
  // 16 experts, 65,536 routed rows: each expert's GEMM is 4096 x 2048 x 1536.
  const double m = 65536, n = 1536, k = 2048;
  OpCost op{OpKind::grouped_gemm, 2 * m * n * k, 0, m, n, k, 16};
  const double f = (4096.0 / (4096 + 64)) * (1536.0 / (1536 + 64)) * (2048.0 / (2048 + 64));
  CHECK(op_seconds(cm, op) == rel_approx(2 * m * n * k / (1000e12 * 0.8 * 0.5 * f), 1e-9));
}
