// NCCL's cost tables as the collective model reads them: latency per algorithm and protocol,
// the extra per-hop latency of each link type over its LL figure, and the bandwidth derating
// of each protocol and algorithm. The defaults are NCCL's own (src/graph/tuning.cc, 2.23 and
// later); a calibration profile replaces any of them (ClusterSpec::nccl).
#pragma once

#include <array>

namespace ctwin {

struct NcclModel {
  // Per protocol, indexed LL, LL128, Simple; microseconds.
  using PerProtocol = std::array<double, 3>;
  // NCCL's own figures (topology/src/nccl_model.cpp: out of line, so a change to one rebuilds
  // one file, not everything that includes a cluster).
  NcclModel();
  // tuning.cc baseLat: fixed cost of one call per algorithm and protocol (2.19-2.22 had Tree
  // Simple at base 0 and 28 us per hop).
  PerProtocol base_ring_us;
  PerProtocol base_tree_us;
  // tuning.cc hwLat, less the link's own LL hop (ClusterSpec::intra_latency_us,
  // inter_latency_us), which the cluster carries.
  PerProtocol ring_nvlink_extra_us;  // NVLink ring hop: 0.6 / 1.9 / 3.4
  PerProtocol ring_pcie_extra_us;    // PCI ring hop: 1.0 / 2.5 / 5.7
  PerProtocol ring_net_extra_us;     // network ring hop: 2.7 / 4.0 / 14
  PerProtocol tree_nvlink_extra_us;  // NVLink tree hop: 0.6 / 1.25 / 4.0
  PerProtocol tree_net_extra_us;     // network tree hop: 5.0 / 8.5 / 14
  double nvls_latency_us;            // NVLS on NVLink (hwLat NVLS, Simple)
  double collnet_latency_us;         // CollNet Direct: NVLink + network hop (hwLat)
  // Multi-node rings: a hop costs at least the host's net overhead (getNetOverhead), this many
  // times over with Simple (tuning.cc: 3 x netOverhead for Simple).
  double simple_net_overhead_factor;
  // Protocol bandwidth efficiencies (tuning.cc): LL moves 8 of every 16 bytes and pays a flag
  // per line: 1/4 of Simple's rate on reductions and across nodes, 1/3 otherwise; LL128 120 of
  // 128 bytes, derated to 0.92.
  double ring_ll_efficiency;
  double ring_ll_copy_efficiency;  // LL on a single-node all-gather, broadcast, ...
  double ring_ll128_efficiency;
  // Tree: NCCL's tree bandwidth derating (treeCorrectionFactor), times the protocol's share:
  // LL 1/3.8, LL128 120/128 across nodes and 7/9 inside one.
  double tree_efficiency;
  double tree_ll_efficiency;
  double tree_ll128_efficiency;
  double tree_ll128_intra_efficiency;
};

}  // namespace ctwin
