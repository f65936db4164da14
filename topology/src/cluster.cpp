#include "topology/cluster.hpp"

#include <stdexcept>

namespace ctwin {

const char* to_string(IntraNodeFabric f) { return intra_fabric_names.name(f); }

const char* to_string(InterNodeFabric f) { return inter_fabric_names.name(f); }

Cluster build_cluster(const ClusterSpec& spec) {
  if (spec.nodes < 1 || spec.gpus_per_node < 1) throw std::invalid_argument("build_cluster: empty cluster");
  if (!(spec.intra_gbps > 0) && spec.gpus_per_node > 1 && !(spec.gpu.pcie_gbps > 0))
    throw std::invalid_argument("build_cluster: no intra-node bandwidth");
  if (spec.nics_per_node < 0 || spec.nics_per_node > spec.gpus_per_node)
    throw std::invalid_argument("build_cluster: nics_per_node must be 0 (one per GPU) up to gpus_per_node");
  return Cluster{spec};
}

}  // namespace ctwin
