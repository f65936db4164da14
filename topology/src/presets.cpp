#include <map>

#include "topology/cluster.hpp"

namespace ctwin {
namespace {

struct Preset {
  const char* gpu;
  int gpus_per_node;
  IntraNodeFabric intra;
  double nic_gbyte_per_s;  // per NIC per direction
  int nics_per_node;       // 0: one per GPU
  HostCpu host_cpu;
};

// NICs: DGX A100 has 8x HDR (200 Gb/s = 25 GB/s); DGX H100, HGX H200 and DGX B200 8x NDR
// ConnectX-7 (400 Gb/s = 50 GB/s); the PCIe boxes (8x L40S, 8x H100 PCIe in NVLink-bridged
// pairs) 4 NICs, one per PCIe switch of two GPUs: 4x 200 Gb/s for L40S, 4x NDR for H100 PCIe.
// Hosts: DGX A100 has AMD EPYC 7742 CPUs, DGX H100 and B200 Intel Xeon (8480C, 8570); the HGX and
// PCIe boxes vary by OEM and take NCCL's non-AMD row, which Intel hosts share.
const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> p{
      {"dgx-a100", {"A100-SXM-80GB", 8, IntraNodeFabric::nvswitch, 25, 0, HostCpu::amd}},
      {"dgx-h100", {"H100-SXM", 8, IntraNodeFabric::nvswitch, 50, 0, HostCpu::intel}},
      {"hgx-h200", {"H200", 8, IntraNodeFabric::nvswitch, 50, 0, HostCpu::intel}},
      {"dgx-b200", {"B200", 8, IntraNodeFabric::nvswitch, 50, 0, HostCpu::intel}},
      {"l40s-pcie", {"L40S", 8, IntraNodeFabric::pcie, 25, 4, HostCpu::intel}},
      {"h100-pcie", {"H100-PCIe", 8, IntraNodeFabric::nvlink_bridge, 50, 4, HostCpu::intel}},
  };
  return p;
}

}  // namespace

// NCCL's effective NVLink bandwidth per link over the line rate (src/graph/topo.h: 20.0 GB/s for
// SM80, 20.6 for SM90, 40.1 for SM100, against 25, 25 and 50 GB/s per link): what its protocols
// move. On a DGX H100 that is 18 x 20.6 = 370 of 450 GB/s, the figure NCCL's maintainer quotes
// (nccl-tests #212).
double nvlink_efficiency(int gen) {
  if (gen >= 5) return 40.1 / 50;
  if (gen == 4) return 20.6 / 25;
  return 20.0 / 25;
}

double nvlink_pair_effective_gbps(const ClusterSpec& s) {
  const double eff = s.nvlink_pair_efficiency > 0 ? s.nvlink_pair_efficiency : nvlink_efficiency(s.gpu.nvlink_gen);
  return (s.nvlink_pair_gbyte_per_s > 0 ? s.nvlink_pair_gbyte_per_s : s.intra_gbyte_per_s) * eff;
}

bool preset_cluster(const std::string& name, int nodes, const GpuCatalog& gpus, ClusterSpec& out) {
  auto it = presets().find(name);
  if (it == presets().end()) return false;
  const Preset& p = it->second;
  auto g = gpus.gpus.find(p.gpu);
  if (g == gpus.gpus.end()) return false;
  const GpuSpec& gpu = g->second;
  const ClusterSpec fresh;
  out = fresh;
  out.name = name;
  out.gpu = gpu;
  out.nodes = nodes;
  out.gpus_per_node = p.gpus_per_node;
  out.intra = p.intra;
  out.nic_gbyte_per_s = p.nic_gbyte_per_s;
  out.nics_per_node = p.nics_per_node;
  out.host_cpu = p.host_cpu;
  out.net_overhead_us = nccl_net_overhead_us(p.host_cpu);
  // NCCL's LL hop latencies (tuning.cc hwLat): 0.6 us over NVLink, 1.0 over PCIe, 2.7 over the network.
  out.inter_latency_us = 2.7;
  if (p.intra == IntraNodeFabric::nvswitch) {
    out.intra_gbyte_per_s = gpu.nvlink_gbyte_per_s;
    // NVLink 5 (B200): 1.4 us a hop, fitted on one published curve (HGX B200 all_gather at 1 KiB,
    // 16.42 us = 6.6 + 7 hops; docs/validation-network.md); its all_reduce at 1 KiB (14 hops) checks it.
    out.intra_latency_us = gpu.nvlink_gen >= 5 ? 1.4 : 0.6;
    out.intra_efficiency = nvlink_efficiency(gpu.nvlink_gen);
    // NVLink SHARP all-reduce: ~275 GB/s algbw (~480 busbw) of 450 line rate on 8 H100 (NCCL's
    // maintainer, nccl-tests #212). On NVLink 5 NCCL rates NVLS lower (tuning.cc nvlsEfficiency:
    // 0.74 on Blackwell against 0.85 on Hopper), so the same fraction times 0.74 / 0.85.
    out.nvls_efficiency = gpu.nvlink_gen >= 5 ? 275.0 / 450.0 * 0.74 / 0.85 : gpu.nvlink_gen == 4 ? 275.0 / 450.0 : 0.0;
  } else {
    out.intra_gbyte_per_s = gpu.pcie_gbyte_per_s;
    out.intra_latency_us = 1.0;
    // NCCL models a Gen3 x16 link as 12 of 16 GB/s (topo.h PCI_BW); the same fraction at Gen4/5.
    out.intra_efficiency = 0.75;
    out.sockets = 2;
    out.gpus_per_pcie_switch = 2;
    // NCCL's Sapphire Rapids UPI figure (topo.h SRP_QPI_BW), already an effective rate.
    out.inter_socket_gbyte_per_s = 22;
    if (p.intra == IntraNodeFabric::nvlink_bridge) {
      out.nvlink_pair_gbyte_per_s = gpu.nvlink_gbyte_per_s;
      out.nvlink_pair_efficiency = nvlink_efficiency(gpu.nvlink_gen);
    }
  }
  return true;
}

std::vector<std::string> preset_cluster_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : presets()) names.push_back(k);
  return names;
}

}  // namespace ctwin
