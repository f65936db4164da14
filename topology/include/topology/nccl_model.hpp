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
  // tuning.cc baseLat: fixed cost of one call per algorithm and protocol (2.19-2.22 had Tree
  // Simple at base 0 and 28 us per hop).
  PerProtocol base_ring_us{6.6, 14.0, 8.4};
  PerProtocol base_tree_us{6.8, 14.0, 8.4};
  // tuning.cc hwLat, less the link's own LL hop (ClusterSpec::intra_latency_us,
  // inter_latency_us), which the cluster carries.
  PerProtocol ring_nvlink_extra_us{0.0, 1.3, 2.8};   // NVLink ring hop: 0.6 / 1.9 / 3.4
  PerProtocol ring_pcie_extra_us{0.0, 1.5, 4.7};     // PCI ring hop: 1.0 / 2.5 / 5.7
  PerProtocol ring_net_extra_us{0.0, 1.3, 11.3};     // network ring hop: 2.7 / 4.0 / 14
  PerProtocol tree_nvlink_extra_us{0.0, 0.65, 3.4};  // NVLink tree hop: 0.6 / 1.25 / 4.0
  PerProtocol tree_net_extra_us{2.3, 5.8, 11.3};     // network tree hop: 5.0 / 8.5 / 14
  double nvls_latency_us = 25.0;                     // NVLS on NVLink (hwLat NVLS, Simple)
  double collnet_latency_us = 3.7 + 31.0;            // CollNet Direct: NVLink + network hop (hwLat)
  // Multi-node rings: a hop costs at least the host's net overhead (getNetOverhead), this many
  // times over with Simple (tuning.cc: 3 x netOverhead for Simple).
  double simple_net_overhead_factor = 3;
  // Protocol bandwidth efficiencies (tuning.cc): LL moves 8 of every 16 bytes and pays a flag
  // per line: 1/4 of Simple's rate on reductions and across nodes, 1/3 otherwise; LL128 120 of
  // 128 bytes, derated to 0.92.
  double ring_ll_efficiency = 0.25;
  double ring_ll_copy_efficiency = 1.0 / 3;  // LL on a single-node all-gather, broadcast, ...
  double ring_ll128_efficiency = 0.92;
  // Tree: NCCL's tree bandwidth derating (treeCorrectionFactor), times the protocol's share:
  // LL 1/3.8, LL128 120/128 across nodes and 7/9 inside one.
  double tree_efficiency = 0.92;
  double tree_ll_efficiency = 1 / 3.8;
  double tree_ll128_efficiency = 120.0 / 128;
  double tree_ll128_intra_efficiency = 7.0 / 9;
};

}  // namespace ctwin
