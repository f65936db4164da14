// The tuner's choices and the protocols' bandwidth factors (NCCL src/graph/tuning.cc), for the
// cases the mutation run (scripts/mutate.sh) found unguarded.
#include <doctest/doctest.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "tolerance.hpp"
#include "topology/catalog_json.hpp"
#include "topology/cluster.hpp"
#include "topology/collective.hpp"

using namespace ctwin;
using ctwin::test::rel_approx;

namespace {

Cluster node(const GpuSpec& gpu, IntraNodeFabric intra, double intra_gbps, double intra_eff, double latency_us) {
  ClusterSpec s;
  s.gpu = gpu;
  s.nodes = 1;
  s.gpus_per_node = 8;
  s.intra = intra;
  s.intra_gbyte_per_s = intra_gbps;
  s.intra_efficiency = intra_eff;
  s.intra_latency_us = latency_us;
  s.inter_latency_us = 2.7;
  return build_cluster(s);
}

GpuSpec gpu(int nvlink_gen, double nvlink_gbps, double pcie_gbps) {
  GpuSpec g;
  g.nvlink_gen = nvlink_gen;
  g.nvlink_gbyte_per_s = nvlink_gbps;
  g.pcie_gbyte_per_s = pcie_gbps;
  return g;
}

std::vector<GpuId> ranks(int n) {
  std::vector<GpuId> r;
  for (int i = 0; i < n; ++i) r.emplace_back(i);
  return r;
}

CollectiveOptions forced(CollectiveAlgo a, Protocol p) {
  CollectiveOptions o;
  o.algo = a;
  o.protocol = p;
  return o;
}

}  // namespace

TEST_CASE("LL moves a quarter of the link rate for all-reduce and a third for all-gather inside a node") {
  // An NVSwitch node at NCCL's 20.6 of 25 GB/s per NVLink 4 link: 370.8 GB/s per GPU at Simple.
  const Cluster c = node(gpu(4, 450, 64), IntraNodeFabric::nvswitch, 450, 20.6 / 25, 0.6);
  const double S = 64.0 * 1024 * 1024, B = 370.8e9;
  const auto ll = forced(CollectiveAlgo::ring, Protocol::ll);
  const auto ar = estimate_collective(c, CollectiveCall{CollectiveOp::all_reduce, ranks(8), S}, ll);
  // A step moves S / 8 / 24 channels = 350 kB per channel: 11 LL chunks of 32 KiB, a hop each.
  CHECK(ar.time.seconds() == rel_approx((6.6 + 11 * 14 * 0.6) * 1e-6 + 2.0 * 7 / 8 * S / (0.25 * B), 1e-6));
  const auto ag = estimate_collective(c, CollectiveCall{CollectiveOp::all_gather, ranks(8), S}, ll);
  CHECK(ag.time.seconds() == rel_approx((6.6 + 11 * 7 * 0.6) * 1e-6 + 7.0 / 8 * S / (B / 3), 1e-6));
  // LL128 at 0.92 of Simple's rate.
  const auto ll128 = estimate_collective(c, CollectiveCall{CollectiveOp::all_reduce, ranks(8), S},
                                         forced(CollectiveAlgo::ring, Protocol::ll128));
  CHECK(ll128.time.seconds() == rel_approx((14.0 + 14 * 1.9) * 1e-6 + 2.0 * 7 / 8 * S / (0.92 * B), 1e-6));
}

TEST_CASE("LL128 runs over NVLink only: forcing it on a PCIe node fails, and the tuner never picks it there") {
  const Cluster pcie = node(gpu(0, 0, 32), IntraNodeFabric::pcie, 32, 0.75, 1.0);
  const CollectiveCall call{CollectiveOp::all_reduce, ranks(8), 1 << 20};
  CHECK_THROWS_AS(plan_collective(pcie, call, forced(CollectiveAlgo::ring, Protocol::ll128)), std::invalid_argument);
  for (double bytes = 1024; bytes <= 1 << 30; bytes *= 4) {
    CAPTURE(bytes);
    const auto e = estimate_collective(pcie, CollectiveCall{CollectiveOp::all_reduce, ranks(8), bytes});
    CHECK(e.protocol != "ll128");
  }
}

TEST_CASE("inside one node the tuner picks ring (or NVLS), never the tree NCCL builds across nodes") {
  // An A100 node (no NVLS): ring at every size, as NCCL 2.x on a DGX A100.
  const Cluster a100 = node(gpu(3, 300, 32), IntraNodeFabric::nvswitch, 300, 20.0 / 25, 0.6);
  for (double bytes = 1024; bytes <= 1 << 30; bytes *= 2) {
    CAPTURE(bytes);
    const auto e = estimate_collective(a100, CollectiveCall{CollectiveOp::all_reduce, ranks(8), bytes});
    CHECK(e.algo == "ring");
  }
}

namespace {

// Two DGX A100 nodes (the preset: 8 x 200G a node, 2.7 us a network hop); `no_plateau` sets the
// tuner's ring plateau factor to 1.
Cluster two_dgx_a100(bool no_plateau = false) {
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-a100", 2, builtin_gpus(), s));
  if (no_plateau) s.nccl.ring_plateau_latency_factor = {1, 1, 1, 1};
  return build_cluster(s);
}

}  // namespace

TEST_CASE("a tree all_reduce runs at NCCL's correction of its bandwidth at its size, not from 512 MiB") {
  // tuning.cc treeCorrectionFactor, typed here from NCCL 2.19.3's table, at log2(bytes / 64):
  // 64 B (0), 512 KiB (13), 4 MiB (16), 256 MiB (22); 512 MiB (23) is past the table. Against the
  // same cluster with a table of ones; LL's ceiling lifted, so that only the factor differs.
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-a100", 2, builtin_gpus(), s));
  s.nccl.ll_max_net_gbps = {{{1e6, 1e6}, {1e6, 1e6}}};
  const Cluster c = build_cluster(s);
  for (auto& row : s.nccl.tree_correction) row.fill(1.0);
  const Cluster ones = build_cluster(s);
  struct Case {
    double bytes;
    Protocol p;
    double factor;
  };
  for (const Case k :
       {Case{64, Protocol::ll, 1.0}, Case{64, Protocol::simple, 0.9}, Case{512.0 * 1024, Protocol::ll, 0.4},
        Case{512.0 * 1024, Protocol::ll128, 0.6}, Case{4.0 * 1024 * 1024, Protocol::ll128, 0.8},
        Case{256.0 * 1024 * 1024, Protocol::simple, 0.9}, Case{512.0 * 1024 * 1024, Protocol::simple, 1.0}}) {
    CAPTURE(k.bytes);
    CAPTURE(static_cast<int>(k.p));
    const CollectivePlan plan = plan_collective(c, CollectiveCall{CollectiveOp::all_reduce, ranks(16), k.bytes},
                                                forced(CollectiveAlgo::tree, k.p));
    const CollectivePlan flat = plan_collective(ones, CollectiveCall{CollectiveOp::all_reduce, ranks(16), k.bytes},
                                                forced(CollectiveAlgo::tree, k.p));
    CHECK(plan.efficiency == rel_approx(flat.efficiency * k.factor, 1e-12));
    CHECK(plan.bandwidth_s == rel_approx(flat.bandwidth_s / k.factor, 1e-12));
    // The tuner sees the time the tree takes.
    CHECK(plan.tuner_s == rel_approx(plan.latency_s + plan.bandwidth_s, 1e-12));
  }
}

TEST_CASE("across nodes LL stops at NCCL's host-CPU ceiling: 22.5 / 19.0 GB/s bus on AMD hosts, 39 / 20.4 on Intel") {
  // tuning.cc llMaxBws: a multi-node call takes the row of its host CPU (AMD's, or the one every
  // other host shares), the column of 2 nodes or more. A tree's bus bandwidth is twice its
  // algorithm bandwidth, a ring all_reduce's 2(n-1)/n of it. 64 MiB: past the tree's correction
  // for LL (log2(64 MiB / 64) = 20: 1.0), every ring channel busy.
  struct Case {
    const char* preset;
    HostCpu cpu;
    int nodes;
    double ceiling_gbps;
  };
  const double S = 64.0 * 1024 * 1024;
  for (const Case k : {Case{"dgx-a100", HostCpu::amd, 2, 22.5}, Case{"dgx-a100", HostCpu::amd, 4, 19.0},
                       Case{"dgx-h100", HostCpu::intel, 2, 39.0}, Case{"dgx-h100", HostCpu::intel, 4, 20.4},
                       Case{"dgx-h100", HostCpu::amd, 2, 22.5}}) {
    CAPTURE(k.preset);
    CAPTURE(k.nodes);
    ClusterSpec s;
    REQUIRE(preset_cluster(k.preset, k.nodes, builtin_gpus(), s));
    s.host_cpu = k.cpu;
    const Cluster c = build_cluster(s);
    const int n = 8 * k.nodes;
    const CollectiveCall call{CollectiveOp::all_reduce, ranks(n), S};
    const CollectivePlan tree = plan_collective(c, call, forced(CollectiveAlgo::tree, Protocol::ll));
    CHECK(tree.bandwidth_s == rel_approx(2 * S / (k.ceiling_gbps * 1e9), 1e-12));
    const CollectivePlan ring = plan_collective(c, call, forced(CollectiveAlgo::ring, Protocol::ll));
    CHECK(ring.bandwidth_s == rel_approx(2.0 * (n - 1) / n * S / (k.ceiling_gbps * 1e9), 1e-12));
  }
  // In one node the GPU's column holds: Hopper's 141 GB/s, above the H100 ring's LL quarter.
  ClusterSpec one;
  REQUIRE(preset_cluster("dgx-h100", 1, builtin_gpus(), one));
  one.nccl.ring_ll_efficiency = 1;
  const CollectivePlan ring1 =
      plan_collective(build_cluster(one), CollectiveCall{CollectiveOp::all_reduce, ranks(8), S},
                      forced(CollectiveAlgo::ring, Protocol::ll));
  CHECK(ring1.bandwidth_s == rel_approx(2.0 * 7 / 8 * S / 141e9, 1e-12));
}

TEST_CASE("a multi-node Simple ring all_reduce is predicted at 1.4 times its latency past 64 B a channel and rank") {
  // tuning.cc's plateau effect. Two DGX A100 nodes, 16 ranks: the ring's Simple latency is
  // 8.4 + 28 intra-node hops x max(0.6 + 2.8, 3 x 2.0 net overhead) + 2 network hops x (2.7 + 11.3)
  // = 204.4 us; the tuner adds 0.4 of it. 24 channels x 16 ranks x 64 B = 24 KiB is the threshold.
  const auto simple_ring = forced(CollectiveAlgo::ring, Protocol::simple);
  const CollectiveCall big{CollectiveOp::all_reduce, ranks(16), 64.0 * 1024 * 1024};
  const double with = plan_collective(two_dgx_a100(), big, simple_ring).tuner_s;
  const double without = plan_collective(two_dgx_a100(true), big, simple_ring).tuner_s;
  CHECK(with - without == rel_approx(0.4 * 204.4e-6, 1e-6));
  const CollectiveCall small{CollectiveOp::all_reduce, ranks(16), 16.0 * 1024};
  CHECK(plan_collective(two_dgx_a100(), small, simple_ring).tuner_s ==
        plan_collective(two_dgx_a100(true), small, simple_ring).tuner_s);
  // Only across nodes: one node's ring is predicted at its latency.
  ClusterSpec one;
  REQUIRE(preset_cluster("dgx-a100", 1, builtin_gpus(), one));
  const CollectiveCall inside{CollectiveOp::all_reduce, ranks(8), 64.0 * 1024 * 1024};
  const CollectivePlan p1 = plan_collective(build_cluster(one), inside, simple_ring);
  one.nccl.ring_plateau_latency_factor = {1, 1, 1, 1};
  CHECK(p1.tuner_s == plan_collective(build_cluster(one), inside, simple_ring).tuner_s);
}

TEST_CASE("on Blackwell the tuner derates NVLSTree too, one size further than trees (NCCL 2.29 on)") {
  // 512 MiB is log2 index 23: past the tree's 23 entries, the 24th of NVLSTree's (Simple, 0.9).
  ClusterSpec s;
  REQUIRE(preset_cluster("dgx-b200", 2, builtin_gpus(), s));
  const Cluster c = build_cluster(s);
  const auto nvls_tree = forced(CollectiveAlgo::nvls_tree, Protocol::simple);
  // The tuner sees NVLS at its measured rate, without the loops' hand-offs and fill the time
  // has: the plan on the same cluster with those two set to nothing is its view.
  auto tuner_view = [](ClusterSpec spec, double bytes) {
    spec.nccl.nvls_handoff_hops_per_rank = 0;
    spec.nccl.nvls_fill_loops_per_rank = 0;
    return plan_collective(build_cluster(spec), CollectiveCall{CollectiveOp::all_reduce, ranks(16), bytes},
                           forced(CollectiveAlgo::nvls_tree, Protocol::simple));
  };
  const double big_b = 512.0 * 1024 * 1024, mid_b = 1024.0 * 1024;
  const CollectivePlan big = plan_collective(c, CollectiveCall{CollectiveOp::all_reduce, ranks(16), big_b}, nvls_tree);
  const CollectivePlan big_ref = tuner_view(s, big_b);
  CHECK(big.tuner_s == rel_approx(big_ref.latency_s + big_ref.bandwidth_s / 0.9, 1e-9));
  const CollectivePlan mid = plan_collective(c, CollectiveCall{CollectiveOp::all_reduce, ranks(16), mid_b}, nvls_tree);
  const CollectivePlan mid_ref = tuner_view(s, mid_b);
  CHECK(mid.tuner_s == rel_approx(mid_ref.latency_s + mid_ref.bandwidth_s / 0.5, 1e-9));  // index 14
  CHECK(mid.latency_s + mid.bandwidth_s > mid_ref.latency_s + mid_ref.bandwidth_s);       // the loops cost time
  // Hopper: none.
  REQUIRE(preset_cluster("dgx-h100", 2, builtin_gpus(), s));
  const CollectivePlan h =
      plan_collective(build_cluster(s), CollectiveCall{CollectiveOp::all_reduce, ranks(16), mid_b}, nvls_tree);
  const CollectivePlan h_ref = tuner_view(s, mid_b);
  CHECK(h.tuner_s == rel_approx(h_ref.latency_s + h_ref.bandwidth_s, 1e-9));
  // By hand (tuning.cc's NVLSTree latency, 25 us in the node and 2.7 + 18.2 us up and down the one
  // tree level; NVLS at 275 GB/s binds over the NICs' 8 x 48 GB/s with 2 nodes):
  CHECK(h.tuner_s == rel_approx((25 + 2 * 20.9) * 1e-6 + mid_b / 275e9, 1e-9));
}

TEST_CASE("a multi-node LL128 tree moves at most NCCL's per-channel ceiling on each of its channels, one a NIC") {
  // tuning.cc perChMaxTreeLL128Bws, the 2-node and larger columns: 20 GB/s on Ampere, 36.7 and 29.0
  // on Hopper. Eight NICs, eight tree channels; a tree's bus bandwidth is twice its algorithm
  // bandwidth. 1 GiB: past the mid-size correction (log2(1 GiB / 64) = 24).
  struct Case {
    const char* preset;
    int nodes;
    double per_channel_gbps;
  };
  const double S = 1024.0 * 1024 * 1024;
  for (const Case k :
       {Case{"dgx-a100", 2, 20.0}, Case{"dgx-a100", 4, 20.0}, Case{"dgx-h100", 2, 36.7}, Case{"dgx-h100", 4, 29.0}}) {
    CAPTURE(k.preset);
    CAPTURE(k.nodes);
    ClusterSpec s;
    REQUIRE(preset_cluster(k.preset, k.nodes, builtin_gpus(), s));
    const Cluster c = build_cluster(s);
    const CollectiveCall call{CollectiveOp::all_reduce, ranks(8 * k.nodes), S};
    const CollectivePlan tree = plan_collective(c, call, forced(CollectiveAlgo::tree, Protocol::ll128));
    CHECK(tree.bandwidth_s == rel_approx(2 * S / (8 * k.per_channel_gbps * 1e9), 1e-12));
    // The table is the cluster's: lifted, the tree runs at its links' rate, faster. Simple reads
    // no such ceiling (perChMaxTreeBws with one channel a NIC would hold the A100 RoCE run's
    // largest sizes 20% below what it measured): unchanged.
    const CollectivePlan simple = plan_collective(c, call, forced(CollectiveAlgo::tree, Protocol::simple));
    s.nccl.tree_ll128_net_per_channel_gbps = {{{1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}, {1e6, 1e6}}};
    const Cluster lifted = build_cluster(s);
    CHECK(plan_collective(lifted, call, forced(CollectiveAlgo::tree, Protocol::ll128)).bandwidth_s < tree.bandwidth_s);
    CHECK(plan_collective(lifted, call, forced(CollectiveAlgo::tree, Protocol::simple)).bandwidth_s ==
          simple.bandwidth_s);
  }
}
