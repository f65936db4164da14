// The tuner's choices and the protocols' bandwidth factors (NCCL src/graph/tuning.cc), for the
// cases the mutation run (scripts/mutate.sh) found unguarded.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tolerance.hpp"
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
