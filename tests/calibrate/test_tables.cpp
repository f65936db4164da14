// Measured tables: log-log interpolation worked by hand, exact-shape kernel hits, the profile's
// /tables round trip and its errors.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>

#include "sim/error.hpp"
#include "workloads/measured_tables.hpp"
#include "workloads/profile.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

TEST_CASE("collective tables interpolate log-log inside the measured sizes, nothing outside") {
  MeasuredCollective c;
  c.op = CollectiveOp::all_reduce;
  c.ranks = 2;
  // t = 2e-6 s at 1 KiB, 8e-6 at 4 KiB, 1e-3 at 1 MiB.
  c.points = {{1024, 2e-6}, {4096, 8e-6}, {1 << 20, 1e-3}};
  const std::vector<MeasuredCollective> t{c};
  // 2 KiB: halfway in ln(bytes) between 1 and 4 KiB, so ln t halfway: sqrt(2e-6 * 8e-6) = 4e-6.
  CHECK(*measured_collective_s(t, CollectiveOp::all_reduce, 2, false, 2048) == rel_approx(4e-6, 1e-12));
  // 64 KiB: ln(64K/4K) / ln(1M/4K) = 4/8 = 0.5: sqrt(8e-6 * 1e-3) = 8.944e-5.
  CHECK(*measured_collective_s(t, CollectiveOp::all_reduce, 2, false, 65536) ==
        rel_approx(std::sqrt(8e-6 * 1e-3), 1e-12));
  CHECK(*measured_collective_s(t, CollectiveOp::all_reduce, 2, false, 4096) == 8e-6);  // a measured size
  CHECK(*measured_collective_s(t, CollectiveOp::all_reduce, 2, false, 1024) == 2e-6);  // the first
  CHECK_FALSE(measured_collective_s(t, CollectiveOp::all_reduce, 2, false, 1000));     // below the range
  CHECK_FALSE(measured_collective_s(t, CollectiveOp::all_reduce, 2, false, 2e6));      // above
  CHECK_FALSE(measured_collective_s(t, CollectiveOp::all_reduce, 4, false, 2048));     // other group size
  CHECK_FALSE(measured_collective_s(t, CollectiveOp::all_reduce, 2, true, 2048));      // other scope
  CHECK_FALSE(measured_collective_s(t, CollectiveOp::all_gather, 2, false, 2048));     // other op
}

TEST_CASE("TableCostModel: a measured shape takes its median, any other shape the roofline") {
  GpuSpec gpu;
  gpu.name = "test-gpu";
  gpu.bf16_tflops = 100;
  gpu.hbm_gbyte_per_s = 1000;
  const ComputeModel cm = compute_model(Profile{}, gpu, Dtype::bf16);
  auto roofline = std::make_shared<RooflineCostModel>(cm);
  OpCost op;
  op.kind = OpKind::gemm;
  op.m = op.n = op.k = 1024;
  op.flops = 2.0 * 1024 * 1024 * 1024;
  op.bytes = 3.0 * 2 * 1024 * 1024;
  MeasuredKernel k{op, 123e-6};
  k.op.dtype = Dtype::bf16;  // tables always carry the dtype; op leaves it to the model's
  const TableCostModel table(roofline, {k}, Dtype::bf16);
  CHECK(table.op_seconds(op) == 123e-6);
  OpCost other = op;
  other.k = 2048;
  other.flops *= 2;
  // The roofline by hand: 2^32 FLOP / (1e14 * 0.75 * (1024/1088)^2 (2048/2112)) + 2 us.
  const double eff = 0.75 * std::pow(1024.0 / 1088.0, 2) * (2048.0 / 2112.0);
  CHECK(table.op_seconds(other) == rel_approx(2.0 * 1024 * 1024 * 2048 / (1e14 * eff) + 2e-6, 1e-9));
  OpCost fp32 = op;
  fp32.dtype = Dtype::fp32;  // another dtype: not the measured kernel
  CHECK(table.op_seconds(fp32) != 123e-6);
  // A measured attention kernel prices the op whichever implementation the scenario names (the
  // measurement is the kernel that ran); without a measurement each keeps its own rate.
  OpCost attn{OpKind::attention, 1e12, 1e6};
  attn.query_tokens = 4096;
  attn.attended_pairs = 4096.0 * 2048;
  attn.kv_tokens = 4096;
  MeasuredKernel ka{attn, 7e-3};
  ka.op.dtype = Dtype::bf16;
  const TableCostModel with_attn(roofline, {ka}, Dtype::bf16);
  OpCost tri = attn;
  tri.attention_impl = AttentionImpl::triton;
  CHECK(with_attn.op_seconds(attn) == 7e-3);
  CHECK(with_attn.op_seconds(tri) == 7e-3);
  OpCost tri_other = tri;
  tri_other.flops *= 2;
  CHECK(with_attn.op_seconds(tri_other) == roofline->op_seconds(tri_other));
}

TEST_CASE("a profile's /tables survive a round trip; a bad point is an error naming its path") {
  Profile p;
  p.name = std::string(1, 't');  // not a literal: GCC 12 -O3 warns falsely on one (-Wrestrict, PR 105329)
  MeasuredCollective c;
  c.op = CollectiveOp::all_gather;
  c.ranks = 8;
  c.inter_node = true;
  c.points = {{1e6, 1e-4}, {1e7, 5e-4}};
  p.tables.collectives.push_back(c);
  MeasuredKernel k;
  k.op.kind = OpKind::norm;
  k.op.dtype = Dtype::fp32;
  k.op.bytes = 4e6;
  k.seconds = 7e-6;
  p.tables.kernels.push_back(k);
  const Profile q = parse_profile(profile_to_json(p), "t.json");
  REQUIRE(q.tables.collectives.size() == 1);
  CHECK(q.tables.collectives[0].op == CollectiveOp::all_gather);
  CHECK(q.tables.collectives[0].ranks == 8);
  CHECK(q.tables.collectives[0].inter_node);
  CHECK(q.tables.collectives[0].points == c.points);
  REQUIRE(q.tables.kernels.size() == 1);
  CHECK(q.tables.kernels[0].seconds == 7e-6);
  CHECK(kernel_shape_key(q.tables.kernels[0].op, Dtype::bf16) == kernel_shape_key(k.op, Dtype::bf16));
  // The shipped profiles print no tables.
  CHECK(profile_to_json(builtin_profile("H100")).find("tables") == std::string::npos);

  const std::string bad =
      R"({"tables": {"collectives": [{"op": "all_reduce", "ranks": 2, "scope": "intra",
          "points": [[1024, 1e-5], [512, 2e-5]]}]}})";
  try {
    parse_profile(bad, "bad.json");
    FAIL("accepted sizes out of order");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("/tables/collectives/0/points/1") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_profile(R"({"tables": {"kernels": [{"kind": "gemm", "dtype": "bf16"}]}})", "b.json"),
                  InputError);  // no seconds
}
