#include <doctest/doctest.h>

#include "topology/cluster.hpp"
#include "topology/collective.hpp"

#include "tolerance.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

// A DGX H100 as the preset builds it: 450 GB/s NVLink at NCCL's 20.6/25, 0.6 us NVLink hop,
// 50 GB/s NICs at 0.96, 2.7 us network hop, 1 us net overhead.
ClusterSpec dgx_h100(int nodes) {
  ClusterSpec s;
  s.gpu.pcie_gbyte_per_s = 64;
  s.gpu.nvlink_gen = 4;
  s.nodes = nodes;
  s.intra_gbyte_per_s = 450;
  s.intra_latency_us = 0.6;
  s.intra_efficiency = 20.6 / 25;
  s.nic_gbyte_per_s = 50;
  s.inter_latency_us = 2.7;
  return s;
}

CollectiveCall all_reduce(const ClusterSpec& s, double bytes) {
  CollectiveCall c;
  c.op = CollectiveOp::all_reduce;
  for (int i = 0; i < s.nodes * s.gpus_per_node; ++i) c.ranks.emplace_back(i);
  c.bytes = bytes;
  return c;
}

CollectiveOptions forced(CollectiveAlgo a, Protocol p) {
  CollectiveOptions o;
  o.algo = a;
  o.protocol = p;
  return o;
}

}  // namespace

TEST_CASE("the cluster's NcclModel sets ring latencies: replaced base and NVLink hop give the hand-worked time") {
  ClusterSpec s = dgx_h100(1);
  s.nccl.base_ring_us[2] = 20;
  s.nccl.ring_nvlink_extra_us[2] = 5;
  const double S = 1e9;
  const CollectiveCall call = all_reduce(s, S);
  const CollectivePlan p = plan_collective(build_cluster(s), call, forced(CollectiveAlgo::ring, Protocol::simple));
  // 2(n-1) = 14 ring steps, each 6 slices (1e9 / 8 / 24 channels = 5.2 MB a step, 3 chunks of
  // 2 MiB, 2 slices each) of an NVLink hop of 0.6 + 5 us, after the 20 us base.
  CHECK(p.latency_s == rel_approx((20 + 6 * 14 * (0.6 + 5)) * 1e-6, 1e-12));
  // Bandwidth is untouched: 2(7/8) S over 450 x 20.6/25 GB/s.
  CHECK(p.bandwidth_s == rel_approx(2 * 7.0 / 8 * S / (450 * 20.6 / 25 * 1e9), 1e-12));
  const CollectiveEstimate e =
      estimate_collective(build_cluster(s), call, forced(CollectiveAlgo::ring, Protocol::simple));
  CHECK(e.time.seconds() == rel_approx(p.latency_s + p.bandwidth_s, 1e-9));
}

TEST_CASE("the cluster's NcclModel sets the multi-node net overhead factor and ring LL efficiency") {
  ClusterSpec s = dgx_h100(2);
  s.nccl.simple_net_overhead_factor = 5;
  const CollectiveCall call = all_reduce(s, 1e8);
  const CollectivePlan p = plan_collective(build_cluster(s), call, forced(CollectiveAlgo::ring, Protocol::simple));
  // 30 steps, 2 of them crossing nodes (2.7 + 11.3 us); the other 28 cost max(0.6 + 2.8, 5 x 1 us).
  // A step moves 2 x 15/16 x 1e8 / 30 / 24 channels = 260 kB, one chunk of 2 slices: the 28
  // intra-node steps wait one more NVLink hop (0.6 + 2.8 us) each.
  CHECK(p.latency_s == rel_approx((8.4 + 28 * 5.0 + 2 * (2.7 + 11.3) + 28 * 3.4) * 1e-6, 1e-12));

  s.nccl.ring_ll_efficiency = 0.1;
  const CollectivePlan ll = plan_collective(build_cluster(s), call, forced(CollectiveAlgo::ring, Protocol::ll));
  CHECK(ll.efficiency == rel_approx(0.1, 1e-15));
  // Ring bandwidth: 8 channels x min(50 x 0.96, 450 x 20.6/25 / 8) = 8 x 46.35 GB/s, 0.1 of it
  // (37.1 GB/s) under LL's ceiling across two Intel-hosted nodes, 39 GB/s.
  CHECK(ll.bandwidth_s == rel_approx(2 * 15.0 / 16 * 1e8 / (8 * (450 * 20.6 / 25 / 8) * 0.1 * 1e9), 1e-12));
  // At 0.3 (111 GB/s) the ceiling binds, and it is the cluster's table's.
  s.nccl.ring_ll_efficiency = 0.3;
  s.nccl.ll_max_net_gbps[0][0] = 50;
  const CollectivePlan capped = plan_collective(build_cluster(s), call, forced(CollectiveAlgo::ring, Protocol::ll));
  CHECK(capped.bandwidth_s == rel_approx(2 * 15.0 / 16 * 1e8 / 50e9, 1e-12));
}

TEST_CASE("the cluster's NcclModel sets tree latencies and the tree derating") {
  ClusterSpec s = dgx_h100(2);
  s.nccl.base_tree_us[2] = 10;
  s.nccl.tree_nvlink_extra_us[2] = 1;
  s.nccl.tree_net_extra_us[2] = 20;
  s.nccl.tree_efficiency = 0.5;
  const CollectivePlan p =
      plan_collective(build_cluster(s), all_reduce(s, 1e8), forced(CollectiveAlgo::tree, Protocol::simple));
  // Up and down: 7 NVLink hops of 0.6 + 1 us and log2(2) = 1 network hop of 2.7 + 20 us each way.
  CHECK(p.latency_s == rel_approx((10 + 2 * (7 * 1.6 + 22.7)) * 1e-6, 1e-12));
  // 0.5, times NCCL's mid-size correction for Simple at 1e8 bytes (log2(1e8 / 64) = 20: 0.8).
  CHECK(p.efficiency == rel_approx(0.5 * 0.8, 1e-15));
  s.nccl.tree_correction[2][20] = 0.25;
  const CollectivePlan q =
      plan_collective(build_cluster(s), all_reduce(s, 1e8), forced(CollectiveAlgo::tree, Protocol::simple));
  CHECK(q.efficiency == rel_approx(0.5 * 0.25, 1e-15));
}

TEST_CASE("the cluster's NcclModel sets NVLS's latency and its loops' hand-offs") {
  ClusterSpec s = dgx_h100(1);
  s.nvls_efficiency = 275.0 / 450;
  s.nccl.nvls_latency_us = 40;
  s.nccl.nvls_handoff_hops_per_rank = 0.5;
  const Cluster c = build_cluster(s);
  const auto nvls = forced(CollectiveAlgo::nvls, Protocol::simple);
  // 8 ranks on 16 channels: a loop moves 16 x 8 chunks. A hand-off is 0.5 x 8 NVLink Simple hops
  // of 0.6 + 2.8 us = 13.6 us a loop; the 275 GB/s measured at the full 128 KiB chunk (16 MiB
  // loops) holds them, so the bytes stream at 1 / (1/275e9 - 13.6 us / 16 MiB).
  const double handoff = 13.6e-6, stream = 1 / 275e9 - handoff / (16.0 * 8 * 131072);
  // 1e9 B: below 64 loops of 128 KiB chunks (1 GiB), not below 8 of 64 KiB (64 MiB), so 64 KiB
  // chunks, 8 MiB loops, 120 of them: 119 hand-offs past the first, and a quarter loop a rank of
  // fill (2 loops on 8 ranks) before the pipeline streams.
  const CollectivePlan p = plan_collective(c, all_reduce(s, 1e9), nvls);
  CHECK(nvls_chunk_bytes(s.nccl, 1e9, 16, 8) == 65536);
  CHECK(s.nccl.nvls_fill_loops_per_rank == 0.25);
  CHECK(p.latency_s == rel_approx(40e-6 + 119 * handoff + 2 * 8388608 * stream, 1e-12));
  CHECK(p.bandwidth_s == rel_approx(1e9 * stream, 1e-12));
  CHECK(p.tuner_s == rel_approx(40e-6 + 1e9 / 275e9, 1e-12));
  // 2 MiB: below 2 loops of 32 KiB (8 MiB), so 16 KiB chunks and one 2 MiB loop: no hand-off.
  const CollectivePlan q = plan_collective(c, all_reduce(s, 2097152), nvls);
  CHECK(nvls_chunk_bytes(s.nccl, 2097152, 16, 8) == 16384);
  CHECK(q.latency_s == rel_approx(40e-6 + 2 * 2097152 * stream, 1e-12));
  // Half the ranks: half the hand-off per loop and half the fill, and each GPU moves S (1 + 1/4)
  // each way instead of S (1 + 1/8), so the measured 8-GPU rate times 1.125 / 1.25 = 247.5 GB/s.
  // 32 MiB runs 64 KiB chunks (not below 8 loops of them, 32 MiB) in 4 MiB loops, 8 of them, each
  // past the first waiting 6.8 us, and one loop of fill.
  const double rate4 = 275e9 * 1.125 / 1.25;
  const double stream4 = 1 / rate4 - 6.8e-6 / (16.0 * 4 * 131072);
  CollectiveCall four = all_reduce(s, 33554432);
  four.ranks.resize(4);
  const CollectivePlan r = plan_collective(c, four, nvls);
  CHECK(r.latency_s == rel_approx(40e-6 + 7 * 6.8e-6 + 1 * 4194304 * stream4, 1e-12));
  CHECK(r.bandwidth_s == rel_approx(33554432 * stream4, 1e-12));
  CHECK(r.tuner_s == rel_approx(40e-6 + 33554432 / rate4, 1e-12));
}
