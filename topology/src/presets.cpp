#include <map>

#include "topology/cluster.hpp"

namespace ctwin {
namespace {

struct Preset {
  const char* gpu;
  int gpus_per_node;
  IntraNodeFabric intra;
  double nic_gbps;  // per GPU per direction
};

// NIC speeds: DGX A100 has 8x HDR (200 Gb/s = 25 GB/s); DGX H100 / HGX H200 8x NDR
// (400 Gb/s = 50 GB/s); DGX B200 8x ConnectX-7 NDR; the L40S box 4x 200 Gb/s for 8 GPUs.
const std::map<std::string, Preset>& presets() {
  static const std::map<std::string, Preset> p{
      {"dgx-a100", {"A100-SXM-80GB", 8, IntraNodeFabric::nvswitch, 25}},
      {"dgx-h100", {"H100-SXM", 8, IntraNodeFabric::nvswitch, 50}},
      {"hgx-h200", {"H200", 8, IntraNodeFabric::nvswitch, 50}},
      {"dgx-b200", {"B200", 8, IntraNodeFabric::nvswitch, 50}},
      {"l40s-pcie", {"L40S", 8, IntraNodeFabric::pcie, 12.5}},
  };
  return p;
}

}  // namespace

bool preset_cluster(const std::string& name, int nodes, const GpuCatalog& gpus, ClusterSpec& out) {
  auto it = presets().find(name);
  if (it == presets().end()) return false;
  const Preset& p = it->second;
  auto g = gpus.gpus.find(p.gpu);
  if (g == gpus.gpus.end()) return false;
  out = ClusterSpec{};
  out.name = name;
  out.gpu = g->second;
  out.nodes = nodes;
  out.gpus_per_node = p.gpus_per_node;
  out.intra = p.intra;
  out.intra_gbps = p.intra == IntraNodeFabric::nvswitch ? g->second.nvlink_gbps : g->second.pcie_gbps;
  out.intra_latency_us = p.intra == IntraNodeFabric::nvswitch ? 0.6 : 1.5;
  if (p.intra == IntraNodeFabric::nvswitch) {
    // NCCL on NVLink: 370 GB/s effective of 450 line rate, and NVLS all-reduce at 275 GB/s algbw
    // (~480 busbw) on 8 H100 (Sylvain Jeaugey, NVIDIA/nccl-tests issue #212, 2024). Applied as
    // fractions of the line rate to every NVSwitch generation; NVLS needs NVLink 4 or later.
    out.intra_efficiency = 370.0 / 450.0;
    out.nvls_efficiency = g->second.nvlink_gen >= 4 ? 275.0 / 450.0 : 0.0;
  }
  out.nic_gbps = p.nic_gbps;
  out.inter_latency_us = 3.0;
  return true;
}

std::vector<std::string> preset_cluster_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : presets()) names.push_back(k);
  return names;
}

}  // namespace ctwin
