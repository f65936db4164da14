// Topology discovery's host side: what the CUDA backend found on a node (from NVML where the
// driver has it, else the CUDA runtime) and the NICs under /sys/class/infiniband, turned into a
// cluster description in the simulator's /cluster/file form (topology/cluster_json.hpp).
// Pure functions, so the JSON a real node would produce is tested without one.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ctwin::realrun {

struct DiscoveredGpu {
  std::string name;  // as CUDA names it: "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-..." (NVML), else ""
  std::string pci_bus_id;
  double memory_bytes = 0;
  int sm = 0;          // compute capability, major * 10 + minor
  int nvlinks = 0;     // active NVLink links (NVML), 0 where unknown or none
  int pcie_gen = 0;    // max link generation (NVML), 0 where unknown
  int pcie_width = 0;  // lanes
};

struct DiscoveredNic {
  std::string name;  // "mlx5_0"
  int port = 1;
  double gbit_per_s = 0;   // the port's rate, "400 Gb/sec (4X NDR)" -> 400
  std::string link_layer;  // "InfiniBand", "Ethernet"
};

struct DiscoveredNode {
  std::string hostname;
  std::string driver;  // NVML's driver version, else ""
  std::vector<DiscoveredGpu> gpus;
  std::vector<DiscoveredNic> nics;
  std::vector<std::vector<bool>> peer_access;  // cudaDeviceCanAccessPeer, gpus x gpus
};

// "400 Gb/sec (4X NDR)" -> 400; 0 for text it cannot read.
double parse_ib_rate_gbit(std::string_view text);

// The active ports under `root` (/sys/class/infiniband/DEV/ports/N/{state,rate,link_layer});
// empty where there is no such directory.
std::vector<DiscoveredNic> read_infiniband(const std::filesystem::path& root = "/sys/class/infiniband");

// Per-direction bandwidth of one NVLink link (GB/s) for a GPU of compute capability `sm`:
// NVLink 3 (A100) and 4 (H100, H200) move 25 GB/s a link each way, NVLink 5 (B200) 50.
double nvlink_gbyte_per_s_per_link(int sm);
// Per-direction PCIe bandwidth (GB/s) of a link of `gen` and `width`: 0.985 GB/s a lane at
// Gen3 (8 GT/s, 128b/130b), doubling each generation; 0 when either is unknown.
double pcie_gbyte_per_s(int gen, int width);

// The node as a cluster object: "gpu" the catalog name where catalog_gpu_name knows the device
// (else an inline description with the discovered memory), gpus_per_node, nodes, the node
// fabric (nvswitch with NVLink on more than two GPUs, nvlink_bridge on two, else pcie) and its
// per-GPU rate, and the NICs' rate and count where there are any.
nlohmann::ordered_json cluster_json_from_discovery(const DiscoveredNode& node, int nodes);

}  // namespace ctwin::realrun
