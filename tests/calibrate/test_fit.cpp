// The fits recover coefficients chosen here from synthetic measurements generated with the
// library's own formulas (op_seconds, analytical_collective_time) at those coefficients, with
// deterministic multiplicative noise: the reference is the chosen coefficients.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "calibrate/fit.hpp"
#include "sim/random.hpp"
#include "topology/catalog_json.hpp"
#include "topology/network.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::calibrate;
using ctwin::test::abs_approx;
using ctwin::test::rel_approx;

namespace {

// A made-up GPU: 100 TFLOP/s BF16, 1000 GB/s HBM.
GpuSpec test_gpu() {
  GpuSpec g;
  g.name = "test-gpu";
  g.bf16_tflops = g.fp16_tflops = 100;
  g.fp8_tflops = 200;
  g.tf32_tflops = 50;
  g.hbm_gbyte_per_s = 1000;
  g.hbm_bytes = 80e9;
  return g;
}

// +-amplitude uniform noise, keyed by i.
double noise(std::uint64_t i, double amplitude) { return 1 + amplitude * (2 * uniform01(mix64(i + 77)) - 1); }

OpMeasurement measured(const OpCost& op, double t) {
  OpMeasurement m;
  m.op = op;
  m.stats = stats_of({t});
  return m;
}

OpCost gemm(double m, double n, double k, Dtype d = Dtype::bf16) {
  OpCost op;
  op.kind = OpKind::gemm;
  op.dtype = d;
  op.m = m, op.n = n, op.k = k;
  op.flops = 2 * m * n * k;
  op.bytes = 2 * (m * k + k * n + m * n);
  return op;
}

OpCost streaming(double bytes) {
  OpCost op;
  op.kind = OpKind::elementwise;
  op.dtype = Dtype::bf16;
  op.bytes = bytes;
  op.flops = bytes / 4;
  return op;
}

double value_of(const std::vector<FitResult>& fits, const std::string& fit, const std::string& key) {
  for (const FitResult& f : fits) {
    if (f.name != fit) continue;
    for (const auto& [k, v] : f.values) {
      if (k == key) return v;
    }
  }
  FAIL("no value " << key << " in fit " << fit);
  return 0;
}

}  // namespace

TEST_CASE("compute fits recover launch, HBM, GEMM efficiency and knee from noisy synthetic kernels") {
  const GpuSpec gpu = test_gpu();
  Profile truth;
  truth.compute.kernel_launch_us = 5;
  truth.compute.hbm_efficiency = 0.7;
  truth.compute.gemm_efficiency = 0.6;
  truth.compute.gemm_knee = 96;
  const ComputeModel cm = compute_model(truth, gpu, Dtype::bf16);
  std::vector<OpMeasurement> ops;
  std::uint64_t i = 0;
  for (double b = 1e3; b <= 1e9; b *= 4)
    ops.push_back(measured(streaming(b), op_seconds(cm, streaming(b)) * noise(i++, 0.02)));
  for (double m : {32.0, 128.0, 512.0, 4096.0}) {
    for (double n : {64.0, 1024.0, 8192.0}) {
      for (double k : {48.0, 2048.0})
        ops.push_back(measured(gemm(m, n, k), op_seconds(cm, gemm(m, n, k)) * noise(i++, 0.02)));
    }
  }
  Profile p;  // the defaults: launch 2 us, HBM 0.85, GEMM 0.75, knee 64
  const auto fits = fit_compute(ops, gpu, Dtype::bf16, p, "test");
  CHECK(value_of(fits, "memory-bound", "/compute/kernel_launch_us") == rel_approx(5, 0.05));
  CHECK(value_of(fits, "memory-bound", "/compute/hbm_efficiency") == rel_approx(0.7, 0.03));
  CHECK(value_of(fits, "gemm", "/compute/gemm_efficiency") == rel_approx(0.6, 0.03));
  CHECK(value_of(fits, "gemm", "/compute/gemm_knee") == rel_approx(96, 0.1));
  CHECK(p.compute.gemm_efficiency == rel_approx(0.6, 0.03));
  CHECK(p.sources.count("/compute/gemm_knee") == 1);
  // 2% noise: no residual near the 25% flag.
  for (const FitResult& f : fits) CHECK(f.flagged() == 0);
}

TEST_CASE("attention, grouped GEMM and FP8 fits recover their ratios") {
  const GpuSpec gpu = test_gpu();
  Profile truth;
  truth.compute.attention_ratio = 0.5;
  truth.compute.grouped_gemm_efficiency = 0.8;
  truth.compute.fp8_gemm_efficiency = 0.55;
  truth.compute.fp8_split_accumulator_efficiency = 0.7;
  const ComputeModel cm = compute_model(truth, gpu, Dtype::bf16);
  std::vector<OpMeasurement> ops;
  std::uint64_t i = 100;
  for (double s : {1024.0, 4096.0, 16384.0}) {
    OpCost a;
    a.kind = OpKind::attention;
    a.dtype = Dtype::bf16;
    a.flops = 4 * s * s * 4096;
    a.bytes = 4 * s * 4096 * 2;
    a.query_tokens = a.kv_tokens = s;
    a.attended_pairs = s * s / 2;
    ops.push_back(measured(a, op_seconds(cm, a) * noise(i++, 0.01)));
    OpCost g = gemm(s, 4096, 2048);
    g.kind = OpKind::grouped_gemm;
    g.groups = 4;
    ops.push_back(measured(g, op_seconds(cm, g) * noise(i++, 0.01)));
    const OpCost f = gemm(s, 8192, 4096, Dtype::fp8);
    ops.push_back(measured(f, op_seconds(cm, f) * noise(i++, 0.01)));
    OpCost split = f;
    split.split_accumulator = true;
    ops.push_back(measured(split, op_seconds(cm, split) * noise(i++, 0.01)));
  }
  Profile p;
  const auto fits = fit_compute(ops, gpu, Dtype::bf16, p, "test");
  CHECK(value_of(fits, "attention", "/compute/attention_ratio") == rel_approx(0.5, 0.02));
  CHECK(value_of(fits, "grouped_gemm", "/compute/grouped_gemm_efficiency") == rel_approx(0.8, 0.02));
  CHECK(value_of(fits, "fp8 gemm", "/compute/fp8_gemm_efficiency") == rel_approx(0.55, 0.02));
  CHECK(value_of(fits, "fp8 gemm split accumulation", "/compute/fp8_split_accumulator_efficiency") ==
        rel_approx(0.7, 0.02));
}

TEST_CASE("a measurement twice the model's time is flagged, the rest are not") {
  FitResult f;
  for (int i = 0; i < 9; ++i) f.points.push_back({"ok", 1.0, 1.0 + 0.01 * (i % 3)});
  f.points.push_back({"slow", 1.0, 0.5});  // predicted half the measured time: -50%
  flag_outliers(f);
  CHECK(f.flagged() == 1);
  CHECK(f.points.back().flagged);
  // 3x the median residual (1%) but below 5%: noise, not flagged.
  FitResult g;
  for (int i = 0; i < 9; ++i) g.points.push_back({"ok", 1.0, 1.01});
  g.points.push_back({"bit off", 1.0, 1.04});
  flag_outliers(g);
  CHECK(g.flagged() == 0);
}

TEST_CASE("alpha-beta per group: 10 us + bytes at 5 GB/s on a 4-rank all_reduce") {
  std::vector<CollectiveMeasurement> cs;
  for (double b = 1024; b <= 1 << 26; b *= 8) {
    CollectiveMeasurement c;
    c.op = CollectiveOp::all_reduce;
    c.ranks = {0, 1, 2, 3};
    c.bytes = b;
    c.stats = stats_of({10e-6 + b / 5e9});
    cs.push_back(c);
  }
  const auto fits = fit_alpha_beta_groups(cs, 8);
  REQUIRE(fits.size() == 1);
  CHECK(fits[0].name == "all_reduce 4 ranks intra");
  CHECK(value_of(fits, fits[0].name, "alpha_us") == rel_approx(10, 1e-6));
  CHECK(value_of(fits, fits[0].name, "algbw_gbyte_per_s") == rel_approx(5, 1e-6));
  // nccl-tests' all_reduce bus factor 2 (n - 1) / n = 1.5.
  CHECK(value_of(fits, fits[0].name, "busbw_gbyte_per_s") == rel_approx(7.5, 1e-6));
}

TEST_CASE("link fit recovers the PCIe efficiency and hop latency through the analytical model") {
  ClusterSpec spec;
  REQUIRE(preset_cluster("l40s-pcie", 1, builtin_gpus(), spec));
  Profile truth = builtin_profile(spec.gpu.name);
  truth.links.pcie_efficiency = 0.5;
  truth.links.pcie_latency_us = 3;
  ClusterSpec ts = spec;
  apply_profile(truth, ts);
  const Cluster cl = build_cluster(ts);
  std::vector<CollectiveMeasurement> cs;
  for (int n : {2, 8}) {
    for (double b = 1024; b <= 1 << 28; b *= 4) {
      CollectiveMeasurement c;
      c.op = CollectiveOp::all_reduce;
      CollectiveCall call{c.op, {}, b};
      for (int r = 0; r < n; ++r) {
        c.ranks.push_back(r);
        call.ranks.push_back(GpuId(static_cast<std::uint32_t>(r)));
      }
      c.bytes = b;
      c.stats = stats_of({analytical_collective_time(cl, call, {}).seconds()});
      cs.push_back(c);
    }
  }
  Profile p = builtin_profile(spec.gpu.name);
  const auto fits = fit_links(cs, spec, p, "test");
  REQUIRE(fits.size() == 1);
  CHECK(p.links.pcie_efficiency == rel_approx(0.5, 0.01));
  CHECK(p.links.pcie_latency_us == rel_approx(3, 0.05));
  CHECK(fits[0].rms_rel_error() == abs_approx(0, 0.01));  // relative error, a fraction
}

TEST_CASE("Levenberg-Marquardt: y = a exp(b x) through three exact points, from a far start") {
  // y(0) = 2, y(1) = 2e^0.5, y(2) = 2e: a = 2, b = 0.5.
  const std::vector<double> xs{0, 1, 2}, ys{2, 2 * std::exp(0.5), 2 * std::exp(1.0)};
  auto r = [&](const Vec& v) {
    Vec out;
    for (std::size_t i = 0; i < xs.size(); ++i) out.push_back(v[0] * std::exp(v[1] * xs[i]) - ys[i]);
    return out;
  };
  const Vec x = levenberg_marquardt(r, {10, -1}, {0, -5}, {100, 5});
  CHECK(x[0] == rel_approx(2, 1e-6));
  CHECK(x[1] == rel_approx(0.5, 1e-6));
}

TEST_CASE("overlap fit: two kernels 1.2x and 1.5x slower beside collectives give sqrt(1.2 x 1.5) - 1") {
  // The fits minimise the squared log ratio, so a constant factor fits at the geometric mean of
  // the measured ratios: log(1 + s) = (log 1.2 + log 1.5) / 2.
  std::vector<OverlapMeasurement> v(2);
  for (auto& o : v) {
    o.op = OpCost{OpKind::gemm, 2e12, 1e9};
    o.op.m = o.op.n = o.op.k = 1e4;
    o.group = "dp";
    o.bytes = 1 << 26;
    o.calls = 3;
  }
  v[0].alone = stats_of({1e-3});
  v[0].overlapped = stats_of({1.2e-3});
  v[1].alone = stats_of({2e-3});
  v[1].overlapped = stats_of({3e-3});
  Profile p;
  const FitResult f = fit_overlap(v, p, "test");
  REQUIRE(f.fitted());
  CHECK(p.compute.overlap_slowdown == rel_approx(std::sqrt(1.2 * 1.5) - 1, 1e-6));
  CHECK(f.values.front().first == "/compute/overlap_slowdown");
  REQUIRE(f.points.size() == 2);
  CHECK(f.points[1].predicted_s == rel_approx(2e-3 * std::sqrt(1.8), 1e-6));
  CHECK(p.sources.at("/compute/overlap_slowdown").find("overlap fit over 2") != std::string::npos);
  // No measurements: no fit, the profile's value kept.
  Profile q;
  q.compute.overlap_slowdown = 0.125;
  CHECK_FALSE(fit_overlap({}, q, "test").fitted());
  CHECK(q.compute.overlap_slowdown == 0.125);
}
