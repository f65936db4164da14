// The nccl-tests text reader on a small literal table and the Kineto reader on a small
// hand-written trace; every expected value is read off the literal input.
#include <doctest/doctest.h>

#include <string>

#include "calibrate/readers.hpp"
#include "sim/error.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using namespace ctwin::calibrate;
using ctwin::test::rel_approx;

namespace {

// The layout of nccl-tests' output (header, rank lines, the two-placement table); numbers made up.
const char* kAllGather =
    R"(# nThread 1 nGpus 1 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  11 on     nodeA device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12 on     nodeA device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  13 on     nodeB device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  14 on     nodeB device  1 [0x2a] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024            64     float    none      -1    20.00    0.05    0.04      0    21.00    0.05    0.04      0
        4096           256     float    none      -1    25.50    0.16    0.12      0    24.50    0.17    0.13    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.08
#
# Collective test concluded: all_gather_perf
)";

}  // namespace

TEST_CASE("nccl-tests text: every row twice (out-of-place, in-place), ranks and nodes from the rank lines") {
  const Measurements m = parse_nccl_tests(kAllGather, "run.log");
  CHECK(m.host.ranks == 4);
  CHECK(m.host.nodes == 2);
  CHECK(m.repeats == 20);
  REQUIRE(m.collectives.size() == 4);
  CHECK(m.collectives[0].op == CollectiveOp::all_gather);
  CHECK(m.collectives[0].ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(m.collectives[0].bytes == 1024);
  CHECK(m.collectives[0].stats.median_s == rel_approx(20e-6, 1e-12));
  CHECK(m.collectives[1].stats.median_s == rel_approx(21e-6, 1e-12));
  CHECK(m.collectives[2].bytes == 4096);
  CHECK(m.collectives[2].stats.median_s == rel_approx(25.5e-6, 1e-12));
  CHECK(m.collectives[3].stats.median_s == rel_approx(24.5e-6, 1e-12));
  // busbw = bytes / t * (n - 1) / n for all_gather: 4096 / 25.5e-6 * 3/4 = 0.1205 GB/s.
  CHECK(m.collectives[2].busbw_gbyte_per_s == rel_approx(4096 / 25.5e-6 * 0.75 / 1e9, 1e-9));
}

TEST_CASE("nccl-tests text: the collective from the file name; no table or no collective is an error") {
  const std::string body =
      "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
      "   8 2 float sum -1 10.0 0.00 0.00 0 11.0 0.00 0.00 0\n";
  const Measurements m = parse_nccl_tests(body, "logs/all_reduce.txt");
  REQUIRE(m.collectives.size() == 2);
  CHECK(m.collectives[0].op == CollectiveOp::all_reduce);
  CHECK(m.host.ranks == 1);
  CHECK_THROWS_AS(parse_nccl_tests(body, "logs/run.txt"), InputError);
  CHECK_THROWS_AS(parse_nccl_tests("# all_reduce_perf\n# nothing measured\n", "x.txt"), InputError);
}

TEST_CASE("Kineto trace: GEMM shapes from the launching aten op, kinds by kernel name, NCCL sizes from args") {
  const std::string trace = R"({
  "distributedInfo": {"rank": 1, "world_size": 4},
  "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 30,
     "args": {"External id": 7, "Input Dims": [[128, 256], [256, 512]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "ts": 5, "dur": 10, "args": {"External id": 7}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "ts": 50, "dur": 14, "args": {"External id": 7}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16_bf16f32", "ts": 90, "dur": 12, "args": {"External id": 7}},
    {"ph": "X", "cat": "kernel", "name": "flash_fwd_kernel", "ts": 120, "dur": 40, "args": {}},
    {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4>", "ts": 170, "dur": 3},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 200, "dur": 25,
     "args": {"In msg nelems": 1024, "Out msg nelems": 1024, "dtype": "Float", "Group size": 4}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "ts": 300, "dur": 9, "args": {}}
  ]})";
  const Measurements m = parse_kineto_trace(trace, "trace.json");
  CHECK(m.host.ranks == 4);
  REQUIRE(m.ops.size() == 3);
  const OpMeasurement* g = nullptr;
  int attention = 0, elementwise = 0;
  for (const auto& o : m.ops) {
    if (o.op.kind == OpKind::gemm) g = &o;
    attention += o.op.kind == OpKind::attention;
    elementwise += o.op.kind == OpKind::elementwise;
  }
  CHECK(attention == 1);
  CHECK(elementwise == 1);
  REQUIRE(g != nullptr);
  CHECK(g->rank == 1);
  CHECK(g->op.m == 128);
  CHECK(g->op.k == 256);
  CHECK(g->op.n == 512);
  CHECK(g->op.flops == 2.0 * 128 * 256 * 512);
  CHECK(g->op.bytes == 2.0 * (128 * 256 + 256 * 512 + 128 * 512));
  CHECK(g->op.dtype == Dtype::bf16);
  CHECK(g->stats.repeats == 3);
  CHECK(g->stats.median_s == rel_approx(12e-6, 1e-12));  // of 10, 14, 12 us
  // The all-gather kernel has no size: left out.
  REQUIRE(m.collectives.size() == 1);
  CHECK(m.collectives[0].op == CollectiveOp::all_reduce);
  CHECK(m.collectives[0].bytes == 4096);  // 1024 floats
  CHECK(m.collectives[0].ranks.size() == 4);
  CHECK(m.collectives[0].stats.median_s == rel_approx(25e-6, 1e-12));
  CHECK_THROWS_AS(parse_kineto_trace(R"({"events": []})", "t.json"), InputError);
  CHECK_THROWS_AS(
      parse_kineto_trace(R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": 3, "dur": 1}]})", "t.json"),
      InputError);
}
