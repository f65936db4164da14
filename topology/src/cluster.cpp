#include "topology/cluster.hpp"

#include <stdexcept>

namespace ctwin {

const char* to_string(IntraNodeFabric f) {
  switch (f) {
    case IntraNodeFabric::nvswitch:
      return "nvswitch";
    case IntraNodeFabric::pcie:
      return "pcie";
    case IntraNodeFabric::nvlink_bridge:
      return "nvlink_bridge";
    case IntraNodeFabric::nvlink_mesh:
      return "nvlink_mesh";
  }
  return "?";
}

const char* to_string(InterNodeFabric f) {
  switch (f) {
    case InterNodeFabric::single_switch:
      return "single_switch";
    case InterNodeFabric::rail_optimized:
      return "rail_optimized";
    case InterNodeFabric::fat_tree:
      return "fat_tree";
    case InterNodeFabric::fat_tree3:
      return "fat_tree3";
  }
  return "?";
}

Cluster build_cluster(const ClusterSpec& spec) {
  if (spec.nodes < 1 || spec.gpus_per_node < 1) throw std::invalid_argument("build_cluster: empty cluster");
  if (!(spec.intra_gbps > 0) && spec.gpus_per_node > 1 && !(spec.gpu.pcie_gbps > 0))
    throw std::invalid_argument("build_cluster: no intra-node bandwidth");
  if (spec.nics_per_node < 0 || spec.nics_per_node > spec.gpus_per_node)
    throw std::invalid_argument("build_cluster: nics_per_node must be 0 (one per GPU) up to gpus_per_node");
  return Cluster{spec};
}

}  // namespace ctwin
