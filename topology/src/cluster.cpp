#include "topology/cluster.hpp"

#include <stdexcept>

namespace ctwin {

Cluster build_cluster(const ClusterSpec& spec) {
  if (spec.nodes < 1 || spec.gpus_per_node < 1) throw std::invalid_argument("build_cluster: empty cluster");
  return Cluster{spec};
}

}  // namespace ctwin
