// The cluster as a graph of links for the flow-level network: GPUs, one NVSwitch (or PCIe
// fabric) per node, one NIC per GPU, rail leaves and spines. Every physical link becomes two
// FlowNetwork links (one per direction). Routes are shortest paths with deterministic ECMP:
// among equal-cost next hops, a hash of (source, destination) picks one.
#pragma once

#include <memory>
#include <vector>

#include "sim/flow.hpp"
#include "topology/cluster.hpp"

namespace ctwin {

class ClusterNetwork {
 public:
  ClusterNetwork(const Cluster& cluster, FlowNetwork& net);
  ~ClusterNetwork();
  ClusterNetwork(const ClusterNetwork&) = delete;
  ClusterNetwork& operator=(const ClusterNetwork&) = delete;

  // Directed links from GPU a to GPU b along a shortest path.
  std::vector<LinkId> route(GpuId a, GpuId b) const;
  // The path NCCL takes to send from GPU a to GPU b in another node through b's rail (PXN):
  // over NVLink to the GPU of a's node on b's rail, then out through that GPU's NIC.
  std::vector<LinkId> route_rail(GpuId a, GpuId b) const;
  std::size_t vertex_count() const;
  std::size_t link_count() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ctwin
