// A cluster as the simulator sees it: nodes of GPUs joined inside a node by NVLink
// (through NVSwitch) or PCIe, and across nodes by one NIC per GPU into a fabric.
#pragma once

#include <string>
#include <vector>

#include "sim/id.hpp"
#include "topology/catalog.hpp"

namespace ctwin {

struct GpuTag;
using GpuId = Id<GpuTag>;

enum class IntraNodeFabric { nvswitch, pcie };

struct ClusterSpec {
  std::string name = "custom";  // preset name, for reports
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 8;
  IntraNodeFabric intra = IntraNodeFabric::nvswitch;
  double intra_gbps = 0;        // per GPU per direction into the node fabric (GB/s)
  double intra_latency_us = 0;  // one hop GPU -> GPU inside a node
  double nic_gbps = 50;         // per GPU per direction (NDR InfiniBand: 400 Gb/s = 50 GB/s)
  double inter_latency_us = 0;  // one hop GPU -> GPU across nodes
  // Inter-node fabric, rail-optimised two-tier: NIC r of every node in a pod plugs into leaf r of
  // that pod; every leaf connects to every spine. Leaf uplinks carry nodes_per_pod x nic_gbps
  // divided by the oversubscription ratio, split over the spines.
  // Fraction of the node fabric's line rate NCCL's Simple protocol moves (its per-chunk flags
  // and synchronisation): 370 of 450 GB/s on NVLink 4 per NCCL's maintainer (nccl-tests #212).
  double intra_efficiency = 1.0;
  // NVLink SHARP (NVLS, NVSwitch 3 and later): all-reduce algorithm bandwidth as a fraction of
  // the per-GPU line rate (275 of 450 GB/s on a DGX H100, same source); 0 where there is none.
  double nvls_efficiency = 0.0;
  int nodes_per_pod = 32;
  int spines = 4;
  double oversubscription = 1.0;
};

struct Cluster {
  ClusterSpec spec;
  int gpu_count() const { return spec.nodes * spec.gpus_per_node; }
  int node_of(GpuId g) const { return static_cast<int>(g.value) / spec.gpus_per_node; }
};

Cluster build_cluster(const ClusterSpec& spec);

}  // namespace ctwin

namespace ctwin {

// Named cluster presets (dgx-a100, dgx-h100, hgx-h200, dgx-b200, l40s-pcie), `nodes` of them.
// Returns false if the name is unknown. GPUs are taken from the catalog by name.
bool preset_cluster(const std::string& name, int nodes, const GpuCatalog& gpus, ClusterSpec& out);
// The preset names, for messages and --help.
std::vector<std::string> preset_cluster_names();

}  // namespace ctwin
