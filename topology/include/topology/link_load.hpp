// The links a run loaded most: bytes asked of each directed link over its capacity, as a fraction
// of the run's time. Which links top the list is what a rank order (TP inside a node or across
// it, DP or PP on the rails) changes, so the training report names them.
#pragma once

#include <string>
#include <vector>

#include "sim/flow.hpp"
#include "topology/network.hpp"

namespace ctwin {

struct LinkLoad {
  std::string name;  // ClusterNetwork::link_name
  double bytes = 0;  // started across it during the run (at the protocol's efficiency)
  double capacity_gbyte_per_s = 0;
  double busy_fraction = 0;  // bytes / capacity / run time: 1 = busy the whole run
};

// The `top` links with the highest busy fraction over a run of `run_s` seconds (ties by name),
// links that carried nothing left out.
std::vector<LinkLoad> busiest_links(const FlowNetwork& net, const ClusterNetwork& routes, double run_s, int top);

}  // namespace ctwin
